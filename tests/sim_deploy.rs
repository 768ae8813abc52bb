//! jujusim: what a deploy runs, in which order, with which environment.

mod sim_support;
use sim_support::{charm, text, Sim};

const DEPLOY: [&str; 6] = [
    "data-storage-attached",
    "install",
    "cluster-relation-created",
    "",
    "config-changed",
    "start",
];

/// The deploy sequence on one unit, with leader-elected or
/// leader-settings-changed in the middle.
fn deploy_order(leader: bool) -> Vec<String> {
    let mid = if leader {
        "leader-elected"
    } else {
        "leader-settings-changed"
    };
    DEPLOY
        .iter()
        .map(|h| if h.is_empty() { mid } else { h }.to_string())
        .collect()
}

#[test]
fn deploy_order_is_exact_on_every_unit() {
    let sim = Sim::new();
    sim.deploy(3);
    for (unit, leader) in [
        ("simtest/0", true),
        ("simtest/1", false),
        ("simtest/2", false),
    ] {
        let hooks = sim.hooks(unit);
        assert_eq!(hooks[..6], deploy_order(leader)[..], "{unit}: {hooks:?}");
        // Nothing relation-joined before start.
        let rest = &hooks[6..];
        assert!(
            rest.iter()
                .all(|h| h.starts_with("cluster-relation-") || h == "leader-settings-changed"),
            "{unit}: {hooks:?}"
        );
        // Joined both other units.
        let joined: Vec<_> = sim
            .hook_lines(unit)
            .into_iter()
            .filter(|l| l.starts_with("cluster-relation-joined"))
            .collect();
        assert_eq!(joined.len(), 2, "{unit}: {joined:?}");
    }
    let st = sim.status();
    let units = &st["applications"]["simtest"]["units"];
    assert_eq!(units["simtest/0"]["leader"], true);
    assert_eq!(units["simtest/1"]["leader"], false);
    for u in ["simtest/0", "simtest/1", "simtest/2"] {
        assert_eq!(units[u]["workload-status"]["current"], "active");
        assert_eq!(units[u]["juju-status"]["current"], "idle");
    }
}

#[test]
fn joined_is_always_followed_by_changed_for_the_same_unit() {
    let sim = Sim::new();
    sim.deploy(3);
    sim.ok(&["add-unit", "-n", "2"]);
    for unit in [
        "simtest/0",
        "simtest/1",
        "simtest/2",
        "simtest/3",
        "simtest/4",
    ] {
        let lines = sim.hook_lines(unit);
        for (i, l) in lines.iter().enumerate() {
            if let Some(rest) = l.strip_prefix("cluster-relation-joined ") {
                let remote = rest.split(' ').next().unwrap();
                let expected = format!("cluster-relation-changed {remote}");
                assert!(
                    lines[i + 1..].iter().any(|x| x.starts_with(&expected)),
                    "{unit}: no changed after joined for {remote}: {lines:?}"
                );
                assert!(remote.starts_with("remote=simtest/"), "{l}");
            }
        }
        let joined = lines
            .iter()
            .filter(|l| l.starts_with("cluster-relation-joined"))
            .count();
        assert_eq!(joined, 4, "{unit} joins every other unit once: {lines:?}");
    }
}

#[test]
fn peer_joined_only_with_more_than_one_unit() {
    let sim = Sim::new();
    sim.deploy(1);
    assert_eq!(sim.hooks("simtest/0"), deploy_order(true));
    sim.ok(&["add-unit"]);
    assert_eq!(sim.hooks("simtest/1")[..6], deploy_order(false)[..]);
    let after: Vec<String> = sim.hook_lines("simtest/0")[6..].to_vec();
    assert!(
        after
            .iter()
            .any(|l| l.starts_with("cluster-relation-joined remote=simtest/1")),
        "{after:?}"
    );
}

#[test]
fn hook_environment_is_jujus() {
    let sim = Sim::new();
    sim.ok(&[
        "deploy",
        charm().to_str().unwrap(),
        "-n",
        "2",
        "--env",
        "SIMTEST_ROOT={unit_root}/data",
        "--env",
        "SIMTEST_UNIT={unit}",
    ]);
    sim.ok(&["update-status", "simtest/1"]);
    let env = std::fs::read_to_string(sim.root("simtest/1").join("env.last")).unwrap();
    let get = |k: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{k} missing from {env}"))
            .to_string()
    };
    let model = std::fs::canonicalize(&sim.model).unwrap();
    assert_eq!(get("JUJU_UNIT_NAME"), "simtest/1");
    assert_eq!(get("JUJU_HOOK_NAME"), "update-status");
    assert_eq!(get("JUJU_DISPATCH_PATH"), "hooks/update-status");
    assert_eq!(get("JUJU_VERSION"), "3.6.4");
    assert_eq!(get("JUJU_MODEL_NAME"), "model");
    assert_eq!(
        get("JUJU_CHARM_DIR"),
        model.join("units/simtest-1/charm").display().to_string()
    );
    assert_eq!(
        get("JUJUSIM_UNIT_ROOT"),
        model.join("units/simtest-1/root").display().to_string()
    );
    assert_eq!(get("JUJUSIM_MODEL"), model.display().to_string());
    assert_eq!(
        get("SIMTEST_ROOT"),
        model
            .join("units/simtest-1/root/data")
            .display()
            .to_string()
    );
    assert_eq!(get("SIMTEST_UNIT"), "simtest/1");
    assert!(get("PATH").starts_with(&format!("{}:", model.join("tools").display())));
    for k in [
        "JUJU_MODEL_UUID",
        "JUJU_MACHINE_ID",
        "JUJU_CONTEXT_ID",
        "JUJU_AGENT_SOCKET_ADDRESS",
    ] {
        assert!(!get(k).is_empty(), "{k}");
    }
    assert!(!env.contains("JUJU_RELATION_ID="), "{env}");
    // Storage: attached before install, with its location.
    let loc = model
        .join("units/simtest-1/storage/data")
        .display()
        .to_string();
    assert_eq!(
        sim.exec_ok("simtest/1", "storage-list data --format=json"),
        "[\"data/1\"]\n"
    );
    assert_eq!(
        sim.exec_ok("simtest/1", "storage-get -s data/1 location"),
        format!("{loc}\n")
    );
    assert!(std::path::Path::new(&loc).is_dir());
    // A relation hook adds the relation variables.
    let lines = sim.hook_lines("simtest/1");
    assert!(
        lines.contains(
            &"cluster-relation-joined remote=simtest/0 app=simtest rel=cluster:0 departing="
                .to_string()
        ),
        "{lines:?}"
    );
    assert!(
        lines.contains(
            &"cluster-relation-created remote= app=simtest rel=cluster:0 departing=".to_string()
        ),
        "{lines:?}"
    );
}

#[test]
fn each_unit_has_its_own_loopback_address() {
    let sim = Sim::new();
    sim.deploy(2);
    let a0 = sim.exec_ok("simtest/0", "network-get cluster --ingress-address");
    let a1 = sim.exec_ok("simtest/1", "network-get db --bind-address");
    let (a0, a1) = (a0.trim(), a1.trim());
    // The range the test runner gave the model, not a hash of its directory.
    let given = sim.range().strip_suffix(".0/24").unwrap();
    assert_eq!(a0, format!("{given}.1"));
    assert!(a1.ends_with(".2"), "{a1}");
    assert_eq!(
        a0.rsplit_once('.').unwrap().0,
        a1.rsplit_once('.').unwrap().0
    );
    let x: u32 = a0.split('.').nth(1).unwrap().parse().unwrap();
    assert!((100..=250).contains(&x), "{a0}");
    let full: serde_json::Value =
        serde_json::from_str(&sim.exec_ok("simtest/0", "network-get cluster --format=json"))
            .unwrap();
    assert_eq!(full["ingress-addresses"][0], a0);
    assert_eq!(full["bind-addresses"][0]["addresses"][0]["value"], a0);
    assert_eq!(
        sim.exec_ok("simtest/1", "unit-get private-address").trim(),
        a1
    );
    // Units can bind their address.
    let bound = std::net::TcpListener::bind((a1, 0));
    assert!(bound.is_ok(), "{a1}: {bound:?}");
    // Another model gets other addresses.
    let other = Sim::new();
    other.deploy(1);
    let b0 = other.exec_ok("simtest/0", "network-get cluster --ingress-address");
    assert_ne!(a0, b0.trim());
    // A range that is not a loopback /24 is refused before anything exists.
    let bad = Sim::new();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jujusim"))
        .arg("--model")
        .arg(&bad.model)
        .args(["--address-range", "10.1.2.0/24", "deploy"])
        .arg(charm())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a loopback /24"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn config_get_prints_typed_values_and_config_validates() {
    let sim = Sim::new();
    sim.ok(&["deploy", charm().to_str().unwrap(), "--config", "count=7"]);
    let v: serde_json::Value =
        serde_json::from_str(&sim.exec_ok("simtest/0", "config-get --format=json")).unwrap();
    assert_eq!(v["count"], 7);
    assert_eq!(v["ratio"], 0.5);
    assert_eq!(v["verbose"], false);
    assert_eq!(v["greeting"], "hello");
    assert!(v.get("unset").is_none(), "{v}");
    let all: serde_json::Value =
        serde_json::from_str(&sim.exec_ok("simtest/0", "config-get --format=json --all")).unwrap();
    assert!(all["unset"].is_null() && all.get("unset").is_some());
    assert_eq!(sim.exec_ok("simtest/0", "config-get greeting"), "hello\n");

    let bad = sim.run(&["config", "count=many"]);
    assert!(!bad.status.success());
    assert!(text(&bad.stderr).contains("count"), "{}", text(&bad.stderr));
    assert!(!sim.run(&["config", "nosuch=1"]).status.success());
    assert!(!sim.run(&["config", "verbose=maybe"]).status.success());

    let before = sim.hooks("simtest/0").len();
    sim.ok(&["config", "simtest", "verbose=true", "unset=x"]);
    let hooks = sim.hooks("simtest/0");
    assert_eq!(hooks[before..], ["config-changed".to_string()]);
    let v: serde_json::Value =
        serde_json::from_str(&sim.exec_ok("simtest/0", "config-get --format=json")).unwrap();
    assert_eq!(v["verbose"], true);
    assert_eq!(v["unset"], "x");
    // No change, no hook.
    sim.ok(&["config", "verbose=true"]);
    assert_eq!(sim.hooks("simtest/0").len(), before + 1);
    let shown: serde_json::Value =
        serde_json::from_str(&sim.ok(&["config", "--format=json"])).unwrap();
    assert_eq!(shown["count"], 7);
}

/// The whole run follows from the seed only when hooks run one at a time
/// (tests/sim_concurrency.rs checks what a seed fixes in concurrent runs).
#[test]
fn seeded_order_is_reproducible_when_serial() {
    let order = |seed: &str| {
        let sim = Sim::new();
        sim.ok(&[
            "--serial",
            "--seed",
            seed,
            "deploy",
            charm().to_str().unwrap(),
            "-n",
            "3",
        ]);
        sim.runs()
    };
    let a = order("7");
    assert_eq!(a, order("7"));
    assert_ne!(a, order("8"), "two seeds gave the same interleaving");
}
