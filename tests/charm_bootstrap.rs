//! The two-phase bootstrap on real etcd (issue 10.3): the hook that starts
//! the first member dies right after the start, leadership moves, and in
//! the end there is ONE cluster — under Juju 3.6 (leader-set) and Juju 4
//! (the peer app databag, which a failed hook throws away).

mod charm_support;
use charm_support::*;
use std::collections::BTreeSet;
use std::time::Duration;

fn bootstrap_hook_dies_after_start_then_leadership_moves(juju: &[&str]) {
    let m = Model::new();
    let marker = m.dir.parent().unwrap().join("failpoint-fired");
    let once = format!("ETCD_CHARM_FAILPOINT_ONCE={}", marker.display());
    let mut args = vec![
        // One attempt: the unit stays in error, so leadership can move
        // before the hook is retried.
        "--attempts",
        "1",
        "deploy",
        m.charm.to_str().unwrap(),
        "-n",
        "3",
        "--config",
        "bind_to_all_interfaces=false",
        "--env",
        "ETCD_CHARM_SERVICE=direct",
        "--env",
        "ETCD_CHARM_ROOT={unit_root}",
        "--env",
        "ETCD_CHARM_FAILPOINT=after:start",
        "--env",
        &once,
    ];
    args.extend_from_slice(juju);
    let _ = m.run(&args);
    assert!(marker.exists(), "the failpoint fired");
    let s = m.status();
    let units = s["applications"]["etcd"]["units"].as_object().unwrap();
    let failed: Vec<&String> = units
        .iter()
        .filter(|(_, u)| u["juju-status"]["current"] == "error")
        .map(|(n, _)| n)
        .collect();
    assert_eq!(failed.len(), 1, "one unit in error: {s}");
    let boot = failed[0].clone();
    assert_eq!(m.leader(), boot, "the leader bootstrapped");
    // The hook died; its etcd did not.
    wait_until(
        "the bootstrapped member to answer",
        Duration::from_secs(30),
        || {
            etcdctl(&m.endpoint(&boot), &["endpoint", "health"])
                .status
                .success()
        },
    );
    let first = m.wal_ids(&boot);

    // Leadership moves while the bootstrapper is in error.
    let other = m.units().into_iter().find(|u| *u != boot).unwrap();
    let _ = m.run(&["elect", &other]);
    assert_eq!(m.leader(), other);
    // Others may have joined the running member already (under Juju 4 its
    // peer databag was committed by phase 1's hook), never started another.
    for u in m.units().iter().filter(|u| **u != boot) {
        if let Some(ids) = etcd_charm::wal::read_ids(&m.data_dir(u)).unwrap() {
            assert_eq!(
                ids.cluster_id,
                first.cluster_id,
                "{u} bootstrapped a cluster of its own: {:?}",
                m.workloads()
            );
        }
    }

    m.ok(&["resolve", &boot]);
    m.ok(&["update-status"]);
    m.ok(&["update-status"]);
    m.assert_all_healthy(3);
    let ids: BTreeSet<String> = m
        .units()
        .iter()
        .map(|u| format!("{:x}", m.wal_ids(u).cluster_id))
        .collect();
    assert_eq!(
        ids.into_iter().collect::<Vec<_>>(),
        [format!("{:x}", first.cluster_id)],
        "one cluster ID in every WAL"
    );
    assert_eq!(m.cluster_id(), format!("{:x}", first.cluster_id));
    assert_eq!(m.wal_ids(&boot), first, "the bootstrapper kept its member");
    assert_eq!(members(&m.endpoints()).iter().filter(|x| !x.2).count(), 3);
    put_keys(&m.endpoints(), "one", 5);
    for u in m.units() {
        assert_keys(&m.endpoint(&u), "one", 5);
    }
}

#[test]
fn under_juju_3_a_bootstrap_that_dies_after_start_leaves_one_cluster() {
    bootstrap_hook_dies_after_start_then_leadership_moves(&[]);
}

#[test]
fn under_juju_4_a_bootstrap_that_dies_after_start_leaves_one_cluster() {
    bootstrap_hook_dies_after_start_then_leadership_moves(&["--juju-version", "4.0"]);
}
