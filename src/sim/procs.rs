//! Finding and stopping the processes a model's hooks left running (its
//! workloads): SIGTERM, then SIGKILL after a bound.
//!
//! A process belongs to a unit when its environment carries that unit's
//! JUJUSIM_UNIT_ROOT together with the model's JUJUSIM_MODEL (every hook
//! gets both, and children inherit them), or when one of its arguments names
//! a path under the unit's root (for workloads started with a cleared
//! environment). The caller and its ancestors are never touched.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Which processes to stop: those of these unit roots, in this model.
pub struct Target {
    pub model: PathBuf,
    pub unit_roots: Vec<PathBuf>,
}

impl Target {
    /// Every unit root the model ever had (removed units' dirs stay).
    pub fn whole_model(model: &Path) -> Target {
        let unit_roots = fs::read_dir(model.join("units"))
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path().join("root"))
                    .collect()
            })
            .unwrap_or_default();
        Target {
            model: model.to_path_buf(),
            unit_roots,
        }
    }

    pub fn unit(model: &Path, unit_root: &Path) -> Target {
        Target {
            model: model.to_path_buf(),
            unit_roots: vec![unit_root.to_path_buf()],
        }
    }

    fn matches(&self, pid: i32) -> bool {
        let nul_split = |bytes: Vec<u8>| -> Vec<String> {
            bytes
                .split(|b| *b == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        };
        let environ = nul_split(fs::read(format!("/proc/{pid}/environ")).unwrap_or_default());
        let model_var = format!("JUJUSIM_MODEL={}", self.model.display());
        if environ.contains(&model_var) {
            let in_unit = self.unit_roots.iter().any(|r| {
                let var = format!("JUJUSIM_UNIT_ROOT={}", r.display());
                environ.contains(&var)
            });
            if in_unit {
                return true;
            }
        }
        let cmdline = nul_split(fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default());
        self.unit_roots.iter().any(|r| {
            let root = format!("{}/", r.display());
            cmdline.iter().any(|a| a.contains(&root))
        })
    }
}

/// Our own pid and every ancestor's.
fn protected() -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    let mut pid = std::process::id() as i32;
    while pid > 1 && out.insert(pid) {
        pid = parent_of(pid).unwrap_or(0);
    }
    out
}

/// `/proc/<pid>/stat`: "pid (comm) state ppid ..."; comm may hold spaces.
fn stat_fields(pid: i32) -> Option<(char, i32)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut it = rest.split_whitespace();
    let state = it.next()?.chars().next()?;
    let ppid = it.next()?.parse().ok()?;
    Some((state, ppid))
}

fn parent_of(pid: i32) -> Option<i32> {
    stat_fields(pid).map(|(_, ppid)| ppid)
}

/// Gone, or a zombie waiting for its parent.
fn dead(pid: i32) -> bool {
    !matches!(stat_fields(pid), Some((state, _)) if state != 'Z' && state != 'X')
}

pub fn find(target: &Target) -> Vec<i32> {
    let skip = protected();
    let Ok(rd) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| !skip.contains(pid) && !dead(*pid) && target.matches(*pid))
        .collect()
}

/// Stops every matching process; returns how many there were.
pub fn stop(target: &Target, grace: Duration) -> usize {
    let pids = find(target);
    for pid in &pids {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && pids.iter().any(|p| !dead(*p)) {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Anything still there, and anything started meanwhile.
    let mut rest: BTreeSet<i32> = pids.iter().copied().filter(|p| !dead(*p)).collect();
    let late = find(target);
    let total = pids.len() + late.iter().filter(|p| !pids.contains(p)).count();
    rest.extend(late);
    for pid in &rest {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && rest.iter().any(|p| !dead(*p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn we_are_protected() {
        let me = std::process::id() as i32;
        assert!(protected().contains(&me));
        assert!(!dead(me));
    }

    #[test]
    fn stops_a_process_by_its_environment() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("units/a-0/root");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env("JUJUSIM_MODEL", d.path())
            .env("JUJUSIM_UNIT_ROOT", &root)
            .spawn()
            .unwrap();
        let t = Target::unit(d.path(), &root);
        // Our child is not an ancestor, so it is found once it has exec'd
        // (until then /proc shows our own environment).
        let deadline = Instant::now() + Duration::from_secs(5);
        while find(&t).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(find(&t), vec![child.id() as i32]);
        std::thread::spawn(move || child.wait());
        assert_eq!(stop(&t, Duration::from_secs(5)), 1);
        assert!(find(&t).is_empty());
    }
}
