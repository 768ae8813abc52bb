//! Issue 11, item 1: a 3-unit cluster of the Python charm served over TLS
//! (https on both listeners, client-cert auth, the certificates in
//! /var/snap/etcd/common, its members born under `<name>.etcd`) refreshed
//! to this charm with a writer running. The charm keeps TLS with those
//! files: same cluster ID, member IDs, token and keys; a client without a
//! certificate is still refused and the pair `db` publishes works; no
//! acknowledged write lost, never two members down (the rolling turn
//! reaches the cluster over https with the client pair).

mod test_ca;
mod tls_cluster_support;
mod upgrade_support;
use tls_cluster_support::{status, TlsCluster};
use upgrade_support::*;
#[path = "writer_support/mod.rs"]
mod writer_support;

use etcd_charm::etcd::{self, ClientTls, Endpoints};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KEYS: usize = 30;

#[test]
fn a_tls_cluster_of_the_python_charm_is_taken_over_with_its_certificates() {
    let started = Instant::now();
    let c = TlsCluster::python(3);
    let (up, tls, eps) = (&c.up, &c.tls, &c.eps);
    writer_support::use_tls(&tls.ca_pem, &tls.cert_pem, &tls.key_pem);
    let all = eps.join(",");
    put_keys(&all, "legacy", KEYS);
    let before: Vec<etcd::MemberStatus> = eps.iter().map(|e| status(tls, e).unwrap()).collect();
    let cluster_id = before[0].cluster_id;

    let mut writer = writer_support::Writer::start(eps);
    std::thread::sleep(Duration::from_secs(1));
    writer.disturbance_begins();
    c.refresh();
    // No certificates relation: the status says nothing renews the
    // certificates kept on disk (charm/expiry.rs).
    for (u, _, m) in c.wait_healthy() {
        assert!(m.contains("certificates not related"), "{u}: {m}");
    }
    writer.disturbance_ends();
    std::thread::sleep(Duration::from_secs(1));
    let report = writer.finish(Duration::from_secs(30));
    report.assert_available(
        "TLS takeover of 3 units under a writer",
        writer_support::ROLLING,
    );

    for ((u, ep), b) in up.units.iter().zip(eps).zip(&before) {
        let s = status(tls, ep).unwrap_or_else(|| panic!("{u} answers over https"));
        assert_eq!(s.member_id, b.member_id, "{u} runs its own member");
        assert_eq!(s.cluster_id, cluster_id, "{u}");
        assert_keys(ep, "legacy", KEYS);
        let text = std::fs::read_to_string(up.paths(u).config_file()).unwrap();
        assert!(text.contains("client-cert-auth: true"), "{u}: {text}");
        // Only the loopback metrics listener is plain (issue 19.9).
        let plain: Vec<&str> = text.lines().filter(|l| l.contains("http://")).collect();
        assert!(
            plain.len() == 1 && plain[0].starts_with("listen-metrics-urls: \"http://127."),
            "{u}: {text}"
        );
        let legacy = up.legacy_dir(u).display().to_string();
        assert!(!text.contains(&legacy), "{u}: the charm rewrote it: {text}");
        assert!(
            matches!(etcd_charm::wal::read_ids(&up.m.data_dir(u)), Ok(Some(_))),
            "{u}: the member was moved to the canonical data dir"
        );
    }
    assert_eq!(up.m.token(), TOKEN, "the token is unchanged");
    assert_eq!(up.m.cluster_id(), format!("{cluster_id:x}"));
    let m = members(&all);
    assert_eq!(m.len(), 3, "{m:?}");

    // Actions reach the member over https with the client pair.
    let out =
        up.m.ok(&["run-action", &up.units[0], "health", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["results"]["healthy"], "true", "{out}");
    // So does the nrpe health check, run outside any hook.
    let check = Command::new(env!("CARGO_BIN_EXE_etcd-charm"))
        .args(["nrpe-check", "health"])
        .env("ETCD_CHARM_ROOT", up.m.root(&up.units[0]))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "nrpe health: {}",
        String::from_utf8_lossy(&check.stdout)
    );

    // TLS is still demanded: no client certificate, no answer.
    let plain = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .env_remove("ETCDCTL_CERT")
        .env_remove("ETCDCTL_KEY")
        .args([
            "--endpoints",
            &eps[0],
            "--dial-timeout=3s",
            "--command-timeout=5s",
        ])
        .args(["get", "legacy/0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !plain.status.success(),
        "a client without a certificate was served"
    );

    // What db publishes works (and is the same from every unit).
    let client_charm =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/etcd-client");
    up.m.ok(&["deploy", client_charm.to_str().unwrap()]);
    up.m.ok(&["integrate", "etcd:db", "etcd-client:etcd"]);
    up.m.ok(&["settle"]);
    let published: Vec<serde_json::Value> = up
        .units
        .iter()
        .map(|u| up.m.published_to("etcd-client/0", "etcd", u))
        .collect();
    assert!(published.windows(2).all(|w| w[0] == w[1]), "{published:?}");
    let p = &published[0];
    let conn = p["connection_string"].as_str().unwrap();
    assert!(conn.split(',').all(|u| u.starts_with("https://")), "{conn}");
    let theirs = ClientTls {
        ca_pem: p["client_ca"].as_str().unwrap().into(),
        cert_pem: p["client_cert"].as_str().unwrap().into(),
        key_pem: p["client_key"].as_str().unwrap().into(),
    };
    let urls: Vec<String> = conn.split(',').map(String::from).collect();
    let v = etcd::block_on(etcd::view(Endpoints::new(urls, Some(theirs))))
        .expect("the db pair reaches the cluster");
    assert_eq!(v.cluster_id(), cluster_id);

    eprintln!(
        "3 TLS units taken over in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
