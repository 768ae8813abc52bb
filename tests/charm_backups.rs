//! Issue 21.4-5: backups off the machine. A real S3 server (moto, with IAM
//! auth) on loopback, a stand-in s3-integrator (tests/charms/s3-integrator)
//! publishing its parameters on `s3-parameters`, and the charm's
//! `create-backup`, `list-backups` and `restore backup-id=…` through
//! jujusim on real etcd: a backup of one TLS application restores into a
//! freshly deployed one; a multipart upload round-trips; wrong keys, a
//! missing bucket and a corrupted object each fail by name and change
//! nothing; the secret key is in no result and no log line.

mod s3_support;
mod tls_relation_support;
mod upgrade_support;
mod writer_support;
use s3_support::{S3Server, BUCKET};
use tls_relation_support::*;
use upgrade_support::*;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const PATH: &str = "etcd/prod";

fn s3_integrator() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/charms/s3-integrator")
        .display()
        .to_string()
}

/// s3-integrator deployed, configured for `s3`'s bucket, given its keys
/// (`secret` in place of the right one when set), related to etcd.
fn relate_s3(m: &Model, s3: &S3Server, secret: Option<&str>) {
    let bucket = format!("bucket={BUCKET}");
    let endpoint = format!("endpoint={}", s3.endpoint);
    let path = format!("path={PATH}");
    m.ok(&[
        "deploy",
        &s3_integrator(),
        "--config",
        &bucket,
        "--config",
        &endpoint,
        "--config",
        &path,
        "--config",
        "s3-uri-style=path",
    ]);
    sync_keys(m, &s3.access_key, secret.unwrap_or(&s3.secret_key));
    m.ok(&[
        "integrate",
        "etcd:s3-parameters",
        "s3-integrator:s3-credentials",
    ]);
    m.ok(&["settle"]);
}

fn sync_keys(m: &Model, access: &str, secret: &str) {
    let (ok, v) = m.run_action(
        "s3-integrator/0",
        "sync-s3-credentials",
        &[
            &format!("access-key={access}"),
            &format!("secret-key={secret}"),
        ],
    );
    assert!(ok, "{v}");
    m.ok(&["settle"]);
}

/// Runs an action that must succeed; its results. No secret in them.
fn done(m: &Model, s3: &S3Server, unit: &str, name: &str, params: &[&str]) -> Value {
    let (ok, v) = m.run_action(unit, name, params);
    assert!(ok, "{name} on {unit}: {v}");
    assert_no_secret(s3, &v.to_string(), name);
    v["results"].clone()
}

/// Runs an action that must fail; its message. No secret in it.
fn refused(m: &Model, s3: &S3Server, unit: &str, name: &str, params: &[&str]) -> String {
    let (ok, v) = m.run_action(unit, name, params);
    assert!(!ok, "{name} on {unit} should have failed: {v}");
    assert_no_secret(s3, &v.to_string(), name);
    v["message"].as_str().unwrap_or_default().to_string()
}

fn assert_no_secret(s3: &S3Server, text: &str, what: &str) {
    assert!(
        !text.contains(&s3.secret_key),
        "{what} shows the secret key"
    );
}

/// The etcd units' juju-log lines hold neither key.
fn assert_logs_clean(m: &Model, s3: &S3Server) {
    for u in m.units() {
        let log = String::from_utf8_lossy(&m.run(&["log", "--juju-log", "--unit", &u]).stdout)
            .to_string();
        assert!(!log.is_empty(), "{u} logged nothing");
        assert!(
            !log.contains(&s3.secret_key),
            "{u}'s log holds the secret key"
        );
    }
}

fn absent(ep: &str, key: &str) -> bool {
    let out = etcdctl(ep, &["get", key, "--print-value-only"]);
    out.status.success() && out.stdout.is_empty()
}

#[test]
fn a_backup_of_one_tls_application_restores_into_a_freshly_deployed_one() {
    let Some(s3) = S3Server::start(module_path!()) else {
        return;
    };
    let old = Model::new();
    let (_, _, eps) = move_model_to_tls(&old, "v4-ca", |m| m.deploy(3));
    let joined = eps.join(",");
    put_keys(&joined, "bk", 50);
    relate_s3(&old, &s3, None);

    let r = done(&old, &s3, "etcd/1", "create-backup", &[]);
    let id = r["backup-id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let objects = s3.objects(PATH);
    let key = format!("{PATH}/{id}");
    assert!(
        objects.iter().any(|(k, _)| *k == key)
            && objects.iter().any(|(k, _)| *k == format!("{key}.sha256")),
        "{objects:?}"
    );
    let listed = done(&old, &s3, "etcd/0", "list-backups", &[]);
    let table = listed["backups"].as_str().unwrap_or_default();
    assert!(
        table
            .lines()
            .any(|l| l.starts_with(&id) && l.ends_with("finished")),
        "{listed}"
    );
    put_keys(&joined, "after", 5);
    assert_logs_clean(&old, &s3);
    drop(old);

    // Another application, deployed fresh (its own token, cluster, CA).
    let new = Model::new();
    let (_, _, eps) = move_model_to_tls(&new, "legacy-ca", |m| m.deploy(3));
    let cluster = new.cluster_id();
    relate_s3(&new, &s3, None);
    let listed = done(&new, &s3, "etcd/2", "list-backups", &[]);
    assert!(
        listed["backups"].as_str().unwrap_or_default().contains(&id),
        "{listed}"
    );
    let leader = new.leader();
    let param = format!("backup-id={id}");
    let r = done(&new, &s3, &leader, "restore", &[&param]);
    assert_eq!(r["restore"]["backup-id"], id.as_str(), "{r}");
    new.settle_healthy(3, Duration::from_secs(300));
    assert_ne!(new.cluster_id(), cluster);
    for ep in &eps {
        assert_keys(ep, "bk", 50);
        assert!(
            absent(ep, "after/0"),
            "{ep}: a write after the backup is there"
        );
    }
    assert_logs_clean(&new, &s3);
}

/// 1 MiB values until the db passes the multipart threshold.
fn fill(ep: &str, mib: usize) {
    let value = "x".repeat(1 << 20);
    for i in 0..mib {
        let mut c = Command::new("etcdctl")
            .args([
                "--endpoints",
                ep,
                "--command-timeout=20s",
                "put",
                &format!("big/{i}"),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin.take().unwrap().write_all(value.as_bytes()).unwrap();
        assert!(c.wait().unwrap().success(), "put big/{i}");
    }
}

#[test]
fn s3_failures_are_named_and_change_nothing_and_a_multipart_backup_round_trips() {
    let Some(s3) = S3Server::start(module_path!()) else {
        return;
    };
    let m = Model::new();
    m.deploy(1);
    m.assert_all_healthy(1);
    let ep = m.endpoint("etcd/0");
    fill(&ep, 18);
    put_keys(&ep, "small", 10);

    // Before the relation: the action says what to relate.
    let msg = refused(&m, &s3, "etcd/0", "create-backup", &[]);
    assert!(msg.contains("s3-parameters"), "{msg}");
    relate_s3(&m, &s3, None);

    // Above 16 MiB: a multipart upload, then its sha256 beside it.
    let r = done(&m, &s3, "etcd/0", "create-backup", &[]);
    let first = r["backup-id"].as_str().unwrap().to_string();
    let size: u64 = r["backup"]["size"].as_str().unwrap().parse().unwrap();
    assert!(
        size > etcd_charm::s3::PART as u64,
        "{size} bytes: not multipart"
    );
    let stored = s3.objects(PATH);
    assert!(
        stored.contains(&(format!("{PATH}/{first}"), size)),
        "{stored:?}"
    );
    // No local copy stays behind (the agent keeps its own).
    let backups = m.root("etcd/0").join("var/snap/etcd/common/backups");
    let left: Vec<_> = std::fs::read_dir(&backups)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        left.iter()
            .all(|n| !n.to_string_lossy().starts_with("s3-upload")),
        "{left:?}"
    );

    // A corrupted object: refused before anything is stopped.
    s3.overwrite(&format!("{PATH}/{first}"), "not a snapshot");
    let cluster = m.cluster_id();
    let ids = m.wal_ids("etcd/0");
    let msg = refused(
        &m,
        &s3,
        "etcd/0",
        "restore",
        &[&format!("backup-id={first}")],
    );
    assert!(
        msg.contains("corrupt") && msg.contains("nothing was changed"),
        "{msg}"
    );
    let msg = refused(
        &m,
        &s3,
        "etcd/0",
        "restore",
        &["backup-id=../../etc/passwd"],
    );
    assert!(msg.contains("not a backup id"), "{msg}");
    assert_eq!(
        (m.cluster_id(), m.wal_ids("etcd/0")),
        (cluster.clone(), ids)
    );
    assert_keys(&ep, "small", 10);

    // A good multipart backup restores. Taken at once: never the first's id.
    let r = done(&m, &s3, "etcd/0", "create-backup", &[]);
    let second = r["backup-id"].as_str().unwrap().to_string();
    assert_ne!(second, first);
    put_keys(&ep, "later", 3);
    done(
        &m,
        &s3,
        "etcd/0",
        "restore",
        &[&format!("backup-id={second}")],
    );
    m.settle_healthy(1, Duration::from_secs(300));
    let restored = m.cluster_id();
    assert_ne!(restored, cluster, "a restore is a new cluster");
    assert_keys(&ep, "small", 10);
    assert!(absent(&ep, "later/0"));
    let out = etcdctl(&ep, &["get", "big/17", "--print-value-only"]);
    assert_eq!(out.stdout.len(), (1 << 20) + 1, "big/17 restored whole");

    // The agent's scheduled snapshots go to the bucket too (one uploader:
    // the raft leader's agent), and list as backups.
    let before = s3.objects(PATH).len();
    m.ok(&[
        "config",
        "etcd",
        "agent_check_interval=1s",
        "agent_snapshot_interval=3s",
    ]);
    m.ok(&["settle"]);
    wait_until(
        "a scheduled snapshot in the bucket",
        Duration::from_secs(90),
        || s3.objects(PATH).len() >= before + 2,
    );
    m.ok(&["config", "etcd", "agent_snapshot_interval=0"]);
    m.ok(&["settle"]);
    let listed = done(&m, &s3, "etcd/0", "list-backups", &[]);
    let table = listed["backups"].as_str().unwrap_or_default().to_string();
    let finished = table.lines().filter(|l| l.ends_with("| finished")).count();
    assert!(finished >= 3, "{table}");

    // Wrong keys: refused by the store, by name.
    sync_keys(&m, &s3.access_key, "wrong-secret-key-0000000000000000");
    for action in ["create-backup", "list-backups"] {
        let msg = refused(&m, &s3, "etcd/0", action, &[]);
        assert!(msg.contains("SignatureDoesNotMatch"), "{action}: {msg}");
    }
    sync_keys(&m, "AKIANOSUCHKEY0000000", &s3.secret_key);
    let msg = refused(&m, &s3, "etcd/0", "list-backups", &[]);
    assert!(msg.contains("InvalidAccessKeyId"), "{msg}");
    // A bucket that does not exist.
    sync_keys(&m, &s3.access_key, &s3.secret_key);
    m.ok(&["config", "s3-integrator", "bucket=no-such-bucket"]);
    m.ok(&["settle"]);
    let msg = refused(&m, &s3, "etcd/0", "create-backup", &[]);
    assert!(msg.contains("NoSuchBucket"), "{msg}");
    assert_eq!(m.cluster_id(), restored, "the failures changed nothing");
    assert_keys(&ep, "small", 10);
    assert_logs_clean(&m, &s3);
}

/// Issue 21.6, measured, not asserted (`BACKUP_MIB=1024 cargo test --test
/// charm_backups -- --ignored --nocapture measure`): create-backup beside
/// the by-hand floor (`etcdctl snapshot save`, then boto3's upload_file, as
/// `aws s3 cp` does it), and a restore from the bucket beside one from the
/// same snapshot on the unit, on 3 units.
#[test]
#[ignore]
fn measure_s3_backup_and_restore() {
    let Some(s3) = S3Server::start(module_path!()) else {
        return;
    };
    let mib: usize = std::env::var("BACKUP_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    let ep = m.endpoint("etcd/0");
    fill(&ep, mib);
    relate_s3(&m, &s3, None);
    let leader = m.leader();

    let t = std::time::Instant::now();
    let r = done(&m, &s3, &leader, "create-backup", &[]);
    let backup = t.elapsed();
    let id = r["backup-id"].as_str().unwrap().to_string();
    let size = r["backup"]["size"].as_str().unwrap().to_string();

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("by-hand.db");
    let t = std::time::Instant::now();
    let out = etcdctl(&ep, &["snapshot", "save", file.to_str().unwrap()]);
    assert!(out.status.success());
    let code = s3_support::CLIENT.to_string()
        + r#"
c.upload_file(sys.argv[5], sys.argv[4], "by-hand/snapshot.db")
"#;
    s3.python(
        &code,
        &[
            &s3.endpoint,
            &s3.access_key,
            &s3.secret_key,
            BUCKET,
            file.to_str().unwrap(),
        ],
    );
    let floor = t.elapsed();

    let snap = done(&m, &s3, &leader, "snapshot", &[]);
    let local = snap["snapshot"]["path"].as_str().unwrap().to_string();
    let t = std::time::Instant::now();
    done(&m, &s3, &leader, "restore", &[&format!("path={local}")]);
    m.settle_healthy(3, Duration::from_secs(300));
    let from_file = t.elapsed();
    let t = std::time::Instant::now();
    done(&m, &s3, &leader, "restore", &[&format!("backup-id={id}")]);
    m.settle_healthy(3, Duration::from_secs(300));
    let from_s3 = t.elapsed();
    eprintln!(
        "{mib} MiB keyspace, {size}-byte snapshot: create-backup {backup:.1?}, by hand (etcdctl snapshot save + boto3 upload) {floor:.1?}; restore to 3 healthy voters from the unit's file {from_file:.1?}, from the bucket {from_s3:.1?}"
    );
}
