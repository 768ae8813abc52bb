//! jujusim: what survives a failed hook, bounded retries, the error state
//! and `resolve`.

mod sim_support;
use sim_support::{charm, text, Sim};

#[test]
fn failed_hook_discards_relation_set_and_ports_but_keeps_status_and_leader_set() {
    let sim = Sim::new();
    sim.deploy(2);
    sim.on(
        "simtest/0",
        "update-status",
        "relation-set -r cluster:0 lost=1; relation-set -r cluster:0 --app lost=1; open-port 9999; state-set lost=1\n\
         status-set blocked 'kept'; leader-set kept=1; application-version-set 9.9\nexit 1\n",
    );
    let before = sim.hook_lines("simtest/1").len();
    let out = sim.run(&["update-status", "simtest/0"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("simtest/0 is in error: hook failed: \"update-status\""),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        sim.exec_ok(
            "simtest/1",
            "relation-get --format=json -r cluster:0 - simtest/0"
        ),
        "{}\n"
    );
    assert_eq!(
        sim.exec_ok(
            "simtest/1",
            "relation-get --format=json -r cluster:0 --app - simtest"
        ),
        "{}\n"
    );
    assert_eq!(sim.exec_ok("simtest/0", "state-get --format=json"), "{}\n");
    assert_eq!(
        sim.exec_ok("simtest/1", "leader-get --format=json kept"),
        "\"1\"\n"
    );
    let st = sim.status();
    let u0 = &st["applications"]["simtest"]["units"]["simtest/0"];
    assert_eq!(u0["open-ports"], serde_json::json!([]));
    assert_eq!(u0["workload-version"], "9.9");
    // While in error Juju shows the hook; after resolve, the status the hook set.
    assert_eq!(u0["workload-status"]["current"], "error");
    sim.clear_on("simtest/0", "update-status");
    sim.ok(&["resolve", "simtest/0"]);
    let st = sim.status();
    let u0 = &st["applications"]["simtest"]["units"]["simtest/0"];
    assert_eq!(u0["workload-status"]["current"], "blocked");
    assert_eq!(u0["workload-status"]["message"], "kept");
    // The non-leader saw leader-settings-changed for the leader-set, and no
    // relation-changed for the discarded relation-set.
    let new = sim.hooks("simtest/1")[before..].to_vec();
    assert_eq!(new, ["leader-settings-changed"]);
}

#[test]
fn a_successful_hook_commits_its_relation_data() {
    let sim = Sim::new();
    sim.deploy(2);
    sim.on(
        "simtest/0",
        "update-status",
        "relation-set -r cluster:0 a=1; open-port 2379\n",
    );
    sim.ok(&["update-status", "simtest/0"]);
    assert_eq!(
        sim.exec_ok("simtest/1", "relation-get -r cluster:0 a simtest/0"),
        "1\n"
    );
    assert_eq!(
        sim.status()["applications"]["simtest"]["units"]["simtest/0"]["open-ports"],
        serde_json::json!(["2379/tcp"])
    );
    assert_eq!(
        sim.hooks("simtest/1").last().unwrap(),
        "cluster-relation-changed"
    );
}

#[test]
fn a_hook_reads_its_own_staged_writes() {
    let sim = Sim::new();
    sim.deploy(1);
    let out = sim.exec_ok("simtest/0", "relation-set -r cluster:0 a=1; relation-get -r cluster:0 a simtest/0; state-set s=2; state-get s");
    assert_eq!(out, "1\n2\n");
}

#[test]
fn failing_hook_is_retried_then_the_unit_is_in_error_until_resolved() {
    let sim = Sim::new();
    sim.deploy(2);
    sim.on("simtest/1", "config-changed", "exit 3\n");
    let out = sim.run(&["--attempts", "3", "config", "greeting=hey"]);
    assert_eq!(out.status.code(), Some(2));
    let hooks = sim.hooks("simtest/1");
    let tail: Vec<&String> = hooks.iter().rev().take(3).collect();
    assert!(tail.iter().all(|h| *h == "config-changed"), "{hooks:?}");
    let attempts: Vec<u64> = sim
        .hook_log()
        .iter()
        .filter(|r| r["unit"] == "simtest/1" && r["hook"] == "config-changed" && r["exit"] == 3)
        .map(|r| r["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(attempts, [1, 2, 3]);
    let st = sim.status();
    let u1 = &st["applications"]["simtest"]["units"]["simtest/1"];
    assert_eq!(u1["juju-status"]["current"], "error");
    assert_eq!(
        u1["workload-status"]["message"],
        "hook failed: \"config-changed\""
    );
    assert!(sim
        .ok(&["status"])
        .contains("hook failed: \"config-changed\""));
    // No more hooks while in error.
    let n = sim.hooks("simtest/1").len();
    sim.run(&["update-status"]);
    assert_eq!(sim.hooks("simtest/1").len(), n);
    assert!(
        !sim.run(&["resolve", "simtest/0"]).status.success(),
        "resolve of a healthy unit fails"
    );
    // Resolve retries the failed hook first, then what queued meanwhile
    // (the leader's leader-set of the new greeting, update-status).
    sim.clear_on("simtest/1", "config-changed");
    sim.ok(&["resolve", "simtest/1"]);
    assert_eq!(
        sim.hooks("simtest/1")[n..],
        ["config-changed", "leader-settings-changed", "update-status"]
    );
    assert_eq!(
        sim.status()["applications"]["simtest"]["units"]["simtest/1"]["juju-status"]["current"],
        "idle"
    );
}

#[test]
fn fail_hook_config_fails_install_on_every_unit() {
    let sim = Sim::new();
    let out = sim.run(&[
        "--attempts",
        "2",
        "deploy",
        charm().to_str().unwrap(),
        "-n",
        "2",
        "--config",
        "fail-hook=install",
    ]);
    assert_eq!(out.status.code(), Some(2));
    for u in ["simtest/0", "simtest/1"] {
        assert_eq!(
            sim.hooks(u),
            ["data-storage-attached", "install", "install"]
        );
    }
    // The output of the failing hook is kept in the hook log.
    let log = sim.hook_log();
    let failed = log.iter().find(|r| r["exit"] != 0).unwrap();
    assert!(
        failed["output"]
            .as_str()
            .unwrap()
            .contains("failing install as configured"),
        "{}",
        failed
    );
    // Units in error make every command but exec and run-action exit 2.
    assert_eq!(sim.run(&["config", "fail-hook="]).status.code(), Some(2));
    // config-changed is queued behind the failed install: resolve runs both.
    assert_eq!(sim.run(&["resolve", "simtest/0"]).status.code(), Some(2));
    sim.ok(&["resolve", "simtest/1"]);
    assert_eq!(
        sim.hooks("simtest/0")[3..6],
        ["install", "cluster-relation-created", "leader-elected"]
    );
}

#[test]
fn hook_timeout_kills_and_fails_the_hook() {
    let sim = Sim::new();
    sim.deploy(1);
    let root = sim.root("simtest/0");
    let (pid_file, finished) = (root.join("hook.pid"), root.join("hook.finished"));
    sim.on(
        "simtest/0",
        "update-status",
        &format!(
            "echo $$ > '{}'\nsleep 30\ntouch '{}'\n",
            pid_file.display(),
            finished.display()
        ),
    );
    let out = sim.run(&["--hook-timeout", "1", "--attempts", "1", "update-status"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(sim.hook_log().last().unwrap()["timed_out"], true);
    // Killed, not waited for (it never finished) nor left running.
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
    assert!(!alive, "the hook (pid {pid}) still runs");
    assert!(!finished.exists(), "the hook ran to its end");
}

#[test]
fn max_hooks_bound_is_reported_and_settle_goes_on() {
    let sim = Sim::new();
    let out = sim.run(&[
        "--max-hooks",
        "4",
        "deploy",
        charm().to_str().unwrap(),
        "-n",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let err = text(&out.stderr);
    assert!(
        err.contains("--max-hooks") && err.contains("Still queued"),
        "{err}"
    );
    assert_eq!(sim.hook_log().len(), 4);
    sim.ok(&["settle"]);
    assert_eq!(
        sim.status()["applications"]["simtest"]["units"]["simtest/1"]["workload-status"]["current"],
        "active"
    );
}
