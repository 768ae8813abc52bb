//! Starting and stopping etcd. By default the etcd snap under systemd
//! (`snap.etcd.etcd`); with `ETCD_CHARM_SERVICE=direct` (no systemd: tests,
//! containers, the demo) the charm supervises etcd itself, doing what systemd
//! would: pid file, log file, restart on failure, SIGTERM then SIGKILL.
//!
//! HELPER TASK (render/service helper): implement; keep signatures.

use crate::paths::Paths;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug)]
pub struct ServiceError {
    /// What we tried: "start", "stop", "snap install etcd", ...
    pub action: String,
    pub problem: String,
}

impl std::fmt::Display for ServiceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.action, self.problem)
    }
}
impl std::error::Error for ServiceError {}

pub type Result<T> = std::result::Result<T, ServiceError>;

/// How long stop waits after SIGTERM before SIGKILL. etcd's raft leader
/// first tries to hand leadership over, which can take ~7 s.
pub const STOP_GRACE: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// The etcd snap, `snap.etcd.etcd` under systemd, with our drop-in.
    Snap { channel: String },
    /// etcd run by us: the binary from `ETCD_BIN`, else `etcd` on PATH.
    Direct { etcd_bin: PathBuf },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// The etcd version (e.g. "3.4.23").
    Ready { version: String },
    /// Why etcd cannot be run (binary missing, version unreadable, ...).
    Missing { reason: String },
}

#[derive(Debug, Clone)]
pub struct Service {
    pub backend: Backend,
    pub paths: Paths,
}

impl Service {
    /// Reads `ETCD_CHARM_SERVICE` (`direct` or unset/`snap`) and `ETCD_BIN`.
    pub fn from_env(paths: Paths, channel: &str) -> Service {
        let _ = (paths, channel);
        todo!()
    }

    /// Snap: `snap install etcd --channel <channel>` (refresh if the channel
    /// changed) and the drop-in. Direct: only checks the binary and its version.
    pub fn install(&self) -> Result<Installed> { todo!() }

    /// The etcd version of the binary/snap we run, if it can be read.
    pub fn version(&self) -> Option<String> { todo!() }

    /// Starts etcd with `--config-file <paths.config_file()>`. Runs the start
    /// guard first (direct backend; systemd runs it as ExecStartPre).
    pub fn start(&self) -> Result<()> { todo!() }

    /// SIGTERM, then SIGKILL after STOP_GRACE. Idempotent.
    pub fn stop(&self) -> Result<()> { todo!() }

    pub fn restart(&self) -> Result<()> { todo!() }

    /// Running right now. An etcd that exited 0 (a removed member does) is
    /// not active.
    pub fn is_active(&self) -> Result<bool> { todo!() }

    /// The tail of the workload's log (direct: the log file; snap: journalctl),
    /// for status messages and failed-start errors.
    pub fn log_tail(&self, lines: usize) -> String { let _ = lines; todo!() }
}
