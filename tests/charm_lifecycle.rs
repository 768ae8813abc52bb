//! Cluster lifecycle on real etcd through jujusim: forming, growing,
//! shrinking and healing, with every key written first and checked after.
//! Each test owns its model (and so its loopback addresses); they run one
//! at a time.

mod charm_support;
use charm_support::*;
use std::time::Duration;

fn all_keys(m: &Model, prefix: &str, n: usize) {
    for u in m.units() {
        assert_keys(&m.endpoint(&u), prefix, n);
    }
}

#[test]
fn deploy_three_then_grow_to_five_and_shrink_to_three_keeping_data() {
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    let token = m.token();
    let cluster = m.cluster_id();
    assert_eq!(token.len(), 16, "token {token:?}");
    put_keys(&m.endpoints(), "grow", 20);

    m.ok(&["add-unit", "etcd", "-n", "2"]);
    m.assert_all_healthy(5);
    all_keys(&m, "grow", 20);
    assert_eq!(members(&m.endpoints()).iter().filter(|x| !x.2).count(), 5);

    m.ok(&["remove-unit", "etcd/3"]);
    m.ok(&["remove-unit", "etcd/4"]);
    m.assert_all_healthy(3);
    let names: Vec<String> = members(&m.endpoints()).into_iter().map(|x| x.1).collect();
    assert_eq!(names, ["etcd0", "etcd1", "etcd2"]);
    all_keys(&m, "grow", 20);
    assert_eq!((m.token(), m.cluster_id()), (token, cluster));
}

#[test]
fn deploy_five() {
    let m = Model::new();
    m.deploy(5);
    m.assert_all_healthy(5);
    put_keys(&m.endpoints(), "five", 10);
    all_keys(&m, "five", 10);
}

#[test]
fn scale_one_to_three_to_one_to_three_and_remove_the_leader() {
    let m = Model::new();
    m.deploy(1);
    m.assert_all_healthy(1);
    let token = m.token();
    let cluster = m.cluster_id();
    put_keys(&m.endpoints(), "s", 10);

    m.ok(&["add-unit", "etcd", "-n", "2"]);
    m.assert_all_healthy(3);
    m.ok(&["remove-unit", "etcd/1"]);
    m.ok(&["remove-unit", "etcd/2"]);
    m.assert_all_healthy(1);
    all_keys(&m, "s", 10);
    m.ok(&["add-unit", "etcd", "-n", "2"]);
    m.assert_all_healthy(3);
    all_keys(&m, "s", 10);

    // The leader goes: a new leader is elected and keeps the token.
    let old = m.leader();
    m.ok(&["remove-unit", &old]);
    m.assert_all_healthy(2);
    assert_ne!(m.leader(), old);
    assert_eq!((m.token(), m.cluster_id()), (token, cluster));
    all_keys(&m, "s", 10);
    // And the cluster can still grow under the new leader.
    m.ok(&["add-unit", "etcd"]);
    m.assert_all_healthy(3);
    all_keys(&m, "s", 10);
}

#[test]
fn leadership_moves_to_every_unit_and_every_unit_reboots() {
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    let token = m.token();
    let cluster = m.cluster_id();
    put_keys(&m.endpoints(), "lead", 10);

    for u in m.units() {
        m.ok(&["elect", &u]);
        assert_eq!(m.leader(), u);
        m.assert_all_healthy(3);
        assert_eq!(
            (m.token(), m.cluster_id()),
            (token.clone(), cluster.clone()),
            "after electing {u}"
        );
    }

    let before: Vec<_> = m.units().iter().map(|u| m.wal_ids(u)).collect();
    for u in m.units() {
        m.ok(&["reboot", &u]);
    }
    m.assert_all_healthy(3);
    let after: Vec<_> = m.units().iter().map(|u| m.wal_ids(u)).collect();
    assert_eq!(
        before, after,
        "members rejoin under the IDs their WALs hold"
    );
    all_keys(&m, "lead", 10);
    assert_eq!((m.token(), m.cluster_id()), (token, cluster));
}

#[test]
fn a_member_removed_behind_the_charms_back_rejoins_under_a_new_id() {
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    put_keys(&m.endpoints(), "behind", 10);
    let victim = "etcd/2";
    let old = m.wal_ids(victim);
    // etcd refuses membership changes for a few seconds after the last one.
    let id = format!("{:x}", old.member_id);
    wait_until(
        "etcd to accept the member remove",
        Duration::from_secs(30),
        || {
            etcdctl(&m.endpoint("etcd/0"), &["member", "remove", &id])
                .status
                .success()
        },
    );
    // The removed member exits by itself (status 0).
    wait_until(
        "the removed member to exit",
        Duration::from_secs(20),
        || {
            etcdctl(&m.endpoint(victim), &["endpoint", "health"])
                .status
                .code()
                != Some(0)
        },
    );

    m.ok(&["update-status", victim]);
    m.assert_all_healthy(3);
    let new = m.wal_ids(victim);
    assert_ne!(new.member_id, old.member_id);
    assert_eq!(new.cluster_id, old.cluster_id);
    let backups: Vec<_> = std::fs::read_dir(m.data_dir(victim))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("member.backup-"))
        .collect();
    assert_eq!(backups.len(), 1, "one dated backup of the old member");
    let backup = m.data_dir(victim).join(&backups[0]);
    assert!(backup.join("wal").is_dir(), "the backup keeps the old WAL");
    all_keys(&m, "behind", 10);
}

/// The case `cluster_exists` guards: the leader starts with no WAL (its
/// data disk came up late) while no peer answers. Everything else says
/// "bootstrap" (leader, token, no member on disk); only the recorded
/// cluster and the peers' member IDs say a cluster exists.
#[test]
fn with_peers_unreachable_start_never_bootstraps_a_second_cluster() {
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    let cluster = m.cluster_id();
    put_keys(&m.endpoints(), "dark", 10);
    let ids: Vec<_> = m.units().iter().map(|u| m.wal_ids(u)).collect();
    assert_eq!(m.leader(), "etcd/0");

    // The whole cluster goes down; the leader's machine comes back alone,
    // its member not (yet) in its data dir.
    for u in m.units() {
        m.kill_etcd(&u);
    }
    let data = m.data_dir("etcd/0");
    let away = data.with_file_name("member-on-the-late-disk");
    std::fs::rename(data.join("member"), &away).unwrap();
    m.ok(&["reboot", "etcd/0"]);
    let u = m.unit("etcd/0");
    assert_eq!(u["workload-status"]["current"], "waiting", "{u:#}");
    let msg = u["workload-status"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("no member of it is reachable"), "{msg}");
    assert!(
        !data.join("member").exists(),
        "a new member (a second cluster) was bootstrapped in {}",
        data.display()
    );
    assert!(
        etcdctl(&m.endpoint("etcd/0"), &["endpoint", "status"])
            .status
            .code()
            != Some(0),
        "nothing answers on etcd/0"
    );

    // The disk arrives and the others return: the same cluster, the same
    // members, every key.
    std::fs::rename(&away, data.join("member")).unwrap();
    m.ok(&["reboot", "etcd/0"]);
    m.ok(&["reboot", "etcd/1"]);
    m.ok(&["reboot", "etcd/2"]);
    m.ok(&["update-status"]);
    m.assert_all_healthy(3);
    assert_eq!(m.cluster_id(), cluster);
    let after: Vec<_> = m.units().iter().map(|u| m.wal_ids(u)).collect();
    assert_eq!(after, ids);
    all_keys(&m, "dark", 10);
}

#[test]
fn an_add_whose_answer_was_lost_still_joins_once() {
    let m = Model::new();
    // The leader's first member add succeeds in etcd, then the hook dies
    // before it records anything; Juju retries the hook.
    m.deploy_with(
        3,
        &[
            "--env",
            "ETCD_CHARM_FAILPOINT=add-member:added",
            "--env",
            "ETCD_CHARM_FAILPOINT_ONCE={unit_root}/failpoint-fired",
        ],
    );
    m.assert_all_healthy(3);
    let fired = m
        .units()
        .iter()
        .filter(|u| m.root(u).join("failpoint-fired").exists())
        .count();
    assert_eq!(fired, 1, "the failpoint fired on the leader once");
    assert_eq!(
        members(&m.endpoints()).len(),
        3,
        "no member was added twice"
    );
    put_keys(&m.endpoints(), "lost", 5);
    all_keys(&m, "lost", 5);
}

#[test]
fn a_removal_that_would_lose_quorum_is_refused() {
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    put_keys(&m.endpoints(), "q", 5);
    // etcd/2's machine is in trouble: its etcd is dead and cannot come back
    // while something else holds its peer port.
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
    let etcd1 = members(&m.endpoint("etcd/0"))
        .into_iter()
        .find(|x| x.1 == "etcd1")
        .expect("etcd1 is a member");
    // etcd/1's stop hook refuses to stop a voter whose removal would cost
    // quorum: it fails, and Juju keeps the unit (dying, in error); the
    // command reports it, and etcd/2, whose etcd cannot start.
    let out = m.run(&["remove-unit", "etcd/1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "etcd/1's stop fails: {err}");
    assert!(
        err.contains("etcd/1 is in error: hook failed: \"stop\"")
            && err.contains("etcd/2 is in error")
            && !err.contains("etcd/0"),
        "{err}"
    );
    assert!(m.units().contains(&"etcd/1".to_string()), "{:?}", m.units());

    // The member stays: same ID, still listed, so quorum can return.
    let left = members(&m.endpoint("etcd/0"));
    assert!(left.contains(&etcd1), "{left:?} lacks {etcd1:?}");
    assert_eq!(left.len(), 3, "{left:?}");
    // The leader refused, saying why and what to do, without failing a hook.
    let leader = m.unit("etcd/0");
    assert_eq!(leader["juju-status"]["current"], "idle", "{leader:#}");
    assert_eq!(
        leader["workload-status"]["current"], "blocked",
        "{leader:#}"
    );
    let msg = leader["workload-status"]["message"].as_str().unwrap_or("");
    // etcd1 is leaving; the leader says what is pending and why it waits.
    assert!(
        msg.contains("etcd1 ")
            && msg.contains("is leaving")
            && msg.contains("would leave 1 of 2 remaining members healthy (no quorum)"),
        "{msg}"
    );
    // etcd/2's hooks fail while its etcd cannot start; once the port is
    // free, retrying them brings it back.
    drop(blocker);
    if m.unit("etcd/2")["juju-status"]["current"] == "error" {
        let _ = m.run(&["resolve", "etcd/2"]);
    }
    let _ = m.run(&["reboot", "etcd/2"]);
    wait_until("quorum to return", Duration::from_secs(30), || {
        etcdctl(&m.endpoint("etcd/2"), &["get", "q/0"])
            .status
            .success()
    });
    assert_keys(&m.endpoint("etcd/2"), "q", 5);
    // Retried now, etcd/1's stop removes its member and the unit goes.
    m.ok(&["resolve", "etcd/1"]);
    assert!(!m.units().contains(&"etcd/1".to_string()));
    assert_eq!(members(&m.endpoint("etcd/0")).len(), 2);
}

#[test]
fn under_juju_4_leadership_data_lives_in_the_peer_app_databag() {
    let m = Model::new();
    m.deploy_with(3, &["--juju-version", "4.0.0"]);
    m.assert_all_healthy(3);
    let token = m.token();
    assert_eq!(token.len(), 16);
    let old = m.leader();
    m.ok(&["remove-unit", &old]);
    m.assert_all_healthy(2);
    assert_eq!(m.token(), token);
}

#[test]
fn under_juju_3_leadership_data_is_written_to_both_places() {
    let m = Model::new();
    m.deploy(1);
    m.assert_all_healthy(1);
    assert_eq!(m.leader_get()["token"], m.leader_data()["token"]);
    assert_eq!(m.leader_get()["cluster-id"], m.leader_data()["cluster-id"]);
}
