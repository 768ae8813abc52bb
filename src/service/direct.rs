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
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::unistd::Pid;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

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
    // SAFETY: setsid is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
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

// ---------------------------------------------------------------- the supervisor

static TERMINATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_terminate(_: nix::libc::c_int) {
    TERMINATE.store(true, Ordering::SeqCst);
}

fn terminating() -> bool {
    TERMINATE.load(Ordering::SeqCst)
}

/// The `supervise` subcommand: runs etcd with `--config-file
/// <paths.config_file()>`, its output appended to the log, until etcd exits
/// 0 or SIGTERM/SIGINT arrives; restarts it after a failure per
/// [`RESTART_POLICY`](super::RESTART_POLICY). Runs the start guard before
/// every start and gives up when it refuses. Exits 0 on a clean end (etcd
/// exited 0, or we were told to stop), 1 when it gave up.
pub fn supervise(paths: &Paths, etcd_bin: &Path) -> ExitCode {
    let files = Files::new(paths);
    let log = match open_log(&files.log) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "etcd-charm supervise: cannot open {}: {e}",
                files.log.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let say = |msg: &str| append_log(&log, "supervise", msg);
    let on_term = SigAction::new(
        SigHandler::Handler(on_terminate),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic.
        if let Err(e) = unsafe { signal::sigaction(sig, &on_term) } {
            say(&format!("cannot handle {sig}: {e}"));
            return ExitCode::FAILURE;
        }
    }
    let me = std::process::id() as i32;
    if let Some(other) = live_supervisor(&files).filter(|&p| p != me) {
        say(&format!(
            "another supervisor (pid {other}) already runs etcd for {}; exiting",
            files.root.display()
        ));
        return ExitCode::FAILURE;
    }
    if let Err(e) = write_pid(&files.supervisor_pid, me) {
        say(&format!(
            "cannot write {}: {e}",
            files.supervisor_pid.display()
        ));
        return ExitCode::FAILURE;
    }
    let code = run_etcd(paths, &files, etcd_bin, &log);
    remove_pid_files(&files);
    say("exiting");
    code
}

fn run_etcd(paths: &Paths, files: &Files, etcd_bin: &Path, log: &File) -> ExitCode {
    let say = |msg: &str| append_log(log, "supervise", msg);
    let policy = RESTART_POLICY;
    let mut starts: VecDeque<Instant> = VecDeque::new();
    loop {
        if terminating() {
            return ExitCode::SUCCESS;
        }
        if let Err(m) = crate::layout::start_guard(paths) {
            say(&format!("the start guard refused to start etcd: {m}"));
            return ExitCode::FAILURE;
        }
        let now = Instant::now();
        while starts
            .front()
            .is_some_and(|t| now.duration_since(*t) >= policy.interval)
        {
            starts.pop_front();
        }
        if starts.len() >= policy.burst as usize {
            say(&format!(
                "etcd started {} times within {}s and failed each time; giving up until the next start",
                starts.len(),
                policy.interval.as_secs()
            ));
            return ExitCode::FAILURE;
        }
        starts.push_back(now);
        let mut child = match spawn_etcd(etcd_bin, &files.config, log) {
            Ok(c) => c,
            Err(e) => {
                say(&format!("could not run {}: {e}", etcd_bin.display()));
                return ExitCode::FAILURE;
            }
        };
        let pid = child.id() as i32;
        if let Err(e) = write_pid(&files.etcd_pid, pid) {
            say(&format!("cannot write {}: {e}", files.etcd_pid.display()));
            let _ = child.kill();
            let _ = child.wait();
            return ExitCode::FAILURE;
        }
        say(&format!(
            "started etcd (pid {pid}): {} --config-file {}",
            etcd_bin.display(),
            files.config.display()
        ));
        let status = wait_etcd(&mut child);
        say(&format!("etcd (pid {pid}) exited: {status}"));
        if terminating() {
            return ExitCode::SUCCESS;
        }
        if status.success() {
            say("etcd exited 0, as a member removed from its cluster does; not restarting it");
            return ExitCode::SUCCESS;
        }
        say(&format!(
            "restarting etcd in {}s",
            policy.delay.as_secs_f32()
        ));
        let _ = wait_until(policy.delay, terminating);
    }
}

fn spawn_etcd(bin: &Path, config: &Path, log: &File) -> std::io::Result<Child> {
    Command::new(bin)
        .arg("--config-file")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?)
        .spawn()
}

/// Waits for etcd, passing a SIGTERM we receive on to it.
fn wait_etcd(child: &mut Child) -> ExitStatus {
    let mut forwarded = false;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status,
            Ok(None) => {}
            // Not our child any more: nothing to wait for; call it a failure.
            Err(_) => return ExitStatus::from_raw(1 << 8),
        }
        if terminating() && !forwarded {
            send(child.id() as i32, Signal::SIGTERM);
            forwarded = true;
        }
        std::thread::sleep(POLL);
    }
}

// ---------------------------------------------------------------- pids and /proc

fn read_pid(path: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(path).ok()?;
    text.trim().parse().ok().filter(|&p: &i32| p > 0)
}

fn write_pid(path: &Path, pid: i32) -> std::io::Result<()> {
    write_atomic(path, format!("{pid}\n").as_bytes())
}

fn remove_pid_files(files: &Files) {
    let _ = std::fs::remove_file(&files.supervisor_pid);
    let _ = std::fs::remove_file(&files.etcd_pid);
}

fn send(pid: i32, sig: Signal) {
    let _ = signal::kill(Pid::from_raw(pid), sig);
}

/// The state letter and parent pid from /proc/<pid>/stat.
fn proc_stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Alive and not a zombie (a zombie still answers kill(pid, 0)).
fn alive(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X' | 'x'))
}

fn proc_cmdline(pid: i32) -> Vec<OsString> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    bytes
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect()
}

/// `Some(value)` when /proc/<pid>/environ is readable (`Some(None)`: unset).
fn proc_env(pid: i32, key: &str) -> Option<Option<OsString>> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{key}=");
    Some(bytes.split(|&b| b == 0).find_map(|kv| {
        kv.strip_prefix(prefix.as_bytes())
            .map(|v| OsString::from_vec(v.to_vec()))
    }))
}

/// Our supervisor: a live `… supervise` started for this root.
fn is_supervisor(pid: i32, files: &Files) -> bool {
    alive(pid)
        && proc_cmdline(pid).iter().skip(1).any(|a| a == "supervise")
        && match proc_env(pid, "ETCD_CHARM_ROOT") {
            Some(root) => root.as_deref() == Some(files.root.as_os_str()),
            None => true,
        }
}

/// Our etcd: live, run with our `--config-file`, and (when `parent` is
/// given) that supervisor's child.
fn is_our_etcd(pid: i32, files: &Files, parent: Option<i32>) -> bool {
    let Some((state, ppid)) = proc_stat(pid) else {
        return false;
    };
    !matches!(state, 'Z' | 'X' | 'x')
        && parent.is_none_or(|p| p == ppid)
        && proc_cmdline(pid)
            .windows(2)
            .any(|w| w[0] == "--config-file" && Path::new(&w[1]) == files.config)
}

/// Adds a newly recorded etcd to `tracked`, drops the dead; whether none is left.
fn all_gone(files: &Files, tracked: &mut Vec<i32>) -> bool {
    if let Some(e) = live_etcd(files, None).filter(|e| !tracked.contains(e)) {
        tracked.push(e);
    }
    tracked.retain(|&p| alive(p));
    tracked.is_empty()
}

fn live_supervisor(files: &Files) -> Option<i32> {
    read_pid(&files.supervisor_pid).filter(|&p| is_supervisor(p, files))
}

fn live_etcd(files: &Files, parent: Option<i32>) -> Option<i32> {
    read_pid(&files.etcd_pid).filter(|&p| is_our_etcd(p, files, parent))
}

/// Polls `done` until it holds or `limit` passes; whether it held.
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(POLL.min(deadline - Instant::now()));
    }
}

// ---------------------------------------------------------------- the log

fn open_log(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(path)
}

fn rotate_log(path: &Path) {
    if std::fs::metadata(path).is_ok_and(|m| m.len() > LOG_ROTATE_BYTES) {
        let mut old = path.as_os_str().to_owned();
        old.push(".1");
        let _ = std::fs::rename(path, old);
    }
}

/// One line, written with a single `write` so it does not interleave with
/// etcd's output.
fn append_log(mut log: &File, who: &str, msg: &str) {
    let line = format!(
        "{} etcd-charm {who}[{}]: {msg}\n",
        crate::stamp::utc_timestamp(SystemTime::now()),
        std::process::id()
    );
    let _ = log.write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
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
