//! Hook-tool calls per routine hook on a settled 3-unit cluster (real etcd
//! through jujusim). On a real controller each call is a round trip to the
//! unit agent, so the count is what a large model pays every five minutes:
//! update-status must stay at ≤ 4 calls on every unit, leader or not. The
//! shortcuts that keep it there must not make a hook miss what it is for:
//! a real config change, a removed unit and a new leader are still acted on.

mod charm_support;
use charm_support::*;
use serde_json::Value;
use std::collections::BTreeSet;

const UPDATE_STATUS_MAX: u64 = 4;

/// The hook log as JSON records.
fn hook_log(m: &Model) -> Vec<Value> {
    m.ok(&["log", "--format=json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn contexts(m: &Model) -> BTreeSet<String> {
    hook_log(m)
        .iter()
        .filter_map(|r| r["context"].as_str().map(String::from))
        .collect()
}

/// (unit, tool calls) of each `hook` run not among `before`, which all exited 0.
fn runs_since(m: &Model, before: &BTreeSet<String>, hook: &str) -> Vec<(String, u64)> {
    hook_log(m)
        .into_iter()
        .filter(|r| r["hook"] == hook && !before.contains(r["context"].as_str().unwrap_or("")))
        .map(|r| {
            assert_eq!(r["exit"], 0, "{hook} failed: {r}");
            (
                r["unit"].as_str().unwrap().to_string(),
                r["tool_calls"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The tools one hook run called, in order, for a readable failure.
fn tools_of(m: &Model, unit: &str, hook: &str) -> Vec<String> {
    let ctx = hook_log(m)
        .into_iter()
        .rev()
        .find(|r| r["hook"] == hook && r["unit"] == unit)
        .and_then(|r| r["context"].as_str().map(String::from))
        .unwrap_or_default();
    m.ok(&["log", "--tool-calls", "--format=json", "--unit", unit])
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["context"] == ctx.as_str())
        .map(|r| {
            let args: Vec<&str> = r["args"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
                .unwrap_or_default();
            format!("{} {}", r["tool"].as_str().unwrap_or(""), args.join(" "))
        })
        .collect()
}

/// "leader" or "non-leader" for a row of the table.
fn role(m: &Model, unit: &str) -> &'static str {
    if m.leader() == unit {
        "leader"
    } else {
        "non-leader"
    }
}

fn settled() -> Model {
    let m = Model::new();
    m.deploy(3);
    m.ok(&["settle"]);
    m.assert_all_healthy(3);
    // One round first: a hook right after the deploy may still see news.
    m.ok(&["update-status"]);
    m.ok(&["settle"]);
    m
}

#[test]
fn routine_hooks_on_a_settled_cluster_make_few_calls() {
    let m = settled();
    let mut table = Vec::new();

    // update-status, one unit at a time.
    let mut over = Vec::new();
    for u in m.units() {
        let before = contexts(&m);
        m.ok(&["update-status", &u]);
        let runs = runs_since(&m, &before, "update-status");
        assert_eq!(runs.len(), 1, "{runs:?}");
        let calls = runs[0].1;
        eprintln!("update-status {u} ({}): {calls} calls", role(&m, &u));
        table.push(("update-status", role(&m, &u), calls));
        if calls > UPDATE_STATUS_MAX {
            over.push(format!(
                "{u}: {calls} calls: {:#?}",
                tools_of(&m, &u, "update-status")
            ));
        }
    }
    assert!(
        over.is_empty(),
        "update-status over {UPDATE_STATUS_MAX} calls: {over:#?}"
    );
    m.assert_all_healthy(3);

    // A config-changed that changes nothing (an option set to its value).
    let before = contexts(&m);
    m.ok(&["config", "etcd", "snapshot_count=auto"]);
    m.ok(&["config", "etcd", "snapshot_count="]);
    m.ok(&["settle"]);
    for (u, calls) in runs_since(&m, &before, "config-changed") {
        eprintln!(
            "config-changed (no-op) {u} ({}): {calls} calls: {:?}",
            role(&m, &u),
            tools_of(&m, &u, "config-changed")
        );
        table.push(("config-changed, no-op", role(&m, &u), calls));
    }
    m.assert_all_healthy(3);

    // A peer relation-changed that changes nothing the charm uses: a key of
    // no meaning set in one unit's peer databag.
    let writer = m.units()[1].clone();
    let before = contexts(&m);
    m.ok(&[
        "exec",
        &writer,
        "--",
        "relation-set",
        "-r",
        "cluster:0",
        "perf-note=1",
    ]);
    m.ok(&["settle"]);
    let runs = runs_since(&m, &before, "cluster-relation-changed");
    assert!(!runs.is_empty(), "no peer relation-changed ran");
    for (u, calls) in runs {
        eprintln!(
            "cluster-relation-changed (no-op) {u} ({}): {calls} calls: {:?}",
            role(&m, &u),
            tools_of(&m, &u, "cluster-relation-changed")
        );
        table.push(("cluster-relation-changed, no-op", role(&m, &u), calls));
    }
    m.assert_all_healthy(3);

    eprintln!("\n| hook | unit role | calls |\n|---|---|---|");
    for (h, r, c) in &table {
        eprintln!("| {h} | {r} | {c} |");
    }
}

#[test]
fn the_shortcuts_still_act_on_config_removal_and_leadership() {
    let m = settled();
    put_keys(&m.endpoints(), "quiet", 10);

    // A real change: each unit's etcd.conf.yml takes it.
    m.ok(&["config", "etcd", "snapshot_count=5000"]);
    m.ok(&["settle"]);
    for u in m.units() {
        let conf = std::fs::read_to_string(m.root(&u).join("var/snap/etcd/common/etcd.conf.yml"))
            .unwrap_or_default();
        assert!(
            conf.contains("snapshot-count: 5000"),
            "{u} did not act on the config:\n{conf}"
        );
    }
    m.assert_all_healthy(3);

    // A new leader takes over and the cluster stays healthy.
    let old = m.leader();
    let next = m.units().into_iter().find(|u| *u != old).unwrap();
    m.ok(&["elect", &next]);
    m.ok(&["settle"]);
    assert_eq!(m.leader(), next);
    m.ok(&["update-status"]);
    m.assert_all_healthy(3);

    // A removed unit's member goes.
    let gone = m.units().into_iter().find(|u| *u != next).unwrap();
    m.ok(&["remove-unit", &gone]);
    m.ok(&["settle"]);
    m.ok(&["update-status"]);
    m.assert_all_healthy(2);
    let names: Vec<String> = members(&m.endpoints()).into_iter().map(|x| x.1).collect();
    assert!(
        !names.contains(&gone.replace('/', "")),
        "{gone}'s member is still there: {names:?}"
    );
    assert_eq!(names.len(), 2, "{names:?}");
    for u in m.units() {
        assert_keys(&m.endpoint(&u), "quiet", 10);
    }
}

#[test]
fn a_stray_member_is_still_removed_by_the_leaders_update_status() {
    let m = settled();
    let leader = m.leader();
    // A member no unit claims, added behind the charm's back (never
    // started); etcd refuses adds until every member has been up a while.
    wait_until(
        "etcd to take a member add",
        std::time::Duration::from_secs(60),
        || {
            etcdctl(
                &m.endpoint(&leader),
                &[
                    "member",
                    "add",
                    "stray",
                    "--learner",
                    "--peer-urls=http://127.0.0.1:29380",
                ],
            )
            .status
            .success()
        },
    );
    assert_eq!(members(&m.endpoint(&leader)).len(), 4);
    // A non-leader's update-status leaves it to the leader; the leader's removes it.
    for u in m.units().into_iter().filter(|u| *u != leader) {
        m.ok(&["update-status", &u]);
    }
    m.ok(&["update-status", &leader]);
    let names: Vec<String> = members(&m.endpoint(&leader))
        .into_iter()
        .map(|x| x.1)
        .collect();
    assert_eq!(names, ["etcd0", "etcd1", "etcd2"]);
    m.ok(&["update-status"]);
    m.assert_all_healthy(3);
}
