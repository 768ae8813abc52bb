//! `etcd-charm upgrade-charm --dry-run` on each layout a unit can be in, on
//! real etcd data: through `jujusim refresh --dry-run` (hook tools present:
//! leadership data is read) and by hand with no Juju at all (it plans from
//! the disk and says what it could not read). Every run leaves the unit's
//! whole root exactly as it was.

mod upgrade_support;
use upgrade_support::*;

use serde_json::Value;
use std::process::Command;

/// The dry run as an operator would run it over ssh: the new binary, the
/// unit's root, no hook tools and no JUJU_* variables.
fn by_hand(up: &Upgrade, unit: &str) -> (i32, Value, String) {
    let out = Command::new(up.m.charm.join("bin/etcd-charm"))
        .args(["upgrade-charm", "--dry-run", "--format=json"])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("ETCD_CHARM_ROOT", up.m.root(unit))
        .env("ETCD_CHARM_SERVICE", "direct")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    (
        out.status.code().unwrap_or(-1),
        v,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Both dry runs, each checked to change nothing under the unit's root.
fn dry_runs(up: &Upgrade, unit: &str) -> ((i32, Value), (i32, Value, String)) {
    let root = up.m.root(unit);
    let before = hash_tree(&root);
    let runs = up.dry_run();
    assert_eq!(
        hash_tree(&root),
        before,
        "jujusim's dry run changed the root"
    );
    let (_, code, report) = runs.into_iter().find(|(u, _, _)| u == unit).unwrap();
    let hand = by_hand(up, unit);
    assert_eq!(
        hash_tree(&root),
        before,
        "the dry run by hand changed the root"
    );
    assert_eq!(report["changed_nothing"], true);
    assert_eq!(report["model"]["hook_tools"], true, "{report:#}");
    assert_eq!(hand.1["model"]["hook_tools"], false);
    let unread = hand.1["model"]["unread"][0].as_str().unwrap_or("");
    assert!(unread.contains("no Juju hook tools"), "{unread}");
    // Under Juju the old charm is the unit's; over ssh it is unknown.
    assert_eq!(report["refresh"]["compared"], true, "{report:#}");
    assert_eq!(report["refresh"]["refusals"], serde_json::json!([]));
    assert_eq!(hand.1["refresh"]["compared"], false);
    ((code, report), hand)
}

fn step_keys(report: &Value) -> Vec<String> {
    report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_dry_run_on_each_layout() {
    let up = Upgrade::deploy(1, &[]);
    let u = "etcd/0";
    // The token only in leadership data, as the Python charm kept it.
    let legacy = bootstrap_legacy(&up, 10, false);
    up.m.ok(&["exec", u, "--", "leader-set", &format!("token={TOKEN}")]);
    let ids = legacy.ids[0].1;
    let hex = |v: u64| format!("{v:x}");

    // 1. Legacy only (the snap-migrated config): the migration proceeds.
    let ((code, r), (hcode, h, _)) = dry_runs(&up, u);
    assert_eq!((code, hcode), (0, 0), "{r:#}\n{h:#}");
    for rep in [&r, &h] {
        assert_eq!(rep["verdict"], "proceed");
        assert_eq!(rep["migration"]["kind"], "migrate");
        assert_eq!(rep["migration"]["member_id"], hex(ids.member_id));
        assert_eq!(rep["migration"]["cluster_id"], hex(ids.cluster_id));
        assert_eq!(
            rep["migration"]["from"],
            "/var/snap/etcd/current/etcd0.etcd"
        );
        let diff = rep["config"]["diff"].as_str().unwrap();
        assert!(
            diff.contains("-data-dir: '") && diff.contains("+data-dir: \""),
            "{diff}"
        );
        assert!(
            diff.contains("+initial-cluster-state: \"existing\""),
            "{diff}"
        );
    }
    // Under Juju the leadership data gives the token; over ssh there is none
    // to read, and the dry run says so rather than inventing one.
    assert_eq!(r["token"]["value"], TOKEN);
    assert_eq!(r["token"]["source"], "leadership data (leader-get)");
    assert_eq!(h["token"], Value::Null);
    assert_eq!(h["unit"], "etcd/0");
    assert_eq!(h["unit_from"], "the name in etcd.conf.yml");
    let keys = step_keys(&r);
    assert!(keys.contains(&"migrate-rename".to_string()), "{keys:?}");
    assert!(
        !keys.contains(&"stop".to_string()),
        "etcd is not running: {keys:?}"
    );

    // 2. A kill after the copy was verified: the dry run resumes from there.
    let out = up.run_hook(
        u,
        "upgrade-charm",
        &[
            "ETCD_CHARM_MIGRATE=copy",
            "ETCD_CHARM_FAILPOINT=after:migrate-verify",
        ],
    );
    assert_eq!(out.status.code(), Some(137));
    let ((code, r), _) = dry_runs(&up, u);
    assert_eq!(code, 0, "{r:#}");
    assert!(
        r["migration"]["method"]
            .as_str()
            .unwrap()
            .contains("resuming"),
        "{r:#}"
    );
    let keys = step_keys(&r);
    assert!(
        keys.starts_with(&[
            "migrate-set-aside-source".to_string(),
            "migrate-promote".to_string()
        ]),
        "{keys:?}"
    );

    // 3. Migrated (the hook finishes the job), etcd stopped: nothing to move.
    let out = up.run_hook(u, "config-changed", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_migrated(&up, u, ids);
    stop_service(&up.m.root(u));
    let ((code, r), (hcode, h, _)) = dry_runs(&up, u);
    assert_eq!((code, hcode), (0, 0), "{r:#}\n{h:#}");
    assert_eq!(r["migration"]["kind"], "nothing");
    assert_eq!(r["config"]["changed"], false, "{r:#}");
    assert_eq!(h["migration"]["kind"], "nothing");
    assert!(step_keys(&r).contains(&"start".to_string()));
    // By hand the token comes from the config the charm wrote.
    assert_eq!(h["token"]["value"], TOKEN);

    // 4. A second, different member appears under <name>.etcd: blocked.
    let paths = up.paths(u);
    let logs = tempfile::tempdir().unwrap();
    let ip = up.m.address(u);
    let mut other = hand_etcd(
        "etcd0",
        &ip,
        &up.legacy_dir(u),
        logs.path(),
        &[("etcd0".into(), ip.clone())],
        "OTHER1",
    );
    other.wait_healthy();
    let other_ids = live_ids(&other.endpoint());
    other.stop();
    let ((code, r), (hcode, h, stderr)) = dry_runs(&up, u);
    assert_eq!((code, hcode), (2, 2), "{r:#}");
    for rep in [&r, &h] {
        assert_eq!(rep["verdict"], "blocked");
        let reason = rep["reason"].as_str().unwrap();
        assert!(
            reason.contains(&format!("{ids} at /var/snap/etcd/current "))
                && reason.contains(&format!("{other_ids} at /var/snap/etcd/current/etcd0.etcd")),
            "{reason}"
        );
        assert_eq!(rep["migration"]["kind"], "conflict");
        assert_eq!(rep["steps"].as_array().map(Vec::len), Some(0), "{rep:#}");
    }
    assert!(stderr.contains("would block"), "{stderr}");
    assert!(paths.config_file().exists());
}
