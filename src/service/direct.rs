//! The direct backend: etcd supervised by the charm itself, for machines
//! without systemd (tests, containers, the demo).
//!
//! `start` spawns `<charm binary> supervise` in a session of its own,
//! detached from the hook's stdio, and returns once etcd's process is up; the
//! hook can then exit while the supervisor lives on. The supervisor does what
//! systemd does for the snap: runs the start guard, restarts etcd after a
//! failure per [`RESTART_POLICY`](super::RESTART_POLICY), leaves it down after
//! a clean exit (a removed member exits 0), and on SIGTERM passes the signal
//! to etcd and waits for it.
//!
//! Bookkeeping, like systemd's (not membership state):
//! - `direct_pid_file()`: the supervisor's pid, written by the supervisor;
//! - [`etcd_pid_file`]: the running etcd's pid, kept until the next start so
//!   a watcher can tell "exited" from "not started yet";
//! - `direct_log_file()`: etcd's stdout and stderr, with the supervisor's
//!   own lines (prefixed `etcd-charm`) in between.
//!
//! A pid file is trusted only while its process is alive, not a zombie, and
//! looks like ours in /proc (`supervise` with our `ETCD_CHARM_ROOT`; etcd with
//! our `--config-file`), so stale files and reused pids are harmless.

use super::{
    err, find_on_path, is_executable, parse_etcd_version, write_atomic, Installed, Result,
    RESTART_POLICY, STOP_GRACE, SUPERVISOR_ENV,
};
use crate::paths::Paths;
use log::{append_log, open_log, rotate_log};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use pidfiles::{
    alive, all_gone, is_our_etcd, is_supervisor, live_etcd, live_supervisor, read_pid,
    remove_pid_files, send, wait_until,
};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
pub use supervisor::supervise;

mod log;
mod pidfiles;
mod supervisor;

/// How long `start` waits for etcd's process to appear.
const START_WAIT: Duration = Duration::from_secs(10);
/// How long etcd must stay up before `start` calls it started: a bad config
/// or a taken port makes etcd exit within milliseconds.
const START_SETTLE: Duration = Duration::from_millis(500);
/// How long `stop` waits for processes to vanish after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);
const POLL: Duration = Duration::from_millis(25);
/// `start` moves a log bigger than this to `<log>.1`.
const LOG_ROTATE_BYTES: u64 = 16 << 20;

/// The running etcd's pid file, beside the supervisor's.
pub fn etcd_pid_file(paths: &Paths) -> PathBuf {
    paths.direct_pid_file().with_extension("etcd.pid")
}

/// One direct service's files, under its root made absolute (the supervisor
/// runs in `/` and the pid checks compare absolute paths).
struct Files {
    root: PathBuf,
    supervisor_pid: PathBuf,
    etcd_pid: PathBuf,
    log: PathBuf,
    config: PathBuf,
}

impl Files {
    fn new(paths: &Paths) -> Files {
        let root = std::path::absolute(paths.root()).unwrap_or_else(|_| paths.root().to_path_buf());
        let p = Paths::new(&root);
        Files {
            supervisor_pid: p.direct_pid_file(),
            etcd_pid: etcd_pid_file(&p),
            log: p.direct_log_file(),
            config: p.config_file(),
            root,
        }
    }
}

// ---------------------------------------------------------------- the hook side

pub(super) fn install(etcd_bin: &Path) -> Installed {
    match version(etcd_bin) {
        Ok(version) => Installed::Ready { version },
        Err(reason) => Installed::Missing { reason },
    }
}

pub(super) fn version(etcd_bin: &Path) -> std::result::Result<String, String> {
    let bin = resolve(etcd_bin).ok_or_else(|| {
        format!(
            "etcd binary {} not found (set ETCD_BIN or put etcd on PATH)",
            etcd_bin.display()
        )
    })?;
    let out = Command::new(&bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run {} --version: {e}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match parse_etcd_version(&stdout) {
        Some(v) if out.status.success() => Ok(v),
        _ => Err(format!(
            "{} --version ({}) printed no version: {}",
            bin.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

/// A binary named with a slash is taken as is (made absolute); a bare name
/// is looked up on PATH.
fn resolve(bin: &Path) -> Option<PathBuf> {
    if bin.as_os_str().as_bytes().contains(&b'/') {
        let abs = std::path::absolute(bin).ok()?;
        is_executable(&abs).then_some(abs)
    } else {
        find_on_path(bin.to_str()?)
    }
}

pub(super) fn start(paths: &Paths, etcd_bin: &Path) -> Result<()> {
    let files = Files::new(paths);
    if let Some(sup) = live_supervisor(&files) {
        return wait_running(&files, sup).map_err(|problem| failed_start(paths, problem));
    }
    // Nothing supervised: clear what a crash may have left behind (an
    // orphaned etcd holding the ports, stale pid files).
    stop(paths, STOP_GRACE)?;
    crate::layout::start_guard(paths).map_err(|m| {
        err(
            "start",
            format!("the start guard refused to start etcd: {m}"),
        )
    })?;
    let etcd_bin = resolve(etcd_bin).ok_or_else(|| {
        err(
            "start",
            format!("etcd binary {} not found", etcd_bin.display()),
        )
    })?;
    if !files.config.is_file() {
        return Err(err(
            "start",
            format!("{} does not exist", files.config.display()),
        ));
    }
    let program = match std::env::var_os(SUPERVISOR_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => std::env::current_exe()
            .map_err(|e| err("start", format!("finding the charm binary: {e}")))?,
    };
    rotate_log(&files.log);
    let log = open_log(&files.log)
        .map_err(|e| err("start", format!("opening {}: {e}", files.log.display())))?;
    append_log(
        &log,
        "start",
        &format!("starting {} supervise", program.display()),
    );
    let (out, errs) = match (log.try_clone(), log.try_clone()) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return Err(err("start", format!("log file: {e}"))),
    };
    let mut cmd = Command::new(&program);
    cmd.arg("supervise")
        .env("ETCD_CHARM_ROOT", &files.root)
        .env("ETCD_BIN", &etcd_bin)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(errs)
        .current_dir("/");
    super::detach(&mut cmd);
    let mut child = cmd.spawn().map_err(|e| {
        err(
            "start",
            format!("could not run {} supervise: {e}", program.display()),
        )
    })?;
    let outcome = wait_first_start(&files, &mut child);
    if outcome.is_err() {
        let _ = stop(paths, STOP_GRACE);
    }
    // Reap the supervisor if it exits while we still run (a test process; a
    // hook exits first and the supervisor is re-parented).
    std::thread::spawn(move || child.wait());
    outcome.map_err(|problem| failed_start(paths, problem))
}

fn failed_start(paths: &Paths, problem: String) -> crate::service::ServiceError {
    let tail = log_tail(paths, 20);
    err(
        "start",
        format!(
            "{problem}; end of {}:\n{}",
            paths.direct_log_file().display(),
            tail.trim_end()
        ),
    )
}

/// Until etcd is up under the supervisor we just spawned and has stayed up
/// for START_SETTLE.
fn wait_first_start(files: &Files, child: &mut Child) -> std::result::Result<(), String> {
    let deadline = Instant::now() + START_WAIT;
    let sup = child.id() as i32;
    let mut up: Option<(i32, Instant)> = None;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "the supervisor exited ({status}) before etcd was up"
            ));
        }
        if let Some(pid) = read_pid(&files.etcd_pid) {
            if !is_our_etcd(pid, files, Some(sup)) {
                return Err(format!("etcd (pid {pid}) exited at once"));
            }
            let (first, since) = *up.get_or_insert((pid, Instant::now()));
            if first != pid {
                return Err(format!("etcd (pid {first}) exited at once"));
            }
            if since.elapsed() >= START_SETTLE {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            return Err(format!("etcd was not up within {}s", START_WAIT.as_secs()));
        }
        std::thread::sleep(POLL);
    }
}

/// A supervisor already runs: wait until its etcd is up (it may be between
/// restarts).
fn wait_running(files: &Files, sup: i32) -> std::result::Result<(), String> {
    let deadline = Instant::now() + START_WAIT;
    loop {
        if live_etcd(files, Some(sup)).is_some() {
            return Ok(());
        }
        if !is_supervisor(sup, files) {
            return Err(format!("the supervisor (pid {sup}) exited"));
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the supervisor (pid {sup}) runs but etcd was not up within {}s",
                START_WAIT.as_secs()
            ));
        }
        std::thread::sleep(POLL);
    }
}

/// SIGTERM to the supervisor (which passes it on and waits for etcd), or to
/// an orphaned etcd; SIGKILL to both, and to the supervisor's process group,
/// after `grace`. Idempotent.
pub(super) fn stop(paths: &Paths, grace: Duration) -> Result<()> {
    let files = Files::new(paths);
    let sup = live_supervisor(&files);
    let etcd = live_etcd(&files, None);
    match (sup, etcd) {
        (Some(s), _) => send(s, Signal::SIGTERM),
        (None, Some(e)) => send(e, Signal::SIGTERM),
        (None, None) => {
            remove_pid_files(&files);
            return Ok(());
        }
    }
    // Identities are checked once, here and when a new etcd pid shows up;
    // after that a pid is waited on until it is gone or a zombie. (A dying
    // process loses its cmdline before it closes its sockets, so checking
    // identity again would call it gone too early.)
    let mut tracked: Vec<i32> = sup.into_iter().chain(etcd).collect();
    if !wait_until(grace, || all_gone(&files, &mut tracked)) {
        if let Some(s) = sup.filter(|&s| alive(s)) {
            // Its session is its process group: that reaches an etcd it
            // spawned but had no time to record.
            let _ = signal::killpg(Pid::from_raw(s), Signal::SIGKILL);
        }
        for &pid in &tracked {
            send(pid, Signal::SIGKILL);
        }
        if !wait_until(KILL_WAIT, || all_gone(&files, &mut tracked)) {
            return Err(err(
                "stop",
                format!("still running after SIGKILL: pids {tracked:?}"),
            ));
        }
        if let Ok(log) = open_log(&files.log) {
            append_log(
                &log,
                "stop",
                &format!("killed after {}s", grace.as_secs_f32()),
            );
        }
    }
    remove_pid_files(&files);
    Ok(())
}

pub(super) fn is_active(paths: &Paths) -> bool {
    let files = Files::new(paths);
    live_supervisor(&files).is_some_and(|sup| live_etcd(&files, Some(sup)).is_some())
}

/// The last `lines` lines of the log ("" when there is none).
pub(super) fn log_tail(paths: &Paths, lines: usize) -> String {
    const MAX: u64 = 256 << 10;
    let Ok(mut f) = File::open(paths.direct_log_file()) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(MAX)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    let mut tail = all[all.len().saturating_sub(lines)..].join("\n");
    if !tail.is_empty() {
        tail.push('\n');
    }
    tail
}

#[cfg(test)]
mod tests {
    use super::pidfiles::write_pid;
    use super::*;

    #[test]
    fn etcd_pid_file_sits_beside_the_supervisors() {
        let p = Paths::new("/r");
        assert_eq!(
            etcd_pid_file(&p),
            PathBuf::from("/r/run/etcd-charm/etcd.etcd.pid")
        );
    }

    #[test]
    fn our_own_process_is_neither_supervisor_nor_etcd() {
        let files = Files::new(&Paths::new("/nonexistent-root"));
        let me = std::process::id() as i32;
        assert!(alive(me));
        assert!(!is_supervisor(me, &files));
        assert!(!is_our_etcd(me, &files, None));
        assert!(!alive(i32::MAX));
    }

    #[test]
    fn stale_pid_files_are_ignored_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path());
        let files = Files::new(&paths);
        // Our own pid: alive, but not a supervisor or an etcd.
        write_pid(&files.supervisor_pid, std::process::id() as i32).unwrap();
        write_pid(&files.etcd_pid, i32::MAX).unwrap();
        assert!(!is_active(&paths));
        stop(&paths, Duration::from_millis(10)).unwrap();
        assert!(!files.supervisor_pid.exists());
        assert!(!files.etcd_pid.exists());
        // Idempotent.
        stop(&paths, Duration::from_millis(10)).unwrap();
    }

    #[test]
    fn log_tail_returns_the_last_lines() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path());
        assert_eq!(log_tail(&paths, 5), "");
        let log = open_log(&paths.direct_log_file()).unwrap();
        for i in 0..10 {
            append_log(&log, "test", &format!("line {i}"));
        }
        let tail = log_tail(&paths, 3);
        assert_eq!(tail.lines().count(), 3);
        assert!(tail.lines().next().unwrap().ends_with("line 7"));
        assert!(tail.ends_with("line 9\n"));
    }

    #[test]
    fn missing_binary_is_reported_not_raised() {
        match install(Path::new("/nonexistent/etcd")) {
            Installed::Missing { reason } => assert!(reason.contains("/nonexistent/etcd")),
            other => panic!("{other:?}"),
        }
    }
}
