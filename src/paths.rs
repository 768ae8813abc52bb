//! Every host path the charm touches, resolved under `ETCD_CHARM_ROOT`
//! (default `/`), so tests and jujusim run unprivileged in a temp dir.

use std::path::{Path, PathBuf};

/// Where the etcd snap (and the Python charm before us) keeps things.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    root: PathBuf,
    /// The canonical data dir when it is not the snap's (the `data`
    /// storage volume: `/media/etcd/data`); see [`crate::storage`].
    data_dir: Option<PathBuf>,
}

impl Paths {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Paths {
            root: root.into(),
            data_dir: None,
        }
    }

    /// The same paths with the canonical data dir at `abs` (a host path as
    /// configs name it, mapped under the root).
    pub fn with_data_dir(&self, abs: impl AsRef<Path>) -> Self {
        Paths {
            root: self.root.clone(),
            data_dir: Some(self.host(abs)),
        }
    }

    /// Reads `ETCD_CHARM_ROOT`; unset or empty means `/`.
    pub fn from_env() -> Self {
        match std::env::var_os("ETCD_CHARM_ROOT") {
            Some(r) if !r.is_empty() => Paths::new(r),
            _ => Paths::new("/"),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Maps an absolute host path (as written in configs) under the root.
    ///
    /// A path already under a root other than `/` is returned unchanged:
    /// under a test root the charm writes configs with the paths etcd really
    /// uses (`<root>/var/snap/…`), and reading them back must not prefix the
    /// root twice. Configs as earlier charms left them (`/var/snap/…`) map
    /// under the root as before.
    pub fn host(&self, abs: impl AsRef<Path>) -> PathBuf {
        let abs = abs.as_ref();
        if self.root != Path::new("/") && abs.starts_with(&self.root) {
            return abs.to_path_buf();
        }
        let rel = abs.strip_prefix("/").unwrap_or(abs);
        self.root.join(rel)
    }

    /// A path as a config file names it. Configs the charm writes hold real
    /// paths (already under the root); configs left by earlier charms name
    /// host paths, which are mapped under the root.
    pub fn from_config(&self, p: impl AsRef<Path>) -> PathBuf {
        let p = p.as_ref();
        if self.root != Path::new("/") && p.starts_with(&self.root) {
            p.to_path_buf()
        } else {
            self.host(p)
        }
    }

    /// The inverse of [`Paths::host`]: the path as etcd and configs name it.
    /// Paths outside the root are returned unchanged.
    pub fn unhost(&self, p: impl AsRef<Path>) -> PathBuf {
        let p = p.as_ref();
        match p.strip_prefix(&self.root) {
            Ok(rel) => Path::new("/").join(rel),
            Err(_) => p.to_path_buf(),
        }
    }

    /// `/var/snap/etcd/common`: configs live here.
    pub fn common_dir(&self) -> PathBuf {
        self.host("/var/snap/etcd/common")
    }

    /// `/var/snap/etcd/common/etcd.conf.yml`, read by etcd via `--config-file`.
    pub fn config_file(&self) -> PathBuf {
        self.common_dir().join("etcd.conf.yml")
    }

    /// The environment-style config of the etcd 2.x snap.
    pub fn env_config(&self) -> PathBuf {
        self.common_dir().join("etcd.conf")
    }

    /// What the snap renamed `etcd.conf` to on its 2.x → 3.x move.
    pub fn env_config_2x(&self) -> PathBuf {
        self.common_dir().join("etcd.conf.2x")
    }

    /// The canonical data dir (holds `member/`): `/var/snap/etcd/current`,
    /// or the storage volume's `/media/etcd/data` when it is in use.
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(|| self.snap_data_dir())
    }

    /// `/var/snap/etcd/current`, the snap's own data dir.
    pub fn snap_data_dir(&self) -> PathBuf {
        self.host("/var/snap/etcd/current")
    }

    /// `<snap data dir>/<name>.etcd`: where clusters born on etcd 2.3 kept the member.
    pub fn legacy_data_dir(&self, member_name: &str) -> PathBuf {
        self.snap_data_dir().join(format!("{member_name}.etcd"))
    }

    /// Dated backups go beside what they back up, never inside it.
    pub fn backup_dir(&self) -> PathBuf {
        self.host("/var/snap/etcd/common/backups")
    }

    /// The maintenance agent's rolling scheduled snapshots.
    pub fn scheduled_snapshot_dir(&self) -> PathBuf {
        self.backup_dir().join("scheduled")
    }

    /// The systemd drop-in that adds our restart policy and start guard.
    pub fn systemd_dropin(&self) -> PathBuf {
        self.host("/etc/systemd/system/snap.etcd.etcd.service.d/10-etcd-charm.conf")
    }

    /// Pid file of the direct (no systemd) service backend.
    pub fn direct_pid_file(&self) -> PathBuf {
        self.host("/run/etcd-charm/etcd.pid")
    }

    /// Log file of the direct service backend.
    pub fn direct_log_file(&self) -> PathBuf {
        self.host("/var/log/etcd-charm/etcd.log")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_paths_live_under_the_root() {
        let p = Paths::new("/tmp/r");
        assert_eq!(
            p.config_file(),
            PathBuf::from("/tmp/r/var/snap/etcd/common/etcd.conf.yml")
        );
        assert_eq!(
            p.legacy_data_dir("etcd0"),
            PathBuf::from("/tmp/r/var/snap/etcd/current/etcd0.etcd")
        );
        assert_eq!(
            p.unhost(p.data_dir()),
            PathBuf::from("/var/snap/etcd/current")
        );
        assert_eq!(
            Paths::new("/").data_dir(),
            PathBuf::from("/var/snap/etcd/current")
        );
    }

    #[test]
    fn host_is_idempotent_under_a_test_root() {
        let p = Paths::new("/tmp/r");
        let once = p.host("/var/snap/etcd/current");
        assert_eq!(p.host(&once), once);
        // A sibling that merely shares the prefix as text is not under it.
        assert_eq!(p.host("/tmp/rx/a"), PathBuf::from("/tmp/r/tmp/rx/a"));
        assert_eq!(Paths::new("/").host("/a/b"), PathBuf::from("/a/b"));
    }
}
