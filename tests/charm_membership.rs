//! Membership repairs on real etcd (issue 10.4, 10.5, 19.3): a removal
//! refused for quorum fails the stop hook and leaves etcd running (resolve
//! retries it once the down member is back; `remove-unit --force` removes
//! the unit anyway, and a later hook of the leader completes the removal);
//! a member that lost its WAL comes back under a new ID, never as its old
//! voter.

mod charm_support;
mod writer_support;
use charm_support::*;
use std::time::Duration;
use writer_support::Writer;

fn names(endpoint: &str) -> Vec<String> {
    members(endpoint).into_iter().map(|x| x.1).collect()
}

/// A 3-unit cluster whose etcd/2 is dead and held down; keys `q/0..10`.
fn three_with_etcd2_down() -> (Model, HeldDown) {
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    put_keys(&m.endpoints(), "q", 10);
    assert_eq!(m.leader(), "etcd/0");
    let held = m.hold_down("etcd/2");
    (m, held)
}

#[test]
fn a_removal_refused_for_quorum_fails_the_stop_hook_and_etcd_keeps_running() {
    let (m, held) = three_with_etcd2_down();
    // Removing a healthy unit now would leave one of two members up.
    let out = m.run(&["remove-unit", "etcd/1"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "the unit is left in error: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let u = m.unit("etcd/1");
    assert_eq!(u["juju-status"]["current"], "error", "{u}");
    assert_eq!(u["juju-status"]["message"], "hook failed: \"stop\"", "{u}");
    let why = m.last_output("etcd/1", "stop");
    assert!(
        why.contains("no quorum") && why.contains("remove-unit --force"),
        "the hook says why and what to do: {why}"
    );
    assert!(
        names(&m.endpoint("etcd/0")).contains(&"etcd1".to_string()),
        "etcd1 still listed"
    );
    // etcd/1's etcd still runs: the cluster keeps its quorum.
    let eps = format!("{},{}", m.endpoint("etcd/0"), m.endpoint("etcd/1"));
    assert_eq!(puts_ok(&eps, "after", 10), 10, "writes after the refusal");

    // The down member returns; resolving retries the stop hook, which now
    // removes the member and stops etcd; the unit goes.
    m.bring_back(held);
    assert_ne!(m.unit("etcd/2")["juju-status"]["current"], "error");
    m.ok(&["resolve", "etcd/1"]);
    assert!(!m.units().contains(&"etcd/1".to_string()), "etcd/1 is gone");
    assert_eq!(names(&m.endpoint("etcd/0")), ["etcd0", "etcd2"]);
    m.ok(&["update-status"]);
    m.assert_all_healthy(2);
    for u in m.units() {
        assert_keys(&m.endpoint(&u), "q", 10);
    }
}

#[test]
fn a_refused_removal_forced_knowingly_is_completed_by_a_later_update_status() {
    let (m, held) = three_with_etcd2_down();
    let out = m.run(&["remove-unit", "etcd/1"]);
    assert_eq!(out.status.code(), Some(2));
    let ep1 = m.endpoint("etcd/1");
    // The operator removes it anyway: its machine goes, and with it etcd.
    m.ok_or_in_error(&["remove-unit", "etcd/1", "--force"]);
    assert!(!m.units().contains(&"etcd/1".to_string()), "etcd/1 is gone");
    assert!(
        !etcdctl(&ep1, &["endpoint", "health"]).status.success(),
        "etcd/1's etcd stopped with its machine"
    );
    // Its member is still listed (no quorum to remove it): the cluster has
    // lost quorum, as the operator was told, and the leader says so.
    assert!(
        names(&m.endpoint("etcd/0")).contains(&"etcd1".to_string()),
        "etcd1 still listed"
    );
    m.ok_or_in_error(&["update-status", "etcd/0"]);
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
    // No leader: a loss of the majority, not yet called one (etcd2's unit
    // is still there: waited for, issue 21), saying who is missing.
    assert_eq!(s, "waiting", "{msg}");
    assert!(
        msg.starts_with("Waiting for the cluster to elect a raft leader: 1 of 3 voters answer; etcd1 is gone (unit removed); etcd2 does not answer (unit still there) for "),
        "{msg}"
    );

    // etcd/2 returns; the leader's next routine hook completes the removal.
    m.bring_back(held);
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
    let mut w = Writer::start(&eps);
    std::thread::sleep(Duration::from_secs(1));
    // Behind the charm's back: etcd dies and its WAL goes (snap/db stays).
    w.disturbance_begins();
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
    w.disturbance_ends();
    std::thread::sleep(Duration::from_secs(1));
    let r = w.finish(Duration::from_secs(20));
    // A follower killed, then replaced by a new member: a follower down
    // costs what a rolling restart does.
    r.assert_available(
        "a member that lost its WAL rejoins under a new ID",
        writer_support::ROLLING,
    );
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
