//! jujusim: leadership, unit removal, refresh, reboot, elect, destroy.

mod sim_support;
use sim_support::{charm, text, Sim};

const UNITS: [&str; 3] = ["simtest/0", "simtest/1", "simtest/2"];

#[test]
fn leader_settings_changed_follows_leader_set_on_every_non_leader() {
    let sim = Sim::new();
    sim.deploy(3);
    let before: Vec<usize> = UNITS.iter().map(|u| sim.hooks(u).len()).collect();
    // config-changed on the leader leader-sets the greeting.
    sim.ok(&["config", "greeting=bonjour"]);
    let log = sim.runs();
    let leader_cc = log
        .iter()
        .rposition(|(u, h)| u == "simtest/0" && h == "config-changed")
        .unwrap();
    for (i, u) in UNITS.iter().enumerate().skip(1) {
        let new = sim.hooks(u)[before[i]..].to_vec();
        assert!(
            new.contains(&"leader-settings-changed".to_string()),
            "{u}: {new:?}"
        );
        let lsc = log
            .iter()
            .rposition(|(x, h)| x == u && h == "leader-settings-changed")
            .unwrap();
        assert!(
            lsc > leader_cc,
            "{u}: leader-settings-changed ran before the leader-set"
        );
        assert_eq!(sim.exec_ok(u, "leader-get greeting"), "bonjour\n");
    }
    assert!(!sim.hooks("simtest/0")[before[0]..].contains(&"leader-settings-changed".to_string()));
    // The same value again: no hook.
    let n = sim.hooks("simtest/1").len();
    sim.exec_ok("simtest/0", "leader-set greeting=bonjour");
    assert_eq!(sim.hooks("simtest/1").len(), n);
}

#[test]
fn remove_unit_departs_breaks_stops_removes() {
    let sim = Sim::new();
    sim.deploy(3);
    // While departed runs, the departing unit's data can still be read.
    sim.exec_ok("simtest/2", "relation-set -r cluster:0 addr=two");
    for u in UNITS {
        sim.on(u, "cluster-relation-departed", "relation-get -r \"$JUJU_RELATION_ID\" addr simtest/2 >> \"$JUJUSIM_UNIT_ROOT/departed-read\"; relation-list --format=json >> \"$JUJUSIM_UNIT_ROOT/departed-read\"\n");
    }
    let before: Vec<usize> = UNITS.iter().map(|u| sim.hook_lines(u).len()).collect();
    let unit_dir = sim.unit_dir("simtest/2");
    sim.ok(&["remove-unit", "simtest/2"]);
    let dying = sim.hook_lines("simtest/2")[before[2]..].to_vec();
    let names: Vec<String> = dying
        .iter()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "cluster-relation-departed",
            "cluster-relation-departed",
            "cluster-relation-broken",
            "stop",
            "data-storage-detaching",
            "remove"
        ],
        "{dying:?}"
    );
    assert!(
        dying[0].contains("departing=simtest/2") && dying[1].contains("departing=simtest/2"),
        "{dying:?}"
    );
    let remotes: Vec<&str> = dying[..2]
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap())
        .collect();
    assert_eq!(remotes, ["remote=simtest/0", "remote=simtest/1"]);
    assert!(
        dying[2].starts_with("cluster-relation-broken remote= "),
        "{dying:?}"
    );
    for (i, u) in UNITS.iter().enumerate().take(2) {
        let new = sim.hook_lines(u)[before[i]..].to_vec();
        assert_eq!(new, ["cluster-relation-departed remote=simtest/2 app=simtest rel=cluster:0 departing=simtest/2"], "{u}");
        let read = std::fs::read_to_string(sim.root(u).join("departed-read")).unwrap();
        assert!(read.starts_with("two\n"), "{u}: {read:?}");
        assert!(
            !read.contains("simtest/2\""),
            "departing unit still listed: {read:?}"
        );
        assert_eq!(
            sim.exec_ok(u, "relation-list -r cluster:0 --format=json")
                .matches("simtest/")
                .count(),
            1
        );
    }
    let st = sim.status();
    assert!(st["applications"]["simtest"]["units"]
        .get("simtest/2")
        .is_none());
    assert!(
        unit_dir.exists(),
        "removed units' directories are kept for inspection"
    );
}

#[test]
fn removing_a_unit_before_it_joined_anyone() {
    let sim = Sim::new();
    sim.deploy(2);
    // Stop part-way through the new unit's deploy hooks, then remove it.
    let out = sim.run(&["--max-hooks", "2", "add-unit"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    sim.ok(&["remove-unit", "simtest/2"]);
    assert!(sim.status()["applications"]["simtest"]["units"]
        .get("simtest/2")
        .is_none());
    for u in ["simtest/0", "simtest/1"] {
        let lines = sim.hook_lines(u);
        let joined = lines
            .iter()
            .filter(|l| l.starts_with("cluster-relation-joined remote=simtest/2"))
            .count();
        let departed = lines
            .iter()
            .filter(|l| l.starts_with("cluster-relation-departed remote=simtest/2"))
            .count();
        assert_eq!(joined, departed, "{u}: {lines:?}");
        assert_eq!(
            sim.exec_ok(u, "relation-list -r cluster:0 --format=json")
                .matches("simtest/")
                .count(),
            1
        );
    }
    let gone = sim.hooks("simtest/2");
    assert_eq!(gone.last().unwrap(), "remove", "{gone:?}");
    assert!(
        !gone.contains(&"cluster-relation-joined".to_string()),
        "{gone:?}"
    );
}

#[test]
fn a_dying_unit_whose_stop_fails_stays_in_error_until_resolved_or_forced() {
    let sim = Sim::new();
    sim.deploy(3);
    // A workload on simtest/2 (as etcd would be), and a stop hook that fails
    // (as a removal refused for quorum does).
    sim.exec_ok(
        "simtest/2",
        "setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $! > \"$JUJUSIM_UNIT_ROOT/pid\"",
    );
    let pid = std::fs::read_to_string(sim.root("simtest/2").join("pid"))
        .unwrap()
        .trim()
        .to_string();
    sim.on("simtest/2", "stop", "exit 1\n");
    let out = sim.run(&["remove-unit", "simtest/2"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let unit = |st: &serde_json::Value| st["applications"]["simtest"]["units"]["simtest/2"].clone();
    let u = unit(&sim.status());
    assert_eq!(u["juju-status"]["current"], "error", "{u}");
    assert_eq!(u["life"], "dying", "{u}");
    assert!(alive(&pid), "the unit's workload runs on");
    assert_eq!(sim.hooks("simtest/2").last().unwrap(), "stop");

    // A second plain remove-unit changes nothing and names the way out.
    let again = sim.run(&["remove-unit", "simtest/2"]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("--force"),
        "{}",
        text(&again.stderr)
    );

    // resolve retries the failed stop: still failing, still in error.
    let out = sim.run(&["resolve", "simtest/2"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert_eq!(unit(&sim.status())["juju-status"]["current"], "error");

    // --force: Juju removes the dying unit whatever its agent is doing; no
    // further hook runs on it, and its machine (its processes) goes with it.
    let n = sim.hooks("simtest/2").len();
    sim.ok(&["remove-unit", "simtest/2", "--force"]);
    assert!(unit(&sim.status()).is_null(), "simtest/2 is gone");
    assert_eq!(sim.hooks("simtest/2").len(), n, "no hook ran on it");
    assert!(!alive(&pid), "its workload was stopped with its machine");
    for u in ["simtest/0", "simtest/1"] {
        assert_eq!(
            sim.exec_ok(u, "relation-list -r cluster:0 --format=json")
                .matches("simtest/")
                .count(),
            1,
            "{u}"
        );
    }
}

#[test]
fn removing_the_leader_elects_another() {
    let sim = Sim::new();
    sim.deploy(3);
    sim.ok(&["remove-unit", "simtest/0"]);
    let st = sim.status();
    assert_eq!(
        st["applications"]["simtest"]["units"]["simtest/1"]["leader"],
        true
    );
    assert_eq!(sim.hooks("simtest/1").last().unwrap(), "leader-elected");
    assert_eq!(sim.exec_ok("simtest/1", "is-leader"), "True\n");
    // Unit numbers are never reused.
    sim.ok(&["add-unit"]);
    assert!(sim.status()["applications"]["simtest"]["units"]
        .get("simtest/3")
        .is_some());
}

#[test]
fn elect_moves_leadership() {
    let sim = Sim::new();
    sim.deploy(2);
    sim.ok(&["elect", "simtest/1"]);
    assert_eq!(sim.hooks("simtest/1").last().unwrap(), "leader-elected");
    assert_eq!(
        sim.exec_ok("simtest/1", "is-leader --format=json"),
        "true\n"
    );
    assert_eq!(
        sim.exec_ok("simtest/0", "is-leader --format=json"),
        "false\n"
    );
    assert!(sim.ok(&["status"]).contains("simtest/1*"));
}

#[test]
fn refresh_runs_upgrade_then_config_then_leader_settings_then_start() {
    let sim = Sim::new();
    sim.deploy(2);
    // A new revision: the same charm with a marker file.
    let new = sim.path("simtest-v2");
    copy_dir(&charm(), &new);
    std::fs::write(new.join("VERSION"), "2\n").unwrap();
    let before: Vec<usize> = UNITS.iter().take(2).map(|u| sim.hooks(u).len()).collect();
    sim.ok(&["refresh", "--path", new.to_str().unwrap()]);
    assert_eq!(
        sim.hooks("simtest/0")[before[0]..],
        ["upgrade-charm", "config-changed", "start"]
    );
    let h1 = sim.hooks("simtest/1")[before[1]..].to_vec();
    assert_eq!(
        h1[..4],
        [
            "upgrade-charm",
            "config-changed",
            "leader-settings-changed",
            "start"
        ]
    );
    assert!(!h1.contains(&"install".to_string()));
    assert_eq!(
        std::fs::read_to_string(sim.unit_dir("simtest/1").join("charm/VERSION")).unwrap(),
        "2\n"
    );
    assert_eq!(sim.status()["applications"]["simtest"]["charm-rev"], 2);
}

#[test]
fn forced_refresh_out_of_error_skips_upgrade_charm_and_config_changed() {
    let sim = Sim::new();
    sim.deploy(2);
    // update-status fails on simtest/1 until the charm carries a fix.
    sim.on(
        "simtest/1",
        "update-status",
        "[ -f \"$JUJU_CHARM_DIR/FIXED\" ] || exit 1\n",
    );
    assert_eq!(
        sim.run(&["update-status", "simtest/1"]).status.code(),
        Some(2)
    );
    let fixed = sim.path("simtest-fixed");
    copy_dir(&charm(), &fixed);
    std::fs::write(fixed.join("FIXED"), "").unwrap();
    let refused = sim.run(&["refresh", "--path", fixed.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("--force-units"),
        "{}",
        text(&refused.stderr)
    );
    let n = sim.hooks("simtest/1").len();
    let m = sim.hooks("simtest/0").len();
    sim.ok(&[
        "refresh",
        "--path",
        fixed.to_str().unwrap(),
        "--force-units",
    ]);
    assert_eq!(
        sim.hooks("simtest/1")[n..],
        ["update-status", "leader-settings-changed", "start"]
    );
    assert_eq!(
        sim.hooks("simtest/0")[m..],
        ["upgrade-charm", "config-changed", "start"]
    );
}

#[test]
fn refresh_dry_run_changes_nothing_and_reports_each_unit() {
    let sim = Sim::new();
    sim.deploy(2);
    let new = sim.path("simtest-dry");
    copy_dir(&charm(), &new);
    // The new charm's dispatch answers the dry run itself.
    std::fs::write(
        new.join("dispatch"),
        "#!/bin/bash\necho \"dry $* on $JUJU_UNIT_NAME charm=$JUJU_CHARM_DIR dispatch=${JUJU_DISPATCH_PATH:-none}\"\n\
         relation-set -r cluster:0 dry=1; leader-set dry=1 2>/dev/null; status-set blocked dry\n\
         [ \"$JUJU_UNIT_NAME\" = simtest/1 ] && [ \"$3\" = strict ] && exit 4\nexit 0\n",
    )
    .unwrap();
    let n0 = sim.hook_log().len();
    let out = sim.ok(&[
        "refresh",
        "--path",
        new.to_str().unwrap(),
        "--dry-run",
        "--",
        "extra",
    ]);
    assert!(out.contains("=== simtest/0 (exit 0) ==="), "{out}");
    let model = std::fs::canonicalize(&sim.model).unwrap();
    let expect = format!(
        "dry upgrade-charm --dry-run extra on simtest/1 charm={} dispatch=none",
        model.join("units/simtest-1/charm").display()
    );
    assert!(out.contains(&expect), "{out}");
    // Nothing changed: no hooks, no data, no status, old charm in place.
    assert_eq!(sim.hook_log().len(), n0);
    assert_eq!(
        sim.exec_ok(
            "simtest/1",
            "relation-get -r cluster:0 --format=json - simtest/0"
        ),
        "{}\n"
    );
    assert_eq!(
        sim.exec_ok("simtest/1", "leader-get --format=json dry"),
        "null\n"
    );
    assert_eq!(
        sim.status()["applications"]["simtest"]["units"]["simtest/0"]["workload-status"]["current"],
        "active"
    );
    assert_eq!(sim.status()["applications"]["simtest"]["charm-rev"], 1);
    // A unit whose dry run fails makes the command fail.
    let bad = sim.run(&[
        "refresh",
        "--path",
        new.to_str().unwrap(),
        "--dry-run",
        "--",
        "strict",
    ]);
    assert!(!bad.status.success());
    assert!(
        text(&bad.stdout).contains("=== simtest/1 (exit 4) ==="),
        "{}",
        text(&bad.stdout)
    );
}

#[test]
fn reboot_runs_start_only_and_kills_the_units_processes() {
    let sim = Sim::new();
    sim.deploy(2);
    sim.exec_ok(
        "simtest/1",
        "setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $! > \"$JUJUSIM_UNIT_ROOT/pid\"",
    );
    sim.exec_ok(
        "simtest/0",
        "setsid sleep 300 >/dev/null 2>&1 < /dev/null & echo $! > \"$JUJUSIM_UNIT_ROOT/pid\"",
    );
    let pid = |u: &str| {
        std::fs::read_to_string(sim.root(u).join("pid"))
            .unwrap()
            .trim()
            .to_string()
    };
    let n = sim.hooks("simtest/1").len();
    sim.ok(&["reboot", "simtest/1"]);
    assert_eq!(sim.hooks("simtest/1")[n..], ["start"]);
    assert!(
        !alive(&pid("simtest/1")),
        "simtest/1's process survived the reboot"
    );
    assert!(
        alive(&pid("simtest/0")),
        "simtest/0's process died with another unit's machine"
    );
    sim.ok(&["destroy"]);
    assert!(!alive(&pid("simtest/0")));
}

#[test]
fn destroy_kills_a_background_process_the_charm_started() {
    let sim = Sim::new();
    sim.ok(&["deploy", charm().to_str().unwrap(), "-n", "2"]);
    // The charm starts a "workload" in start, detached like a daemon.
    sim.on(
        "simtest/0",
        "update-status",
        "nohup sleep 300 >/dev/null 2>&1 &\necho $! > \"$JUJUSIM_UNIT_ROOT/pid\"\n",
    );
    sim.ok(&["update-status"]);
    let pid = std::fs::read_to_string(sim.root("simtest/0").join("pid"))
        .unwrap()
        .trim()
        .to_string();
    assert!(alive(&pid));
    let out = sim.run(&["destroy"]);
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("1 processes stopped"),
        "{}",
        text(&out.stderr)
    );
    assert!(!alive(&pid), "workload {pid} survived destroy");
    assert_eq!(sim.status()["applications"], serde_json::json!({}));
}

#[test]
fn update_status_only_on_request() {
    let sim = Sim::new();
    sim.deploy(2);
    assert!(!sim
        .hooks("simtest/0")
        .contains(&"update-status".to_string()));
    sim.ok(&["update-status", "simtest/1"]);
    assert!(!sim
        .hooks("simtest/0")
        .contains(&"update-status".to_string()));
    assert_eq!(sim.hooks("simtest/1").last().unwrap(), "update-status");
    sim.ok(&["update-status"]);
    assert_eq!(sim.hooks("simtest/0").last().unwrap(), "update-status");
}

#[test]
fn actions_report_results_and_failures() {
    let sim = Sim::new();
    sim.deploy(1);
    let out = sim.ok(&[
        "run-action",
        "simtest/0",
        "echo",
        "message=hello there",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["results"]["echo"], "hello there");
    assert_eq!(v["results"]["nested"]["value"], "1");
    assert_eq!(v["log"][0], "echoing hello there");
    assert!(v["stdout"].as_str().unwrap().contains("stdout of echo"));
    // Defaults from actions.yaml.
    let v: serde_json::Value =
        serde_json::from_str(&sim.ok(&["run-action", "simtest/0", "echo", "--format=json"]))
            .unwrap();
    assert_eq!(v["results"]["echo"], "hi");
    let failed = sim.run(&["run-action", "simtest/0", "fail"]);
    assert_eq!(failed.status.code(), Some(1));
    assert!(
        text(&failed.stdout).contains("asked to fail"),
        "{}",
        text(&failed.stdout)
    );
    assert!(!sim
        .run(&["run-action", "simtest/0", "nosuch"])
        .status
        .success());
    assert!(
        !sim.run(&["run-action", "simtest/0", "run"])
            .status
            .success(),
        "required parameter"
    );
    // additionalProperties: false refuses unknown parameters.
    assert!(!sim
        .run(&["run-action", "simtest/0", "strict", "other=1"])
        .status
        .success());
    sim.ok(&["run-action", "simtest/0", "strict", "level=2"]);
    // An action that exits non-zero failed, with its output kept.
    let out = sim.run(&[
        "run-action",
        "simtest/0",
        "run",
        "cmd=echo ran $JUJU_ACTION_NAME; exit 5",
        "--format=json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(v["status"], "failed");
    assert_eq!(v["message"], "exit status 5");
    assert!(v["stdout"].as_str().unwrap().contains("ran run"), "{v}");
}

fn alive(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
                .to_string();
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}
