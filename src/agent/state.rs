//! What the agent did and sees, as its HTTP endpoint serves it: JSON at
//! `/` (and `/state`), Prometheus text at `/metrics`. Kept in memory only
//! (rule 3): after a restart the snapshots on disk still say when the last
//! one was taken.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How many defrags and snapshots the state remembers.
pub const HISTORY: usize = 50;

/// One defrag: when the turn (or the NOSPACE order) was ours, in unix
/// milliseconds. `end_ms` is taken before the turn is given back, so two
/// agents' intervals never overlap while the lock holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DefragRecord {
    pub start_ms: u64,
    pub end_ms: u64,
    pub reason: String,
    pub ok: bool,
    pub db_size_before: u64,
    pub db_size_after: u64,
    #[serde(default)]
    pub error: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    pub path: String,
    pub at_ms: u64,
    pub size: u64,
    pub sha256: String,
}

/// A binary's identity: `dev:inode` of the file (for `/proc/self/exe`, the
/// one the process was started from, even once it is deleted or replaced).
pub fn exe_id(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some(format!("{}:{}", m.dev(), m.ino()))
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentState {
    pub unit: String,
    /// The binary this agent runs (`dev:inode`, [`exe_id`]): the charm
    /// replaces an agent whose binary is no longer the charm's (a refresh).
    #[serde(default)]
    pub exe: String,
    pub started_ms: u64,
    pub checks: u64,
    pub last_check_ms: u64,
    pub member_id: String,
    pub db_size: u64,
    pub db_size_in_use: u64,
    pub alarms: Vec<String>,
    pub last_snapshot: Option<SnapshotRecord>,
    pub snapshots_total: u64,
    pub snapshot_failures: u64,
    pub snapshots_kept: usize,
    /// Scheduled snapshots uploaded to the s3-parameters bucket, failed
    /// uploads, and the last one's backup id.
    #[serde(default)]
    pub uploads_total: u64,
    #[serde(default)]
    pub upload_failures: u64,
    #[serde(default)]
    pub last_upload: Option<String>,
    pub last_defrag: Option<DefragRecord>,
    pub defrags: VecDeque<DefragRecord>,
    pub defrags_total: u64,
    pub defrag_failures: u64,
    pub nospace_recoveries: u64,
    /// What the last check waited for, if anything.
    pub waiting: Option<String>,
    /// Problems an operator should act on: each stays until what failed
    /// succeeds again.
    pub problems: Vec<String>,
    /// The last errors, newest last (bounded).
    pub errors: VecDeque<String>,
}

impl AgentState {
    pub fn record_defrag(&mut self, r: DefragRecord) {
        self.defrags_total += 1;
        if !r.ok {
            self.defrag_failures += 1;
        }
        self.defrags.push_back(r.clone());
        while self.defrags.len() > HISTORY {
            self.defrags.pop_front();
        }
        self.last_defrag = Some(r);
    }

    pub fn error(&mut self, e: String) {
        self.errors.push_back(e);
        while self.errors.len() > HISTORY {
            self.errors.pop_front();
        }
    }

    /// Prometheus text exposition (version 0.0.4).
    pub fn metrics(&self) -> String {
        let mut out = String::new();
        let mut gauge = |name: &str, help: &str, kind: &str, v: f64| {
            out.push_str(&format!(
                "# HELP etcd_charm_agent_{name} {help}\n# TYPE etcd_charm_agent_{name} {kind}\n"
            ));
            out.push_str(&format!(
                "etcd_charm_agent_{name}{{unit=\"{}\"}} {v}\n",
                self.unit
            ));
        };
        let secs = |ms: u64| ms as f64 / 1000.0;
        gauge("up", "The maintenance agent answers.", "gauge", 1.0);
        gauge(
            "checks_total",
            "Checks of the member.",
            "counter",
            self.checks as f64,
        );
        gauge(
            "db_size_bytes",
            "The member's db file.",
            "gauge",
            self.db_size as f64,
        );
        gauge(
            "db_size_in_use_bytes",
            "The part of the db file in use.",
            "gauge",
            self.db_size_in_use as f64,
        );
        gauge(
            "alarms",
            "Alarms raised in the cluster.",
            "gauge",
            self.alarms.len() as f64,
        );
        gauge(
            "snapshots_total",
            "Scheduled snapshots taken.",
            "counter",
            self.snapshots_total as f64,
        );
        gauge(
            "uploads_total",
            "Scheduled snapshots uploaded to the s3-parameters bucket.",
            "counter",
            self.uploads_total as f64,
        );
        gauge(
            "upload_failures_total",
            "Uploads to the s3-parameters bucket that failed.",
            "counter",
            self.upload_failures as f64,
        );
        gauge(
            "snapshot_failures_total",
            "Scheduled snapshots that failed.",
            "counter",
            self.snapshot_failures as f64,
        );
        gauge(
            "snapshots_kept",
            "Scheduled snapshots on disk.",
            "gauge",
            self.snapshots_kept as f64,
        );
        gauge(
            "last_snapshot_timestamp_seconds",
            "When the last scheduled snapshot was written.",
            "gauge",
            self.last_snapshot.as_ref().map_or(0.0, |s| secs(s.at_ms)),
        );
        gauge(
            "defrags_total",
            "Defragmentations.",
            "counter",
            self.defrags_total as f64,
        );
        gauge(
            "defrag_failures_total",
            "Defragmentations that failed.",
            "counter",
            self.defrag_failures as f64,
        );
        gauge(
            "last_defrag_timestamp_seconds",
            "When the last defragmentation ended.",
            "gauge",
            self.last_defrag.as_ref().map_or(0.0, |d| secs(d.end_ms)),
        );
        gauge(
            "nospace_recoveries_total",
            "NOSPACE alarms this agent cleared.",
            "counter",
            self.nospace_recoveries as f64,
        );
        gauge(
            "problems",
            "Problems reported.",
            "gauge",
            self.problems.len() as f64,
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_name_every_counter_once() {
        let mut s = AgentState {
            unit: "etcd/0".into(),
            ..Default::default()
        };
        s.record_defrag(DefragRecord {
            start_ms: 1000,
            end_ms: 3000,
            reason: "test".into(),
            ok: true,
            db_size_before: 10,
            db_size_after: 5,
            error: String::new(),
        });
        let m = s.metrics();
        assert!(m.contains("etcd_charm_agent_defrags_total{unit=\"etcd/0\"} 1\n"));
        assert!(m.contains("etcd_charm_agent_last_defrag_timestamp_seconds{unit=\"etcd/0\"} 3\n"));
        assert_eq!(m.matches("# TYPE etcd_charm_agent_up gauge").count(), 1);
        let json = serde_json::to_string(&s).unwrap();
        let back: AgentState = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn history_is_bounded() {
        let mut s = AgentState::default();
        for i in 0..(HISTORY as u64 + 5) {
            s.record_defrag(DefragRecord {
                start_ms: i,
                end_ms: i,
                reason: String::new(),
                ok: i % 2 == 0,
                db_size_before: 0,
                db_size_after: 0,
                error: String::new(),
            });
            s.error(format!("e{i}"));
        }
        assert_eq!(s.defrags.len(), HISTORY);
        assert_eq!(s.errors.len(), HISTORY);
        assert_eq!(s.defrags_total, HISTORY as u64 + 5);
    }
}
