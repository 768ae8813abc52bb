//! Issue 11, item 7, what ./demo shows: a plain cluster of this charm, a
//! CA on `certificates` (tests/charms/legacy-ca, easyrsa's protocol) and the
//! stand-in kubernetes-control-plane on `db`. The client waits while etcd
//! serves plain http (no credentials published), and once every member is
//! on TLS it reads the first unit's data and its put/get over TLS works;
//! every unit publishes the same https connection_string and pair.

mod upgrade_support;
use upgrade_support::*;

use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const KUBE: &str = "kube-control-plane/0";
/// Generous (2 shared cores): the move to TLS goes one member at a time.
const TRANSITION: Duration = Duration::from_secs(500);

fn stand_in(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/charms")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn kube_status(m: &Model) -> (String, String) {
    let s = m.status();
    let w = &s["applications"]["kube-control-plane"]["units"][KUBE]["workload-status"];
    let text = |k: &str| w[k].as_str().unwrap_or("").to_string();
    (text("current"), text("message"))
}

fn db_bag(m: &Model, rel: &str, unit: &str) -> Value {
    serde_json::from_str(&m.ok(&[
        "exec",
        KUBE,
        "--",
        "relation-get",
        "-r",
        rel,
        "-",
        unit,
        "--format=json",
    ]))
    .unwrap()
}

#[test]
fn kube_control_plane_works_once_the_certificates_relation_gives_etcd_tls() {
    let started = Instant::now();
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    let mut units = m.units();
    units.sort();

    // Plain etcd: the client is not ready (kube-apiserver needs the pair).
    m.ok(&["deploy", &stand_in("kube-control-plane")]);
    m.ok(&["integrate", "etcd:db", "kube-control-plane:etcd"]);
    m.ok(&["settle"]);
    let (s, msg) = kube_status(&m);
    assert_eq!(s, "waiting", "{msg}");
    assert!(msg.contains("client_cert"), "{msg}");

    m.ok(&["deploy", &stand_in("legacy-ca"), "--name", "easyrsa"]);
    // integrate returns once the model settles: the move runs inside it.
    let related = Instant::now();
    m.ok(&["integrate", "etcd:certificates", "easyrsa:certificates"]);
    let deadline = related + TRANSITION;
    loop {
        let (s, msg) = kube_status(&m);
        if s == "active" {
            assert!(msg.contains("data of etcd/0"), "{msg}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the client never got a working pair: {s}: {msg}\n{:?}",
            m.workloads()
        );
        m.ok(&["update-status"]);
        std::thread::sleep(Duration::from_secs(1));
    }
    eprintln!(
        "relate certificates → the client's TLS put/get works: {:.1} s",
        related.elapsed().as_secs_f64()
    );
    wait_until("every etcd unit healthy on TLS", TRANSITION, || {
        let ok = m
            .workloads()
            .iter()
            .all(|(_, s, msg)| s == "active" && msg.starts_with("Healthy with 3 known peers"));
        if !ok {
            m.ok(&["update-status"]);
        }
        ok
    });
    m.ok(&["settle"]);

    let rel: Vec<String> =
        serde_json::from_str(&m.ok(&["exec", KUBE, "--", "relation-ids", "etcd", "--format=json"]))
            .unwrap();
    let bags: Vec<Value> = units.iter().map(|u| db_bag(&m, &rel[0], u)).collect();
    assert!(bags.windows(2).all(|w| w[0] == w[1]), "{bags:?}");
    let mut want: Vec<String> = units
        .iter()
        .map(|u| format!("https://{}:2379", m.address(u)))
        .collect();
    want.sort();
    assert_eq!(bags[0]["connection_string"], want.join(","));
    for k in ["client_cert", "client_key", "client_ca"] {
        assert!(
            bags[0][k]
                .as_str()
                .is_some_and(|v| v.contains("-----BEGIN")),
            "{k}"
        );
    }
    // The put/get once more, through the action, on the settled cluster.
    let out = m.ok(&["run-action", KUBE, "put-get", "--format", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "completed", "{out}");
    assert_eq!(v["results"]["result"], "ok", "{out}");
    assert_eq!(v["results"]["connection-string"], want.join(","), "{out}");
    eprintln!(
        "kube stand-in on a cluster moved to TLS in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
