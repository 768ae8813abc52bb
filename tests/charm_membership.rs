//! Membership repairs on real etcd (issue 10.4, 10.5): a refused removal is
//! completed by a later hook once quorum is back; a member that lost its
//! WAL comes back under a new ID, never as its old voter.

mod charm_support;
mod writer_support;
use charm_support::*;
use std::time::Duration;
use writer_support::Writer;

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
            u["workload-status"]["current"]
                .as_str()
                .unwrap()
                .to_string(),
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

#[test]
fn a_member_that_lost_its_wal_rejoins_under_a_new_id() {
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    put_keys(&m.endpoints(), "wal", 10);
    let victim = "etcd/2";
    assert_ne!(m.leader(), victim);
    let old = m.wal_ids(victim);
    // Writes go on all the while (to any member that answers): the rejoin
    // under a new ID must not cost the cluster an acknowledged write.
    let eps: Vec<String> = m.units().iter().map(|u| m.endpoint(u)).collect();
    let w = Writer::start(&eps);
    // Behind the charm's back: etcd dies and its WAL goes (snap/db stays).
    m.kill_etcd(victim);
    let data = m.data_dir(victim);
    wait_until("etcd/2 to be down", Duration::from_secs(20), || {
        !etcdctl(&m.endpoint(victim), &["endpoint", "health"])
            .status
            .success()
    });
    std::fs::rename(data.join("member/wal"), data.join("wal.lost")).unwrap();
    assert!(data.join("member/snap/db").is_file());
    // The start guard refuses this member/ as it is.
    let guard = std::process::Command::new(env!("CARGO_BIN_EXE_etcd-charm"))
        .arg("guard")
        .env("ETCD_CHARM_ROOT", m.root(victim))
        .output()
        .unwrap();
    assert!(
        !guard.status.success(),
        "guard passed: {}",
        String::from_utf8_lossy(&guard.stdout)
    );
    assert!(String::from_utf8_lossy(&guard.stderr).contains("holds no WAL"));

    m.ok(&["reboot", victim]);
    m.ok(&["update-status"]);
    m.assert_all_healthy(3);
    let r = w.finish(Duration::from_secs(20));
    r.print("a member that lost its WAL rejoins under a new ID");
    assert_eq!(r.lost, 0, "acknowledged writes lost: {:?}", r.lost_keys);
    assert!(r.acked > 0, "the writer never got a write through");
    let new = m.wal_ids(victim);
    assert_ne!(new.member_id, old.member_id, "a new member ID");
    assert_eq!(new.cluster_id, old.cluster_id);
    let ids: Vec<String> = members(&m.endpoints()).into_iter().map(|x| x.0).collect();
    assert!(
        !ids.contains(&format!("{:x}", old.member_id)),
        "the old ID is gone: {ids:?}"
    );
    assert_eq!(ids.len(), 3);
    let backups: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("member.backup-")
        })
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert!(
        backups[0].join("snap/db").is_file(),
        "what was left is kept"
    );
    for u in m.units() {
        assert_keys(&m.endpoint(&u), "wal", 10);
    }
}
