//! The maintenance agent on a 3-unit cluster of real etcd through jujusim
//! (direct backend: one agent process per unit beside its etcd): scheduled
//! snapshots appear, kept to retention with their sha256; agents that all
//! want to defragment at every check never do so at the same time (their
//! defrag intervals, from each agent's state, do not overlap); a NOSPACE
//! alarm from a tiny quota is cleared by the agents and writes work again.

mod charm_support;
use charm_support::*;
use etcd_charm::agent::state::{AgentState, DefragRecord};
use std::path::Path;
use std::time::{Duration, Instant};

fn agent_addr(m: &Model, unit: &str) -> String {
    format!("{}:9379", m.address(unit))
}

fn state(m: &Model, unit: &str) -> AgentState {
    etcd_charm::agent::http::get_state(&agent_addr(m, unit))
        .unwrap_or_else(|e| panic!("{unit}'s agent: {e}"))
}

/// Every pair of defrags by different agents is disjoint in time.
fn assert_no_overlap(all: &[(String, DefragRecord)]) -> u64 {
    let mut sorted: Vec<&(String, DefragRecord)> = all.iter().collect();
    sorted.sort_by_key(|(_, d)| d.start_ms);
    let mut min_gap = u64::MAX;
    for w in sorted.windows(2) {
        let ((ua, a), (ub, b)) = (w[0], w[1]);
        assert!(
            a.end_ms <= b.start_ms,
            "{ua} defragmented {}..{} while {ub} did {}..{}",
            a.start_ms,
            a.end_ms,
            b.start_ms,
            b.end_ms
        );
        min_gap = min_gap.min(b.start_ms - a.end_ms);
    }
    min_gap
}

fn sha256(path: &Path) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(std::fs::read(path).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn agents_snapshot_on_schedule_and_never_defrag_together() {
    let m = Model::new();
    m.deploy_with(
        3,
        &[
            "--config",
            "agent_check_interval=1s",
            "--config",
            "agent_snapshot_interval=3s",
            "--config",
            "agent_snapshot_retention=2",
        ],
    );
    for (u, s, msg) in m.workloads() {
        assert_eq!(s, "active", "{u}: {msg}");
        assert!(msg.starts_with("Healthy with 3 known peers"), "{u}: {msg}");
    }
    let units = m.units();
    // An operator's own file beside the agent's dir: never the agent's to remove.
    let theirs = m
        .root(&units[0])
        .join("var/snap/etcd/common/backups/etcd-snapshot-mine.db");
    std::fs::write(&theirs, b"an operator's snapshot").unwrap();
    // The keys go in first: with defrags at every check leadership moves
    // every second or so, and a put may then wait out etcdctl's timeout.
    put_keys(&m.endpoints(), "agent", 50);
    m.ok(&["config", "etcd", "agent_defrag_threshold=0"]);
    // Each agent wants a defrag at every check: they contend for the turn.
    // Snapshots go on past the retention count (issue 19.13: they paused
    // there for good), the oldest removed.
    wait_until(
        "3 defrags and 4 snapshots (twice the retention count) by every agent",
        Duration::from_secs(240),
        || {
            units.iter().all(|u| {
                let s = state(&m, u);
                s.defrags.iter().filter(|d| d.ok).count() >= 3 && s.snapshots_total >= 4
            })
        },
    );
    let mut all = Vec::new();
    for u in &units {
        let s = state(&m, u);
        assert!(s.problems.is_empty(), "{u}: {:?}", s.problems);
        for d in &s.defrags {
            all.push((u.clone(), d.clone()));
        }
    }
    let min_gap = assert_no_overlap(&all);
    let longest = all
        .iter()
        .map(|(_, d)| d.end_ms - d.start_ms)
        .max()
        .unwrap();
    let first = all.iter().map(|(_, d)| d.start_ms).min().unwrap();
    let last = all.iter().map(|(_, d)| d.end_ms).max().unwrap();
    eprintln!(
        "{} defrags by 3 agents over {} ms, none overlapping; longest defrag {longest} ms, smallest gap between two {min_gap} ms",
        all.len(),
        last - first
    );
    for u in &units {
        let metrics = etcd_charm::agent::http::get(&agent_addr(&m, u), "/metrics").unwrap();
        assert!(
            metrics.contains("etcd_charm_agent_snapshots_total{unit="),
            "{metrics}"
        );
    }
    m.ok(&["update-status"]);
    for (u, s, msg) in m.workloads() {
        assert_eq!(s, "active", "{u}: {msg}");
        assert!(!msg.contains("maintenance agent"), "{u}: {msg}");
    }
    // Turned off: every agent stops; etcd keeps running.
    m.ok(&["config", "etcd", "maintenance_agent=false"]);
    for u in &units {
        let got = etcd_charm::agent::http::get(&agent_addr(&m, u), "/state");
        assert!(got.is_err(), "{u}'s agent still answers");
    }
    // With the agents stopped: on every unit exactly the retention count of
    // scheduled snapshots, the newest, each a real snapshot with its sha256
    // beside it, root's alone (issue 19.1); the operator's file is still there.
    for u in &units {
        let dir = m.root(u).join("var/snap/etcd/common/backups/scheduled");
        assert_eq!(file_mode(&dir), 0o700, "{}", dir.display());
        let snaps: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "db"))
            .collect();
        assert_eq!(snaps.len(), 2, "{u}: {snaps:?}");
        let shas = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".sha256"))
            .count();
        assert_eq!(
            shas, 2,
            "{u}: a .sha256 beside each kept snapshot, no other"
        );
        for s in &snaps {
            assert_eq!(file_mode(s), 0o600, "{}", s.display());
            let sha = std::fs::read_to_string(format!("{}.sha256", s.display())).unwrap();
            assert_eq!(
                sha.split_whitespace().next(),
                Some(sha256(s).as_str()),
                "{s:?}"
            );
            let out = std::process::Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args(["snapshot", "status", "-w", "json"])
                .arg(s)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{s:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        eprintln!("{u}: {} scheduled snapshots kept", snaps.len());
    }
    assert!(theirs.exists(), "the operator's snapshot is kept");
    assert_keys(&m.endpoint(&units[0]), "agent", 50);
    m.assert_all_healthy(3);
}

/// Puts 64 KiB values under one key until etcd refuses.
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
fn the_agents_clear_a_nospace_alarm() {
    let m = Model::new();
    m.deploy_with(
        3,
        &[
            "--config",
            "quota_backend_bytes=4194304",
            "--config",
            "agent_check_interval=2s",
            "--config",
            "agent_snapshot_interval=0",
        ],
    );
    m.assert_all_healthy(3);
    let ep = m.endpoints();
    let n = fill_until_nospace(&ep);
    let raised = Instant::now();
    eprintln!("NOSPACE after {n} puts of 64 KiB with a 4 MiB quota");
    wait_until("writes work again", Duration::from_secs(180), || {
        etcdctl(&ep, &["put", "after", "nospace"]).status.success()
    });
    eprintln!("writes refused for {:?}", raised.elapsed());
    wait_until("no alarm left", Duration::from_secs(60), || {
        let out = etcdctl(&ep, &["alarm", "list"]);
        out.status.success() && out.stdout.is_empty()
    });
    let out = etcdctl(&ep, &["get", "after", "--print-value-only"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "nospace");
    let units = m.units();
    let addrs: Vec<String> = units.iter().map(|u| m.address(u)).collect();
    // The members NOSPACE mode left compacted but not defragmented (they
    // had room) are defragmented afterwards under the turn (threshold 50%).
    // A cluster in use keeps getting writes, and this one must too: bbolt
    // counts the pages a compaction freed as in use until a later write
    // transaction begins, so a follower whose compaction finished after
    // the last put showed ~20% free pages for ever (CI timed out here).
    let small = wait_for(Duration::from_secs(120), || {
        let _ = etcdctl(&ep, &["put", "heartbeat", "x"]);
        units.iter().all(|u| state(&m, u).db_size < 1 << 20)
    });
    if !small {
        let seen: Vec<String> = units
            .iter()
            .map(|u| {
                let s = state(&m, u);
                let log = m.root(u).join("var/log/etcd-charm/agent.log");
                let log = std::fs::read_to_string(&log).unwrap_or_else(|e| format!("{e}"));
                format!(
                    "{u}: db {} in use {} waiting {:?} problems {:?} errors {:?} defrags {:?}\n  agent.log ends:\n{}",
                    s.db_size,
                    s.db_size_in_use,
                    s.waiting,
                    s.problems,
                    s.errors,
                    s.defrags,
                    tail(&log, 40)
                )
            })
            .collect();
        panic!(
            "timed out after 120 s waiting for every db file small again:\n{}",
            seen.join("\n")
        );
    }
    eprintln!(
        "every db under 1 MiB {:?} after the alarm",
        raised.elapsed()
    );
    let mut recoveries = 0;
    let mut all = Vec::new();
    for u in &units {
        let s = state(&m, u);
        recoveries += s.nospace_recoveries;
        all.extend(s.defrags.iter().map(|d| (u.clone(), d.clone())));
        eprintln!("{u}: db {} bytes, defrags {:?}", s.db_size, s.defrags);
    }
    assert!(recoveries >= 1, "no agent says it cleared the alarm");
    assert!(!all.is_empty(), "no agent defragmented");
    assert_no_overlap(&all);
    m.ok(&["update-status"]);
    m.assert_all_healthy(3);
    // A removed unit's agent goes with it.
    let gone = units[2].clone();
    m.ok(&["remove-unit", &gone]);
    let got = etcd_charm::agent::http::get(&format!("{}:9379", addrs[2]), "/state");
    assert!(
        got.is_err(),
        "{gone}'s agent still answers after its removal"
    );
    m.assert_all_healthy(2);
}

/// A problem the agent reports reaches the status (the quiet update-status
/// and the full reconcile agree on it) and leaves it once fixed.
#[test]
fn a_failing_scheduled_snapshot_shows_in_the_status_until_it_works() {
    let m = Model::new();
    m.deploy_with(
        1,
        &[
            "--config",
            "agent_check_interval=1s",
            "--config",
            "agent_snapshot_interval=2s",
        ],
    );
    m.assert_all_healthy(1);
    let backups = m.root("etcd/0").join("var/snap/etcd/common/backups");
    std::fs::create_dir_all(&backups).unwrap();
    let blocker = backups.join("scheduled");
    let _ = std::fs::remove_dir_all(&blocker);
    // A file where the snapshot dir should be: every snapshot fails.
    std::fs::write(&blocker, "not a directory").unwrap();
    let note = "maintenance agent: scheduled snapshot failed";
    wait_until("the failure in the status", Duration::from_secs(60), || {
        m.ok(&["update-status"]);
        let (_, s, msg) = m.workloads().remove(0);
        s == "active" && msg.starts_with("Healthy with 1 known peer; ") && msg.contains(note)
    });
    eprintln!("status: {:?}", m.workloads()[0]);
    // Quiet now: the next update-status sets the same status.
    m.ok(&["update-status"]);
    assert!(m.workloads()[0].2.contains(note));
    std::fs::remove_file(&blocker).unwrap();
    wait_until("the status healthy again", Duration::from_secs(60), || {
        m.ok(&["update-status"]);
        m.workloads()[0].2 == "Healthy with 1 known peer"
    });
    assert!(state(&m, "etcd/0").snapshots_total >= 1);
}
