//! Measurements for the upgrade note, not run by default:
//!
//! ```text
//! cargo test --release --test upgrade_bench -- --ignored --nocapture --test-threads=1
//! ```
//!
//! For a real member of about 10 MiB and about 1 GiB of values (written by
//! a real etcd under `<root>/var/snap/etcd/current/etcd0.etcd`, then stopped):
//! - the rename path's wall time (snapshot of the db + one rename);
//! - the copy path's (snapshot, copy with fsync, verify, set aside, promote)
//!   and its throughput, beside `cp -a` + `sync` of the same tree.
//!
//! Page caches are dropped before each timed copy when the machine lets us
//! (root), so both copies read from disk; the output says whether they were.
//! Addresses: 127.79.200.1 (this file's alone).

mod etcd_support;
use etcd_support::Spec;

use etcd_charm::layout;
use etcd_charm::migrate::{self, Migration};
use etcd_charm::paths::Paths;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const IP: &str = "127.79.200.1";

fn drop_caches() -> bool {
    let _ = Command::new("sync").status();
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok()
}

fn du(p: &Path) -> u64 {
    let out = Command::new("du").args(["-sb"]).arg(p).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

/// A real member with `values` values of 1 MiB each, etcd stopped after.
fn make_member(data_dir: &Path, values: usize) {
    std::fs::create_dir_all(data_dir.parent().unwrap()).unwrap();
    let log = data_dir.parent().unwrap().join("bench-etcd.log");
    let mut etcd = Spec::new("etcd0", IP, data_dir, &log)
        .args(&["--quota-backend-bytes", &(8u64 << 30).to_string()])
        .start();
    etcd.wait_healthy();
    let ep = etcd.endpoint();
    // 8 writers: etcd batches their fsyncs.
    let value: Vec<u8> = (0..(1 << 20)).map(|i| (i * 7 % 251) as u8).collect();
    std::thread::scope(|s| {
        for w in 0..8 {
            let (ep, value) = (ep.clone(), value.clone());
            s.spawn(move || {
                for i in (w..values).step_by(8) {
                    let mut c = Command::new("etcdctl")
                        .args(["--endpoints", &ep, "put", &format!("bench/{i}")])
                        .env("ETCDCTL_API", "3")
                        .stdin(Stdio::piped())
                        .stdout(Stdio::null())
                        .spawn()
                        .unwrap();
                    c.stdin.take().unwrap().write_all(&value).unwrap();
                    assert!(c.wait().unwrap().success(), "put bench/{i}");
                }
            });
        }
    });
    etcd.stop();
}

/// Runs the whole migration the planner gives, timing each step.
fn migrate_timed(paths: &Paths, force_copy: bool) -> Vec<(String, Duration)> {
    let mut l = layout::observe(paths, "etcd0");
    l.migration.force_copy = force_copy;
    let Migration::Migrate { steps, .. } = migrate::plan_migration(&l, paths, "etcd0") else {
        panic!("no migration planned");
    };
    steps
        .iter()
        .map(|s| {
            let t = Instant::now();
            assert_eq!(migrate::apply(s, &mut |_| {}).unwrap(), None, "{s}");
            (s.key().to_string(), t.elapsed())
        })
        .collect()
}

fn put_back(paths: &Paths) {
    // Undo a migration for the next measurement (test data only).
    let legacy = paths.legacy_data_dir("etcd0");
    std::fs::rename(paths.data_dir().join("member"), legacy.join("member")).unwrap();
    for e in std::fs::read_dir(&legacy).unwrap().flatten() {
        if e.file_name()
            .to_string_lossy()
            .starts_with("member.migrated-")
        {
            std::fs::remove_dir_all(e.path()).unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(paths.backup_dir());
}

fn measure(values: usize) {
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let paths = Paths::new(tmp.path());
    let legacy = paths.legacy_data_dir("etcd0");
    let t = Instant::now();
    make_member(&legacy, values);
    let member = legacy.join("member");
    let size = du(&member);
    let db = std::fs::metadata(member.join("snap/db"))
        .map(|m| m.len())
        .unwrap_or(0);
    eprintln!(
        "\n== member of {values} x 1 MiB values: {:.0} MiB on disk (db {:.0} MiB), made in {:.1} s",
        mib(size),
        mib(db),
        t.elapsed().as_secs_f64()
    );

    // cp -a + sync of the same tree, for comparison.
    let cold = drop_caches();
    let dst = tmp.path().join("cp-a-copy");
    let t = Instant::now();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(&member)
        .arg(&dst)
        .status()
        .unwrap()
        .success());
    assert!(Command::new("sync").status().unwrap().success());
    let cp = t.elapsed();
    std::fs::remove_dir_all(&dst).unwrap();
    eprintln!(
        "cp -a + sync: {:.2} s, {:.0} MiB/s (caches dropped: {cold})",
        cp.as_secs_f64(),
        mib(size) / cp.as_secs_f64()
    );

    // The copy path (forced on this one file system).
    let cold = drop_caches();
    let steps = migrate_timed(&paths, true);
    let total: Duration = steps.iter().map(|(_, d)| *d).sum();
    let copy = steps
        .iter()
        .find(|(k, _)| k == "migrate-copy")
        .map(|(_, d)| *d)
        .unwrap();
    eprintln!(
        "copy path: {:.2} s in all; copy+fsync {:.2} s = {:.0} MiB/s (caches dropped: {cold}); steps: {}",
        total.as_secs_f64(),
        copy.as_secs_f64(),
        mib(size) / copy.as_secs_f64(),
        steps
            .iter()
            .map(|(k, d)| format!("{k} {:.2}s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    put_back(&paths);

    // The rename path.
    let cold = drop_caches();
    let steps = migrate_timed(&paths, false);
    let total: Duration = steps.iter().map(|(_, d)| *d).sum();
    eprintln!(
        "rename path: {:.3} s in all (caches dropped: {cold}); steps: {}",
        total.as_secs_f64(),
        steps
            .iter()
            .map(|(k, d)| format!("{k} {:.3}s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(etcd_charm::wal::read_ids(&paths.data_dir())
        .unwrap()
        .is_some());
}

#[test]
#[ignore = "a measurement (minutes, GiBs of disk): run with --ignored"]
fn migration_of_a_10_mib_member() {
    measure(10);
}

#[test]
#[ignore = "a measurement (minutes, GiBs of disk): run with --ignored"]
fn migration_of_a_1_gib_member() {
    measure(1024);
}
