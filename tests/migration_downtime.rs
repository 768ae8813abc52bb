//! A measurement, not run by default (issue 14.3): how long etcd is down
//! on the rename path, from the stop to the member answering again, with
//! the snapshot taken offline after the stop (the old order) and online
//! before it (the new one), for ~10 MiB and ~100 MiB of values.
//!
//! ```text
//! cargo test --release --test migration_downtime -- --ignored --nocapture --test-threads=1
//! ```
//!
//! Only the migration's own steps run between the stop and the start (no
//! hook, no config written): the charm adds the same fixed work to both
//! orders. "Answering" is `etcdctl endpoint health` succeeding, polled every
//! 100 ms, so figures are ±0.1 s. Page caches are left alone (the machine is
//! shared): the offline copy reads a warm db, the best case for the old
//! order. Addresses: 127.79.201.1 (this file's alone).

mod etcd_support;
use etcd_support::{Etcd, Spec};

use etcd_charm::layout;
use etcd_charm::migrate::{self, Migration, MigrationStep};
use etcd_charm::paths::Paths;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const IP: &str = "127.79.201.1";
const ROUNDS: usize = 3;

fn start(data_dir: &Path) -> Etcd {
    let log = data_dir.parent().unwrap().join("downtime-etcd.log");
    let mut etcd = Spec::new("etcd0", IP, data_dir, &log)
        .args(&["--quota-backend-bytes", &(2u64 << 30).to_string()])
        .start();
    etcd.wait_healthy();
    etcd
}

/// `values` values of 1 MiB each through etcd at `ep`.
fn fill(ep: &str, values: usize) {
    let value: Vec<u8> = (0..(1 << 20)).map(|i| (i * 7 % 251) as u8).collect();
    std::thread::scope(|s| {
        for w in 0..4 {
            let value = &value;
            s.spawn(move || {
                for i in (w..values).step_by(4) {
                    let mut c = Command::new("etcdctl")
                        .args(["--endpoints", ep, "put", &format!("bench/{i}")])
                        .env("ETCDCTL_API", "3")
                        .stdin(Stdio::piped())
                        .stdout(Stdio::null())
                        .spawn()
                        .unwrap();
                    c.stdin.take().unwrap().write_all(value).unwrap();
                    assert!(c.wait().unwrap().success(), "put bench/{i}");
                }
            });
        }
    });
}

fn run(steps: &[MigrationStep]) -> Vec<(String, Duration)> {
    steps
        .iter()
        .map(|s| {
            let t = Instant::now();
            assert_eq!(migrate::apply(s, &mut |_| {}).unwrap(), None, "{s}");
            (s.key().to_string(), t.elapsed())
        })
        .collect()
}

fn show(steps: &[(String, Duration)]) -> String {
    steps
        .iter()
        .map(|(k, d)| format!("{k} {:.3}s", d.as_secs_f64()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One migration of the running member at the legacy dir; returns the
/// downtime (stop → answering at the canonical dir) and the running etcd.
fn migrate_once(paths: &Paths, mut etcd: Etcd, online: bool) -> (Duration, Etcd) {
    let l = layout::observe(paths, "etcd0");
    let ids = etcd_charm::wal::read_ids(&paths.legacy_data_dir("etcd0"))
        .unwrap()
        .unwrap();
    let ep = etcd.endpoint();
    let live = online.then_some((ep.as_str(), ids.member_id));
    let Migration::Migrate { steps, .. } = migrate::plan_migration_live(&l, paths, "etcd0", live)
    else {
        panic!("no migration planned");
    };
    let (before, after): (Vec<_>, Vec<_>) = steps.into_iter().partition(|s| s.before_stop());
    let up = run(&before);
    let t = Instant::now();
    etcd.stop();
    let stopped = t.elapsed();
    let down = run(&after);
    let steps_done = t.elapsed();
    let etcd = start(&paths.data_dir());
    let downtime = t.elapsed();
    eprintln!(
        "  {}: down {:.3} s (etcd's stop {:.3} s, migration steps {:.3} s, etcd's start to answering {:.3} s); before the stop: [{}]; while down: [{}]",
        if online {
            "online snapshot, then stop"
        } else {
            "stop, then offline snapshot"
        },
        downtime.as_secs_f64(),
        stopped.as_secs_f64(),
        (steps_done - stopped).as_secs_f64(),
        (downtime - steps_done).as_secs_f64(),
        show(&up),
        show(&down)
    );
    (downtime, etcd)
}

/// Undoes a migration for the next round (test data only).
fn put_back(paths: &Paths, mut etcd: Etcd) -> Etcd {
    etcd.stop();
    let legacy = paths.legacy_data_dir("etcd0");
    std::fs::rename(paths.data_dir().join("member"), legacy.join("member")).unwrap();
    let _ = std::fs::remove_dir_all(paths.backup_dir());
    start(&legacy)
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64()
}

fn measure(values: usize) {
    let tmp = tempfile::tempdir_in("/var/tmp").unwrap();
    let paths = Paths::new(tmp.path());
    let legacy = paths.legacy_data_dir("etcd0");
    std::fs::create_dir_all(&legacy).unwrap();
    let mut etcd = start(&legacy);
    fill(&etcd.endpoint(), values);
    let db = std::fs::metadata(legacy.join("member/snap/db"))
        .map(|m| m.len())
        .unwrap_or(0);
    eprintln!(
        "\n== {values} x 1 MiB values (db {} MiB), rename path, {ROUNDS} rounds of each order",
        db >> 20
    );
    let (mut old, mut new) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for online in [false, true] {
            let (d, e) = migrate_once(&paths, etcd, online);
            if online { &mut new } else { &mut old }.push(d);
            etcd = put_back(&paths, e);
        }
    }
    eprintln!(
        "downtime, median of {ROUNDS}: stop then offline snapshot {:.3} s; online snapshot then stop {:.3} s",
        median(old),
        median(new)
    );
    etcd.stop();
}

#[test]
#[ignore = "a measurement (a minute, a few hundred MiB of disk): run with --ignored"]
fn rename_path_downtime_at_10_and_100_mib() {
    measure(10);
    measure(100);
}
