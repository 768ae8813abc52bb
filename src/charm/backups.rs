//! Where the charm keeps copies of the keyspace (snapshots, pre-restore
//! backups, staged restores, the agent's scheduled snapshots) and keeping
//! them root-only: any local account that reads one reads every
//! Kubernetes Secret. Earlier revisions (and the Python charm) wrote them
//! 0644 in 0755 dirs; each hook tightens what it finds (observe lists,
//! plan decides, apply chmods).

use crate::paths::Paths;
use std::path::{Path, PathBuf};

/// The snapshot action's default target (the Python charm's).
pub const SNAPSHOT_TARGET: &str = "/home/ubuntu/etcd-snapshots";
/// The pre-restore backup's default target (the Python charm's home dir).
pub const RESTORE_BACKUP_TARGET: &str = "/home/ubuntu";
/// What the restore action names its backup in that shared dir.
pub const RESTORE_BACKUP_PREFIX: &str = "etcd-backup-before-restore-";

/// The dirs only the charm writes into: every file in them is keyspace.
pub fn own_dirs(paths: &Paths) -> Vec<PathBuf> {
    vec![
        paths.backup_dir(),
        paths.scheduled_snapshot_dir(),
        paths.from_config(SNAPSHOT_TARGET),
    ]
}

/// Makes `dir` ready for a keyspace copy: a dir of ours is created or
/// tightened to 0700; an operator's own dir (a `target=` param) is created
/// 0700 when missing and otherwise left as it is (the file is 0600).
pub fn prepare_dir(paths: &Paths, dir: &Path) -> std::io::Result<()> {
    if own_dirs(paths).iter().any(|d| d == dir) || !dir.exists() {
        crate::private::dir(dir)
    } else {
        Ok(())
    }
}

/// Paths of ours another account may read: the own dirs themselves, the
/// files in them, and the restore's backups in the shared home dir.
pub fn observe(paths: &Paths) -> Vec<(PathBuf, u32)> {
    let mut loose = Vec::new();
    let mut add = |p: PathBuf| {
        if let Some(mode) = crate::private::loose(&p) {
            loose.push((p, mode));
        }
    };
    for dir in own_dirs(paths) {
        if !dir.is_dir() {
            continue;
        }
        add(dir.clone());
        for f in files(&dir, |_| true) {
            add(f);
        }
    }
    let home = paths.from_config(RESTORE_BACKUP_TARGET);
    for f in files(&home, |n| n.starts_with(RESTORE_BACKUP_PREFIX)) {
        add(f);
    }
    loose
}

/// Regular files (not symlinks) directly in `dir` whose name passes.
fn files(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| keep(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Tightens each path: dirs to 0700, files to 0600.
pub fn tighten(paths: &[PathBuf]) -> std::io::Result<()> {
    for p in paths {
        let mode = if p.is_dir() {
            crate::private::DIR_MODE
        } else {
            crate::private::FILE_MODE
        };
        crate::private::tighten(p, mode)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }

    #[test]
    fn finds_open_backups_of_ours_and_leaves_the_operators_files_alone() {
        let d = tempfile::tempdir().unwrap();
        let paths = Paths::new(d.path());
        let snaps = paths.from_config(SNAPSHOT_TARGET);
        std::fs::create_dir_all(&snaps).unwrap();
        chmod(&snaps, 0o755);
        let snap = snaps.join("etcd-snapshot-2025.tar.gz");
        std::fs::write(&snap, b"keyspace").unwrap();
        chmod(&snap, 0o644);
        let home = paths.from_config(RESTORE_BACKUP_TARGET);
        let backup = home.join(format!("{RESTORE_BACKUP_PREFIX}x.db"));
        std::fs::write(&backup, b"keyspace").unwrap();
        chmod(&backup, 0o644);
        let theirs = home.join("notes.txt");
        std::fs::write(&theirs, b"mine").unwrap();
        chmod(&theirs, 0o644);
        let found: Vec<PathBuf> = observe(&paths).into_iter().map(|(p, _)| p).collect();
        assert_eq!(found, vec![snaps.clone(), snap.clone(), backup.clone()]);
        tighten(&found).unwrap();
        assert!(observe(&paths).is_empty());
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            (mode(&snaps), mode(&snap), mode(&backup), mode(&theirs)),
            (0o700, 0o600, 0o600, 0o644)
        );
    }

    #[test]
    fn an_operators_existing_target_is_not_tightened() {
        let d = tempfile::tempdir().unwrap();
        let paths = Paths::new(d.path());
        let theirs = d.path().join("srv/dumps");
        std::fs::create_dir_all(&theirs).unwrap();
        chmod(&theirs, 0o755);
        prepare_dir(&paths, &theirs).unwrap();
        assert!(crate::private::loose(&theirs).is_some());
        let new = d.path().join("srv/new");
        prepare_dir(&paths, &new).unwrap();
        assert!(crate::private::loose(&new).is_none());
        let ours = paths.backup_dir();
        std::fs::create_dir_all(&ours).unwrap();
        chmod(&ours, 0o755);
        prepare_dir(&paths, &ours).unwrap();
        assert!(crate::private::loose(&ours).is_none());
    }
}
