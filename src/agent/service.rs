//! Running the agent next to etcd. Snap backend: a systemd unit of its own,
//! `etcd-charm-agent.service` (Restart=on-failure, enabled at boot),
//! written by the charm. Direct backend: a detached process in a session
//! of its own, with a pid file and a log file beside etcd's, started and
//! stopped by the hooks like the direct etcd (and, like it, never trusted
//! by pid alone: the process must be our `agent` for this root).

use super::options::arg_value;
use crate::paths::Paths;
use crate::service::{Backend, SUPERVISOR_ENV};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const UNIT: &str = "etcd-charm-agent.service";
/// How long a start waits for the agent's endpoint to answer.
const START_WAIT: Duration = Duration::from_secs(15);
/// After SIGTERM the agent ends its current check (a defrag may take a while).
const STOP_GRACE: Duration = Duration::from_secs(20);

/// The agent as installed now: its command line (after the program) and
/// whether it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    pub args: Vec<String>,
    pub running: bool,
}

impl Installed {
    /// `host:port` of its endpoint.
    pub fn listen(&self) -> Option<&str> {
        arg_value(&self.args, "--listen")
    }
}

pub fn unit_file(paths: &Paths) -> PathBuf {
    paths.host("/etc/systemd/system/etcd-charm-agent.service")
}

pub fn pid_file(paths: &Paths) -> PathBuf {
    paths.host("/run/etcd-charm/agent.pid")
}

pub fn log_file(paths: &Paths) -> PathBuf {
    paths.host("/var/log/etcd-charm/agent.log")
}

fn program() -> Result<PathBuf, String> {
    match std::env::var_os(SUPERVISOR_ENV) {
        Some(p) if !p.is_empty() => Ok(PathBuf::from(p)),
        _ => std::env::current_exe().map_err(|e| format!("finding the charm binary: {e}")),
    }
}

/// The identity of the binary an agent started now would run.
pub fn program_id() -> Option<String> {
    super::state::exe_id(&program().ok()?)
}

fn abs_root(paths: &Paths) -> PathBuf {
    std::path::absolute(paths.root()).unwrap_or_else(|_| paths.root().to_path_buf())
}

/// The systemd unit (pure).
pub fn render_unit(program: &Path, args: &[String], root: &Path) -> String {
    let env = if root == Path::new("/") {
        String::new()
    } else {
        format!("Environment=ETCD_CHARM_ROOT={}\n", root.display())
    };
    format!(
        "# Written by the etcd charm; removed with it.\n\
         [Unit]\n\
         Description=etcd-charm maintenance agent (snapshots, defrag, NOSPACE)\n\
         After=snap.etcd.etcd.service\n\
         \n\
         [Service]\n\
         {env}ExecStart={} {}\n\
         Restart=on-failure\n\
         RestartSec=5\n\
         \n\
         [Install]\n\
         WantedBy=multi-user.target\n",
        program.display(),
        args.join(" ")
    )
}

/// The arguments of the unit file's ExecStart (pure).
pub fn unit_args(text: &str) -> Option<Vec<String>> {
    let line = text.lines().find_map(|l| l.strip_prefix("ExecStart="))?;
    Some(line.split_whitespace().skip(1).map(String::from).collect())
}

fn systemctl(args: &[&str]) -> Result<String, String> {
    let out = Command::new("systemctl")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not run systemctl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "systemctl {}: {} {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn proc_args(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

fn proc_root(pid: i32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    env.split(|b| *b == 0).find_map(|kv| {
        let kv = String::from_utf8_lossy(kv);
        kv.strip_prefix("ETCD_CHARM_ROOT=").map(String::from)
    })
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|st| !matches!(st, "Z" | "X" | "x"))
    })
}

/// The direct agent's pid, if the pid file names our live agent.
fn live_pid(paths: &Paths) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pid_file(paths))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let root = abs_root(paths).display().to_string();
    let args = proc_args(pid);
    let ours = alive(pid)
        && args.get(1).is_some_and(|a| a == "agent")
        && arg_value(&args, "--listen").is_some()
        && proc_root(pid).is_none_or(|r| r == root);
    ours.then_some(pid)
}

pub fn installed(paths: &Paths, backend: &Backend) -> Option<Installed> {
    match backend {
        Backend::Direct { .. } => live_pid(paths).map(|pid| Installed {
            args: proc_args(pid).into_iter().skip(1).collect(),
            running: true,
        }),
        Backend::Snap { .. } => {
            let text = std::fs::read_to_string(unit_file(paths)).ok()?;
            Some(Installed {
                args: unit_args(&text).unwrap_or_default(),
                running: systemctl(&["is-active", "--quiet", UNIT]).is_ok(),
            })
        }
    }
}

/// Until the endpoint at `listen` answers, or `gone()` says the process died.
fn wait_answers(listen: &str, mut gone: impl FnMut() -> bool) -> Result<(), String> {
    let start = Instant::now();
    loop {
        match super::http::get(listen, "/state") {
            Ok(_) => return Ok(()),
            Err(e) if gone() || start.elapsed() > START_WAIT => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

/// Runs the agent with `args` (replacing one that runs with others, or
/// any that runs when `replace`: its binary changed) and waits until its
/// endpoint answers.
pub fn ensure(
    paths: &Paths,
    backend: &Backend,
    args: &[String],
    replace: bool,
) -> Result<(), String> {
    let listen = arg_value(args, "--listen").ok_or("the agent's arguments name no --listen")?;
    match backend {
        Backend::Direct { .. } => {
            stop(paths, backend)?;
            let log_path = log_file(paths);
            if let Some(d) = log_path.parent() {
                std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
            }
            let log = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .map_err(|e| format!("{}: {e}", log_path.display()))?;
            let err_log = log.try_clone().map_err(|e| e.to_string())?;
            let program = program()?;
            let mut cmd = Command::new(&program);
            cmd.args(args)
                .env("ETCD_CHARM_ROOT", abs_root(paths))
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(err_log)
                .current_dir("/");
            crate::service::detach(&mut cmd);
            let mut child = cmd
                .spawn()
                .map_err(|e| format!("could not run {} agent: {e}", program.display()))?;
            crate::durable::write_atomic(&pid_file(paths), format!("{}\n", child.id()).as_bytes())
                .map_err(|e| format!("{}: {e}", pid_file(paths).display()))?;
            // The hook exits soon; a child that lives on is reaped by init.
            wait_answers(listen, || matches!(child.try_wait(), Ok(Some(_))))
                .map_err(|e| format!("{e}; agent log: {}", tail(&log_path)))
        }
        Backend::Snap { .. } => {
            let text = render_unit(&program()?, args, &abs_root(paths));
            let file = unit_file(paths);
            let changed = std::fs::read_to_string(&file).ok().as_deref() != Some(text.as_str());
            if changed {
                crate::durable::write_atomic(&file, text.as_bytes())
                    .map_err(|e| format!("{}: {e}", file.display()))?;
                systemctl(&["daemon-reload"])?;
            }
            systemctl(&["enable", UNIT])?;
            let active = systemctl(&["is-active", "--quiet", UNIT]).is_ok();
            if changed || replace || !active {
                systemctl(&["restart", UNIT])?;
            }
            wait_answers(listen, || false)
        }
    }
}

/// Stops the agent (snap: and disables it). Idempotent.
pub fn stop(paths: &Paths, backend: &Backend) -> Result<(), String> {
    match backend {
        Backend::Direct { .. } => {
            let Some(pid) = live_pid(paths) else {
                let _ = std::fs::remove_file(pid_file(paths));
                return Ok(());
            };
            let p = Pid::from_raw(pid);
            let _ = signal::kill(p, Signal::SIGTERM);
            let start = Instant::now();
            while alive(pid) && start.elapsed() < STOP_GRACE {
                std::thread::sleep(Duration::from_millis(50));
            }
            if alive(pid) {
                let _ = signal::kill(p, Signal::SIGKILL);
            }
            let _ = std::fs::remove_file(pid_file(paths));
            Ok(())
        }
        Backend::Snap { .. } => {
            if unit_file(paths).exists() {
                systemctl(&["disable", "--now", UNIT])?;
            }
            Ok(())
        }
    }
}

/// The remove hook: stopped, and (snap) its unit file gone with the charm.
pub fn remove(paths: &Paths, backend: &Backend) -> Result<(), String> {
    stop(paths, backend)?;
    if let Backend::Snap { .. } = backend {
        let file = unit_file(paths);
        if file.exists() {
            std::fs::remove_file(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            systemctl(&["daemon-reload"])?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_file_round_trips_its_arguments() {
        let args: Vec<String> = ["agent", "--unit", "etcd/0", "--listen", "127.0.0.1:9379"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let text = render_unit(
            Path::new("/var/lib/juju/charm/etcd-charm"),
            &args,
            Path::new("/"),
        );
        assert!(text.contains("ExecStart=/var/lib/juju/charm/etcd-charm agent --unit etcd/0"));
        assert!(text.contains("Restart=on-failure"));
        assert!(text.contains("WantedBy=multi-user.target"));
        assert!(!text.contains("ETCD_CHARM_ROOT"));
        assert_eq!(unit_args(&text).unwrap(), args);
        let rooted = render_unit(Path::new("/c"), &args, Path::new("/m/root"));
        assert!(rooted.contains("Environment=ETCD_CHARM_ROOT=/m/root\n"));
    }

    #[test]
    fn no_pid_file_means_not_installed_and_stop_is_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path());
        let direct = Backend::Direct {
            etcd_bin: "etcd".into(),
        };
        assert_eq!(installed(&paths, &direct), None);
        // Our own pid is alive but not an agent.
        crate::durable::write_atomic(
            &pid_file(&paths),
            format!("{}\n", std::process::id()).as_bytes(),
        )
        .unwrap();
        assert_eq!(installed(&paths, &direct), None);
        stop(&paths, &direct).unwrap();
        stop(&paths, &direct).unwrap();
        assert!(!pid_file(&paths).exists());
    }
}
