//! The production path for real: each unit's machine boots the host's
//! systemd as PID 1 of its own namespace (`jujusim deploy --machines
//! systemd`), the charm runs with `ETCD_CHARM_ROOT=/` and its snap backend,
//! `snap` is the stand-in in tests/snapd-standin, and etcd is the real one
//! under `snap.etcd.etcd.service`. Needs root and /lib/systemd/systemd; the
//! tests say so and pass without them. Run one at a time.

mod charm_support;
use charm_support::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// Why these tests cannot run here, if they cannot.
fn unavailable() -> Option<&'static str> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        == Some("0");
    if !root {
        return Some("not root");
    }
    if !Path::new("/lib/systemd/systemd").is_file() {
        return Some("no /lib/systemd/systemd");
    }
    None
}

/// Kills every machine of a model on drop (after the model's own destroy,
/// which stops them already): a machine must never outlive its test.
struct Machines<'a>(&'a Model);

impl Drop for Machines<'_> {
    fn drop(&mut self) {
        let Ok(rd) = std::fs::read_dir(self.0.dir.join("units")) else {
            return;
        };
        for e in rd.flatten() {
            let Ok(pid) = std::fs::read_to_string(e.path().join("machine.pid")) else {
                continue;
            };
            let Ok(pid) = pid.trim().parse::<i32>() else {
                continue;
            };
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            if comm.trim() == "systemd" {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::SIGKILL,
                );
            }
        }
    }
}

fn standin_dir() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapd-standin")
        .display()
        .to_string()
}

/// Deploys `n` units on systemd machines with the snap backend (the direct
/// backend, under the unit's root, should a machine fall back).
fn deploy_systemd(m: &Model, n: u32) {
    let standin = format!("{}:/usr/local/sbin", standin_dir());
    m.deploy_with(
        n,
        &[
            "--machines",
            "systemd",
            "--machine-bind",
            &standin,
            "--machine-bind",
            "{unit_root}/var/lib/snapd-standin:/var/lib/snapd-standin",
            "--systemd-env",
            "ETCD_CHARM_SERVICE=snap",
            "--systemd-env",
            "ETCD_CHARM_ROOT=/",
        ],
    );
    for u in m.units() {
        let unit = m.unit(&u);
        assert_eq!(unit["machine-mode"], "systemd", "{u}: {unit}");
    }
}

/// The host pid of a unit's machine (its systemd).
fn machine_pid(m: &Model, unit: &str) -> i32 {
    m.unit(unit)["machine-pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("{unit} has no running machine")) as i32
}

/// A command inside a unit's machine.
fn inside(m: &Model, unit: &str, args: &[&str]) -> Output {
    std::process::Command::new("nsenter")
        .args(["-t", &machine_pid(m, unit).to_string(), "-m", "-p", "--"])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running nsenter")
}

fn inside_text(m: &Model, unit: &str, args: &[&str]) -> String {
    String::from_utf8_lossy(&inside(m, unit, args).stdout)
        .trim()
        .to_string()
}

fn unit_prop(m: &Model, unit: &str, prop: &str) -> String {
    inside_text(
        m,
        unit,
        &["systemctl", "show", "-p", prop, "--value", "snap.etcd.etcd"],
    )
}

fn wal_all(m: &Model) -> BTreeMap<String, etcd_charm::wal::WalIds> {
    m.units().into_iter().map(|u| (u.clone(), m.wal_ids(&u))).collect()
}

/// Member IDs (hex) the live cluster lists, sorted.
fn live_ids(m: &Model) -> Vec<String> {
    let mut ids: Vec<String> = members(&m.endpoints()).into_iter().map(|x| x.0).collect();
    ids.sort();
    ids
}

fn wal_hex(w: &BTreeMap<String, etcd_charm::wal::WalIds>) -> Vec<String> {
    let mut ids: Vec<String> = w.values().map(|i| format!("{:x}", i.member_id)).collect();
    ids.sort();
    ids
}

#[test]
fn three_units_reach_active_on_systemd_machines_with_the_snap() {
    if let Some(why) = unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let m = Model::new();
    let _machines = Machines(&m);
    let t = Instant::now();
    deploy_systemd(&m, 3);
    let systemd_time = t.elapsed();
    m.assert_all_healthy(3);
    for u in m.units() {
        // systemd loaded our drop-in: the guard runs before every start.
        let pre = unit_prop(&m, &u, "ExecStartPre");
        assert!(pre.contains("etcd-charm") && pre.contains("guard"), "{u}: {pre}");
        assert_eq!(unit_prop(&m, &u, "Restart"), "on-failure", "{u}");
        assert_eq!(unit_prop(&m, &u, "ActiveState"), "active", "{u}");
        let list = inside_text(&m, &u, &["snap", "list", "etcd"]);
        assert!(list.contains("233") && list.contains("3.4/stable"), "{u}: {list}");
        // etcd runs from the snap's revision, on the snap's config.
        let exec = unit_prop(&m, &u, "ExecStart");
        assert!(exec.contains("snap run etcd"), "{u}: {exec}");
        let main = unit_prop(&m, &u, "MainPID");
        let cmd = inside_text(&m, &u, &["cat", &format!("/proc/{main}/cmdline")]);
        assert!(
            cmd.contains("/snap/etcd/233/bin/etcd") && cmd.contains("/var/snap/etcd/common/etcd.conf.yml"),
            "{u}: {cmd:?}"
        );
    }
    assert_eq!(live_ids(&m), wal_hex(&wal_all(&m)));

    // The same deploy in the direct mode, for the record.
    let d = Model::new();
    let t = Instant::now();
    d.deploy(3);
    let direct_time = t.elapsed();
    d.assert_all_healthy(3);
    eprintln!(
        "deploy-to-active, 3 units: systemd machines {:.1} s, direct {:.1} s",
        systemd_time.as_secs_f64(),
        direct_time.as_secs_f64()
    );
}

#[test]
fn systemd_restarts_a_killed_etcd_and_the_unit_stays_active() {
    if let Some(why) = unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let m = Model::new();
    let _machines = Machines(&m);
    deploy_systemd(&m, 3);
    let ids = wal_all(&m);
    let u = "etcd/1";
    let before = unit_prop(&m, u, "MainPID");
    assert_ne!(before, "0");
    let kill = inside(&m, u, &["kill", "-9", &before]);
    assert!(kill.status.success(), "{kill:?}");
    wait_until("systemd to restart etcd", Duration::from_secs(60), || {
        let now = unit_prop(&m, u, "MainPID");
        now != "0" && now != before && unit_prop(&m, u, "ActiveState") == "active"
    });
    let restarts = unit_prop(&m, u, "NRestarts");
    assert!(restarts.parse::<u32>().unwrap_or(0) >= 1, "NRestarts {restarts}");
    wait_until("the member to serve again", Duration::from_secs(60), || {
        etcdctl(&m.endpoint(u), &["endpoint", "health"]).status.success()
    });
    m.ok(&["update-status"]);
    m.assert_all_healthy(3);
    assert_eq!(wal_all(&m), ids, "member IDs changed");
    assert_eq!(live_ids(&m), wal_hex(&ids));
}

#[test]
fn rebooting_every_machine_brings_the_same_members_back() {
    if let Some(why) = unavailable() {
        eprintln!("skipped: {why}");
        return;
    }
    let m = Model::new();
    let _machines = Machines(&m);
    deploy_systemd(&m, 3);
    let ids = wal_all(&m);
    put_keys(&m.endpoints(), "before-reboot", 10);
    let pids: Vec<i32> = m.units().iter().map(|u| machine_pid(&m, u)).collect();
    // Reboot each machine without running any hook (--max-hooks 0 leaves
    // the start hooks queued): the enabled snap service starts at boot.
    for u in m.units() {
        let out = m.run(&["--max-hooks", "0", "reboot", &u]);
        assert_eq!(out.status.code(), Some(3), "{u}: {out:?}");
    }
    let after: Vec<i32> = m.units().iter().map(|u| machine_pid(&m, u)).collect();
    for (a, b) in pids.iter().zip(&after) {
        assert_ne!(a, b, "a machine was not rebooted");
    }
    for u in m.units() {
        let q = m.unit(&u)["queued-hooks"].clone();
        assert_eq!(q, serde_json::json!(["start"]), "{u}");
        wait_until(&format!("{u}'s etcd up at boot"), Duration::from_secs(60), || {
            unit_prop(&m, &u, "ActiveState") == "active"
        });
    }
    wait_until("the cluster serving before any start hook", Duration::from_secs(60), || {
        etcdctl(&m.endpoints(), &["endpoint", "health", "--cluster"]).status.success()
    });
    assert_eq!(wal_all(&m), ids, "member IDs changed across the reboot");
    assert_eq!(live_ids(&m), wal_hex(&ids));
    assert_keys(&m.endpoint("etcd/0"), "before-reboot", 10);

    // Then Juju's start hooks.
    m.ok(&["settle"]);
    m.assert_all_healthy(3);
    assert_eq!(wal_all(&m), ids, "member IDs changed in the start hooks");
    assert_eq!(live_ids(&m), wal_hex(&ids));
}
