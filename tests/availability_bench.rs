//! Availability rows for bench/run (issue 14.2), not run by default:
//!
//! ```text
//! cargo test --release --test availability_bench -- --ignored --nocapture --test-threads=1
//! ```
//!
//! Each row runs tests/writer_support's writer against every member (one
//! put at a time, each bounded by `PUT_TIMEOUT` = 800 ms with connecting
//! included, 20 ms apart, moving to the next member after a failure) from
//! 2 s before an operation until 2 s after the cluster is back, and prints
//! one `BENCH-AVAIL {json}` line: the longest gap between acknowledged
//! writes, failed writes (and how many of them ran out of the timeout),
//! lost writes and the most members down at once. Beside them, in the same
//! cluster and run, the floors: one member restarted by hand (a follower's
//! etcd stopped and started outside the charm, as `systemctl restart`
//! would, with the writer on it) and one election (`etcdctl move-leader`,
//! with the writer on the old leader). The writer starts on the first unit
//! for the charm's operations and on the raft leader when it is killed.
//!
//! - `routine_operations`: a 3-unit cluster of this charm at its default
//!   raft timings (heartbeat 100 ms, election 1000 ms): the floors, a
//!   refresh to a build whose `snapshot_count` default differs, a
//!   `snapshot_count` change, the rolling `defrag` action, the raft
//!   leader's etcd killed with SIGKILL (the supervisor restarts it after
//!   its 2 s delay, as systemd would).
//! - `legacy_migration`: 3 units of the Python charm's layout
//!   (tests/upgrade_support, raft timings 50/500 ms), the floors there,
//!   then `jujusim refresh` to this charm, which migrates every member.
//! - `version_upgrade`: 3 units on jujusim's systemd machines (the snapd
//!   stand-in, the snap backend), the floors there (`systemctl restart` in
//!   a machine), then `channel=3.5/stable` from 3.4 (tests/systemd_support;
//!   needs SNAP_STANDIN_ETCD35, else it prints `BENCH-AVAIL-SKIP` and why).
//!
//! Outcomes are checked (no lost write, never two members down, every key
//! and member kept); the figures themselves are reported, never asserted.

mod upgrade_support;
mod writer_support;
use upgrade_support::*;
/// tests/systemd_support reaches its helpers as `crate::charm_support`:
/// here they are upgrade_support's (one `Model` type in this file).
mod charm_support {
    pub use crate::upgrade_support::*;
}
mod systemd_support;
use writer_support::{Report, Writer};

use etcd_charm::paths::Paths;
use etcd_charm::service::{Backend, Service};
use std::path::Path;
use std::time::{Duration, Instant};

const KEYS: usize = 20;
/// Writing before and after the operation: the gap must fall inside.
const MARGIN: Duration = Duration::from_secs(2);

fn endpoints(m: &Model, units: &[String]) -> Vec<String> {
    units.iter().map(|u| m.endpoint(u)).collect()
}

fn service(m: &Model, unit: &str) -> Service {
    Service {
        backend: Backend::Direct {
            etcd_bin: "etcd".into(),
        },
        paths: Paths::new(m.root(unit)),
    }
}

/// Runs update-status until every unit is active and healthy (bounded).
fn settle_healthy(m: &Model, n: usize) {
    let want = format!("Healthy with {n} known peers");
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let w = m.workloads();
        if w.len() == n && w.iter().all(|(_, s, msg)| s == "active" && *msg == want) {
            return;
        }
        assert!(Instant::now() < deadline, "units never all healthy: {w:?}");
        std::thread::sleep(Duration::from_secs(1));
        m.ok(&["update-status"]);
    }
}

/// Every member answers `endpoint health` (bounded).
fn wait_members_healthy(eps: &[String]) {
    for ep in eps {
        wait_until(&format!("{ep} healthy"), Duration::from_secs(120), || {
            etcdctl(ep, &["endpoint", "health"]).status.success()
        });
    }
}

/// (unit, member id) of the raft leader, and of the other units.
fn leader_and_followers(m: &Model, units: &[String]) -> ((String, u64), Vec<(String, u64)>) {
    let st: Vec<(String, Status)> = units
        .iter()
        .map(|u| {
            let s = endpoint_status(&m.endpoint(u)).unwrap_or_else(|e| panic!("{u}: {e}"));
            (u.clone(), s)
        })
        .collect();
    let leader = st[0].1.leader;
    let mut followers = Vec::new();
    let mut lead = None;
    for (u, s) in st {
        if s.ids.member_id == leader {
            lead = Some((u, s.ids.member_id));
        } else {
            followers.push((u, s.ids.member_id));
        }
    }
    (lead.expect("a raft leader among the units"), followers)
}

/// `units` with `first` first: the writer starts on it (and stays there
/// until a put fails).
fn starting_at(units: &[String], first: &str) -> Vec<String> {
    let at = units.iter().position(|u| u == first).expect("a unit");
    let mut v = units.to_vec();
    v.rotate_left(at);
    v
}

/// One row: the writer around `op`, which returns once the operation is
/// done; then every member must answer (and with `settle`, every unit must
/// be active and healthy) before the writer stops. The writer starts on
/// `units[0]`.
fn row(
    m: &Model,
    units: &[String],
    name: &str,
    kind: &str,
    op: impl FnOnce(),
    settle: bool,
) -> Report {
    let eps = endpoints(m, units);
    let ids = members(&eps.join(","));
    let w = Writer::start(&eps);
    std::thread::sleep(MARGIN);
    let t = Instant::now();
    op();
    wait_members_healthy(&eps);
    if settle {
        settle_healthy(m, units.len());
    }
    let took = t.elapsed();
    std::thread::sleep(MARGIN);
    let r = w.finish(Duration::from_secs(60));
    r.print(name);
    println!("{}", r.bench_line(name, kind, took));
    assert_eq!(
        r.lost, 0,
        "{name}: acknowledged writes lost: {:?}",
        r.lost_keys
    );
    assert!(r.acked > 0, "{name}: the writer never got a write through");
    assert!(
        r.max_down <= 1,
        "{name}: {} members down at once ({:?})",
        r.max_down,
        r.max_down_at
    );
    assert_eq!(members(&eps.join(",")), ids, "{name}: the same members");
    r
}

/// The floors, in the cluster at hand: a follower's etcd stopped and
/// started by hand (outside the charm, through the same supervisor the
/// charm uses) while the writer is on it, then raft leadership moved to a
/// follower while the writer is on the leader.
fn floors(m: &Model, units: &[String], suffix: &str, restart: impl FnOnce(&str)) {
    let (_, followers) = leader_and_followers(m, units);
    let unit = followers[0].0.clone();
    row(
        m,
        &starting_at(units, &unit),
        &format!("floor: one member restarted by hand{suffix}"),
        "floor-restart",
        || restart(&unit),
        false,
    );
    let ((leader, _), followers) = leader_and_followers(m, units);
    let target = followers[0].1;
    row(
        m,
        &starting_at(units, &leader),
        &format!("floor: an election (move-leader){suffix}"),
        "floor-election",
        || {
            let out = etcdctl(
                &m.endpoint(&leader),
                &["move-leader", &format!("{target:x}")],
            );
            assert!(out.status.success(), "move-leader: {out:?}");
        },
        false,
    );
}

/// Stops and starts a unit's etcd outside the charm (direct backend).
fn restart_direct(m: &Model, unit: &str) {
    let svc = service(m, unit);
    svc.stop()
        .unwrap_or_else(|e| panic!("stopping {unit}: {e}"));
    svc.start()
        .unwrap_or_else(|e| panic!("starting {unit}: {e}"));
}

/// A build of this charm whose `snapshot_count` default is 50000, not
/// `auto`: a refresh to it changes the rendered etcd.conf.yml, so every
/// member restarts in upgrade-charm (jujusim, like Juju, takes defaults
/// from the charm refreshed to).
fn charm_with_new_default(dest: &Path) {
    pack_charm(dest);
    let p = dest.join("config.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    let mut out = String::new();
    let mut option = String::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':')) {
            if !name.starts_with(' ') {
                option = name.to_string();
            }
        }
        if option == "snapshot_count" && line.trim() == "default: auto" {
            out.push_str("    default: \"50000\"\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(out.contains("default: \"50000\""), "no default: {text}");
    std::fs::write(&p, out).unwrap();
}

/// `n` puts of `size` bytes under one key: history for a defrag to free.
fn churn(ep: &str, n: usize, size: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut c = etcd_client::Client::connect([ep], None).await.unwrap();
        let value = vec![b'z'; size];
        for _ in 0..n {
            c.put("churn", value.clone(), None).await.unwrap();
        }
    });
}

fn action(m: &Model, unit: &str, name: &str, params: &[&str]) -> serde_json::Value {
    let mut args = vec!["run-action", unit, name, "--format", "json"];
    args.extend_from_slice(params);
    let out = m.ok(&args);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "completed", "{out}");
    v["results"].clone()
}

fn etcd_pid(m: &Model, unit: &str) -> i32 {
    std::fs::read_to_string(m.root(unit).join("run/etcd-charm/etcd.etcd.pid"))
        .unwrap_or_else(|e| panic!("{unit}'s etcd pid: {e}"))
        .trim()
        .parse()
        .unwrap()
}

/// Hand-started supervisors run the charm binary (the test's own exe is
/// not it); set before any thread starts.
fn use_charm_binary_as_supervisor() {
    std::env::set_var(
        etcd_charm::service::SUPERVISOR_ENV,
        env!("CARGO_BIN_EXE_etcd-charm"),
    );
}

#[test]
#[ignore = "a measurement for bench/run: run with --ignored"]
fn routine_operations() {
    use_charm_binary_as_supervisor();
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    let mut units = m.units();
    units.sort();
    put_keys(&m.endpoints(), "before", KEYS);

    floors(&m, &units, "", |u| restart_direct(&m, u));

    let new = tempfile::tempdir().unwrap();
    let charm = new.path().join("charm");
    charm_with_new_default(&charm);
    row(
        &m,
        &units,
        "refresh (upgrade-charm with a config change: snapshot_count default)",
        "refresh",
        || {
            m.ok(&["refresh", "--path", charm.to_str().unwrap()]);
        },
        true,
    );
    row(
        &m,
        &units,
        "config change needing restarts (snapshot_count=20000)",
        "config",
        || {
            m.ok(&["config", "etcd", "snapshot_count=20000"]);
        },
        true,
    );
    for u in &units {
        let conf = std::fs::read_to_string(Paths::new(m.root(u)).config_file()).unwrap();
        assert!(conf.contains("snapshot-count: 20000"), "{u}: {conf}");
    }

    // ~20 MiB of history under one key, compacted: each member's defrag
    // rewrites a real file.
    churn(&m.endpoint(&units[0]), 20, 1 << 20);
    action(&m, &units[0], "compact", &[]);
    row(
        &m,
        &units,
        "rolling defrag action (every member, ~20 MiB freed)",
        "defrag",
        || {
            let r = action(&m, &units[2], "defrag", &[]);
            assert_eq!(r["output"].as_str().unwrap().lines().count(), 3, "{r}");
        },
        true,
    );

    let ((leader, _), _) = leader_and_followers(&m, &units);
    let pid = etcd_pid(&m, &leader);
    row(
        &m,
        &starting_at(&units, &leader),
        "raft leader's etcd killed (SIGKILL; restarted by its supervisor)",
        "kill-leader",
        || {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL)
                .unwrap();
            // Back when a new etcd runs there and answers.
            wait_until(
                "a new etcd on the old leader",
                Duration::from_secs(60),
                || {
                    std::fs::read_to_string(m.root(&leader).join("run/etcd-charm/etcd.etcd.pid"))
                        .is_ok_and(|p| p.trim() != pid.to_string())
                },
            );
        },
        true,
    );
    for u in &units {
        assert_keys(&m.endpoint(u), "before", KEYS);
    }
}

#[test]
#[ignore = "a measurement for bench/run: run with --ignored"]
fn legacy_migration() {
    use_charm_binary_as_supervisor();
    let up = Upgrade::deploy(3, &[]);
    let legacy = bootstrap_legacy(&up, KEYS, true);
    up.start_old_etcd();
    let suffix = format!(" (legacy cluster, raft {HEARTBEAT_MS}/{ELECTION_MS} ms)");
    floors(&up.m, &up.units, &suffix, |u| restart_direct(&up.m, u));
    row(
        &up.m,
        &up.units,
        "legacy migration of 3 units (refresh from the Python charm's layout)",
        "migration",
        || {
            let out = up.refresh(&[]);
            assert!(
                out.status.success(),
                "refresh: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        },
        true,
    );
    for (unit, want) in &legacy.ids {
        let ep = up.m.endpoint(unit);
        assert_eq!(live_ids(&ep), *want, "{unit} runs its own member");
        assert_migrated(&up, unit, *want);
        assert_keys(&ep, "legacy", KEYS);
    }
}

/// A `channel` change from 3.4/stable to 3.5/stable on systemd machines
/// (the snapd stand-in, the charm's snap backend), as
/// tests/charm_snap_upgrade.rs runs it; floors there by `systemctl restart
/// snap.etcd.etcd` inside a machine. Needs root, /lib/systemd/systemd and
/// etcd 3.5 (SNAP_STANDIN_ETCD35): without them it prints why and passes.
#[test]
#[ignore = "a measurement for bench/run: run with --ignored"]
fn version_upgrade() {
    use systemd_support::*;
    let why = unavailable().map(str::to_string).or_else(|| {
        etcd35()
            .is_none()
            .then(|| "SNAP_STANDIN_ETCD35 unset (no etcd 3.5 binaries)".to_string())
    });
    if let Some(why) = why {
        println!("BENCH-AVAIL-SKIP version upgrade: {why}");
        return;
    }
    let m = Model::new();
    let _machines = Machines(&m);
    let env = format!("SNAP_STANDIN_ETCD35={}", etcd35().unwrap());
    deploy_systemd(&m, 3, &[&env]);
    m.assert_all_healthy(3);
    let mut units = m.units();
    units.sort();
    put_keys(&m.endpoints(), "before", KEYS);
    floors(&m, &units, " (systemd machines, snap)", |u| {
        let out = inside(&m, u, &["systemctl", "restart", "snap.etcd.etcd"]);
        assert!(out.status.success(), "systemctl restart on {u}: {out:?}");
    });
    row(
        &m,
        &units,
        "version upgrade: channel 3.4/stable → 3.5/stable (systemd machines, snap)",
        "upgrade",
        || {
            m.ok(&["config", "etcd", "channel=3.5/stable"]);
        },
        true,
    );
    for u in &units {
        let v = member_version(&m, u);
        assert!(
            v.as_deref().is_some_and(|v| v.starts_with("3.5.")),
            "{u}: {v:?}"
        );
        assert_keys(&m.endpoint(u), "before", KEYS);
    }
}
