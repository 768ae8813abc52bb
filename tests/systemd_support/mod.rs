//! Helpers for tests on jujusim's systemd machines (`--machines systemd`,
//! the snapd stand-in, the charm's snap backend): one recipe for
//! tests/charm_systemd.rs and tests/charm_snap_upgrade.rs.
#![allow(dead_code)]

use crate::charm_support::*;
use std::path::Path;
use std::process::Output;

/// Why these tests cannot run here, if they cannot.
pub fn unavailable() -> Option<&'static str> {
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

/// The etcd 3.5 binaries the stand-in serves as 3.5/stable, if any.
pub fn etcd35() -> Option<String> {
    std::env::var("SNAP_STANDIN_ETCD35")
        .ok()
        .filter(|d| Path::new(d).join("etcd").is_file())
}

/// Kills every machine of a model on drop (after the model's own destroy,
/// which stops them already): a machine must never outlive its test.
pub struct Machines<'a>(pub &'a Model);

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

pub fn standin_dir() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapd-standin")
        .display()
        .to_string()
}

/// The `jujusim deploy` arguments for systemd machines with the stand-in
/// and the snap backend; `env` are more `NAME=value` for the machines'
/// hooks and actions.
pub fn systemd_args(env: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--machines",
        "systemd",
        "--machine-bind",
        &format!("{}:/usr/local/sbin", standin_dir()),
        "--machine-bind",
        "{unit_root}/var/lib/snapd-standin:/var/lib/snapd-standin",
        "--systemd-env",
        "ETCD_CHARM_SERVICE=snap",
        "--systemd-env",
        "ETCD_CHARM_ROOT=/",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for e in env {
        args.push("--systemd-env".into());
        args.push(e.to_string());
    }
    args
}

/// Deploys `n` units on systemd machines (see [`systemd_args`]).
pub fn deploy_systemd(m: &Model, n: u32, env: &[&str]) {
    let args = systemd_args(env);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    m.deploy_with(n, &args);
    for u in m.units() {
        let unit = m.unit(&u);
        assert_eq!(unit["machine-mode"], "systemd", "{u}: {unit}");
    }
}

/// The host pid of a unit's machine (its systemd).
pub fn machine_pid(m: &Model, unit: &str) -> i32 {
    m.unit(unit)["machine-pid"]
        .as_i64()
        .unwrap_or_else(|| panic!("{unit} has no running machine")) as i32
}

/// A command inside a unit's machine.
pub fn inside(m: &Model, unit: &str, args: &[&str]) -> Output {
    std::process::Command::new("nsenter")
        .args(["-t", &machine_pid(m, unit).to_string(), "-m", "-p", "--"])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running nsenter")
}

pub fn inside_text(m: &Model, unit: &str, args: &[&str]) -> String {
    String::from_utf8_lossy(&inside(m, unit, args).stdout)
        .trim()
        .to_string()
}

pub fn unit_prop(m: &Model, unit: &str, prop: &str) -> String {
    inside_text(
        m,
        unit,
        &["systemctl", "show", "-p", prop, "--value", "snap.etcd.etcd"],
    )
}

/// The etcd version the unit's member reports.
pub fn member_version(m: &Model, unit: &str) -> Option<String> {
    let out = etcdctl(&m.endpoint(unit), &["endpoint", "status", "-w", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v[0]["Status"]["version"].as_str().map(str::to_string)
}

/// The host's /etc/fstab as a test found it. A systemd machine that wrote
/// its fstab line there would leave the host unable to boot any machine:
/// tests that mount volumes on systemd machines take it at their start
/// (refusing to run on a host that already carries a /media/etcd line) and
/// assert it unchanged at their end.
pub struct HostFstab(String);

impl HostFstab {
    pub fn take() -> HostFstab {
        let now = std::fs::read_to_string("/etc/fstab").unwrap_or_default();
        assert!(
            !now.lines()
                .any(|l| !l.trim_start().starts_with('#') && l.contains("/media")),
            "the host's /etc/fstab already mounts something under /media (a machine's line \
             leaked there?); fix the host before running this test:\n{now}"
        );
        HostFstab(now)
    }

    pub fn assert_unchanged(&self) {
        let now = std::fs::read_to_string("/etc/fstab").unwrap_or_default();
        assert_eq!(now, self.0, "the host's /etc/fstab changed under the test");
    }
}
