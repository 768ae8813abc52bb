//! Rolling restarts on real etcd through jujusim, whose units run their
//! hooks concurrently: `config` and `refresh` fire a hook on every unit at
//! about the same moment, and every unit's member must restart. Each test
//! runs a writer (tests/writer_support) and checks that the cluster never
//! had two members down at once, that no acknowledged write was lost, and
//! that every member came back as itself with every key.
//!
//! Each is held to writer_support's bounds (the longest write gap, failed
//! writes, writes inside the disturbance; never two members down), and so
//! is the raft leader killed under the writer.

mod upgrade_support;
mod writer_support;
use upgrade_support::*;
use writer_support::{Report, Writer};

use std::path::Path;
use std::time::{Duration, Instant};

const KEYS: usize = 20;
/// A generous sanity bound on the whole disturbance (2 shared cores).
const SANE: Duration = Duration::from_secs(300);

fn endpoints(m: &Model, units: &[String]) -> Vec<String> {
    units.iter().map(|u| m.endpoint(u)).collect()
}

fn etcd_pid(m: &Model, unit: &str) -> Option<String> {
    std::fs::read_to_string(m.root(unit).join("run/etcd-charm/etcd.etcd.pid"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// Runs update-status until every unit is active and healthy (bounded).
fn settle_healthy(m: &Model, n: usize) {
    let want = format!("Healthy with {n} known peers");
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let w = m.workloads();
        if w.len() == n && w.iter().all(|(_, s, msg)| s == "active" && *msg == want) {
            return;
        }
        assert!(Instant::now() < deadline, "units never all healthy: {w:?}");
        std::thread::sleep(Duration::from_secs(1));
        m.ok(&["update-status"]);
    }
}

fn conf(m: &Model, unit: &str) -> String {
    let p = etcd_charm::paths::Paths::new(m.root(unit));
    std::fs::read_to_string(p.config_file()).unwrap()
}

/// What every scenario must end with.
fn assert_rolled(r: &Report, what: &str, took: Duration) {
    r.assert_available(what, writer_support::ROLLING);
    assert!(took < SANE, "the rolling restart took {took:?}");
}

/// A 3-unit cluster of this charm, healthy, keys written; its units sorted.
fn three_units() -> (Model, Vec<String>) {
    let m = Model::new();
    m.deploy(3);
    m.assert_all_healthy(3);
    let mut units = m.units();
    units.sort();
    put_keys(&m.endpoints(), "before", KEYS);
    (m, units)
}

/// Disturbs a running 3-unit cluster with `disturb`, which must restart
/// every member; checks the outcome and returns the writer's report.
fn roll(m: &Model, units: &[String], what: &str, disturb: impl FnOnce()) -> Report {
    let ids = members(&m.endpoints());
    let pids: Vec<Option<String>> = units.iter().map(|u| etcd_pid(m, u)).collect();
    let mut w = Writer::start(&endpoints(m, units));
    std::thread::sleep(Duration::from_secs(2));
    let started = Instant::now();
    w.disturbance_begins();
    disturb();
    settle_healthy(m, 3);
    w.disturbance_ends();
    let took = started.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let r = w.finish(Duration::from_secs(60));
    eprintln!("{what}: settled in {:.1} s", took.as_secs_f64());
    for (u, before) in units.iter().zip(&pids) {
        assert_ne!(&etcd_pid(m, u), before, "{u}'s etcd was not restarted");
        assert_keys(&m.endpoint(u), "before", KEYS);
    }
    assert_eq!(members(&m.endpoints()), ids, "the same members, by ID");
    assert_rolled(&r, what, took);
    r
}

#[test]
fn a_config_change_on_three_units_restarts_one_member_at_a_time() {
    let (m, units) = three_units();
    roll(&m, &units, "config heartbeat/election on 3 units", || {
        m.ok(&[
            "config",
            "etcd",
            "heartbeat_interval=150",
            "election_timeout=1500",
        ]);
    });
    for u in &units {
        let c = conf(&m, u);
        assert!(c.contains("heartbeat-interval: 150"), "{u}: {c}");
        assert!(c.contains("election-timeout: 1500"), "{u}: {c}");
    }
}

/// A build of this charm whose config.yaml has other defaults for the raft
/// timings: a new charm revision that changes a default is the ordinary
/// way a refresh changes the rendered etcd.conf.yml (jujusim, like Juju,
/// takes defaults from the charm being refreshed to), so every member must
/// restart in upgrade-charm/config-changed.
fn charm_with_new_defaults(dest: &Path) {
    pack_charm(dest);
    let p = dest.join("config.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    let mut out = String::new();
    let mut option = String::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':')) {
            if !name.starts_with(' ') {
                option = name.to_string();
            }
        }
        let new = match (option.as_str(), line.trim()) {
            ("heartbeat_interval", "default: 100") => "    default: 120".to_string(),
            ("election_timeout", "default: 1000") => "    default: 1200".to_string(),
            _ => line.to_string(),
        };
        out.push_str(&new);
        out.push('\n');
    }
    assert!(
        out.contains("default: 120") && out.contains("default: 1200"),
        "config.yaml defaults not found:\n{text}"
    );
    std::fs::write(&p, out).unwrap();
}

#[test]
fn a_refresh_to_a_build_with_new_defaults_restarts_one_member_at_a_time() {
    let (m, units) = three_units();
    let new = tempfile::tempdir().unwrap();
    let charm = new.path().join("charm");
    charm_with_new_defaults(&charm);
    roll(
        &m,
        &units,
        "refresh to new raft defaults on 3 units",
        || {
            m.ok(&["refresh", "--path", charm.to_str().unwrap()]);
        },
    );
    for u in &units {
        let c = conf(&m, u);
        assert!(c.contains("heartbeat-interval: 120"), "{u}: {c}");
        assert!(c.contains("election-timeout: 1200"), "{u}: {c}");
    }
}

#[test]
fn a_legacy_cluster_refreshed_at_once_migrates_one_member_at_a_time() {
    let up = Upgrade::deploy(3, &[]);
    let legacy = bootstrap_legacy(&up, KEYS, true);
    up.start_old_etcd();
    let eps = endpoints(&up.m, &up.units);
    let ids = members(&eps.join(","));
    assert_eq!(ids.len(), 3);
    let mut w = Writer::start(&eps);
    std::thread::sleep(Duration::from_secs(2));
    let started = Instant::now();
    w.disturbance_begins();
    let out = up.refresh(&[]);
    assert!(
        out.status.success(),
        "refresh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    settle_healthy(&up.m, 3);
    w.disturbance_ends();
    let took = started.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    let r = w.finish(Duration::from_secs(60));
    eprintln!("legacy migration: settled in {:.1} s", took.as_secs_f64());
    for (unit, want) in &legacy.ids {
        let ep = up.m.endpoint(unit);
        assert_eq!(live_ids(&ep), *want, "{unit} runs its own member");
        assert_migrated(&up, unit, *want);
        assert_keys(&ep, "legacy", KEYS);
    }
    assert_eq!(members(&eps.join(",")), ids, "the same members, by ID");
    assert_rolled(&r, "legacy <name>.etcd migration on 3 units at once", took);
}

/// The raft leader's etcd killed (SIGKILL) under the writer: its supervisor
/// starts it again, the others elect a leader meanwhile. Not an operation
/// of the charm's but the failure every rolling step is measured against:
/// one election, bounded by etcd's election timeout.
#[test]
fn the_raft_leader_killed_under_a_writer_costs_one_election() {
    let (m, units) = three_units();
    let eps = endpoints(&m, &units);
    let status = |u: &str| {
        etcd_charm::etcd::block_on(etcd_charm::etcd::member_status(m.endpoint(u).as_str()))
            .unwrap_or_else(|e| panic!("{u}: {e}"))
    };
    let first = status(&units[0]);
    let leader = units
        .iter()
        .find(|u| status(u).member_id == first.leader)
        .expect("a raft leader among the units")
        .clone();
    let pid = etcd_pid(&m, &leader).expect("the leader's etcd pid");
    let mut w = Writer::start(&eps);
    std::thread::sleep(Duration::from_secs(2));
    w.disturbance_begins();
    let n: i32 = pid.parse().unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(n), nix::sys::signal::SIGKILL).unwrap();
    wait_until(
        "a new etcd on the old leader",
        Duration::from_secs(60),
        || etcd_pid(&m, &leader).is_some_and(|p| p != pid),
    );
    wait_until(
        "every member answering, under a leader",
        Duration::from_secs(60),
        || {
            units.iter().all(|u| {
                etcd_charm::etcd::block_on(etcd_charm::etcd::member_status(m.endpoint(u).as_str()))
                    .is_ok_and(|s| s.leader != 0)
            })
        },
    );
    // The disturbance includes the restarted member's first second back:
    // on a loaded machine the election can outlast its restart, and a
    // window that closes as the election ends holds no write to count.
    std::thread::sleep(Duration::from_secs(1));
    w.disturbance_ends();
    std::thread::sleep(Duration::from_secs(2));
    let r = w.finish(Duration::from_secs(60));
    r.assert_available(
        &format!("raft leader {leader} killed (SIGKILL; restarted by its supervisor)"),
        writer_support::LEADER_KILLED,
    );
    assert_ne!(status(&units[0]).leader, 0, "a leader again");
    for u in &units {
        assert_keys(&m.endpoint(u), "before", KEYS);
    }
}

/// The turn key's value, read from any member.
fn turn_holder(m: &Model) -> String {
    let out = etcdctl(
        &m.endpoints(),
        &["get", etcd_charm::rolling::TURN_KEY, "--print-value-only"],
    );
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_turn_left_by_a_killed_hook_is_taken_over_by_its_own_unit_next_hook() {
    let (m, units) = three_units();
    roll(
        &m,
        &units,
        "config change after a hook killed holding the turn",
        || {
            // The change is made but no hook runs yet (exit 3: stopped part-way).
            let out = m.run(&[
                "--max-hooks",
                "0",
                "config",
                "etcd",
                "heartbeat_interval=150",
                "election_timeout=1500",
            ]);
            assert_ne!(out.status.code(), Some(1), "{out:?}");
            // etcd/1's hook dies right after taking the turn: no release, no
            // keep-alive; the key stays for the lease's 30 s.
            let dispatch = m.charm.join("dispatch");
            let out = m.run(&[
                "--max-hooks",
                "0",
                "exec",
                "etcd/1",
                "--",
                "env",
                "ETCD_CHARM_FAILPOINT=after:take-turn",
                "JUJU_DISPATCH_PATH=hooks/config-changed",
                dispatch.to_str().unwrap(),
            ]);
            assert_eq!(out.status.code(), Some(137), "{out:?}");
            assert_eq!(turn_holder(&m), "etcd/1: a new etcd.conf.yml");
            // Every unit's config-changed now runs at once; etcd/1 takes its
            // own turn over (Juju runs one hook at a time per unit, so the
            // holder is dead), the others wait for it.
            m.ok(&["settle"]);
        },
    );
    assert_eq!(turn_holder(&m), "", "the turn was given back");
}

#[test]
fn a_turn_held_by_a_vanished_unit_makes_hooks_wait_then_lapses_with_its_lease() {
    let m = Model::new();
    m.deploy_with(3, &["--env", "ETCD_CHARM_TURN_WAIT=4"]);
    m.assert_all_healthy(3);
    let mut units = m.units();
    units.sort();
    put_keys(&m.endpoints(), "before", KEYS);
    roll(
        &m,
        &units,
        "config change while a vanished unit held the turn",
        || {
            // What a unit that vanished mid-turn leaves: the key under a 30 s
            // lease that nobody renews.
            let out = etcdctl(&m.endpoints(), &["lease", "grant", "30"]);
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            let lease = text
                .split_whitespace()
                .nth(1)
                .unwrap_or_else(|| panic!("lease grant: {text}"))
                .to_string();
            let put = etcdctl(
                &m.endpoints(),
                &[
                    "put",
                    &format!("--lease={lease}"),
                    etcd_charm::rolling::TURN_KEY,
                    "etcd/9: a new etcd.conf.yml",
                ],
            );
            assert!(put.status.success(), "{put:?}");
            m.ok(&[
                "config",
                "etcd",
                "heartbeat_interval=150",
                "election_timeout=1500",
            ]);
            // The wait (4 s here) ran out on every unit: each says who holds
            // the turn, and nothing was written or restarted.
            for (u, s, msg) in m.workloads() {
                assert_eq!(
                (s.as_str(), msg.as_str()),
                (
                    "waiting",
                    "Waiting for a rolling turn to restart etcd (a new etcd.conf.yml; held by etcd/9)"
                ),
                "{u}"
            );
                assert!(conf(&m, &u).contains("heartbeat-interval: 100"), "{u}");
            }
            // roll() now runs update-status until all are healthy: the hooks
            // retry, and once the lease lapses the members restart in turn.
        },
    );
    for u in &units {
        assert!(conf(&m, u).contains("heartbeat-interval: 150"), "{u}");
    }
}

/// Issue 19.5: `port` changed while a member is down. The two live members
/// may not restart (a turn needs every other voter healthy), and neither
/// may the hooks after the change, which find nothing at the new client
/// URL yet (the members still run with the old one): unknown means wait,
/// never an unguarded restart. Once the member is back, all three move to
/// the new port.
#[test]
fn a_port_change_while_a_member_is_down_waits_for_it_then_rolls() {
    let m = Model::new();
    m.deploy_with(3, &["--env", "ETCD_CHARM_TURN_WAIT=3"]);
    m.assert_all_healthy(3);
    let mut units = m.units();
    units.sort();
    let live = units[..2].to_vec();
    let old = endpoints(&m, &live).join(",");
    let held = m.hold_down(&units[2]);
    let pids: Vec<Option<String>> = live.iter().map(|u| etcd_pid(&m, u)).collect();
    m.ok_or_in_error(&["config", "etcd", "port=2479"]);
    for _ in 0..2 {
        m.ok_or_in_error(&["update-status"]);
    }
    for (u, pid) in live.iter().zip(&pids) {
        assert_eq!(
            &etcd_pid(&m, u),
            pid,
            "{u}'s etcd was restarted while {} was down",
            units[2]
        );
        assert!(
            conf(&m, u).contains(":2379"),
            "{u}: the new port was written without a turn"
        );
    }
    assert_eq!(
        puts_ok(&old, "port", 10),
        10,
        "the live members keep quorum"
    );
    for (u, s, msg) in m.workloads() {
        if live.contains(&u) {
            assert_eq!(s, "waiting", "{u}: {msg}");
            assert!(msg.contains("rolling turn"), "{u}: {msg}");
        }
    }
    // It comes back on the new port: it was down, so nothing waited.
    m.bring_back_on(held, 2479);
    settle_healthy(&m, 3);
    let new: Vec<String> = units
        .iter()
        .map(|u| format!("http://{}:2479", m.address(u)))
        .collect();
    for u in &units {
        assert!(conf(&m, u).contains(":2479"), "{u}: {}", conf(&m, u));
    }
    assert_eq!(members(&new.join(",")).len(), 3);
    let got = etcdctl(&new[0], &["get", "--prefix", "port/", "--keys-only"]);
    let keys = String::from_utf8_lossy(&got.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .count();
    assert_eq!(keys, 10, "the writes made while etcd/2 was down");
}

/// `run-action` on `unit`: (completed?, the whole answer).
fn run_action(m: &Model, unit: &str, name: &str, params: &[&str]) -> (bool, serde_json::Value) {
    let mut args = vec!["run-action", unit, name, "--format", "json"];
    args.extend_from_slice(params);
    let out = m.run(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text} {out:?}"));
    (v["status"] == "completed", v)
}

/// Issue 19.10: no turn can be had (members down), so every hook waits and
/// gives up; the `restart` action applies the pending config to one unit
/// on purpose. It refuses a restart that would take the cluster below
/// quorum; with quorum already lost it costs nothing and goes ahead.
#[test]
fn the_restart_action_applies_a_change_no_turn_can_be_had_for() {
    let m = Model::new();
    m.deploy_with(3, &["--env", "ETCD_CHARM_TURN_WAIT=3"]);
    m.assert_all_healthy(3);
    let mut units = m.units();
    units.sort();
    let down2 = m.hold_down(&units[2]);
    m.ok_or_in_error(&[
        "config",
        "etcd",
        "heartbeat_interval=150",
        "election_timeout=1500",
    ]);
    for u in &units[..2] {
        assert!(conf(&m, u).contains("heartbeat-interval: 100"), "{u}");
    }
    // 2 of 3 up: restarting etcd/1 would leave 1, below quorum. Refused.
    let pid1 = etcd_pid(&m, &units[1]);
    let (done, v) = run_action(&m, &units[1], "restart", &[]);
    assert!(!done, "{v}");
    let msg = v["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("below the quorum of 2") && msg.contains("force=true"),
        "{v}"
    );
    assert_eq!(
        etcd_pid(&m, &units[1]),
        pid1,
        "a refused restart changed nothing"
    );
    assert!(conf(&m, &units[1]).contains("heartbeat-interval: 100"));
    // Quorum lost (etcd/1 down too): the restart costs nothing more.
    let down1 = m.hold_down(&units[1]);
    let pid0 = etcd_pid(&m, &units[0]);
    let (done, v) = run_action(&m, &units[0], "restart", &[]);
    assert!(done, "{v}");
    let steps = v["results"]["steps"].as_str().unwrap_or_default();
    assert!(
        steps.contains("write etcd.conf.yml") && steps.contains("restart etcd"),
        "{v}"
    );
    assert!(!steps.contains("rolling turn"), "{v}");
    assert_ne!(etcd_pid(&m, &units[0]), pid0, "etcd/0 was not restarted");
    assert!(conf(&m, &units[0]).contains("heartbeat-interval: 150"));
    m.bring_back(down1);
    m.bring_back(down2);
    settle_healthy(&m, 3);
    for u in &units {
        assert!(conf(&m, u).contains("heartbeat-interval: 150"), "{u}");
    }
}

/// The monitor's overlap count (writer_support), checked once here: two
/// members' down intervals that overlap are two down at once, touching
/// ones are not, and one still open at the end runs to the end.
#[test]
fn the_writers_monitor_counts_overlapping_down_intervals() {
    use writer_support::{most_down_at_once, Polled};
    let ms = Duration::from_millis;
    let eps = vec!["a".to_string(), "b".to_string()];
    let p = |v: Vec<(u64, Option<u64>)>| Polled {
        down: v.into_iter().map(|(a, b)| (ms(a), b.map(ms))).collect(),
        ..Default::default()
    };
    let apart = [p(vec![(100, Some(600))]), p(vec![(600, Some(900))])];
    assert_eq!(most_down_at_once(&eps, &apart, ms(2000)).0, 1);
    let overlap = [p(vec![(100, Some(650))]), p(vec![(600, Some(900))])];
    let (n, at) = most_down_at_once(&eps, &overlap, ms(2000));
    assert_eq!(n, 2);
    assert_eq!(at.unwrap().0, ms(600));
    let open = [p(vec![(100, None)]), p(vec![(1500, Some(1600))])];
    assert_eq!(
        most_down_at_once(&eps, &open, ms(2000)).0,
        2,
        "still down at the end"
    );
}
