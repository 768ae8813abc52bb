//! The reported failure, reproduced and prevented: a 3-unit cluster whose
//! members were born under `<name>.etcd`, running on configs as the snap
//! left them (no token in etcd.conf.yml), refreshed to this charm with a
//! leadership change in the middle of the upgrade. Every unit must end
//! active in the same cluster, with every key, the token unchanged and the
//! data under the canonical dir (the old tree moved, a snapshot kept).
//!
//! Two variants: the token only in leadership data (`token`, as the Python
//! charm kept it), and only in each unit's etcd.conf.2x.

mod upgrade_support;
use upgrade_support::*;

use std::time::{Duration, Instant};

const KEYS: usize = 30;

fn upgrade_three_units(token_in_leadership_data: bool) {
    let started = Instant::now();
    let up = Upgrade::deploy(3, &[]);
    let legacy = bootstrap_legacy(&up, KEYS, !token_in_leadership_data);
    let first_leader = up.m.leader();
    if token_in_leadership_data {
        up.m.ok(&[
            "exec",
            &first_leader,
            "--",
            "leader-set",
            &format!("token={TOKEN}"),
        ]);
    }
    up.start_old_etcd();
    let eps = up.m.endpoints();
    assert_eq!(members(&eps).len(), 3);

    // What each unit would do, before anything is done.
    for (unit, code, r) in up.dry_run() {
        assert_eq!(code, 0, "{unit}: {r:#}");
        assert_eq!(r["migration"]["kind"], "migrate", "{unit}");
        assert_eq!(r["token"]["value"], TOKEN, "{unit}: {r:#}");
        let source = r["token"]["source"].as_str().unwrap();
        if token_in_leadership_data {
            assert!(source.starts_with("leadership data"), "{unit}: {source}");
        } else {
            assert!(source.contains("etcd.conf.2x"), "{unit}: {source}");
        }
    }

    // The refresh, interrupted after its first hook by a leadership change
    // to a unit that has not migrated yet: it migrates in leader-elected.
    let out = up.refresh(&["--max-hooks", "1"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "the refresh should stop part-way: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let moved: Vec<&String> = up
        .units
        .iter()
        .filter(|u| matches!(etcd_charm::wal::read_ids(&up.m.data_dir(u)), Ok(Some(_))))
        .collect();
    assert_eq!(
        moved.len(),
        1,
        "one unit migrated before the change: {moved:?}"
    );
    let new_leader = up
        .units
        .iter()
        .find(|u| **u != first_leader && !moved.contains(u))
        .unwrap()
        .clone();
    up.m.ok(&["elect", &new_leader]);
    up.m.ok(&["settle"]);
    assert_eq!(up.m.leader(), new_leader);

    // Statuses settle once every unit has seen the others' migrations.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let w = up.m.workloads();
        if w.iter()
            .all(|(_, s, m)| s == "active" && m == "Healthy with 3 known peers")
        {
            break;
        }
        assert!(Instant::now() < deadline, "units never all healthy: {w:?}");
        up.m.ok(&["update-status"]);
    }
    for (unit, ids) in &legacy.ids {
        let ep = up.m.endpoint(unit);
        assert_eq!(live_ids(&ep), *ids, "{unit} runs its own member");
        assert_eq!(ids.cluster_id, legacy.cluster_id);
        assert_migrated(&up, unit, *ids);
        assert_keys(&ep, "legacy", KEYS);
        assert!(
            names(&up.legacy_dir(unit)).is_empty(),
            "{unit}: the rename leaves <name>.etcd empty"
        );
    }
    let m = members(&eps);
    assert_eq!(m.len(), 3, "{m:?}");
    assert!(m.iter().all(|(_, _, learner)| !learner), "{m:?}");
    assert_eq!(up.m.token(), TOKEN, "the token is unchanged");
    assert_eq!(up.m.cluster_id(), format!("{:x}", legacy.cluster_id));
    eprintln!(
        "3 units upgraded (token in {}) in {:.1} s",
        if token_in_leadership_data {
            "leadership data"
        } else {
            "etcd.conf.2x"
        },
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn three_units_with_the_token_in_leadership_data_upgrade_across_a_leader_change() {
    upgrade_three_units(true);
}

#[test]
fn three_units_with_the_token_only_in_etcd_conf_2x_upgrade_across_a_leader_change() {
    upgrade_three_units(false);
}
