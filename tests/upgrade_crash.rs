//! Crash safety of the migration on real etcd: the upgrade hook is killed
//! (a failpoint: exit 137 right after a step, no destructors) after each
//! step of its plan in turn, on the rename path and on the copy path; the
//! next hook must converge with every key, the same IDs and the same token.
//! The old etcd runs when the hook starts, so the plan snapshots it online
//! before the stop (a kill right after that snapshot, etcd still up, too).
//!
//! One unit, one model: before each kill the unit's disk is put back to the
//! legacy layout (a copy taken once) and the old etcd started on it.

mod upgrade_support;
use upgrade_support::*;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const KEYS: usize = 20;

fn cp_a(from: &Path, to: &Path) {
    let ok = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cp -a {} {}", from.display(), to.display());
}

/// The plan's step keys, from the dry run in the unit's context.
fn plan_keys(up: &Upgrade, unit: &str, env: &[&str]) -> Vec<String> {
    let bin = up.m.charm.join("bin/etcd-charm");
    let mut args = vec!["exec", unit, "--", "env"];
    args.extend_from_slice(env);
    args.extend([
        bin.to_str().unwrap(),
        "upgrade-charm",
        "--dry-run",
        "--format=json",
    ]);
    let out = up.m.run(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["verdict"], "proceed", "{v:#}");
    v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .collect()
}

fn crash_after_each_step(copy: bool) {
    let started = Instant::now();
    let up = Upgrade::deploy(1, &[]);
    let u = "etcd/0";
    let legacy = bootstrap_legacy(&up, KEYS, true);
    let ids = legacy.ids[0].1;
    let root = up.m.root(u);
    let snap_dir = root.join("var/snap/etcd");
    let template = tempfile::tempdir().unwrap();
    cp_a(&snap_dir, &template.path().join("etcd"));
    let mode: Vec<&str> = if copy {
        vec!["ETCD_CHARM_MIGRATE=copy"]
    } else {
        vec![]
    };

    up.start_old_etcd();
    let mut keys = plan_keys(&up, u, &mode);
    if copy {
        // A kill half-way through the copy, not only after it.
        keys.insert(
            keys.iter().position(|k| k == "migrate-copy").unwrap(),
            "during:migrate-copy".into(),
        );
    }
    let mut crashed = BTreeSet::new();
    let mut skipped = Vec::new();
    for key in &keys {
        let failpoint = if key.contains(':') {
            format!("ETCD_CHARM_FAILPOINT={key}")
        } else {
            format!("ETCD_CHARM_FAILPOINT=after:{key}")
        };
        // Back to the legacy layout, old etcd running on it.
        stop_service(&root);
        std::fs::remove_dir_all(&snap_dir).unwrap();
        cp_a(&template.path().join("etcd"), &snap_dir);
        up.forget_model_writes(u);
        up.start_old_etcd();

        let mut env = mode.clone();
        env.push(&failpoint);
        let out = up.run_hook(u, "upgrade-charm", &env);
        match out.status.code() {
            Some(137) => {
                crashed.insert(key.clone());
            }
            // The step was done already (leadership data survives a
            // failed hook, as under Juju): nothing to kill after.
            Some(0) => skipped.push(key.clone()),
            other => panic!(
                "{key}: exit {other:?}\n{}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
        let out = up.run_hook(u, "config-changed", &mode);
        assert!(
            out.status.success(),
            "after a kill at {key}, config-changed failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (status, msg) = workload(&up.m, u);
        assert_eq!(
            (status.as_str(), msg.as_str()),
            ("active", "Healthy with 1 known peer"),
            "after a kill at {key}"
        );
        let ep = up.m.endpoint(u);
        assert_eq!(live_ids(&ep), ids, "after a kill at {key}");
        assert_keys(&ep, "legacy", KEYS);
        assert_migrated(&up, u, ids);
        let staged: Vec<String> = names(&up.m.data_dir(u))
            .into_iter()
            .filter(|n| n == "member.incoming" || n == "member.verified")
            .collect();
        assert!(staged.is_empty(), "after a kill at {key}: {staged:?}");
    }
    assert_eq!(up.m.token(), TOKEN);
    let must: &[&str] = if copy {
        &[
            "migrate-online-snapshot",
            "stop",
            "during:migrate-copy",
            "migrate-copy",
            "migrate-verify",
            "migrate-set-aside-source",
            "migrate-promote",
            "set-leader-data",
            "publish",
            "write-config",
            "start",
            "wait-member",
            "verify-member",
        ]
    } else {
        &[
            "migrate-online-snapshot",
            "stop",
            "migrate-rename",
            "set-leader-data",
            "publish",
            "write-config",
            "start",
            "wait-member",
            "verify-member",
        ]
    };
    for k in must {
        assert!(crashed.contains(*k), "never killed after {k}: {crashed:?}");
    }
    eprintln!(
        "{} path: killed after {} steps ({crashed:?}); already done: {skipped:?}; {:.1} s",
        if copy { "copy" } else { "rename" },
        crashed.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn a_kill_after_each_step_of_the_rename_path_converges() {
    crash_after_each_step(false);
}

#[test]
fn a_kill_after_each_step_of_the_copy_path_converges() {
    crash_after_each_step(true);
}
