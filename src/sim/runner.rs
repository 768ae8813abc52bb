//! Running one hook process: a clean environment (the caller's, less any
//! JUJU_*/JUJUSIM_* variables, plus the hook's), its own process group, a
//! timeout, and output captured to files — never pipes, since a workload the
//! hook starts in the background keeps its inherited descriptors open.

use crate::sim::error::{Context as _, Result};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub enum Capture {
    /// stdout and stderr interleaved in one file.
    Combined(PathBuf),
    /// stdout and stderr apart (actions keep both).
    Separate { out: PathBuf, err: PathBuf },
    /// The caller's own stdin/stdout/stderr (exec).
    Inherit,
}

pub struct Spawn {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub capture: Capture,
    /// Called every 10 s while the process runs (progress on long hooks).
    pub still_running: Option<Box<dyn Fn(Duration)>>,
}

/// How often `still_running` is called.
const NOTE_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct Outcome {
    /// The exit code; a death by signal is reported as 128 + signal.
    pub code: i32,
    pub timed_out: bool,
    pub duration: Duration,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.code == 0 && !self.timed_out
    }
}

/// Variables a hook never inherits from the controller's environment.
fn foreign(name: &str) -> bool {
    name.starts_with("JUJU_") || name.starts_with("JUJUSIM_") || name == "CHARM_DIR"
}

pub fn run(spawn: &Spawn) -> Result<Outcome> {
    let mut cmd = Command::new(&spawn.program);
    cmd.args(&spawn.args).current_dir(&spawn.cwd).env_clear();
    cmd.envs(std::env::vars().filter(|(k, _)| !foreign(k)));
    cmd.envs(spawn.env.iter().map(|(k, v)| (k, v)));
    cmd.process_group(0);
    match &spawn.capture {
        Capture::Combined(path) => {
            let f = File::create(path).ctx(path.display())?;
            cmd.stdin(Stdio::null()).stdout(f.try_clone()?).stderr(f);
        }
        Capture::Separate { out, err } => {
            cmd.stdin(Stdio::null())
                .stdout(File::create(out).ctx(out.display())?)
                .stderr(File::create(err).ctx(err.display())?);
        }
        Capture::Inherit => {}
    }
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .ctx(format!("running {}", spawn.program.display()))?;
    let mut pause = Duration::from_millis(1);
    let mut next_note = NOTE_EVERY;
    loop {
        if let Some(status) = child.try_wait()? {
            let code = status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
            return Ok(Outcome {
                code,
                timed_out: false,
                duration: start.elapsed(),
            });
        }
        if start.elapsed() >= spawn.timeout {
            let _ = killpg(Pid::from_raw(child.id() as i32), Signal::SIGKILL);
            let _ = child.wait();
            return Ok(Outcome {
                code: 137,
                timed_out: true,
                duration: start.elapsed(),
            });
        }
        if let Some(note) = spawn
            .still_running
            .as_ref()
            .filter(|_| start.elapsed() >= next_note)
        {
            note(start.elapsed());
            next_note += NOTE_EVERY;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// The last `max` bytes of a file, as text (lossy).
pub fn tail(path: &Path, max: u64) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout: Duration, out: &Path) -> Outcome {
        run(&Spawn {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: "/".into(),
            env: vec![("X".into(), "1".into())],
            timeout,
            capture: Capture::Combined(out.to_path_buf()),
            still_running: None,
        })
        .unwrap()
    }

    #[test]
    fn exit_code_and_output() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out");
        let o = sh(
            "echo hi $X; echo err >&2; exit 3",
            Duration::from_secs(10),
            &out,
        );
        assert_eq!(o.code, 3);
        assert_eq!(tail(&out, 100), "hi 1\nerr\n");
        assert_eq!(tail(&out, 4), "err\n");
    }

    #[test]
    fn background_child_does_not_block() {
        let d = tempfile::tempdir().unwrap();
        let o = sh(
            "sleep 5 & echo started",
            Duration::from_secs(10),
            &d.path().join("o"),
        );
        assert!(o.ok());
        assert!(o.duration < Duration::from_secs(4));
    }

    #[test]
    fn timeout_kills() {
        let d = tempfile::tempdir().unwrap();
        let o = sh("sleep 10", Duration::from_millis(200), &d.path().join("o"));
        assert!(o.timed_out);
        assert!(!o.ok());
    }
}
