//! The Python charm's `proxy` and `certificates` endpoints before this charm
//! manages TLS, on real etcd through jujusim: a proxy client gets the
//! cluster's members, and a related certificates provider that has issued
//! nothing shows in the status (etcd keeps serving plain http).

mod charm_support;
use charm_support::*;
use std::path::Path;
use std::time::Duration;

fn charm(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/charms")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn proxy_gets_the_cluster_and_certificates_say_tls_is_pending() {
    let m = Model::new();
    m.deploy(2);
    m.assert_all_healthy(2);

    m.ok(&["deploy", &charm("etcd-proxy-client")]);
    m.ok(&["integrate", "etcd:proxy", "etcd-proxy-client:etcd"]);
    let file = m.dir.join("units/etcd-proxy-client-0/root/cluster");
    let cluster =
        std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let want: Vec<String> = ["etcd/0", "etcd/1"]
        .iter()
        .map(|u| format!("{}=http://{}:2380", u.replace('/', ""), m.address(u)))
        .collect();
    assert_eq!(cluster.trim(), want.join(","));

    // Grown by one: the proxy client hears of the new member.
    m.ok(&["add-unit", "etcd"]);
    m.assert_all_healthy(3);
    wait_until(
        "the proxy cluster to list 3 members",
        Duration::from_secs(30),
        || std::fs::read_to_string(&file).is_ok_and(|c| c.trim().split(',').count() == 3),
    );

    m.ok(&["deploy", &charm("tls-silent")]);
    m.ok(&["integrate", "etcd:certificates", "tls-silent:client"]);
    for (u, s, msg) in m.workloads() {
        assert_eq!(s, "active", "{u}: {msg}");
        // Requested, nothing issued yet (certificates.rs): plain http stays.
        assert!(
            msg.starts_with("Healthy with 3 known peers; TLS: requested from tls-silent"),
            "{u}: {msg}"
        );
    }
    // etcd still answers on plain http.
    let ep = m.endpoint("etcd/0");
    assert!(etcdctl(&ep, &["endpoint", "health"]).status.success());
}
