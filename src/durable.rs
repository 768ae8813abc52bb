//! The one way this project replaces a file: a temp file beside it, fsync,
//! rename, fsync of the directory. A crash leaves the old file or the new
//! one, never half of either, and a rename that returned is on disk (the
//! systemd drop-in holds the start guard: it must not vanish on power loss).

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` durably and atomically; creates the parent dir.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_mode(path, bytes, None)
}

/// As [`write_atomic`], for a private key: the file is 0600 from its
/// creation (the temp file never exists with wider permissions).
pub fn write_atomic_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic_mode(path, bytes, Some(0o600))
}

fn write_atomic_mode(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::other(format!(
            "{} names no file",
            path.display()
        )));
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut f = match mode {
            None => std::fs::File::create(&tmp)?,
            Some(m) => {
                use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(m)
                    .open(&tmp)?;
                // A temp file left by a crash keeps its old mode: set it.
                f.set_permissions(std::fs::Permissions::from_mode(m))?;
                f
            }
        };
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    sync_dir(dir)
}

/// Makes a rename (or create) in `dir` durable: a rename that returned is
/// on disk only once its directory is synced.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temp_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sub/f.conf");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(d.path().join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["f.conf"]);
    }

    /// fsync is invisible to the file system's contents, so this watches
    /// the system calls: the file and then its directory are synced. The
    /// child writes through the service's helper, which writes the drop-in
    /// (it had its own copy without fsync).
    #[test]
    fn syncs_the_file_and_its_directory() {
        if std::env::var_os("ETCD_CHARM_DURABLE_CHILD").is_some() {
            let p = std::path::PathBuf::from(std::env::var_os("ETCD_CHARM_DURABLE_CHILD").unwrap());
            crate::service::write_atomic(&p, b"x").unwrap();
            return;
        }
        let Ok(strace) = which_strace() else {
            crate::prereq::skip(
                "durable fsync trace",
                "strace not installed",
                "apt-get install strace",
            );
            return;
        };
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("trace");
        let target = d.path().join("f");
        let exe = std::env::current_exe().unwrap();
        let st = std::process::Command::new(strace)
            .args(["-f", "-e", "trace=fsync,fdatasync", "-o"])
            .arg(&log)
            .arg(exe)
            .args([
                "--exact",
                "durable::tests::syncs_the_file_and_its_directory",
                "--test-threads=1",
            ])
            .env("ETCD_CHARM_DURABLE_CHILD", &target)
            .output()
            .unwrap();
        assert!(
            st.status.success(),
            "{}",
            String::from_utf8_lossy(&st.stderr)
        );
        let trace = std::fs::read_to_string(&log).unwrap();
        let syncs = trace
            .lines()
            .filter(|l| l.contains("fsync(") && l.contains("= 0"))
            .count();
        assert!(syncs >= 2, "file and dir fsynced:\n{trace}");
        assert_eq!(std::fs::read(&target).unwrap(), b"x");
    }

    fn which_strace() -> Result<std::path::PathBuf, ()> {
        ["/usr/bin/strace", "/bin/strace"]
            .iter()
            .map(std::path::PathBuf::from)
            .find(|p| p.exists())
            .ok_or(())
    }
}
