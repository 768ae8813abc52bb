//! Starting and stopping etcd. By default the etcd snap under systemd
//! (`snap.etcd.etcd`); with `ETCD_CHARM_SERVICE=direct` (no systemd: tests,
//! containers, the demo) the charm supervises etcd itself, doing what systemd
//! would: pid file, log file, restart on failure, SIGTERM then SIGKILL.
//!
//! # Layout
//! - this file — the backend-neutral [`Service`] and the restart policy both
//!   backends share.
//! - `snap`    — the commands (pure builders, unit-tested) the snap backend runs.
//! - `direct`  — the detached supervisor process and its pid and log files.
//!
//! # Environment
//! - `ETCD_CHARM_SERVICE`: `direct`, or `snap` (the default when unset).
//! - `ETCD_BIN`: the etcd binary of the direct backend (else `etcd` on PATH).
//! - `ETCD_CHARM_SUPERVISOR`: the program the direct backend runs as
//!   `<program> supervise` (default: the running binary itself). Tests point
//!   it at the built `etcd-charm`, since their own executable is a test harness.

use crate::paths::Paths;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod direct;
mod snap;

pub use direct::{etcd_pid_file, supervise};
pub use snap::{
    daemon_reload_cmd, journal_cmd, normalize_channel, one_line_tail, parse_snap_list,
    parse_unit_state, plan_snap, reset_failed_cmd, snap_install_cmd, snap_list_cmd,
    snap_refresh_cmd, systemctl_cmd, unit_state_cmd, SnapInfo, UnitState, SNAP_UNIT,
};

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

fn err(action: impl Into<String>, problem: impl Into<String>) -> ServiceError {
    ServiceError {
        action: action.into(),
        problem: problem.into(),
    }
}

/// How long stop waits after SIGTERM before SIGKILL. etcd's raft leader
/// first tries to hand leadership over, which can take ~7 s.
pub const STOP_GRACE: Duration = Duration::from_secs(15);

/// The restart policy both backends share (the snap drop-in is rendered
/// from it, the direct supervisor follows it); defined below `render` and
/// `service` so neither imports the other for it.
pub use crate::restart::{RestartPolicy, RESTART_POLICY};

/// Names the program the direct backend runs as `<program> supervise`.
pub const SUPERVISOR_ENV: &str = "ETCD_CHARM_SUPERVISOR";

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

/// The direct backend's etcd: `ETCD_BIN` when set and non-empty, else `etcd`
/// found on PATH, else plain `etcd` (which [`Service::install`] reports as
/// missing). For the `supervise` subcommand as much as for [`Service::from_env`].
pub fn etcd_bin_from_env() -> PathBuf {
    match std::env::var_os("ETCD_BIN") {
        Some(b) if !b.is_empty() => PathBuf::from(b),
        _ => find_on_path("etcd").unwrap_or_else(|| PathBuf::from("etcd")),
    }
}

/// The backend `ETCD_CHARM_SERVICE=<choice>` asks for; `etcd_bin` is only
/// consulted for `direct`.
fn backend_for(choice: Option<&str>, etcd_bin: impl FnOnce() -> PathBuf, channel: &str) -> Backend {
    match choice {
        Some("direct") => Backend::Direct {
            etcd_bin: etcd_bin(),
        },
        None | Some("") | Some("snap") => Backend::Snap {
            channel: channel.to_string(),
        },
        Some(other) => {
            tracing::warn!("ETCD_CHARM_SERVICE={other:?} is neither direct nor snap; using snap");
            Backend::Snap {
                channel: channel.to_string(),
            }
        }
    }
}

impl Service {
    /// Reads `ETCD_CHARM_SERVICE` (`direct` or unset/`snap`) and `ETCD_BIN`.
    /// Any other value is treated as `snap`, with a warning in the log.
    pub fn from_env(paths: Paths, channel: &str) -> Service {
        let choice = std::env::var("ETCD_CHARM_SERVICE").ok();
        let backend = backend_for(choice.as_deref(), etcd_bin_from_env, channel);
        Service { backend, paths }
    }

    /// Snap: `snap install etcd --channel <channel>` (refresh if the channel
    /// changed) and the drop-in. Direct: only checks the binary and its version.
    pub fn install(&self) -> Result<Installed> {
        match &self.backend {
            Backend::Snap { channel } => snap::install(&self.paths, channel),
            Backend::Direct { etcd_bin } => Ok(direct::install(etcd_bin)),
        }
    }

    /// The etcd version of the binary/snap we run, if it can be read.
    pub fn version(&self) -> Option<String> {
        match &self.backend {
            Backend::Snap { .. } => snap::version(),
            Backend::Direct { etcd_bin } => direct::version(etcd_bin).ok(),
        }
    }

    /// Starts etcd with `--config-file <paths.config_file()>`. Runs the start
    /// guard first (direct backend; systemd runs it as ExecStartPre).
    ///
    /// Snap: rewrites the drop-in if it changed, then `systemctl start`.
    /// Direct: a no-op when already running; otherwise spawns the supervisor
    /// and waits until etcd's process is up and has stayed up briefly (not
    /// until the cluster is healthy). If etcd or the supervisor dies in that
    /// time, everything is stopped again and the error carries the log tail.
    pub fn start(&self) -> Result<()> {
        match &self.backend {
            Backend::Snap { .. } => snap::start(&self.paths),
            Backend::Direct { etcd_bin } => direct::start(&self.paths, etcd_bin),
        }
    }

    /// SIGTERM, then SIGKILL after STOP_GRACE. Idempotent.
    pub fn stop(&self) -> Result<()> {
        self.stop_with_grace(STOP_GRACE)
    }

    /// [`Service::stop`] with another grace period (direct backend; the snap
    /// backend leaves the timing to systemd and ignores it).
    pub fn stop_with_grace(&self, grace: Duration) -> Result<()> {
        match &self.backend {
            Backend::Snap { .. } => snap::stop(),
            Backend::Direct { .. } => direct::stop(&self.paths, grace),
        }
    }

    pub fn restart(&self) -> Result<()> {
        match &self.backend {
            Backend::Snap { .. } => snap::restart(&self.paths),
            Backend::Direct { .. } => {
                self.stop()?;
                self.start()
            }
        }
    }

    /// Running right now. An etcd that exited 0 (a removed member does) is
    /// not active.
    pub fn is_active(&self) -> Result<bool> {
        match &self.backend {
            Backend::Snap { .. } => snap::is_active(),
            Backend::Direct { .. } => Ok(direct::is_active(&self.paths)),
        }
    }

    /// The tail of the workload's log (direct: the log file; snap: journalctl),
    /// for status messages and failed-start errors.
    pub fn log_tail(&self, lines: usize) -> String {
        match &self.backend {
            Backend::Snap { .. } => snap::log_tail(lines),
            Backend::Direct { .. } => direct::log_tail(&self.paths, lines),
        }
    }

    /// Snap: writes the drop-in if its content changed and then runs
    /// `systemctl daemon-reload`; true when it did. `install` and `start`
    /// call it, so a charm upgrade (which skips `install`) still converges.
    /// Direct: nothing to do, false.
    pub fn ensure_dropin(&self) -> Result<bool> {
        match &self.backend {
            Backend::Snap { .. } => snap::ensure_dropin(&self.paths),
            Backend::Direct { .. } => Ok(false),
        }
    }

    /// Snap: `snap connect etcd:removable-media` (idempotent), so the
    /// confined etcd can use its data dir on the volume at /media/etcd.
    /// Direct: nothing (not confined).
    pub fn connect_removable_media(&self) -> Result<()> {
        match &self.backend {
            Backend::Snap { .. } => snap::snap_connect_media_cmd().run().map(|_| ()),
            Backend::Direct { .. } => Ok(()),
        }
    }

    /// The drop-in this charm binary would write (snap backend only), so the
    /// plan and `ensure_dropin` never disagree about its text.
    pub fn desired_dropin(&self) -> Result<Option<String>> {
        match &self.backend {
            Backend::Snap { .. } => snap::desired_dropin(&self.paths).map(Some),
            Backend::Direct { .. } => Ok(None),
        }
    }

    /// Snap: removes the drop-in (for the `remove` hook: once the charm is
    /// gone its ExecStartPre would point at nothing). Direct: nothing.
    pub fn remove_dropin(&self) -> Result<()> {
        match &self.backend {
            Backend::Snap { .. } => snap::remove_dropin(&self.paths),
            Backend::Direct { .. } => Ok(()),
        }
    }

    /// Snap: the etcd row of `snap list` (version, revision, tracking), None
    /// when absent or unreadable. Direct: None.
    pub fn snap_info(&self) -> Option<SnapInfo> {
        match &self.backend {
            Backend::Snap { .. } => snap::snap_info().ok().flatten(),
            Backend::Direct { .. } => None,
        }
    }

    /// Snap: `snap refresh etcd --channel <channel>` (snapd copies SNAP_DATA
    /// and restarts the service). Direct: there is no snap to refresh.
    pub fn snap_refresh(&self, channel: &str) -> Result<()> {
        match &self.backend {
            Backend::Snap { .. } => snap::snap_refresh_cmd(channel).run().map(drop),
            Backend::Direct { .. } => Err(err(
                format!("snap refresh etcd --channel {channel}"),
                "the direct backend runs no snap (ETCD_CHARM_SERVICE=direct)",
            )),
        }
    }

    /// Snap: holds etcd's auto-refresh or sets snapd's timer. Direct: no snapd.
    pub fn set_snapd_refresh(&self, policy: &SnapdRefresh) -> Result<()> {
        match &self.backend {
            Backend::Snap { .. } => snap::set_snapd_refresh(policy),
            Backend::Direct { .. } => Ok(()),
        }
    }
}

/// `snapd_refresh`: snapd restarts etcd when it refreshes the snap, so by
/// default it may not; channel changes are how this charm upgrades etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapdRefresh {
    /// `max`: hold etcd's automatic refreshes.
    Hold,
    /// A snapd `refresh.timer`; etcd not held.
    Timer(String),
    /// `""`: snapd's own default timer, etcd not held.
    SnapdDefault,
}

/// A command as data, so the snap backend's calls can be checked by tests
/// without running them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    pub program: String,
    pub args: Vec<String>,
}

impl Cmd {
    pub fn new(program: &str, args: &[&str]) -> Cmd {
        Cmd {
            program: program.to_string(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    /// Runs it; Err only when it could not be run at all.
    fn output(&self) -> Result<std::process::Output> {
        std::process::Command::new(&self.program)
            .args(&self.args)
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| {
                err(
                    self.to_string(),
                    format!("could not run {}: {e}", self.program),
                )
            })
    }

    /// Runs it and returns its stdout; a non-zero exit is an Err naming the
    /// command, its status and its stderr.
    fn run(&self) -> Result<String> {
        let out = self.output()?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(err(self.to_string(), failure_text(&out)))
        }
    }
}

fn failure_text(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr = stderr.trim();
    if stderr.is_empty() {
        format!("{}", out.status)
    } else {
        format!("{}: {stderr}", out.status)
    }
}

impl std::fmt::Display for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.program)?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

pub(crate) use crate::durable::write_atomic;

/// `name` as PATH would find it: the first executable regular file.
pub(crate) fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Reads `etcd Version: 3.4.23` out of `etcd --version`.
pub fn parse_etcd_version(stdout: &str) -> Option<String> {
    stdout.lines().find_map(|l| {
        let v = l.trim().strip_prefix("etcd Version:")?.trim();
        (!v.is_empty()).then(|| v.to_string())
    })
}

/// Runs `cmd`'s child in a session of its own: it outlives the hook that
/// started it and no signal to the hook's process group reaches it.
pub fn detach(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_version_line() {
        let out = "etcd Version: 3.4.23\nGit SHA: Not provided\nGo Version: go1.19.8\n";
        assert_eq!(parse_etcd_version(out).as_deref(), Some("3.4.23"));
        assert_eq!(parse_etcd_version("etcdctl version: 3.4.23"), None);
        assert_eq!(parse_etcd_version(""), None);
    }

    #[test]
    fn backend_follows_etcd_charm_service() {
        let bin = || PathBuf::from("/opt/etcd");
        let snap = Backend::Snap {
            channel: "3.4/stable".into(),
        };
        assert_eq!(backend_for(None, bin, "3.4/stable"), snap);
        assert_eq!(backend_for(Some("snap"), bin, "3.4/stable"), snap);
        assert_eq!(backend_for(Some(""), bin, "3.4/stable"), snap);
        assert_eq!(backend_for(Some("systemd?"), bin, "3.4/stable"), snap);
        assert_eq!(
            backend_for(Some("direct"), bin, "3.4/stable"),
            Backend::Direct {
                etcd_bin: "/opt/etcd".into()
            }
        );
    }

    #[test]
    fn commands_display_as_typed() {
        assert_eq!(
            Cmd::new("systemctl", &["start", "x"]).to_string(),
            "systemctl start x"
        );
    }
}
