//! Free space before the migration's copies: the pure decision on observed
//! numbers, and the executor on a small tmpfs that cannot hold the copy.

use super::*;
use crate::layout::{DirFacts, DiskLayout, FoundConfig, Location, Role, SpaceFacts};
use crate::paths::Paths;
use std::path::Path;

const IDS: WalIds = WalIds {
    member_id: 0xabc,
    cluster_id: 0xdef,
};
const GIB: u64 = 1 << 30;

/// A member in `<data>/etcd0.etcd` on another file system than the
/// canonical dir (so it is copied), with the given space facts.
fn layout(
    paths: &Paths,
    member: u64,
    canon_free: u64,
    backup_free: u64,
    same_fs: bool,
) -> DiskLayout {
    let legacy = paths.legacy_data_dir("etcd0");
    let facts = |dev, db: Option<u64>| DirFacts {
        member_dir: db.is_some(),
        device: Some(dev),
        db_size: db,
        ..Default::default()
    };
    let mut l = DiskLayout {
        config: Some(Ok(FoundConfig {
            name: Some("etcd0".into()),
            data_dir: Some(paths.unhost(&legacy).display().to_string()),
            ..Default::default()
        })),
        env_configs: vec![],
        locations: vec![
            Location {
                path: paths.data_dir(),
                role: Role::Canonical,
                exists: true,
                member: Ok(None),
                facts: facts(1, None),
            },
            Location {
                path: legacy.clone(),
                role: Role::Legacy,
                exists: true,
                member: Ok(Some(IDS)),
                facts: facts(2, Some(member / 2)),
            },
        ],
        migration: Default::default(),
    };
    l.migration.space = Some(SpaceFacts {
        member_bytes: [(legacy, member)].into_iter().collect(),
        canonical_free: canon_free,
        backup_free,
        same_fs,
    });
    l
}

#[test]
fn a_copy_that_does_not_fit_blocks_naming_sizes_and_path() {
    let paths = Paths::new("/r");
    let l = layout(&paths, 2 * GIB, GIB, 100 * GIB, false);
    let Migration::Conflict { message } = plan_migration(&l, &paths, "etcd0") else {
        panic!("expected a block");
    };
    assert!(
        message.contains("need 2.2 GiB in /var/snap/etcd/current")
            && message.contains("1.0 GiB free"),
        "{message}"
    );
}

#[test]
fn a_snapshot_that_does_not_fit_blocks() {
    let paths = Paths::new("/r");
    let l = layout(&paths, 2 * GIB, 100 * GIB, GIB / 2, false);
    let Migration::Conflict { message } = plan_migration(&l, &paths, "etcd0") else {
        panic!("expected a block");
    };
    assert!(
        message.contains("snapshot") && message.contains("/var/snap/etcd/common/backups"),
        "{message}"
    );
}

#[test]
fn an_online_snapshot_that_does_not_fit_blocks_too() {
    let paths = Paths::new("/r");
    let l = layout(&paths, 2 * GIB, 100 * GIB, GIB / 2, false);
    let live = Some(("http://10.0.0.1:2379", IDS.member_id));
    let Migration::Conflict { message } = plan_migration_live(&l, &paths, "etcd0", live) else {
        panic!("expected a block");
    };
    assert!(
        message.contains("snapshot") && message.contains("/var/snap/etcd/common/backups"),
        "{message}"
    );
}

#[test]
fn on_one_file_system_the_copy_and_the_snapshot_add_up() {
    let paths = Paths::new("/r");
    // 3 GiB free holds the 2 GiB copy, or the 1 GiB db's snapshot, not both.
    let alone = layout(&paths, 2 * GIB, 3 * GIB, 3 * GIB, false);
    assert!(matches!(
        plan_migration(&alone, &paths, "etcd0"),
        Migration::Migrate { .. }
    ));
    let shared = layout(&paths, 2 * GIB, 3 * GIB, 3 * GIB, true);
    assert!(matches!(
        plan_migration(&shared, &paths, "etcd0"),
        Migration::Conflict { .. }
    ));
}

#[test]
fn unread_space_leaves_the_check_to_the_executor() {
    let paths = Paths::new("/r");
    let mut l = layout(&paths, 2 * GIB, 0, 0, false);
    l.migration.space = None;
    assert!(matches!(
        plan_migration(&l, &paths, "etcd0"),
        Migration::Migrate { .. }
    ));
}

/// A tmpfs mounted for the test (we are root), unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(opts: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            crate::prereq::skip(
                "migrate ENOSPC copy",
                "cannot mount a tmpfs",
                "run the tests as root",
            );
            return None;
        }
        Some(Tmpfs { dir })
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.dir.path())
            .status();
    }
}

/// A member of `files` files of `size` bytes each.
fn member(dir: &Path, files: usize, size: usize) -> PathBuf {
    let m = dir.join("member");
    crate::wal::write_test_segment(dir, IDS).unwrap();
    for i in 0..files {
        std::fs::write(m.join("snap").join(format!("f{i}")), vec![1u8; size]).unwrap();
    }
    m
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_full_target_blocks_and_no_partial_copy_accumulates() {
    // 32 MiB of tmpfs cannot take a 40 MiB member (plus the margin).
    let Some(fs) = Tmpfs::mount("size=32m") else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    let from = member(src.path(), 4, 10 << 20);
    let canon = fs.path().join("current");
    std::fs::create_dir_all(&canon).unwrap();
    let step = MigrationStep::Copy {
        from: from.clone(),
        wal_dir: None,
        to: canon.join(INCOMING),
    };
    for attempt in 1..=3 {
        let msg = apply(&step, &mut |_| {}).unwrap().expect("blocked");
        assert!(
            msg.contains("need 106.0 MiB in") && msg.contains("MiB free"),
            "attempt {attempt}: {msg}"
        );
        assert!(
            entries(&canon).is_empty(),
            "attempt {attempt}: {:?}",
            entries(&canon)
        );
    }
    // The snapshot checks too.
    let backups = fs.path().join("backups");
    let snap = MigrationStep::Snapshot {
        member_dir: from.clone(),
        name: "etcd0".into(),
        ids: IDS,
        backup_dir: backups.clone(),
    };
    std::fs::write(from.join("snap/db"), vec![2u8; 40 << 20]).unwrap();
    let msg = apply(&snap, &mut |_| {}).unwrap().expect("blocked");
    assert!(msg.contains("snapshot") && msg.contains("need"), "{msg}");
    assert!(!backups.exists() || entries(&backups).is_empty());
}

#[test]
fn a_copy_that_fills_the_target_part_way_removes_its_partial_copy() {
    // Room for the bytes but only a few inodes: the copy passes the space
    // check and then fails with ENOSPC part way, three times.
    let Some(fs) = Tmpfs::mount("size=256m,nr_inodes=8") else {
        return;
    };
    let src = tempfile::tempdir().unwrap();
    let from = member(src.path(), 12, 1 << 10);
    let canon = fs.path().join("current");
    std::fs::create_dir_all(&canon).unwrap();
    let step = MigrationStep::Copy {
        from,
        wal_dir: None,
        to: canon.join(INCOMING),
    };
    for attempt in 1..=3 {
        let err = apply(&step, &mut |_| {}).expect_err("the copy cannot fit");
        assert!(
            err.to_string().contains("No space left"),
            "attempt {attempt}: {err}"
        );
        assert!(
            entries(&canon).is_empty(),
            "attempt {attempt}: {:?}",
            entries(&canon)
        );
    }
}

#[test]
fn killed_snapshots_leave_one_partial_at_most() {
    let tmp = tempfile::tempdir().unwrap();
    let from = member(tmp.path(), 1, 1000);
    let backups = tmp.path().join("backups");
    for stamp in ["20260101T000000Z", "20260102T000000Z"] {
        std::fs::create_dir_all(backups.join(format!(
            "{}.partial",
            snapshot_name(stamp, "etcd0", IDS.member_id)
        )))
        .unwrap();
    }
    let snap = MigrationStep::Snapshot {
        member_dir: from,
        name: "etcd0".into(),
        ids: IDS,
        backup_dir: backups.clone(),
    };
    assert_eq!(apply(&snap, &mut |_| {}).unwrap(), None);
    let left = entries(&backups);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(!left[0].ends_with(".partial"), "{left:?}");
}

#[test]
fn killed_copies_leave_one_incomplete_copy_at_most() {
    let tmp = tempfile::tempdir().unwrap();
    let canon = tmp.path().join("current");
    for attempt in 1..=3 {
        // A kill during the copy leaves member.incoming; the retry sets it aside.
        let incoming = canon.join(INCOMING);
        std::fs::create_dir_all(incoming.join("snap")).unwrap();
        std::fs::write(incoming.join("snap/db"), vec![attempt as u8; 100]).unwrap();
        let step = MigrationStep::SetAside {
            path: incoming,
            kind: Aside::Incomplete,
        };
        assert_eq!(apply(&step, &mut |_| {}).unwrap(), None);
        let left = entries(&canon);
        assert_eq!(left.len(), 1, "attempt {attempt}: {left:?}");
        let db = std::fs::read(canon.join(&left[0]).join("snap/db")).unwrap();
        assert_eq!(db[0], attempt as u8, "the newest is kept");
    }
}
