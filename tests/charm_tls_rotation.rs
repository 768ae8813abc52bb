//! Issue 11, item 3 (CA rotation): a 3-unit cluster on https from a
//! stand-in CA (legacy-ca, v4-ca) (tests/tls_relation_support), then the CA rotates
//! under a writer that follows etcd/0's files as kube-apiserver follows its
//! db data. Every member ends serving a leaf of the new CA and trusting it
//! alone; IDs, keys and every acknowledged write kept; never two members
//! down.

mod systemd_support;
mod tls_relation_support;
mod upgrade_support;
// systemd_support names `crate::charm_support`: upgrade_support's copy.
use upgrade_support::charm_support;
mod writer_support;
use tls_relation_support::*;
use upgrade_support::*;
use writer_support::Writer;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// `etcdctl endpoint status` on `ep` with these files, succeeding or not.
fn answers_with(ep: &str, ca: &Path, cert: &Path, key: &Path) -> bool {
    Command::new("etcdctl")
        .env_remove("ETCDCTL_CACERT")
        .env_remove("ETCDCTL_CERT")
        .env_remove("ETCDCTL_KEY")
        .args([
            "--endpoints",
            ep,
            "--dial-timeout=3s",
            "--command-timeout=5s",
        ])
        .arg(format!("--cacert={}", ca.display()))
        .arg(format!("--cert={}", cert.display()))
        .arg(format!("--key={}", key.display()))
        .args(["endpoint", "status"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_legacy_ca_rotation_rolls_through_the_members_with_every_write_kept() {
    let m = Model::new();
    rotates(&m, "legacy-ca", |m| m.deploy(3));
}

/// The production configuration: the snap under real systemd machines
/// (nextest's systemd-machines group takes tests named `on_systemd_machines`).
#[test]
fn a_v4_ca_rotation_on_systemd_machines_rolls_through_the_members_with_every_write_kept() {
    if let Some(why) = systemd_support::unavailable() {
        etcd_charm::prereq::skip(
            module_path!(),
            why,
            "run the tests as root on a machine with systemd (packaging/prereqs installs systemd)",
        );
        return;
    }
    let m = Model::new();
    let _machines = systemd_support::Machines(&m);
    rotates(&m, "v4-ca", |m| systemd_support::deploy_systemd(m, 3, &[]));
    operations_on_tls_and_systemd(&m);
}

/// Issue 20.3: what an operator does to a production cluster, on the one
/// already on v4 TLS and the snap under systemd (a deploy of its own would
/// cost two minutes): the maintenance actions, a rolling config change
/// under a writer, a restore from a snapshot, and a member whose WAL is lost
/// behind the charm's back.
fn operations_on_tls_and_systemd(m: &Model) {
    let mut units = m.units();
    units.sort();
    let eps: Vec<String> = units
        .iter()
        .map(|u| format!("https://{}:2379", m.address(u)))
        .collect();
    let joined = eps.join(",");
    put_keys(&joined, "ops", 10);

    // The actions, each through the charm's TLS client.
    for action in ["health", "member-list", "alarm-list", "compact", "defrag"] {
        let (ok, v) = m.run_action("etcd/1", action, &[]);
        assert!(ok, "{action} on TLS + systemd: {v}");
    }
    // On the leader: the restore below runs there, on a file of its machine.
    let leader = m.leader();
    let (ok, v) = m.run_action(&leader, "snapshot", &[]);
    assert!(ok, "snapshot: {v}");
    let inside = v["results"]["snapshot"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("{v}"))
        .to_string();
    let on_host = m.root(&leader).join(inside.trim_start_matches('/'));
    assert_eq!(file_mode(&on_host), 0o600, "{}", on_host.display());
    let out = etcdctl(&joined, &["put", "ops/after-snapshot", "x"]);
    assert!(out.status.success());

    // A rolling config change: one member down at a time, writes go on.
    let mut w = Writer::start(&eps);
    std::thread::sleep(Duration::from_secs(2));
    w.disturbance_begins();
    let t = Instant::now();
    m.ok(&[
        "config",
        "etcd",
        "heartbeat_interval=150",
        "election_timeout=1500",
    ]);
    m.settle_healthy(3, TRANSITION);
    let took = t.elapsed();
    w.disturbance_ends();
    std::thread::sleep(Duration::from_secs(2));
    let r = w.finish(Duration::from_secs(60));
    r.assert_available(
        "config heartbeat/election on 3 units (v4 TLS, systemd)",
        writer_support::ROLLING,
    );
    eprintln!("rolling config change: {:.1} s", took.as_secs_f64());
    for u in &units {
        let c = read(&etcd_charm::paths::Paths::new(m.root(u)).config_file());
        assert!(c.contains("election-timeout: 1500"), "{u}: {c}");
    }

    // Restore from the snapshot: the key written after it is gone, the
    // ones before it are back on every member, the cluster has a new ID.
    let cluster = m.cluster_id();
    assert_eq!(m.leader(), leader);
    let path = format!("path={inside}");
    let (ok, v) = m.run_action(&leader, "restore", &[&path]);
    assert!(ok, "restore on TLS + systemd: {v}");
    m.settle_healthy(3, TRANSITION);
    assert_ne!(m.cluster_id(), cluster, "a restore is a new cluster");
    for ep in &eps {
        assert_keys(ep, "ops", 10);
        let out = etcdctl(ep, &["get", "ops/after-snapshot", "--print-value-only"]);
        assert!(
            out.status.success() && out.stdout.is_empty(),
            "{ep}: {out:?}"
        );
    }

    // A member's WAL lost while it was down: the snap's service refuses to
    // start it (the guard), and the charm's hooks bring it back as a new
    // member on the same unit.
    let victim = units.iter().find(|u| **u != m.leader()).unwrap().clone();
    let old = m.wal_ids(&victim);
    let out = systemd_support::inside(m, &victim, &["systemctl", "stop", "snap.etcd.etcd"]);
    assert!(out.status.success(), "{out:?}");
    let data = m.data_dir(&victim);
    std::fs::rename(data.join("member/wal"), data.join("wal.lost")).unwrap();
    m.ok(&["reboot", &victim]);
    m.settle_healthy(3, TRANSITION);
    let new = m.wal_ids(&victim);
    assert_ne!(new.member_id, old.member_id, "{victim}: a new member ID");
    assert_eq!(new.cluster_id, old.cluster_id);
    assert_eq!(members(&joined).len(), 3);
    for ep in &eps {
        assert_keys(ep, "ops", 10);
    }
}

/// A 3-unit cluster deployed by `deploy`, moved to https from the stand-in
/// `ca_app`, whose CA then rotates; everything asserted at the end.
fn rotates(m: &Model, ca_app: &str, deploy: impl FnOnce(&Model)) {
    let (units, f0, eps) = move_model_to_tls(m, ca_app, deploy);
    let joined = eps.join(",");
    let ids_before = members(&joined);
    let cluster_before = m.cluster_id();

    // The old CA and client pair, kept aside to show they end refused.
    let old = tempfile::tempdir().unwrap();
    let keep = |name: &str, from: &Path| {
        let p = old.path().join(name);
        std::fs::write(&p, read(from)).unwrap();
        p
    };
    let old_ca = keep("ca.crt", &f0.ca);
    let old_cert = keep("client.crt", &f0.client_cert);
    let old_key = keep("client.key", &f0.client_key);
    let old_ca_text = read(&old_ca);

    let mut w = Writer::start(&eps);
    std::thread::sleep(Duration::from_secs(2));
    let started = Instant::now();
    w.disturbance_begins();
    let new_ca_file = m.root(&format!("{ca_app}/0")).join("ca/ca.crt");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let provider = format!("{ca_app}/0");
    let new_ca = std::thread::scope(|s| {
        // Clients follow etcd/0's files (kube-apiserver its db data): the
        // bundle first, then the new pair.
        let follow = s.spawn(|| {
            let mut seen = (read(&f0.ca), read(&f0.client_cert), read(&f0.client_key));
            let mut swaps = 0;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
                let now = (read(&f0.ca), read(&f0.client_cert), read(&f0.client_key));
                std::thread::sleep(Duration::from_millis(200));
                let again = (read(&f0.ca), read(&f0.client_cert), read(&f0.client_key));
                if now != again || now == seen || now.0.is_empty() || now.2.is_empty() {
                    continue;
                }
                writer_support::rotate_tls(&now.0, &now.1, &now.2);
                seen = now;
                swaps += 1;
            }
            swaps
        });
        let action = s.spawn(|| m.ok(&["run-action", &provider, "rotate-ca"]));
        action.join().unwrap();
        let new_ca = read(&new_ca_file);
        assert_ne!(new_ca.trim(), old_ca_text.trim(), "the stand-in CA rotated");
        let done = || {
            units.iter().zip(&eps).all(|(u, ep)| {
                let f = tls_paths(m, u);
                read(&f.ca).trim() == new_ca.trim()
                    && !answers_with(ep, &old_ca, &old_cert, &old_key)
                    && answers_with(ep, &new_ca_file, &f.client_cert, &f.client_key)
            })
        };
        let deadline = Instant::now() + TRANSITION;
        while !done() {
            assert!(
                Instant::now() < deadline,
                "the rotation never finished: {:?}\n{}",
                m.workloads(),
                tail(&String::from_utf8_lossy(&m.run(&["log"]).stdout), 80)
            );
            m.ok(&["update-status"]);
            std::thread::sleep(Duration::from_secs(1));
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let swaps = follow.join().unwrap();
        eprintln!("the writer took new credentials {swaps} times");
        new_ca
    });
    let rotation = started.elapsed();
    let want = "Healthy with 3 known peers";
    wait_until(
        "every unit active and healthy after the rotation",
        TRANSITION,
        || {
            let w = m.workloads();
            let ok = w.len() == 3
                && w.iter()
                    .all(|(_, s, msg)| s == "active" && msg.starts_with(want));
            if !ok {
                m.ok(&["update-status"]);
            }
            ok
        },
    );
    w.disturbance_ends();
    std::thread::sleep(Duration::from_secs(2));
    let r = w.finish(Duration::from_secs(60));
    r.assert_available(
        &format!("CA rotation ({ca_app}) on 3 units"),
        writer_support::ROLLING,
    );
    // bench/run's avail section reads this line (the legacy CA's run).
    println!(
        "{}",
        r.bench_line(&format!("CA rotation ({ca_app})"), "ca-rotation", rotation)
    );
    eprintln!(
        "rotate-ca → every member on the new CA alone: {:.1} s",
        rotation.as_secs_f64()
    );

    for (u, ep) in units.iter().zip(&eps) {
        let f = tls_paths(m, u);
        for leaf in [&f.server_cert, &f.client_cert] {
            assert!(
                etcd_charm::tls::cert::signed_by(&read(leaf), &new_ca).unwrap(),
                "{u}: {} is not the new CA's",
                leaf.display()
            );
        }
        assert_eq!(
            etcd_charm::tls::cert::ders(&read(&f.ca)).unwrap().len(),
            1,
            "{u} still trusts two CAs"
        );
        // The served leaf is checked by a client trusting only the new CA.
        assert!(answers_with(
            ep,
            &new_ca_file,
            &f0.client_cert,
            &f0.client_key
        ));
        assert!(
            !answers_with(ep, &old_ca, &old_cert, &old_key),
            "{u} still takes the old CA's client pair"
        );
        std::env::set_var("ETCDCTL_CACERT", &new_ca_file);
        assert_keys(ep, "before", KEYS);
    }
    assert_eq!(members(&joined), ids_before, "the same members, by ID");
    assert_eq!(m.cluster_id(), cluster_before, "the same cluster");
}
