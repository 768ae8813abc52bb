//! The pid files and /proc: a pid is trusted only while its process is
//! alive, not a zombie, and looks like ours.

use super::{write_atomic, Files, POLL};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::time::{Duration, Instant};

pub(super) fn read_pid(path: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(path).ok()?;
    text.trim().parse().ok().filter(|&p: &i32| p > 0)
}

pub(super) fn write_pid(path: &Path, pid: i32) -> std::io::Result<()> {
    write_atomic(path, format!("{pid}\n").as_bytes())
}

pub(super) fn remove_pid_files(files: &Files) {
    let _ = std::fs::remove_file(&files.supervisor_pid);
    let _ = std::fs::remove_file(&files.etcd_pid);
}

pub(super) fn send(pid: i32, sig: Signal) {
    let _ = signal::kill(Pid::from_raw(pid), sig);
}

/// The state letter and parent pid from /proc/<pid>/stat.
pub(super) fn proc_stat(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Alive and not a zombie (a zombie still answers kill(pid, 0)).
pub(super) fn alive(pid: i32) -> bool {
    proc_stat(pid).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X' | 'x'))
}

pub(super) fn proc_cmdline(pid: i32) -> Vec<OsString> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    bytes
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect()
}

/// `Some(value)` when /proc/<pid>/environ is readable (`Some(None)`: unset).
pub(super) fn proc_env(pid: i32, key: &str) -> Option<Option<OsString>> {
    let bytes = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{key}=");
    Some(bytes.split(|&b| b == 0).find_map(|kv| {
        kv.strip_prefix(prefix.as_bytes())
            .map(|v| OsString::from_vec(v.to_vec()))
    }))
}

/// Our supervisor: a live `… supervise` started for this root.
pub(super) fn is_supervisor(pid: i32, files: &Files) -> bool {
    alive(pid)
        && proc_cmdline(pid).iter().skip(1).any(|a| a == "supervise")
        && match proc_env(pid, "ETCD_CHARM_ROOT") {
            Some(root) => root.as_deref() == Some(files.root.as_os_str()),
            None => true,
        }
}

/// Our etcd: live, run with our `--config-file`, and (when `parent` is
/// given) that supervisor's child.
pub(super) fn is_our_etcd(pid: i32, files: &Files, parent: Option<i32>) -> bool {
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
pub(super) fn all_gone(files: &Files, tracked: &mut Vec<i32>) -> bool {
    if let Some(e) = live_etcd(files, None).filter(|e| !tracked.contains(e)) {
        tracked.push(e);
    }
    tracked.retain(|&p| alive(p));
    tracked.is_empty()
}

pub(super) fn live_supervisor(files: &Files) -> Option<i32> {
    read_pid(&files.supervisor_pid).filter(|&p| is_supervisor(p, files))
}

pub(super) fn live_etcd(files: &Files, parent: Option<i32>) -> Option<i32> {
    read_pid(&files.etcd_pid).filter(|&p| is_our_etcd(p, files, parent))
}

/// Polls `done` until it holds or `limit` passes; whether it held.
pub(super) fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
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
