//! A loopback /24 of this test's own, for a jujusim model: held by an
//! exclusive `flock` on a file named for it, so no concurrent test (in this
//! process or another: the runner runs test binaries side by side) takes
//! the same addresses. The kernel drops the lock when the holder exits, also
//! when it is killed, so a crashed test leaves no range taken.
//!
//! Ranges are 127.X.Y.0/24 with X in 100..=250 (the hand-assigned ranges of
//! the direct-etcd tests are 127.77–127.99, and 127.0.0.x is left alone).
#![allow(dead_code)]

use nix::fcntl::{Flock, FlockArg};
use std::fs::{File, OpenOptions};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

const FIRST_X: u32 = 100;
const XS: u32 = 151;
const RANGES: u32 = XS * 256;

pub struct Range {
    _lock: Flock<File>,
    /// `127.X.Y.0/24`, as jujusim's `--address-range` takes it.
    pub cidr: String,
}

fn lock_dir() -> PathBuf {
    let dir = std::env::temp_dir().join("etcd-charm-address-ranges");
    std::fs::create_dir_all(&dir).expect("creating the address-range lock dir");
    dir
}

/// Takes the first free range, starting at a place that differs per process
/// and call, so that a range an earlier, killed run may have left an orphaned
/// etcd on is not always the first one tried.
pub fn take() -> Range {
    let dir = lock_dir();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let start = (std::process::id().wrapping_mul(2_654_435_761) ^ nanos) % RANGES;
    for i in 0..RANGES {
        let n = (start + i) % RANGES;
        let (x, y) = (FIRST_X + n / 256, n % 256);
        let path = dir.join(format!("127.{x}.{y}.lock"));
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
        if let Ok(lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            return Range {
                _lock: lock,
                cidr: format!("127.{x}.{y}.0/24"),
            };
        }
    }
    panic!("every loopback range under {} is taken", dir.display());
}
