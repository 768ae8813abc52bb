//! Free space before a copy: every copy the charm writes (the migration's
//! cross-file-system copy, its db snapshot, the snapshot action) asks first
//! whether it fits, and ends blocked, naming sizes and paths, instead of
//! filling the disk that etcd (and often the whole machine) lives on.
//!
//! Reading the free space is I/O ([`free_bytes`]); deciding is pure
//! ([`shortfall`]), so the planner can decide from observed numbers and the
//! executor re-check with fresh ones right before it writes.

use std::path::Path;

/// Headroom kept beyond the copy itself: 64 MiB plus 5 % of its size.
///
/// Why: the copy lands on a file system that keeps being written while and
/// after it runs (etcd's WAL segments are preallocated 64 MiB each, the
/// bbolt db grows in steps, journald and snapd write beside it); a copy
/// that leaves exactly zero bytes free makes the next WAL segment fail and
/// etcd stop. 5 % covers the metadata a copy costs on ext4 (inodes, dir
/// blocks, extent trees are well under 1 % of the data) with room to
/// spare. `statvfs`'s `f_bavail` already excludes root's reserved blocks.
pub const MARGIN_FIXED: u64 = 64 << 20;
pub const MARGIN_PERCENT: u64 = 5;

/// Bytes a copy of `size` bytes needs free: size + margin.
pub fn need(size: u64) -> u64 {
    size.saturating_add(MARGIN_FIXED)
        .saturating_add(size / 100 * MARGIN_PERCENT)
}

/// Bytes free to an unprivileged writer in the file system holding `path`
/// (or its nearest existing ancestor, for a dir not made yet).
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    let st = nix::sys::statvfs::statvfs(existing(path)).map_err(std::io::Error::from)?;
    Ok((st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64))
}

/// Whether `a` and `b` (or their nearest existing ancestors) are on one
/// file system.
pub fn same_fs(a: &Path, b: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let dev = |p: &Path| std::fs::metadata(existing(p)).map(|m| m.dev());
    Ok(dev(a)? == dev(b)?)
}

/// `path`, or its nearest ancestor that exists (a dir not made yet is on
/// its parent's file system).
fn existing(path: &Path) -> &Path {
    path.ancestors()
        .find(|a| a.exists())
        .unwrap_or(Path::new("/"))
}

/// `Some(message)` when `size` bytes (plus the margin) do not fit in the
/// `free` bytes of `dir`; the message is the blocked status.
pub fn shortfall(what: &str, size: u64, dir: &Path, free: u64) -> Option<String> {
    let need = need(size);
    (free < need).then(|| {
        format!(
            "not enough space for {what}: need {} in {} ({} + {} margin), {} free; free some space or attach bigger storage, then the next hook goes on",
            human(need),
            dir.display(),
            human(size),
            human(need - size),
            human(free)
        )
    })
}

/// [`shortfall`] with the free space read now. An unreadable file system
/// is reported as such (blocked), never guessed to be big enough.
pub fn check(what: &str, size: u64, dir: &Path) -> Option<String> {
    match free_bytes(dir) {
        Ok(free) => shortfall(what, size, dir, free),
        Err(e) => Some(format!(
            "cannot read the free space of {} before {what}: {e}",
            dir.display()
        )),
    }
}

/// `2.3 GiB`, `512 MiB`, `12 KiB`, `100 B`.
pub fn human(bytes: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if bytes >= GIB {
        format!("{:.1} GiB", bytes as f64 / GIB as f64)
    } else if bytes >= MIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else if bytes >= 1024 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_margin_is_fixed_plus_a_share() {
        assert_eq!(need(0), 64 << 20);
        assert_eq!(need(1000 << 20), (1000 << 20) + (64 << 20) + (50 << 20));
        assert_eq!(need(u64::MAX), u64::MAX);
    }

    #[test]
    fn a_copy_that_does_not_fit_names_sizes_and_path() {
        let dir = Path::new("/var/snap/etcd/common/backups");
        let size = (2u64 << 30) + (200 << 20);
        let msg = shortfall("the db snapshot", size, dir, (11 << 30) / 10).unwrap();
        assert!(
            msg.contains("need 2.4 GiB in /var/snap/etcd/common/backups"),
            "{msg}"
        );
        assert!(msg.contains("1.1 GiB free"), "{msg}");
        assert_eq!(
            shortfall("x", size, dir, need(size)),
            None,
            "exactly enough fits"
        );
        assert!(shortfall("x", size, dir, need(size) - 1).is_some());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(100), "100 B");
        assert_eq!(human(12 * 1024), "12 KiB");
        assert_eq!(human(512 << 20), "512.0 MiB");
        assert_eq!(human((23 << 30) / 10), "2.3 GiB");
    }

    #[test]
    fn free_space_of_a_dir_not_made_yet_is_its_parents() {
        let tmp = tempfile::tempdir().unwrap();
        let here = free_bytes(tmp.path()).unwrap();
        let below = free_bytes(&tmp.path().join("a/b/c")).unwrap();
        // Both read the same file system; other writers may move it a bit.
        assert!(here.abs_diff(below) < (256 << 20), "{here} vs {below}");
    }
}
