//! Issue 11, items 5 and 7: Kubernetes on a TLS cluster of this charm
//! (tests/tls_cluster_support). The stand-in kubernetes-control-plane
//! (tests/charms/kube-control-plane) reads the FIRST etcd unit's `db` data
//! as charms.kubernetes_libs.v0.etcd does and makes a TLS put/get with
//! etcdctl; when that unit goes, the next one's data works as well. A
//! client without a certificate, or with one the cluster's CA did not
//! sign, is refused.

mod test_ca;
mod tls_cluster_support;
mod upgrade_support;
use tls_cluster_support::TlsCluster;
use upgrade_support::*;

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const KUBE: &str = "kube-control-plane/0";

/// The stand-in deployed and related to etcd's `db`, the model settled.
fn relate_kube(m: &Model) {
    let charm = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/kube-control-plane");
    m.ok(&["deploy", charm.to_str().unwrap()]);
    m.ok(&["integrate", "etcd:db", "kube-control-plane:etcd"]);
    m.ok(&["settle"]);
}

fn kube_status(m: &Model) -> (String, String) {
    let s = m.status();
    let w = &s["applications"]["kube-control-plane"]["units"][KUBE]["workload-status"];
    let text = |k: &str| w[k].as_str().unwrap_or("").to_string();
    (text("current"), text("message"))
}

/// The stand-in's copy of the files kube-apiserver is given.
fn kube_file(m: &Model, name: &str) -> PathBuf {
    m.root(KUBE).join("root/cdk/etcd").join(name)
}

/// Every etcd unit's databag in the db relation, as the client reads it.
fn db_bags(m: &Model, units: &[String]) -> Vec<Value> {
    let rel: Vec<String> =
        serde_json::from_str(&m.ok(&["exec", KUBE, "--", "relation-ids", "etcd", "--format=json"]))
            .unwrap();
    units
        .iter()
        .map(|u| {
            let bag = m.ok(&[
                "exec",
                KUBE,
                "--",
                "relation-get",
                "-r",
                &rel[0],
                "-",
                u,
                "--format=json",
            ]);
            serde_json::from_str(&bag).unwrap()
        })
        .collect()
}

fn put_get(m: &Model) -> Value {
    let out = m.ok(&["run-action", KUBE, "put-get", "--format", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "completed", "{out}");
    v["results"].clone()
}

/// etcdctl get with exactly `creds` (flags), none from the environment.
fn etcdctl_get(eps: &str, creds: &[String]) -> Output {
    Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .env_remove("ETCDCTL_CACERT")
        .env_remove("ETCDCTL_CERT")
        .env_remove("ETCDCTL_KEY")
        .arg(format!("--endpoints={eps}"))
        .args(creds)
        .args(["--dial-timeout=3s", "--command-timeout=5s"])
        .args(["get", "/kube-control-plane/", "--prefix", "--keys-only"])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn kube_control_plane_reads_the_first_etcd_units_data_and_puts_and_gets_over_tls() {
    let started = Instant::now();
    let c = TlsCluster::taken_over(3);
    let m = &c.up.m;
    relate_kube(m);

    // Every unit publishes the same, and what the first one publishes works.
    let bags = db_bags(m, &c.up.units);
    assert!(bags.windows(2).all(|w| w[0] == w[1]), "{bags:?}");
    let mut eps = c.eps.clone();
    eps.sort();
    assert_eq!(bags[0]["connection_string"], eps.join(","));
    let (s, msg) = kube_status(m);
    assert_eq!(s, "active", "{msg}");
    assert!(
        msg.starts_with("etcd put/get over TLS ok (data of etcd/0, https://"),
        "{msg}"
    );
    assert!(!msg.contains("PRIVATE KEY"), "{msg}");
    let r = put_get(m);
    assert_eq!(r["result"], "ok", "{r}");
    assert_eq!(r["first-unit"], "etcd/0", "{r}");
    assert_eq!(r["connection-string"], eps.join(","), "{r}");
    // The value is in the cluster: read back with the charm's own client.
    let key = r["key"].as_str().unwrap();
    let got = c.get(&c.endpoints(), key);
    assert_eq!(got.as_deref(), r["value"].as_str(), "{r}");
    // The files kube-apiserver gets are the published PEMs, the key private.
    let key_file = kube_file(m, "client-key.pem");
    assert_eq!(std::fs::read_to_string(&key_file).unwrap(), c.tls.key_pem);
    assert_eq!(
        std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        std::fs::read_to_string(kube_file(m, "client-cert.pem")).unwrap(),
        c.tls.cert_pem
    );

    // The first unit goes: the client now reads etcd/1's data, which works
    // as well (every unit published the same working values).
    m.ok(&["remove-unit", "etcd/0"]);
    m.ok(&["settle"]);
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (s, msg) = kube_status(m);
        if s == "active" && msg.contains("data of etcd/1") {
            break;
        }
        assert!(Instant::now() < deadline, "{s}: {msg}");
        m.ok(&["update-status"]);
        std::thread::sleep(Duration::from_millis(500));
    }
    let r = put_get(m);
    assert_eq!(r["first-unit"], "etcd/1", "{r}");
    let got = c.get(&c.eps[1..].join(","), r["key"].as_str().unwrap());
    assert_eq!(got.as_deref(), r["value"].as_str(), "{r}");
    eprintln!(
        "kube stand-in on 3 TLS units, then 2, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_client_without_a_certificate_signed_by_the_cluster_ca_is_refused() {
    let c = TlsCluster::taken_over(3);
    let m = &c.up.m;
    relate_kube(m);
    assert_eq!(kube_status(m).0, "active", "{:?}", kube_status(m));
    let conn = db_bags(m, &c.up.units[..1])[0]["connection_string"]
        .as_str()
        .unwrap()
        .to_string();
    let flag = |k: &str, f: &str| format!("--{k}={}", kube_file(m, f).display());
    let ca = flag("cacert", "client-ca.pem");

    // With the published pair: served (so the refusals below are about
    // the certificate, not the endpoints or the CA).
    let ok = etcdctl_get(
        &conn,
        &[
            ca.clone(),
            flag("cert", "client-cert.pem"),
            flag("key", "client-key.pem"),
        ],
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(String::from_utf8_lossy(&ok.stdout).contains("/kube-control-plane/"));

    // No certificate at all: refused, on every endpoint.
    for ep in conn.split(',') {
        let out = etcdctl_get(ep, std::slice::from_ref(&ca));
        assert!(
            !out.status.success(),
            "{ep} served a client without a certificate: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // A certificate from another CA: refused too.
    let other = test_ca::new_ca("not-the-cluster-ca");
    let pair = test_ca::leaf(
        &other,
        etcd_charm::tls::key::KeyAlg::EcdsaP256,
        "intruder",
        &[],
    );
    let d = tempfile::tempdir().unwrap();
    let (cert, key) = (d.path().join("c.pem"), d.path().join("k.pem"));
    std::fs::write(&cert, &pair.cert).unwrap();
    std::fs::write(&key, &pair.key).unwrap();
    let out = etcdctl_get(
        &conn,
        &[
            ca,
            format!("--cert={}", cert.display()),
            format!("--key={}", key.display()),
        ],
    );
    assert!(
        !out.status.success(),
        "a certificate of another CA was served: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Plain http on the client port: nothing answers there.
    let plain = conn
        .split(',')
        .next()
        .unwrap()
        .replace("https://", "http://");
    let out = etcdctl_get(&plain, &[]);
    assert!(!out.status.success(), "plain http was served on {plain}");
}
