//! A test's missing prerequisite (root, systemd, a loop device, strace, the
//! etcd 3.5 binaries): fatal when the suite runs strict, else counted.
//!
//! A skip that only prints is invisible under cargo's captured output, so a
//! machine without systemd passed every systemd test without running one.
//! `./test` runs strict (`ETCD_CHARM_STRICT=1`): the test fails, naming what
//! to install. Outside strict mode each skip is appended to the file named by
//! `ETCD_CHARM_SKIP_LOG`, which `./test` counts and prints at the end.

use std::io::Write;
use std::path::Path;

/// Strict unless `ETCD_CHARM_STRICT` is unset, empty or `0`.
pub fn strict() -> bool {
    std::env::var("ETCD_CHARM_STRICT").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// The test cannot run here because `why`; `install` says what fixes it.
/// Panics under strict mode; otherwise prints and records the skip. The
/// caller returns right after.
pub fn skip(test: &str, why: &str, install: &str) {
    let log = std::env::var_os("ETCD_CHARM_SKIP_LOG").map(std::path::PathBuf::from);
    skip_with(strict(), log.as_deref(), test, why, install)
}

fn skip_with(strict: bool, log: Option<&Path>, test: &str, why: &str, install: &str) {
    if strict {
        panic!(
            "missing prerequisite for {test}: {why}. {install}. \
             (./test runs strict; ETCD_CHARM_STRICT=0 counts skips instead)"
        );
    }
    let line = format!("{test}: {why} ({install})");
    eprintln!("skipped: {line}");
    if let Some(log) = log {
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_recorded_outside_strict_mode_and_fatal_inside() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("skips");
        skip_with(
            false,
            Some(&log),
            "t1",
            "no strace",
            "apt-get install strace",
        );
        skip_with(false, Some(&log), "t2", "no tmpfs", "run as root");
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(
            text.contains("t1: no strace (apt-get install strace)"),
            "{text}"
        );
        let r = std::panic::catch_unwind(|| {
            skip_with(
                true,
                Some(&log),
                "t3",
                "no systemd",
                "apt-get install systemd",
            )
        });
        let msg = r.expect_err("a strict skip must fail the test");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("no systemd") && msg.contains("apt-get install systemd"),
            "{msg}"
        );
        assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 2);
    }
}
