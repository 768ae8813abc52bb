//! The dated set-aside (rule 4: nothing is deleted): `<base>-<UTC stamp>`
//! beside the original, `-2`, `-3`… when that name is taken, and the
//! rename made durable by an fsync of the directory.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// `<dir>/<base>-<stamp>`, or `<dir>/<base>-<stamp>-<n>` for the first
/// `n` from 2 that nothing holds (also not a dangling symlink).
pub fn free_name(dir: &Path, base: &str, stamp: &str) -> PathBuf {
    let base = format!("{base}-{stamp}");
    let mut target = dir.join(&base);
    let mut n = 2;
    while target.symlink_metadata().is_ok() {
        target = dir.join(format!("{base}-{n}"));
        n += 1;
    }
    target
}

/// Renames `path` to [`free_name`] beside it (named `<base>-<stamp now>`)
/// and syncs the directory; returns where it went.
pub fn set_aside(path: &Path, base: &str) -> std::io::Result<PathBuf> {
    set_aside_stamped(path, base, &crate::stamp::utc_stamp(SystemTime::now()))
}

/// [`set_aside`] with a given stamp (a procedure uses one for all its steps).
pub fn set_aside_stamped(path: &Path, base: &str, stamp: &str) -> std::io::Result<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let to = free_name(dir, base, stamp);
    std::fs::rename(path, &to)?;
    crate::durable::sync_dir(dir)?;
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_name_gets_a_number() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..3 {
            std::fs::create_dir(d.path().join("member")).unwrap();
            std::fs::write(d.path().join("member/f"), format!("{i}")).unwrap();
            let to = set_aside_stamped(&d.path().join("member"), "member.backup", "S").unwrap();
            let want = ["member.backup-S", "member.backup-S-2", "member.backup-S-3"][i];
            assert_eq!(to, d.path().join(want));
            assert_eq!(
                std::fs::read_to_string(to.join("f")).unwrap(),
                i.to_string()
            );
        }
        assert!(!d.path().join("member").exists());
    }

    #[test]
    fn a_missing_path_is_an_error_and_moves_nothing() {
        let d = tempfile::tempdir().unwrap();
        assert!(set_aside(&d.path().join("nothing"), "nothing.backup").is_err());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }
}
