//! jujusim's hook tools: exact forms, leader-only writes, relation data
//! visibility, and errors (non-zero exit, message on stderr).

mod sim_support;
use serde_json::{json, Value};
use sim_support::{charm, text, Sim};

fn fails_with(out: &std::process::Output, needle: &str) {
    assert!(
        !out.status.success(),
        "expected failure, got success: {}",
        text(&out.stdout)
    );
    let err = text(&out.stderr);
    assert!(err.contains(needle), "stderr {err:?} lacks {needle:?}");
}

#[test]
fn leader_only_writes_fail_on_non_leaders() {
    let sim = Sim::new();
    sim.deploy(2);
    assert_eq!(
        sim.exec_ok("simtest/0", "is-leader --format=json"),
        "true\n"
    );
    assert_eq!(
        sim.exec_ok("simtest/1", "is-leader --format=json"),
        "false\n"
    );

    fails_with(&sim.exec("simtest/1", "leader-set a=1"), "not the leader");
    fails_with(
        &sim.exec("simtest/1", "relation-set -r cluster:0 --app a=1"),
        "not the leader",
    );
    fails_with(
        &sim.exec("simtest/1", "status-set --application active hi"),
        "not the leader",
    );

    sim.exec_ok("simtest/0", "leader-set a=1");
    sim.exec_ok("simtest/0", "relation-set -r cluster:0 --app a=2");
    sim.exec_ok("simtest/0", "status-set --application blocked 'app says'");
    assert_eq!(
        sim.exec_ok("simtest/1", "leader-get --format=json a"),
        "\"1\"\n"
    );
    assert_eq!(
        sim.exec_ok(
            "simtest/1",
            "relation-get --format=json -r cluster:0 --app - simtest"
        ),
        "{\"a\":\"2\"}\n"
    );
    let st = sim.status();
    assert_eq!(
        st["applications"]["simtest"]["application-status"]["current"],
        "blocked"
    );
    assert_eq!(
        st["applications"]["simtest"]["application-status"]["message"],
        "app says"
    );
    // A unit's own status is anyone's to set.
    sim.exec_ok("simtest/1", "status-set waiting 'not yet'");
    assert_eq!(
        sim.status()["applications"]["simtest"]["units"]["simtest/1"]["workload-status"]["message"],
        "not yet"
    );
}

#[test]
fn peer_relation_data_visibility_and_forms() {
    let sim = Sim::new();
    sim.deploy(3);
    assert_eq!(
        sim.exec_ok("simtest/1", "relation-ids cluster --format=json"),
        "[\"cluster:0\"]\n"
    );
    assert_eq!(
        sim.exec_ok("simtest/1", "relation-list -r cluster:0 --format=json"),
        "[\"simtest/0\",\"simtest/2\"]\n"
    );
    sim.exec_ok("simtest/1", "relation-set -r cluster:0 addr=x port=1");
    // Stdin YAML map plus k=v; an empty value deletes.
    sim.exec_ok(
        "simtest/1",
        "printf 'port: 2\\nname: \"n 1\"\\n' | relation-set -r cluster:0 --file - extra=y",
    );
    sim.exec_ok("simtest/1", "relation-set -r cluster:0 extra=");
    let own = sim.exec_ok(
        "simtest/1",
        "relation-get --format=json -r cluster:0 - simtest/1",
    );
    assert_eq!(
        serde_json::from_str::<Value>(&own).unwrap(),
        json!({"addr": "x", "port": "2", "name": "n 1"})
    );
    // Other units of the peer relation read it.
    let seen = sim.exec_ok(
        "simtest/2",
        "relation-get --format=json -r cluster:0 - simtest/1",
    );
    assert_eq!(
        serde_json::from_str::<Value>(&seen).unwrap(),
        json!({"addr": "x", "port": "2", "name": "n 1"})
    );
    assert_eq!(
        sim.exec_ok(
            "simtest/2",
            "relation-get --format=json -r cluster:0 port simtest/1"
        ),
        "\"2\"\n"
    );
    assert_eq!(
        sim.exec_ok("simtest/2", "relation-get -r cluster:0 port simtest/1"),
        "2\n"
    );
    // The peer app bag is readable by every unit, in every form.
    sim.exec_ok("simtest/0", "relation-set -r cluster:0 --app token=abc");
    for u in ["simtest/0", "simtest/1", "simtest/2"] {
        assert_eq!(
            sim.exec_ok(u, "relation-get --format=json -r cluster:0 --app - simtest"),
            "{\"token\":\"abc\"}\n"
        );
    }
    // A unit that is not in the model is not readable; a missing relation fails.
    fails_with(
        &sim.exec(
            "simtest/2",
            "relation-get --format=json -r cluster:0 - other/0",
        ),
        "not found",
    );
    fails_with(
        &sim.exec(
            "simtest/2",
            "relation-get --format=json -r cluster:9 - simtest/1",
        ),
        "relation not found",
    );
    fails_with(
        &sim.exec(
            "simtest/2",
            "relation-get --format=json -r db:0 - simtest/1",
        ),
        "relation not found",
    );
    fails_with(
        &sim.exec("simtest/2", "relation-get --format=json - simtest/1"),
        "no relation id",
    );
    fails_with(
        &sim.exec("simtest/2", "relation-set -r cluster:0 novalue"),
        "key=value",
    );
    fails_with(
        &sim.exec("simtest/2", "relation-list --bogus"),
        "not defined",
    );
    fails_with(
        &sim.exec("simtest/2", "status-set purple"),
        "invalid status",
    );
}

#[test]
fn changed_hooks_follow_databag_writes() {
    let sim = Sim::new();
    sim.deploy(3);
    let before: Vec<usize> = ["simtest/0", "simtest/1", "simtest/2"]
        .iter()
        .map(|u| sim.hook_lines(u).len())
        .collect();
    sim.exec_ok("simtest/1", "relation-set -r cluster:0 k=v");
    for (i, u) in ["simtest/0", "simtest/2"].iter().enumerate() {
        let new = sim.hook_lines(u)[before[i * 2]..].to_vec();
        assert_eq!(
            new,
            ["cluster-relation-changed remote=simtest/1 app=simtest rel=cluster:0 departing="],
            "{u}"
        );
    }
    assert_eq!(
        sim.hook_lines("simtest/1").len(),
        before[1],
        "the writer gets no changed"
    );
    // An app bag change: changed with no remote unit, on the other units.
    sim.exec_ok("simtest/0", "relation-set -r cluster:0 --app t=1");
    let new = sim.hook_lines("simtest/2")[before[2] + 1..].to_vec();
    assert_eq!(
        new,
        ["cluster-relation-changed remote= app=simtest rel=cluster:0 departing="]
    );
    // Writing the same value again changes nothing.
    let n = sim.hook_lines("simtest/2").len();
    sim.exec_ok("simtest/1", "relation-set -r cluster:0 k=v");
    assert_eq!(sim.hook_lines("simtest/2").len(), n);
}

#[test]
fn cross_application_relation_visibility() {
    let sim = Sim::new();
    let c = charm();
    sim.ok(&["deploy", c.to_str().unwrap(), "--name", "server", "-n", "2"]);
    sim.ok(&["deploy", c.to_str().unwrap(), "--name", "client"]);
    sim.ok(&["integrate", "server:db", "client:backend"]);
    let lines = sim.hook_lines("client/0");
    assert!(
        lines.contains(
            &"backend-relation-created remote= app=server rel=backend:2 departing=".into()
        ),
        "{lines:?}"
    );
    for remote in ["server/0", "server/1"] {
        let joined =
            format!("backend-relation-joined remote={remote} app=server rel=backend:2 departing=");
        let i = lines
            .iter()
            .position(|l| *l == joined)
            .unwrap_or_else(|| panic!("{lines:?}"));
        assert!(lines[i + 1..]
            .iter()
            .any(|l| l.starts_with(&format!("backend-relation-changed remote={remote}"))));
    }
    // Server units see only the client, never each other, in this relation.
    assert_eq!(
        sim.exec_ok("server/1", "relation-list -r db:2 --format=json"),
        "[\"client/0\"]\n"
    );
    assert_eq!(
        sim.exec_ok("server/1", "relation-list -r db:2 --app"),
        "client\n"
    );
    assert_eq!(
        sim.exec_ok("server/1", "relation-ids db --format=json"),
        "[\"db:2\"]\n"
    );

    sim.exec_ok("server/0", "relation-set -r db:2 --app endpoints=http://x");
    sim.exec_ok("client/0", "relation-set -r backend:2 --app want=db");
    sim.exec_ok("server/1", "relation-set -r db:2 mine=1");
    // The remote app's bag is readable by any unit.
    assert_eq!(
        sim.exec_ok(
            "client/0",
            "relation-get --format=json -r backend:2 --app - server"
        ),
        "{\"endpoints\":\"http://x\"}\n"
    );
    assert_eq!(
        sim.exec_ok(
            "server/1",
            "relation-get --format=json -r db:2 --app - client"
        ),
        "{\"want\":\"db\"}\n"
    );
    // Its own app's bag only by the leader.
    assert_eq!(
        sim.exec_ok(
            "server/0",
            "relation-get --format=json -r db:2 --app - server"
        ),
        "{\"endpoints\":\"http://x\"}\n"
    );
    fails_with(
        &sim.exec(
            "server/1",
            "relation-get --format=json -r db:2 --app - server",
        ),
        "permission denied",
    );
    // Remote units' bags, but not a same-app unit's.
    assert_eq!(
        sim.exec_ok(
            "client/0",
            "relation-get --format=json -r backend:2 - server/1"
        ),
        "{\"mine\":\"1\"}\n"
    );
    fails_with(
        &sim.exec("server/0", "relation-get --format=json -r db:2 - server/1"),
        "not found",
    );
    // Inside a relation hook, the defaults come from the hook's context.
    sim.on(
        "client/0",
        "backend-relation-changed",
        "relation-get - > \"$JUJUSIM_UNIT_ROOT/seen-${JUJU_REMOTE_UNIT/\\//-}\"\n",
    );
    sim.exec_ok("server/0", "relation-set -r db:2 hello=there");
    let content =
        std::fs::read_to_string(sim.root("client/0").join("seen-server-0")).unwrap_or_default();
    assert!(content.contains("hello: there"), "{content:?}");
}

#[test]
fn juju_4_has_no_leader_tools() {
    let sim = Sim::new();
    sim.ok(&[
        "deploy",
        charm().to_str().unwrap(),
        "-n",
        "2",
        "--juju-version",
        "4.0.0",
    ]);
    let out = sim.exec("simtest/0", "leader-get --format=json");
    assert!(!out.status.success());
    assert_eq!(sim.exec_ok("simtest/0", "echo $JUJU_VERSION"), "4.0.0\n");
    assert_eq!(
        sim.exec_ok("simtest/0", "command -v leader-set || echo absent"),
        "absent\n"
    );
    // The peer app bag takes leadership data's place.
    sim.exec_ok("simtest/0", "relation-set -r cluster:0 --app token=t");
    assert_eq!(
        sim.exec_ok("simtest/1", "relation-get -r cluster:0 --app token simtest"),
        "t\n"
    );
}

#[test]
fn misc_tools() {
    let sim = Sim::new();
    sim.deploy(1);
    sim.exec_ok("simtest/0", "application-version-set 1.2.3 && open-port 2379/tcp && open-port 8080 && close-port 8080/tcp");
    let st = sim.status();
    assert_eq!(st["applications"]["simtest"]["version"], "1.2.3");
    assert_eq!(
        st["applications"]["simtest"]["units"]["simtest/0"]["open-ports"],
        json!(["2379/tcp"])
    );
    assert!(sim.ok(&["status"]).contains("2379/tcp"));
    sim.exec_ok("simtest/0", "juju-log --log-level WARNING -- careful now");
    assert!(sim
        .ok(&["log", "--juju-log"])
        .contains("WARNING careful now"));
    sim.exec_ok("simtest/0", "state-set a=1 b=2 && state-delete b");
    assert_eq!(
        sim.exec_ok("simtest/0", "state-get --format=json"),
        "{\"a\":\"1\"}\n"
    );
    let goal: Value =
        serde_json::from_str(&sim.exec_ok("simtest/0", "goal-state --format=json")).unwrap();
    assert_eq!(goal["units"]["simtest/0"]["status"], "active");
    assert!(sim
        .ok(&["log", "--tool-calls"])
        .contains("state-set a=1 b=2"));
    fails_with(&sim.exec("simtest/0", "open-port 99999"), "invalid port");
    fails_with(
        &sim.exec("simtest/0", "action-get"),
        "not running an action",
    );
}

/// The forms the Python `ops` library (3.x, `ops/hookcmds`) passes: Go-style
/// booleans on switches (`--application=False`, status-get's lower-case
/// `--application=false`), `-r <endpoint>:<id>` after `--format=json`, and
/// `--` before a status message or log line.
#[test]
fn ops_library_forms() {
    let sim = Sim::new();
    sim.deploy(2);
    sim.exec_ok(
        "simtest/1",
        "status-set --application=False active -- 'unit says'",
    );
    fails_with(
        &sim.exec("simtest/1", "status-set --application=True active -- hi"),
        "not the leader",
    );
    sim.exec_ok(
        "simtest/0",
        "status-set --application=True blocked -- 'app says'",
    );
    let st = sim.status();
    let app = &st["applications"]["simtest"];
    assert_eq!(
        app["units"]["simtest/1"]["workload-status"]["current"],
        "active"
    );
    assert_eq!(
        app["units"]["simtest/1"]["workload-status"]["message"],
        "unit says"
    );
    assert_eq!(app["application-status"]["current"], "blocked");
    assert_eq!(app["application-status"]["message"], "app says");
    let unit: Value = serde_json::from_str(&sim.exec_ok(
        "simtest/1",
        "status-get --include-data --format=json --application=false",
    ))
    .unwrap();
    assert_eq!(unit["status"], "active");
    fails_with(
        &sim.exec("simtest/1", "status-set --application=maybe active"),
        "invalid boolean value",
    );
    assert_eq!(
        sim.exec_ok("simtest/1", "relation-list --format=json -r cluster:0"),
        "[\"simtest/0\"]\n"
    );
    sim.exec_ok(
        "simtest/1",
        "juju-log --log-level DEBUG -- '-starts with a dash'",
    );
    assert!(sim
        .ok(&["log", "--juju-log"])
        .contains("DEBUG -starts with a dash"));
}
