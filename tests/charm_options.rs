//! The options taken over from the Python etcd charm, on real etcd through
//! jujusim: `bind_with_insecure_http` opens (and closes again) the loopback
//! http client listener; a bad value of a new option blocks, naming it.

mod charm_support;
use charm_support::*;

const INSECURE: &str = "http://127.0.0.1:4001";

fn answers(endpoint: &str) -> bool {
    etcdctl(endpoint, &["endpoint", "health", "--command-timeout=3s"])
        .status
        .success()
}

#[test]
fn bind_with_insecure_http_serves_loopback_http_and_bad_values_block() {
    let m = Model::new();
    m.deploy_with(1, &["--config", "bind_with_insecure_http=true"]);
    m.assert_all_healthy(1);
    let ep = m.endpoint("etcd/0");
    put_keys(&ep, "k", 3);
    // The same member, on both listeners.
    assert_keys(INSECURE, "k", 3);
    let ids = m.wal_ids("etcd/0");

    // Off again: config-changed restarts etcd without the listener.
    m.ok(&["config", "etcd", "bind_with_insecure_http=false"]);
    m.assert_all_healthy(1);
    assert!(!answers(INSECURE), "{INSECURE} still answers");
    assert_keys(&ep, "k", 3);
    assert_eq!(
        m.wal_ids("etcd/0"),
        ids,
        "the same member after the restart"
    );

    // Bad values block with the option's name, and change nothing.
    for (kv, needle) in [
        ("tls_cipher_suites=TLS_NOT_A_SUITE", "TLS_NOT_A_SUITE"),
        ("snapd_refresh=fri;reboot", "snapd_refresh"),
    ] {
        m.ok(&["config", "etcd", kv]);
        let (_, status, message) = m.workloads().remove(0);
        assert_eq!(status, "blocked", "{kv}: {message}");
        assert!(message.contains(needle), "{kv}: {message}");
        let key = kv.split('=').next().unwrap();
        m.ok(&["config", "etcd", "--reset", key]);
    }
    m.assert_all_healthy(1);
    assert_keys(&ep, "k", 3);
}
