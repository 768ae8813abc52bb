//! Issue 21: a cluster that lost its majority comes back from a survivor
//! with one action. On a v4 TLS cluster through jujusim on real etcd: keys
//! written, the machines of a majority lost (`remove-unit --force
//! --no-wait`); every remaining unit is blocked naming the member with the
//! most recent data and the action; `rebuild-cluster` there (refused on a
//! unit that knows less); every key back and writable, the same cluster ID
//! and token; the other remaining units rejoin; `add-unit` back to the
//! original size, every key on every member.

mod tls_relation_support;
mod upgrade_support;
mod writer_support;
use tls_relation_support::*;
use upgrade_support::*;

use std::time::{Duration, Instant};

const KEYS: usize = 50;

/// Runs update-status until `done` holds for the workloads, bounded.
fn until_workloads(m: &Model, what: &str, done: impl Fn(&[(String, String, String)]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let w = m.workloads();
        if done(&w) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {w:#?}"
        );
        std::thread::sleep(Duration::from_secs(1));
        m.ok_or_in_error(&["update-status"]);
    }
}

fn lose_the_majority_and_rebuild(n: usize, lost: usize) {
    let m = Model::new();
    let (units, _f0, eps) = move_model_to_tls(&m, "v4-ca", |m| m.deploy(n as u32));
    put_keys(&eps.join(","), "dr", KEYS);
    let token = m.token();
    let cluster = m.cluster_id();
    let (keep, gone) = units.split_at(n - lost);
    // The machines go at once: no hook runs between the removals (a
    // removal one at a time would let the leader remove each member while
    // a quorum still stood).
    for u in gone {
        let out = m.run(&["--max-hooks", "0", "remove-unit", "--force", "--no-wait", u]);
        assert_ne!(out.status.code(), Some(1), "remove-unit {u}: {out:?}");
    }
    m.ok_or_in_error(&["settle"]);
    let answering = format!("majority lost: {} of {n} voters answer", keep.len());
    until_workloads(&m, "every remaining unit blocked, naming the loss", |w| {
        w.len() == keep.len()
            && w.iter()
                .all(|(_, s, msg)| s == "blocked" && msg.starts_with(&answering))
    });
    // Every unit names the same member and the action to run there (the
    // named unit adds "(this unit)").
    let msgs: Vec<String> = m
        .workloads()
        .into_iter()
        .map(|(_, _, msg)| msg.replace(" (this unit)", ""))
        .collect();
    assert!(msgs.windows(2).all(|w| w[0] == w[1]), "{msgs:#?}");
    let named = msgs[0]
        .split("`juju run ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .unwrap_or_else(|| panic!("no action named: {}", msgs[0]))
        .to_string();
    assert!(
        keep.contains(&named),
        "{named} is not a remaining unit: {}",
        msgs[0]
    );
    eprintln!("{}", msgs[0]);

    // Not from a member that knows less, without force.
    if let Some(other) = keep.iter().find(|u| **u != named) {
        let (done, v) = m.run_action(other, "rebuild-cluster", &[]);
        assert!(!done, "{v}");
    }
    let started = Instant::now();
    let (done, v) = m.run_action(&named, "rebuild-cluster", &[]);
    assert!(done, "rebuild-cluster on {named}: {v}");
    let writable = started.elapsed();
    let survivor = format!("https://{}:2379", m.address(&named));
    assert_keys(&survivor, "dr", KEYS);
    put_keys(&survivor, "after", 5);
    let snapshot = v["results"]["snapshot"].as_str().unwrap_or_default();
    assert!(
        m.root(&named)
            .join(snapshot.trim_start_matches('/'))
            .is_file(),
        "the snapshot before the rebuild: {v}"
    );
    assert_eq!(m.token(), token, "the token is kept");
    assert_eq!(m.cluster_id(), cluster, "the cluster ID is kept");

    // The other remaining units rejoin as new members, one at a time.
    let healthy = |k: usize| {
        format!(
            "Healthy with {k} known peer{}",
            if k == 1 { "" } else { "s" }
        )
    };
    let want = healthy(keep.len());
    until_workloads(&m, "the remaining units healthy again", |w| {
        w.len() == keep.len() && w.iter().all(|(_, s, msg)| s == "active" && *msg == want)
    });
    let voters = keep.len();
    eprintln!(
        "rebuild-cluster → writable {:.1} s, → {voters} voters {:.1} s",
        writable.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    // Back to the original size with new units.
    m.ok(&["add-unit", "etcd", "-n", &lost.to_string()]);
    let want = healthy(n);
    until_workloads(&m, "every unit healthy at the original size", |w| {
        w.len() == n && w.iter().all(|(_, s, msg)| s == "active" && *msg == want)
    });
    let all: Vec<String> = m
        .units()
        .iter()
        .map(|u| format!("https://{}:2379", m.address(u)))
        .collect();
    let list = members(&all.join(","));
    assert_eq!(list.len(), n, "{list:?}");
    assert!(list.iter().all(|(_, _, learner)| !learner), "{list:?}");
    for ep in &all {
        assert_keys(ep, "dr", KEYS);
        assert_keys(ep, "after", 5);
    }
    assert_eq!(m.cluster_id(), cluster, "the cluster ID is kept");
}

#[test]
fn three_units_two_machines_lost_rebuilt_from_the_survivor() {
    lose_the_majority_and_rebuild(3, 2);
}

#[test]
fn five_units_three_machines_lost_rebuilt_from_the_most_recent_survivor() {
    lose_the_majority_and_rebuild(5, 3);
}

/// The rebuild killed after a step, one step per round: before the forced
/// restart nothing has changed and the action is run again; after it,
/// etcd.conf.yml says force-new-cluster and the next hooks finish the job.
/// Two units, one machine lost per round (1 of 2 answer: no quorum), plain
/// etcd (the TLS path is the tests above); a unit added back after each.
#[test]
fn a_rebuild_killed_after_a_step_is_continued_by_the_action_or_the_next_hook() {
    let m = Model::new();
    m.deploy_with(
        2,
        &[
            "--env",
            "ETCD_CHARM_FAILPOINT_FILE={unit_root}/failpoint",
            "--env",
            "ETCD_CHARM_FAILPOINT_ONCE={unit_root}/failpoint.fired",
        ],
    );
    m.assert_all_healthy(2);
    put_keys(&m.endpoints(), "dr", KEYS);
    let cluster = m.cluster_id();
    // (failpoint, whether the action must be run again to finish)
    let rounds = [
        ("after:stop", true),
        ("after:rebuild-copy-aside", true),
        ("after:write-config", false),
        ("after:start", false),
    ];
    for (point, again) in rounds {
        let t = Instant::now();
        let mut units = m.units();
        units.sort();
        let (survivor, lost) = (units[0].clone(), units[1].clone());
        let out = m.run(&[
            "--max-hooks",
            "0",
            "remove-unit",
            "--force",
            "--no-wait",
            &lost,
        ]);
        assert_ne!(out.status.code(), Some(1), "{out:?}");
        m.ok_or_in_error(&["settle"]);
        until_workloads(&m, "the survivor blocked", |w| {
            w.len() == 1
                && w[0].1 == "blocked"
                && w[0]
                    .2
                    .contains(&format!("juju run {survivor} rebuild-cluster"))
        });
        eprintln!("{point}: blocked after {:.1} s", t.elapsed().as_secs_f64());
        let root = m.root(&survivor);
        let _ = std::fs::remove_file(root.join("failpoint.fired"));
        std::fs::write(root.join("failpoint"), point).unwrap();
        let (done, v) = m.run_action(&survivor, "rebuild-cluster", &[]);
        assert!(!done, "{point}: the action was not killed: {v}");
        assert!(root.join("failpoint.fired").exists(), "{point} never fired");
        std::fs::remove_file(root.join("failpoint")).unwrap();
        if again {
            let (done, v) = m.run_action(&survivor, "rebuild-cluster", &[]);
            assert!(done, "{point}: run again: {v}");
        }
        until_workloads(&m, &format!("{point}: the survivor healthy alone"), |w| {
            w.len() == 1 && w[0].1 == "active" && w[0].2 == "Healthy with 1 known peer"
        });
        eprintln!(
            "{point}: healthy alone after {:.1} s",
            t.elapsed().as_secs_f64()
        );
        let conf =
            std::fs::read_to_string(etcd_charm::paths::Paths::new(&root).config_file()).unwrap();
        assert!(
            !conf.contains("\nforce-new-cluster:"),
            "{point}: the flag stayed"
        );
        assert_keys(&m.endpoint(&survivor), "dr", KEYS);
        assert_eq!(m.cluster_id(), cluster, "{point}");
        m.ok(&["add-unit", "etcd"]);
        m.assert_all_healthy(2);
        eprintln!(
            "{point}: two again after {:.1} s",
            t.elapsed().as_secs_f64()
        );
    }
}
