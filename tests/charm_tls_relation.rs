//! Issue 11, items 1–3 with the legacy (reactive) stand-in CA: a plain
//! 3-unit cluster moves to TLS one member at a time under a writer
//! (tests/tls_relation_support), then a renewed leaf from the same CA is
//! written and nothing restarts.

mod tls_relation_support;
mod upgrade_support;
mod writer_support;
use tls_relation_support::*;
use upgrade_support::*;

#[test]
fn a_plain_cluster_related_to_a_legacy_ca_moves_to_tls_one_member_at_a_time() {
    let (m, units, f0, eps) = move_to_tls("legacy-ca");
    // Renewal: a new leaf from the same CA is files only, no restart.
    let pids: Vec<Option<String>> = units.iter().map(|u| etcd_pid(&m, u)).collect();
    // Under a writer over TLS (the pair on disk now): a renewal costs none.
    let mut w = writer_support::Writer::start(&eps);
    std::thread::sleep(std::time::Duration::from_secs(1));
    w.disturbance_begins();
    let old_leaf = std::fs::read_to_string(&f0.server_cert).unwrap();
    let ca_dir = m.root("legacy-ca/0").join("ca");
    std::fs::remove_file(ca_dir.join("etcd_0.pair.crt")).unwrap();
    let rid = m.ok(&[
        "exec",
        "legacy-ca/0",
        "--",
        "relation-ids",
        "certificates",
        "--format=json",
    ]);
    let rid: Vec<String> = serde_json::from_str(rid.trim()).unwrap();
    let rid = rid[0].clone();
    m.ok(&[
        "exec",
        "legacy-ca/0",
        "--",
        "env",
        "JUJU_DISPATCH_PATH=hooks/certificates-relation-changed",
        &format!("JUJU_RELATION_ID={rid}"),
        "./dispatch",
    ]);
    wait_until("etcd/0's renewed leaf on disk", TRANSITION, || {
        m.ok(&["update-status"]);
        std::fs::read_to_string(&f0.server_cert).is_ok_and(|t| t != old_leaf)
    });
    m.ok(&["update-status"]);
    w.disturbance_ends();
    let r = w.finish(std::time::Duration::from_secs(30));
    r.assert_available(
        "renewal of etcd/0's leaf under a writer",
        writer_support::ROLLING,
    );
    assert_eq!(r.max_down, 0, "a member went down for a renewal");
    for (u, before) in units.iter().zip(&pids) {
        assert_eq!(
            &etcd_pid(&m, u),
            before,
            "{u}'s etcd restarted for a renewal"
        );
    }
    assert_keys(&eps[0], "before", KEYS);
}
