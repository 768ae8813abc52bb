//! Membership repairs on real etcd (issue 10.4, 10.5): a refused removal is
//! completed by a later hook once quorum is back; a member that lost its
//! WAL comes back under a new ID, never as its old voter.

mod charm_support;
use charm_support::*;
use std::time::Duration;

fn names(endpoint: &str) -> Vec<String> {
    members(endpoint).into_iter().map(|x| x.1).collect()
}

#[test]
fn a_removal_refused_for_quorum_is_completed_by_a_later_update_status() {
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    put_keys(&m.endpoints(), "q", 10);
    let leader = m.leader();
    assert_eq!(leader, "etcd/0");
    // etcd/2's etcd is dead and cannot come back while its peer port is held.
    m.kill_etcd("etcd/2");
    let addr = m.address("etcd/2");
    let mut blocker = None;
    wait_until(
        "etcd/2's peer port to be free",
        Duration::from_secs(10),
        || {
            blocker = std::net::TcpListener::bind((addr.as_str(), 2380)).ok();
            blocker.is_some()
        },
    );
    let _ = m.run(&["remove-unit", "etcd/1"]);
    assert!(!m.units().contains(&"etcd/1".to_string()), "etcd/1 is gone");
    // Refused: the member is still listed, and the leader says so.
    assert!(
        names(&m.endpoint("etcd/0")).contains(&"etcd1".to_string()),
        "etcd1 still listed"
    );
    let (s, msg) = {
        let u = m.unit("etcd/0");
        (
            u["workload-status"]["current"].as_str().unwrap().to_string(),
            u["workload-status"]["message"]
                .as_str()
                .unwrap()
                .to_string(),
        )
    };
    assert_eq!(s, "blocked", "{msg}");
    assert!(
        msg.contains("etcd1") && msg.contains("no quorum"),
        "the status says what is pending: {msg}"
    );

    // etcd/2 returns; the leader's next routine hook completes the removal.
    drop(blocker);
    if m.unit("etcd/2")["juju-status"]["current"] == "error" {
        m.ok(&["resolve", "etcd/2"]);
    }
    m.ok(&["reboot", "etcd/2"]);
    wait_until("quorum to return", Duration::from_secs(30), || {
        etcdctl(&m.endpoint("etcd/0"), &["get", "q/0"])
            .status
            .success()
    });
    m.ok(&["update-status", "etcd/0"]);
    assert_eq!(names(&m.endpoint("etcd/0")), ["etcd0", "etcd2"]);
    m.ok(&["update-status"]);
    m.assert_all_healthy(2);
    for u in m.units() {
        assert_keys(&m.endpoint(&u), "q", 10);
    }
}
