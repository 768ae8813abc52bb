//! Root-only files and dirs. A snapshot holds the whole keyspace (every
//! Kubernetes Secret), so each copy the charm or its agent writes is 0600
//! from its creation, in a dir that is 0700, and a dir of ours an older
//! revision left wider is tightened (rule 7).

use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub const FILE_MODE: u32 = 0o600;
pub const DIR_MODE: u32 = 0o700;

/// Creates `dir` 0700 (missing parents as the umask has them), or tightens
/// it to 0700 when it exists with any group or other bit.
pub fn dir(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {
            tighten(dir, DIR_MODE)
        }
        Err(e) => Err(e),
    }
}

/// Creates (or truncates) `path` for writing, 0600 from the start; a file
/// left by a crash keeps its old mode, so the mode is set as well.
pub fn create(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)?;
    f.set_permissions(Permissions::from_mode(FILE_MODE))?;
    Ok(f)
}

/// Sets `path` to `mode` when it has more than `mode` allows.
pub fn tighten(path: &Path, mode: u32) -> io::Result<()> {
    let now = std::fs::metadata(path)?.permissions().mode() & 0o7777;
    if now & !mode == 0 {
        return Ok(());
    }
    std::fs::set_permissions(path, Permissions::from_mode(now & mode))
}

/// The mode of `path` when another account may read or enter it.
pub fn loose(path: &Path) -> Option<u32> {
    let mode = std::fs::symlink_metadata(path).ok()?.permissions().mode() & 0o7777;
    (mode & 0o077 != 0).then_some(mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_new_dir_is_0700_and_an_open_one_is_tightened() {
        let d = tempfile::tempdir().unwrap();
        let new = d.path().join("a/b");
        dir(&new).unwrap();
        assert_eq!(mode(&new), 0o700);
        let open = d.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, Permissions::from_mode(0o755)).unwrap();
        assert_eq!(loose(&open), Some(0o755));
        dir(&open).unwrap();
        assert_eq!(mode(&open), 0o700);
        assert_eq!(loose(&open), None);
    }

    #[test]
    fn a_file_is_0600_from_its_creation_even_over_a_wider_one() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("snap.part");
        std::fs::write(&p, b"old").unwrap();
        std::fs::set_permissions(&p, Permissions::from_mode(0o644)).unwrap();
        drop(create(&p).unwrap());
        assert_eq!(mode(&p), 0o600);
        assert_eq!(std::fs::read(&p).unwrap(), b"");
    }

    #[test]
    fn tighten_only_removes_bits() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"x").unwrap();
        std::fs::set_permissions(&p, Permissions::from_mode(0o400)).unwrap();
        tighten(&p, FILE_MODE).unwrap();
        assert_eq!(mode(&p), 0o400, "a file already narrower is left as it is");
        std::fs::set_permissions(&p, Permissions::from_mode(0o664)).unwrap();
        tighten(&p, FILE_MODE).unwrap();
        assert_eq!(mode(&p), 0o600);
    }
}
