//! The dry run's refresh section through `jujusim refresh --dry-run`: the
//! unit runs a stand-in for the Python charm (its metadata and config from
//! tests/fixtures/python-charm/, plus an endpoint and an option this charm
//! lacks), so the dry run, with JUJU_CHARM_DIR = that old charm, says what
//! the refresh keeps, which stored value it drops, and refuses once the
//! endpoint it would drop has a live relation.

mod upgrade_support;
use upgrade_support::*;

use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/python-charm")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The Python charm's declarations, plus `legacy-db` (an etcd endpoint this
/// charm does not have) and `legacy_opt`; hooks that do nothing.
fn python_stand_in(dest: &Path) -> PathBuf {
    let dir = dest.join("python-etcd");
    std::fs::create_dir_all(&dir).unwrap();
    let meta = fixture("metadata.yaml").replace(
        "provides:\n",
        "provides:\n  legacy-db:\n    interface: etcd\n",
    );
    assert!(meta.contains("legacy-db"));
    std::fs::write(dir.join("metadata.yaml"), meta).unwrap();
    let config = format!(
        "{}  legacy_opt:\n    type: string\n    default: unset\n    description: gone in the new charm\n",
        fixture("config.yaml")
    );
    std::fs::write(dir.join("config.yaml"), config).unwrap();
    std::fs::write(dir.join("actions.yaml"), fixture("actions.yaml")).unwrap();
    let dispatch = dir.join("dispatch");
    std::fs::write(&dispatch, "#!/bin/sh\nexit 0\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dispatch, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

fn dry_run(m: &Model, json: bool) -> (i32, String) {
    let mut args = vec![
        "refresh",
        "etcd",
        "--path",
        m.charm.to_str().unwrap(),
        "--dry-run",
    ];
    if json {
        args.extend(["--", "--format=json"]);
    }
    let out = m.run(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let header = text.lines().next().unwrap_or("");
    let code = header
        .strip_prefix("=== etcd/0 (exit ")
        .and_then(|r| r.strip_suffix(") ==="))
        .unwrap_or_else(|| panic!("no dry-run header in {text}"))
        .parse()
        .unwrap();
    (code, text)
}

fn report(m: &Model) -> (i32, Value) {
    let (code, text) = dry_run(m, true);
    let runs = parse_dry_runs(&text);
    assert_eq!(runs.len(), 1, "{text}");
    assert_eq!(runs[0].1, code);
    (code, runs[0].2.clone())
}

fn entry<'a>(v: &'a Value, kind: &str, name: &str) -> &'a Value {
    v["refresh"][kind]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {:#}", v["refresh"]))
}

#[test]
fn the_dry_run_says_what_a_refresh_from_the_python_charm_keeps_drops_and_refuses() {
    let m = Model::new();
    let tmp = tempfile::tempdir().unwrap();
    let old = python_stand_in(tmp.path());
    m.ok(&[
        "deploy",
        old.to_str().unwrap(),
        "--config",
        "legacy_opt=set-by-operator",
        "--config",
        "snapd_refresh=fri,23:00-01:00",
        // On its loopback address only: plain http is allowed there
        // (charm/insecure.rs), as in every other test.
        "--config",
        "bind_to_all_interfaces=false",
        // A 0-1 store gets an instance only when asked for, as under Juju.
        "--storage",
        "data=1G",
        "--env",
        "ETCD_CHARM_SERVICE=direct",
        "--env",
        "ETCD_CHARM_ROOT={unit_root}",
    ]);
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/etcd-client");
    m.ok(&["deploy", client.to_str().unwrap()]);
    m.ok(&["integrate", "etcd:db", "etcd-client:etcd"]);

    // 1. Only kept endpoints are related: the refresh would go through.
    let (code, r) = report(&m);
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["verdict"], "proceed", "{r:#}");
    let rf = &r["refresh"];
    assert_eq!(rf["compared"], true, "{rf:#}");
    // The unit's charm dir (jujusim's copy of the old charm), not the new one.
    let old_dir = PathBuf::from(rf["old_charm_dir"].as_str().unwrap());
    assert_ne!(old_dir, m.charm);
    assert_eq!(
        std::fs::read_to_string(old_dir.join("config.yaml")).unwrap(),
        std::fs::read_to_string(old.join("config.yaml")).unwrap()
    );
    assert_eq!(rf["refusals"], Value::Array(vec![]));
    let db = entry(&r, "endpoints", "db");
    assert_eq!(db["change"], "kept");
    assert_eq!(db["relations"].as_array().map(Vec::len), Some(1), "{db}");
    let legacy = entry(&r, "endpoints", "legacy-db");
    assert_eq!(legacy["change"], "dropped");
    assert_eq!(legacy["relations"], Value::Array(vec![]));
    assert_eq!(
        entry(&r, "endpoints", "nrpe-external-master")["change"],
        "kept"
    );
    assert_eq!(entry(&r, "endpoints", "certificates")["change"], "kept");
    let data = entry(&r, "storage", "data");
    assert_eq!(
        (data["change"].as_str(), data["attached"].as_u64()),
        (Some("kept"), Some(1))
    );
    assert_eq!(rf["resources_to_pass"], Value::Array(vec![]));
    let kept: Vec<&str> = rf["options"]["kept"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(kept.len(), 12, "{kept:?}");
    assert!(kept.contains(&"snapd_refresh"));
    // The options this charm adds (issues 13, 11): new, with their defaults.
    assert_eq!(
        rf["options"]["new"],
        serde_json::json!([
            "agent_check_interval",
            "agent_defrag_threshold",
            "agent_metrics_port",
            "agent_port",
            "agent_snapshot_interval",
            "agent_snapshot_retention",
            "allow_insecure_listeners",
            "auto_compaction_mode",
            "auto_compaction_retention",
            "maintenance_agent",
            "quota_backend_bytes"
        ])
    );
    assert_eq!(rf["options"]["removed"], serde_json::json!(["legacy_opt"]));
    let dropped = rf["options"]["dropped_values"].as_array().unwrap();
    assert_eq!(dropped.len(), 1, "{dropped:?}");
    assert_eq!(dropped[0]["name"], "legacy_opt");
    assert_eq!(dropped[0]["stored"], "set-by-operator");

    // 2. A client on the endpoint the refresh drops: Juju would refuse.
    m.ok(&["deploy", client.to_str().unwrap(), "--name", "old-client"]);
    m.ok(&["integrate", "etcd:legacy-db", "old-client:etcd"]);
    let (code, r) = report(&m);
    assert_eq!(code, 2, "{r:#}");
    assert_eq!(r["verdict"], "refused", "{r:#}");
    let legacy = entry(&r, "endpoints", "legacy-db");
    let rel = legacy["relations"][0].as_str().unwrap().to_string();
    assert!(rel.starts_with("legacy-db:"), "{legacy}");
    let want = format!("would break relation {rel} on endpoint legacy-db");
    assert_eq!(r["refresh"]["refusals"], serde_json::json!([want]));
    assert!(
        r["reason"].as_str().unwrap().contains(&want),
        "{}",
        r["reason"]
    );

    // The text report says the same, and its verdict names the refusal.
    let (code, text) = dry_run(&m, false);
    assert_eq!(code, 2, "{text}");
    if std::env::var_os("SHOW_DRY_RUN").is_some() {
        eprintln!("{text}");
    }
    for line in [
        format!("endpoint legacy-db (provides etcd): DROPPED; relations {rel}"),
        "endpoint nrpe-external-master (provides nrpe-external-master, scope container): kept"
            .to_string(),
        "option legacy_opt: the stored value \"set-by-operator\" is dropped (the option is removed)"
            .to_string(),
        "options removed: legacy_opt".to_string(),
        format!("Verdict: juju refresh would REFUSE: {want}"),
    ] {
        assert!(text.contains(&line), "{line:?} not in\n{text}");
    }
}

/// The Python stand-in on machines of `base`, etcd not started (the base
/// check needs none). Its series gain bionic, as older revisions listed.
fn python_on(base: &str) -> (Model, tempfile::TempDir) {
    let m = Model::new();
    let tmp = tempfile::tempdir().unwrap();
    let old = python_stand_in(tmp.path());
    let meta = old.join("metadata.yaml");
    let text = std::fs::read_to_string(&meta).unwrap();
    let text = text.replace("series:\n", "series:\n  - bionic\n");
    assert!(text.contains("bionic"));
    std::fs::write(&meta, text).unwrap();
    m.ok(&[
        "deploy",
        old.to_str().unwrap(),
        "--base",
        base,
        "--config",
        "bind_to_all_interfaces=false",
        "--env",
        "ETCD_CHARM_SERVICE=direct",
        "--env",
        "ETCD_CHARM_ROOT={unit_root}",
    ]);
    (m, tmp)
}

#[test]
fn the_dry_run_checks_the_machines_base_as_juju_refresh_does() {
    // Focal: the Python charm ran there, and so does this one.
    let (m, _tmp) = python_on("ubuntu@20.04");
    let (code, r) = report(&m);
    assert_eq!(code, 0, "{r:#}");
    assert_eq!(r["verdict"], "proceed", "{r:#}");
    assert_eq!(r["refresh"]["machine_base"], "ubuntu@20.04", "{r:#}");
    let bases = r["refresh"]["bases"].as_array().unwrap();
    assert!(bases.iter().any(|b| b == "ubuntu@20.04"), "{bases:?}");
    let out = m.run(&["refresh", "etcd", "--path", m.charm.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "juju refresh on focal: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Bionic is no base of this charm: the dry run refuses with Juju's words.
    let (m, _tmp) = python_on("ubuntu@18.04");
    let (code, r) = report(&m);
    assert_eq!(code, 2, "{r:#}");
    assert_eq!(r["verdict"], "refused", "{r:#}");
    let why = r["refresh"]["refusals"][0].as_str().unwrap().to_string();
    assert!(
        why.starts_with("base \"ubuntu@18.04\" not supported by charm"),
        "{why}"
    );
    let out = m.run(&["refresh", "etcd", "--path", m.charm.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&why),
        "juju refresh says what the dry run said: {err}"
    );
}
