//! The `supervise` process: runs etcd, restarts it per the restart policy,
//! and passes a SIGTERM on to it (what systemd does for the snap).

use super::log::{append_log, open_log};
use super::pidfiles::{live_supervisor, remove_pid_files, send, wait_until, write_pid};
use super::{Files, POLL, RESTART_POLICY};
use crate::paths::Paths;
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

static TERMINATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_terminate(_: nix::libc::c_int) {
    TERMINATE.store(true, Ordering::SeqCst);
}

pub(super) fn terminating() -> bool {
    TERMINATE.load(Ordering::SeqCst)
}

/// The `supervise` subcommand: runs etcd with `--config-file
/// <paths.config_file()>`, its output appended to the log, until etcd exits
/// 0 or SIGTERM/SIGINT arrives; restarts it after a failure per
/// [`RESTART_POLICY`](crate::service::RESTART_POLICY). Runs the start guard before
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

pub(super) fn run_etcd(paths: &Paths, files: &Files, etcd_bin: &Path, log: &File) -> ExitCode {
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

pub(super) fn spawn_etcd(bin: &Path, config: &Path, log: &File) -> std::io::Result<Child> {
    Command::new(bin)
        .arg("--config-file")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log.try_clone()?)
        .spawn()
}

/// Waits for etcd, passing a SIGTERM we receive on to it.
pub(super) fn wait_etcd(child: &mut Child) -> ExitStatus {
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
