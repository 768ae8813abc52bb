//! The operator actions on a 3-unit cluster of real etcd through jujusim,
//! with the Python etcd charm's names, parameters and result keys; the
//! NOSPACE alarm raised by a small quota, shown in the status and cleared
//! with the actions; defrag rolling under a continuous writer.

mod charm_support;
mod writer_support;
use charm_support::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// `run-action` that must complete; returns its results.
fn action(m: &Model, unit: &str, name: &str, params: &[&str]) -> Value {
    let mut args = vec!["run-action", unit, name, "--format", "json"];
    args.extend_from_slice(params);
    let out = m.ok(&args);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "completed", "{out}");
    v["results"].clone()
}

/// `run-action` that must fail; returns its message.
fn action_fails(m: &Model, unit: &str, name: &str, params: &[&str]) -> String {
    let mut args = vec!["run-action", unit, name, "--format", "json"];
    args.extend_from_slice(params);
    let out = m.run(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success(), "{name} should fail: {text}");
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["status"], "failed", "{text}");
    v["message"].as_str().unwrap_or("").to_string()
}

fn sha256(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    let bytes = std::fs::read(path).unwrap();
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn three_units(extra: &[&str]) -> Model {
    let m = Model::new();
    m.deploy_with(3, extra);
    m.assert_all_healthy(3);
    m
}

/// Runs update-status until every unit shows `want` (bounded).
fn settle(m: &Model, what: &str, want: impl Fn(&str, &str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        m.ok(&["update-status"]);
        let w = m.workloads();
        if w.iter().all(|(_, s, msg)| want(s, msg)) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {w:?}");
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn actions_keep_the_python_charms_names_params_and_defaults() {
    let read = |p: &str| -> serde_yaml::Value {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        serde_yaml::from_str(&std::fs::read_to_string(root.join(p)).unwrap()).unwrap()
    };
    let old = read("tests/fixtures/python-charm/actions.yaml");
    let new = read("packaging/actions.yaml");
    for (name, spec) in old.as_mapping().unwrap() {
        let name = name.as_str().unwrap();
        let ours = &new[name];
        assert!(!ours.is_null(), "action {name} is missing");
        if let Some(params) = spec["params"].as_mapping() {
            for (p, ps) in params {
                let p = p.as_str().unwrap();
                let op = &ours["params"][p];
                assert_eq!(op["type"], ps["type"], "{name}.{p} type");
                assert_eq!(op["default"], ps["default"], "{name}.{p} default");
            }
        }
    }
}

#[test]
fn every_action_on_three_units() {
    // Each unit's own TMPDIR, to see that no action stages files there.
    let m = three_units(&["--env", "TMPDIR={unit_root}/tmp"]);
    let ep = m.endpoints();
    put_keys(&ep, "act", 20);

    // snapshot: streamed from a healthy member, checksummed, readable.
    let r = action(&m, "etcd/1", "snapshot", &[]);
    let s = &r["snapshot"];
    let path = s["path"].as_str().unwrap_or_else(|| panic!("{r}"));
    assert!(
        path.contains("home/ubuntu/etcd-snapshots/etcd-snapshot-"),
        "the Python charm's default target: {path}"
    );
    let size: u64 = s["size"].as_str().unwrap().parse().unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().len(), size);
    assert_eq!(s["sha256"].as_str().unwrap(), sha256(Path::new(path)));
    assert!(s["version"].as_str().unwrap().starts_with("3."), "{r}");
    // The keyspace is root's alone (issue 19.1): the file 0600, its dir 0700.
    let dir = Path::new(path).parent().unwrap();
    assert_eq!(
        (file_mode(Path::new(path)), file_mode(dir)),
        (0o600, 0o700),
        "{path}: snapshot and dir modes"
    );
    let name = path.rsplit_once('/').unwrap().1;
    assert_eq!(
        r["copy"]["cmd"].as_str().unwrap(),
        format!("juju ssh --pty=false etcd/1 -- sudo cat {path} > {name}")
    );
    // What an earlier revision or the Python charm left open (a 0644
    // snapshot in a 0755 dir) is tightened by the next hook, update-status.
    let old = dir.join("etcd-snapshot-2020-01-01.tar.gz");
    std::fs::write(&old, b"an old snapshot").unwrap();
    set_mode(&old, 0o644);
    set_mode(dir, 0o755);
    m.ok(&["update-status"]);
    assert_eq!(
        (file_mode(&old), file_mode(dir)),
        (0o600, 0o700),
        "{}: tightened by update-status",
        old.display()
    );
    let st = etcdctl(&ep, &["snapshot", "status", path, "-w", "json"]);
    assert!(
        st.status.success(),
        "etcdctl reads the snapshot: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let dir = path.rsplit_once('/').unwrap().0;
    let leftovers: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".part"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let msg = action_fails(&m, "etcd/1", "snapshot", &["keys-version=v2"]);
    assert!(msg.contains("not supported by etcd 3.4+"), "{msg}");

    // health: every member reachable, one leader, numbers filled in.
    let r = action(&m, "etcd/0", "health", &[]);
    assert_eq!(r["healthy"], "true", "{r}");
    let health = r["members"].as_object().unwrap().clone();
    assert_eq!(health.len(), 3, "{r}");
    let mut leaders = 0;
    for (name, mm) in &health {
        assert_eq!(mm["reachable"], "true", "{name}: {r}");
        assert_eq!(mm["learner"], "false", "{name}: {r}");
        assert_eq!(mm["alarms"], "", "{name}: {r}");
        assert!(mm["raft-index"].as_str().unwrap().parse::<u64>().unwrap() > 0);
        assert!(mm["db-size"].as_str().unwrap().parse::<u64>().unwrap() > 0);
        leaders += (mm["leader"] == "true") as usize;
    }
    assert_eq!(leaders, 1, "{r}");
    assert!(r["output"].as_str().unwrap().contains("is healthy"), "{r}");

    // member-list
    let r = action(&m, "etcd/2", "member-list", &[]);
    let ids: Vec<(String, String, bool)> = members_of(&r);
    assert_eq!(ids, members(&ep), "{r}");
    assert_eq!(r["output"].as_str().unwrap().lines().count(), 3, "{r}");

    // alarm-list / alarm-disarm with nothing raised.
    let r = action(&m, "etcd/0", "alarm-list", &[]);
    assert_eq!(
        (r["output"].as_str(), r["count"].as_str()),
        (Some(""), Some("0")),
        "{r}"
    );
    let r = action(&m, "etcd/0", "alarm-disarm", &[]);
    assert_eq!(r["count"], "0", "{r}");

    // compact: an old revision is gone afterwards.
    let put = etcdctl(&ep, &["put", "compact-me", "old", "-w", "json"]);
    let old: Value = serde_json::from_slice(&put.stdout).unwrap();
    let old_rev = old["header"]["revision"].as_u64().unwrap().to_string();
    put_keys(&ep, "after-compact-point", 3);
    let r = action(&m, "etcd/2", "compact", &["physical=true"]);
    let compacted: u64 = r["revision"].as_str().unwrap().parse().unwrap();
    assert!(compacted > old_rev.parse::<u64>().unwrap(), "{r}");
    let got = etcdctl(&ep, &["get", "compact-me", &format!("--rev={old_rev}")]);
    assert!(!got.status.success(), "an old revision is still readable");
    assert!(
        String::from_utf8_lossy(&got.stderr).contains("compacted"),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let msg = action_fails(&m, "etcd/2", "compact", &["revision=abc"]);
    assert!(msg.contains("revision=\"abc\""), "{msg}");
    let msg = action_fails(&m, "etcd/2", "compact", &["revision=1"]);
    assert!(msg.contains("compacted"), "{msg}");

    // defrag: every member, the raft leader last.
    let leader = health
        .iter()
        .find(|(_, mm)| mm["leader"] == "true")
        .map(|(n, _)| n.clone())
        .unwrap();
    let r = action(&m, "etcd/0", "defrag", &[]);
    let lines: Vec<&str> = r["output"].as_str().unwrap().lines().collect();
    assert_eq!(lines.len(), 3, "{r}");
    assert!(lines[2].contains(&format!("defragmented {leader} ")), "{r}");
    for name in ["etcd0", "etcd1", "etcd2"] {
        assert!(r["members"][name]["db-size-after"].is_string(), "{r}");
    }
    let r = action(&m, "etcd/0", "defrag", &["member=etcd/1"]);
    assert_eq!(r["output"].as_str().unwrap().lines().count(), 1, "{r}");
    assert_keys(&m.endpoint("etcd/1"), "act", 20);

    // package-client-credentials: a plain unit has no credentials, and says so.
    let msg = action_fails(&m, "etcd/0", "package-client-credentials", &[]);
    assert!(msg.contains("TLS"), "{msg}");
    // The Python charm's actions this charm does not do yet answer so,
    // and change nothing (restore without a snapshot: tests/charm_restore.rs).
    for (name, says) in [
        ("restore", "nothing was changed"),
        ("snap-upgrade", "not run from the etcd snap"),
        ("cis-benchmark", "not offered"),
    ] {
        let msg = action_fails(&m, "etcd/0", name, &[]);
        assert!(msg.contains(says), "{name}: {msg}");
    }
    assert_keys(&m.endpoint("etcd/1"), "act", 20);

    // debug: a tarball without the cluster token.
    let token = m.token();
    assert!(token.len() >= 6, "{token}");
    let r = action(&m, "etcd/0", "debug", &[]);
    let tarball = r["path"].as_str().unwrap();
    // Issue 19.14: staged in the root-only backups dir, never in the shared
    // TMPDIR under a predictable name; the tarball is root's alone.
    let tmp = m.root("etcd/0").join("tmp");
    assert!(
        !tmp.exists(),
        "the debug action staged in {}",
        tmp.display()
    );
    assert_eq!(file_mode(Path::new(tarball)), 0o600, "{tarball}");
    let x = tempfile::tempdir().unwrap();
    let out = Command::new("tar")
        .arg("-xzf")
        .arg(tarball)
        .arg("-C")
        .arg(x.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let top = std::fs::read_dir(x.path())
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut names = Vec::new();
    for e in std::fs::read_dir(&top).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(!text.contains(&token), "{} holds the token", p.display());
        names.push(p.file_name().unwrap().to_string_lossy().into_owned());
    }
    names.sort();
    assert_eq!(
        names,
        [
            "endpoint-status.txt",
            "etcd.conf.yml",
            "etcd.log",
            "member-list.txt",
            "unit-status.json",
            "versions.txt"
        ]
    );
    let conf = std::fs::read_to_string(top.join("etcd.conf.yml")).unwrap();
    assert!(
        conf.contains("initial-cluster-token: \"<redacted>\""),
        "{conf}"
    );
    let log = std::fs::read_to_string(top.join("etcd.log")).unwrap();
    assert!(!log.trim().is_empty(), "the log's tail is there");
    let st = std::fs::read_to_string(top.join("unit-status.json")).unwrap();
    assert!(st.contains("Healthy with 3 known peers"), "{st}");
}

fn members_of(r: &Value) -> Vec<(String, String, bool)> {
    let mut v: Vec<_> = r["members"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, mm)| {
            (
                mm["id"].as_str().unwrap().to_string(),
                name.clone(),
                mm["learner"] == "true",
            )
        })
        .collect();
    v.sort_by(|a, b| a.1.cmp(&b.1));
    v
}

/// Puts 64 KiB values under one key until etcd refuses: every put keeps
/// its revision, so the db outgrows the quota. Returns how many went in.
fn fill_until_nospace(ep: &str) -> usize {
    let value = "x".repeat(64 << 10);
    for i in 0..2000 {
        let out = etcdctl(ep, &["put", "fill", &value]);
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("database space exceeded"), "put {i}: {err}");
            return i;
        }
    }
    panic!("2000 puts of 64 KiB never exceeded the quota");
}

#[test]
fn nospace_blocks_and_compact_defrag_disarm_clear_it() {
    // The agent would clear the alarm by itself (tests/charm_agent.rs).
    let m = three_units(&[
        "--config",
        "quota_backend_bytes=4194304",
        "--config",
        "maintenance_agent=false",
    ]);
    let ep = m.endpoints();
    let conf =
        std::fs::read_to_string(etcd_charm::paths::Paths::new(m.root("etcd/0")).config_file())
            .unwrap();
    assert!(conf.contains("quota-backend-bytes: 4194304"), "{conf}");
    let n = fill_until_nospace(&ep);
    eprintln!("NOSPACE after {n} puts of 64 KiB with a 4 MiB quota");

    let r = action(&m, "etcd/0", "alarm-list", &[]);
    assert!(
        r["output"].as_str().unwrap().contains("alarm:NOSPACE"),
        "{r}"
    );
    settle(&m, "every unit blocked on NOSPACE", |s, msg| {
        s == "blocked" && msg.contains("NOSPACE alarm on etcd") && msg.contains("4.0 MiB quota")
    });
    let w = m.workloads();
    eprintln!("status: {:?}", w[0]);
    assert!(
        w[0].2.contains("compact") && w[0].2.contains("alarm-disarm"),
        "{w:?}"
    );
    let r = action(&m, "etcd/1", "health", &[]);
    assert_eq!(r["healthy"], "false", "{r}");

    action(&m, "etcd/1", "compact", &[]);
    let r = action(&m, "etcd/1", "defrag", &[]);
    eprintln!("defrag: {}", r["output"].as_str().unwrap());
    let r = action(&m, "etcd/1", "alarm-disarm", &[]);
    assert!(
        r["count"].as_str().unwrap().parse::<u32>().unwrap() >= 1,
        "{r}"
    );
    let r = action(&m, "etcd/1", "alarm-list", &[]);
    assert_eq!(r["output"], "", "{r}");
    let put = etcdctl(&ep, &["put", "after", "disarm"]);
    assert!(
        put.status.success(),
        "{}",
        String::from_utf8_lossy(&put.stderr)
    );
    settle(&m, "every unit active again", |s, msg| {
        s == "active" && msg == "Healthy with 3 known peers"
    });
}

/// `n` puts of `size` bytes under one key (etcdctl cannot take a 1 MiB
/// argument).
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

#[test]
fn defrag_rolls_through_the_members_under_a_writer() {
    let m = three_units(&[]);
    let mut units = m.units();
    units.sort();
    let eps: Vec<String> = units.iter().map(|u| m.endpoint(u)).collect();
    // History to give back: 1 MiB values under one key (~40 MiB of db),
    // then compacted, so each member's defrag rewrites a real file.
    churn(&eps[0], 40, 1 << 20);
    action(&m, "etcd/0", "compact", &[]);
    let mut w = writer_support::Writer::start(&eps);
    std::thread::sleep(Duration::from_secs(2));
    let t = Instant::now();
    w.disturbance_begins();
    let r = action(&m, "etcd/2", "defrag", &[]);
    w.disturbance_ends();
    let took = t.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let rep = w.finish(Duration::from_secs(60));
    eprintln!(
        "defrag took {:.2} s\n{}",
        took.as_secs_f64(),
        r["output"].as_str().unwrap()
    );
    rep.assert_available(
        "defrag action on 3 members under a writer",
        writer_support::ROLLING,
    );
    assert_eq!(r["output"].as_str().unwrap().lines().count(), 3, "{r}");
    m.assert_all_healthy(3);
}

#[test]
fn space_options_roll_into_etcd_conf_and_bad_values_block() {
    let m = three_units(&[]);
    let mut units = m.units();
    units.sort();
    let conf = |u: &str| {
        std::fs::read_to_string(etcd_charm::paths::Paths::new(m.root(u)).config_file()).unwrap()
    };
    let pid =
        |u: &str| std::fs::read_to_string(m.root(u).join("run/etcd-charm/etcd.etcd.pid")).ok();
    for u in &units {
        assert!(!conf(u).contains("quota-backend-bytes"), "unset, unwritten");
    }
    let before: Vec<_> = units.iter().map(|u| pid(u)).collect();
    m.ok(&[
        "config",
        "etcd",
        "quota_backend_bytes=16777216",
        "auto_compaction_mode=revision",
        "auto_compaction_retention=1000",
    ]);
    settle(&m, "healthy after the options rolled", |s, msg| {
        s == "active" && msg == "Healthy with 3 known peers"
    });
    for (u, b) in units.iter().zip(&before) {
        let c = conf(u);
        assert!(c.contains("quota-backend-bytes: 16777216"), "{u}: {c}");
        assert!(c.contains("auto-compaction-mode: \"revision\""), "{u}: {c}");
        assert!(
            c.contains("auto-compaction-retention: \"1000\""),
            "{u}: {c}"
        );
        assert_ne!(&pid(u), b, "{u}'s etcd was not restarted");
    }
    // A periodic duration where revisions are meant: blocked, named.
    m.ok(&["config", "etcd", "auto_compaction_retention=1h"]);
    let w = m.workloads();
    assert!(
        w.iter()
            .all(|(_, s, msg)| s == "blocked" && msg.contains("auto_compaction_retention")),
        "{w:?}"
    );
    assert!(conf("etcd/0").contains("auto-compaction-retention: \"1000\""));
    m.ok(&["config", "etcd", "auto_compaction_mode=periodic"]);
    settle(&m, "healthy with periodic 1h", |s, msg| {
        s == "active" && msg == "Healthy with 3 known peers"
    });
    assert!(conf("etcd/0").contains("auto-compaction-retention: \"1h\""));
}
