//! The migration planner on every layout (pure), and its steps on temp dirs,
//! including a kill after each step of the plan converging.

use super::copy::{copy_member, tree_sizes};
use super::*;
use crate::layout::{DirFacts, FoundConfig, MigrationFacts, Snapshot, Staged};
use crate::layout::{DiskLayout, Location, Role};
use crate::paths::Paths;
use crate::wal::write_test_segment;
use std::collections::BTreeMap;
use std::time::UNIX_EPOCH;
use std::time::{Duration, SystemTime};

const OLD: WalIds = WalIds {
    member_id: 0x8e9e_05c5_2164_694d,
    cluster_id: 0xcdf8_1819_4e3a_8c32,
};
const NEW: WalIds = WalIds {
    member_id: 0x1111,
    cluster_id: 0x2222,
};

fn paths() -> Paths {
    Paths::new("/r")
}

fn t(secs: u64) -> Option<SystemTime> {
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

fn loc(path: &str, role: Role, ids: Option<WalIds>) -> Location {
    Location {
        path: paths().host(path),
        role,
        exists: true,
        member: Ok(ids),
        facts: DirFacts {
            member_dir: ids.is_some(),
            wal_dir: None,
            device: Some(1),
            db_size: ids.map(|_| 4096),
            newest_change: ids.and(t(1000)),
        },
    }
}

const CANON: &str = "/var/snap/etcd/current";
const LEGACY: &str = "/var/snap/etcd/current/etcd0.etcd";

fn layout(data_dir: Option<&str>, locations: Vec<Location>) -> DiskLayout {
    DiskLayout {
        config: data_dir.map(|d| {
            Ok(FoundConfig {
                name: Some("etcd0".into()),
                data_dir: Some(d.into()),
                ..Default::default()
            })
        }),
        env_configs: vec![],
        locations,
        migration: MigrationFacts::default(),
    }
}

fn staged(name: &str, ids: Option<WalIds>, mtime: u64) -> Staged {
    Staged {
        path: paths().host(CANON).join(name),
        member: Ok(ids),
        empty: false,
        mtime: t(mtime),
    }
}

fn plan(l: &DiskLayout) -> Migration {
    plan_migration(l, &paths(), "etcd0")
}

fn keys(m: &Migration) -> Vec<&'static str> {
    match m {
        Migration::Migrate { steps, .. } => steps.iter().map(|s| s.key()).collect(),
        other => panic!("expected a migration, got {other:?}"),
    }
}

fn conflict(m: &Migration) -> &str {
    match m {
        Migration::Conflict { message } => message,
        other => panic!("expected a conflict, got {other:?}"),
    }
}

fn h(p: &str) -> PathBuf {
    paths().host(p)
}

#[test]
fn canonical_only_needs_nothing() {
    let l = layout(
        Some(CANON),
        vec![
            loc(CANON, Role::Canonical, Some(OLD)),
            loc(LEGACY, Role::Legacy, None),
        ],
    );
    assert_eq!(plan(&l), Migration::Nothing);
    // A fresh machine: nothing anywhere.
    let l = layout(None, vec![loc(CANON, Role::Canonical, None)]);
    assert_eq!(plan(&l), Migration::Nothing);
}

#[test]
fn legacy_only_on_one_file_system_is_one_rename_after_a_snapshot() {
    let l = layout(
        Some(LEGACY),
        vec![
            loc(CANON, Role::Canonical, None),
            loc(LEGACY, Role::Legacy, Some(OLD)),
        ],
    );
    let m = plan(&l);
    let Migration::Migrate {
        from,
        ids,
        method,
        stop_etcd,
        steps,
    } = &m
    else {
        panic!("{m:?}")
    };
    assert_eq!(
        (from, *ids, method, *stop_etcd),
        (&h(LEGACY), OLD, &Method::Rename, true)
    );
    assert_eq!(
        steps,
        &vec![
            MigrationStep::Snapshot {
                member_dir: h(LEGACY).join("member"),
                name: "etcd0".into(),
                ids: OLD,
                backup_dir: paths().backup_dir(),
            },
            MigrationStep::Rename {
                from: h(LEGACY).join("member"),
                to: h(CANON).join("member"),
            },
        ]
    );
}

#[test]
fn config_regenerated_at_an_empty_canonical_dir_still_migrates() {
    // The reported failure, caught before etcd started: the config already
    // points at the canonical dir, the member is still in <name>.etcd.
    let l = layout(
        Some(CANON),
        vec![
            loc(CANON, Role::Canonical, None),
            loc(LEGACY, Role::Legacy, Some(OLD)),
        ],
    );
    assert_eq!(keys(&plan(&l)), ["migrate-snapshot", "migrate-rename"]);
}

#[test]
fn another_file_system_or_forced_copy_takes_the_copy_path() {
    let mut l = layout(
        Some(LEGACY),
        vec![
            loc(CANON, Role::Canonical, None),
            loc(LEGACY, Role::Legacy, Some(OLD)),
        ],
    );
    l.locations[1].facts.device = Some(2);
    let copy = [
        "migrate-snapshot",
        "migrate-copy",
        "migrate-verify",
        "migrate-set-aside-source",
        "migrate-promote",
    ];
    let m = plan(&l);
    assert_eq!(keys(&m), copy);
    assert!(
        matches!(&m, Migration::Migrate { method: Method::Copy { why }, .. } if why.contains("another file system"))
    );
    l.locations[1].facts.device = Some(1);
    l.migration.force_copy = true;
    let m = plan(&l);
    assert_eq!(keys(&m), copy);
    assert!(
        matches!(&m, Migration::Migrate { method: Method::Copy { why }, .. } if why.contains("ETCD_CHARM_MIGRATE"))
    );
    let Migration::Migrate { steps, .. } = m else {
        unreachable!()
    };
    assert_eq!(
        steps[1],
        MigrationStep::Copy {
            from: h(LEGACY).join("member"),
            wal_dir: None,
            to: h(CANON).join(INCOMING),
        }
    );
    assert_eq!(
        steps[4],
        MigrationStep::MoveIntoPlace {
            from: h(CANON).join(VERIFIED),
            to: h(CANON).join("member"),
        }
    );
}

#[test]
fn a_configured_dir_with_its_own_wal_dir_is_copied() {
    let mut srv = loc("/srv/etcd", Role::Configured, Some(OLD));
    srv.facts.wal_dir = Some(h("/srv/etcd-wal"));
    let l = layout(
        Some("/srv/etcd"),
        vec![
            loc(CANON, Role::Canonical, None),
            loc(LEGACY, Role::Legacy, None),
            srv,
        ],
    );
    let m = plan(&l);
    assert_eq!(
        keys(&m),
        [
            "migrate-snapshot",
            "migrate-copy",
            "migrate-verify",
            "migrate-set-aside-wal-dir",
            "migrate-set-aside-source",
            "migrate-promote"
        ]
    );
    let Migration::Migrate { from, steps, .. } = m else {
        unreachable!()
    };
    assert_eq!(from, h("/srv/etcd"));
    assert!(steps.contains(&MigrationStep::Copy {
        from: h("/srv/etcd/member"),
        wal_dir: Some(h("/srv/etcd-wal")),
        to: h(CANON).join(INCOMING),
    }));
}

#[test]
fn the_same_member_twice_follows_the_config() {
    let both = |data_dir: Option<&str>| {
        layout(
            data_dir,
            vec![
                loc(CANON, Role::Canonical, Some(OLD)),
                loc(LEGACY, Role::Legacy, Some(OLD)),
            ],
        )
    };
    // etcd ran on the canonical copy: the legacy one is a leftover.
    let m = plan(&both(Some(CANON)));
    assert!(
        matches!(
            &m,
            Migration::Migrate {
                method: Method::InPlace,
                stop_etcd: false,
                ..
            }
        ),
        "{m:?}"
    );
    assert_eq!(keys(&m), ["migrate-set-aside-source"]);
    // etcd ran on the legacy copy: the canonical one is stale.
    let m = plan(&both(Some(LEGACY)));
    assert_eq!(
        keys(&m),
        [
            "migrate-set-aside-stale",
            "migrate-snapshot",
            "migrate-rename"
        ]
    );
    // No config to say which: an operator decides.
    let msg = conflict(&plan(&both(None))).to_string();
    assert!(msg.contains("the same member in two places"), "{msg}");
}

#[test]
fn two_different_members_conflict_naming_both_paths_and_ids() {
    for data_dir in [Some(CANON), Some(LEGACY), None] {
        let l = layout(
            data_dir,
            vec![
                loc(CANON, Role::Canonical, Some(NEW)),
                loc(LEGACY, Role::Legacy, Some(OLD)),
            ],
        );
        let msg = conflict(&plan(&l)).to_string();
        for want in [
            "two different members",
            "member 1111 of cluster 2222 at /var/snap/etcd/current",
            "member 8e9e05c52164694d of cluster cdf818194e3a8c32 at /var/snap/etcd/current/etcd0.etcd",
            "Nothing was moved",
        ] {
            assert!(msg.contains(want), "{want:?} not in {msg}");
        }
    }
}

#[test]
fn an_empty_configured_dir_beside_two_members_conflicts_and_names_it() {
    let l = layout(
        Some("/srv/empty"),
        vec![
            loc(CANON, Role::Canonical, Some(NEW)),
            loc(LEGACY, Role::Legacy, Some(OLD)),
            loc("/srv/empty", Role::Configured, None),
        ],
    );
    let msg = conflict(&plan(&l)).to_string();
    assert!(msg.contains("etcd.conf.yml names /srv/empty"), "{msg}");
    // Two sources, no canonical member: still ambiguous.
    let l = layout(
        Some("/srv/etcd"),
        vec![
            loc(CANON, Role::Canonical, None),
            loc(LEGACY, Role::Legacy, Some(OLD)),
            loc("/srv/etcd", Role::Configured, Some(NEW)),
        ],
    );
    let msg = conflict(&plan(&l)).to_string();
    assert!(
        msg.contains("/srv/etcd") && msg.contains("etcd0.etcd"),
        "{msg}"
    );
}

#[test]
fn an_unreadable_wal_blocks() {
    let mut l = layout(
        Some(CANON),
        vec![
            loc(CANON, Role::Canonical, None),
            loc(LEGACY, Role::Legacy, None),
        ],
    );
    l.locations[1].member = Err(crate::wal::WalError {
        file: h(LEGACY).join("member/wal/0.wal"),
        problem: "bad CRC".into(),
    });
    let msg = conflict(&plan(&l)).to_string();
    assert!(
        msg.contains("etcd0.etcd") && msg.contains("bad CRC"),
        "{msg}"
    );
}

#[test]
fn after_the_rename_only_the_config_is_left_to_do() {
    // Killed after the rename, before etcd.conf.yml was rewritten.
    let l = layout(
        Some(LEGACY),
        vec![
            loc(CANON, Role::Canonical, Some(OLD)),
            loc(LEGACY, Role::Legacy, None),
        ],
    );
    assert_eq!(plan(&l), Migration::Nothing);
}

#[test]
fn crash_intermediates_of_the_copy_path() {
    let base = || {
        let mut l = layout(
            Some(LEGACY),
            vec![
                loc(CANON, Role::Canonical, None),
                loc(LEGACY, Role::Legacy, Some(OLD)),
            ],
        );
        l.migration.force_copy = true;
        l
    };
    // Killed during or after the copy: the unverified copy goes aside, redone.
    let mut l = base();
    l.migration.incoming = Some(staged(INCOMING, None, 2000));
    assert_eq!(
        keys(&plan(&l)),
        [
            "migrate-set-aside-incomplete",
            "migrate-snapshot",
            "migrate-copy",
            "migrate-verify",
            "migrate-set-aside-source",
            "migrate-promote"
        ]
    );
    // Killed after verify: the verified copy is used; the snapshot taken
    // before the copy is still fresh.
    let mut l = base();
    l.migration.verified = Some(staged(VERIFIED, Some(OLD), 2000));
    l.migration.snapshots = vec![Snapshot {
        path: paths()
            .backup_dir()
            .join("x-migrate-etcd0-8e9e05c52164694d"),
        member_id: OLD.member_id,
        newest_change: t(1500),
    }];
    assert_eq!(
        keys(&plan(&l)),
        ["migrate-set-aside-source", "migrate-promote"]
    );
    // ... unless etcd ran on the source after the copy was verified.
    l.locations[1].facts.newest_change = t(3000);
    assert_eq!(
        keys(&plan(&l)),
        [
            "migrate-set-aside-stale",
            "migrate-snapshot",
            "migrate-copy",
            "migrate-verify",
            "migrate-set-aside-source",
            "migrate-promote"
        ]
    );
    // Killed after the source went aside: put the copy in place.
    let mut l = base();
    l.locations[1].member = Ok(None);
    l.migration.verified = Some(staged(VERIFIED, Some(OLD), 2000));
    let m = plan(&l);
    assert_eq!(keys(&m), ["migrate-promote"]);
    assert!(matches!(m, Migration::Migrate { ids: OLD, .. }));
    // A verified copy of another member: conflict.
    let mut l = base();
    l.migration.verified = Some(staged(VERIFIED, Some(NEW), 2000));
    let msg = conflict(&plan(&l)).to_string();
    assert!(
        msg.contains("member.verified") && msg.contains("1111"),
        "{msg}"
    );
    // An unfinished copy whose source is gone: nothing to copy from.
    let mut l = base();
    l.locations[1].member = Ok(None);
    l.migration.incoming = Some(staged(INCOMING, Some(OLD), 2000));
    let msg = conflict(&plan(&l)).to_string();
    assert!(msg.contains("member.incoming"), "{msg}");
}

#[test]
fn a_walless_canonical_member_dir_goes_aside_first() {
    let mut l = layout(
        Some(CANON),
        vec![
            loc(CANON, Role::Canonical, None),
            loc(LEGACY, Role::Legacy, Some(OLD)),
        ],
    );
    l.locations[0].facts.member_dir = true;
    assert_eq!(
        keys(&plan(&l)),
        [
            "migrate-set-aside-nowal",
            "migrate-snapshot",
            "migrate-rename"
        ]
    );
}

#[test]
fn a_fresh_snapshot_is_not_taken_again() {
    let mut l = layout(
        Some(LEGACY),
        vec![
            loc(CANON, Role::Canonical, None),
            loc(LEGACY, Role::Legacy, Some(OLD)),
        ],
    );
    l.migration.snapshots = vec![Snapshot {
        path: PathBuf::from("/r/b/s"),
        member_id: OLD.member_id,
        newest_change: t(1000),
    }];
    assert_eq!(keys(&plan(&l)), ["migrate-rename"]);
    // Another member's snapshot does not count.
    l.migration.snapshots[0].member_id = 7;
    assert_eq!(keys(&plan(&l)), ["migrate-snapshot", "migrate-rename"]);
}

const LIVE: &str = "http://10.0.0.1:2379";

fn plan_live(l: &DiskLayout, member_id: u64) -> Migration {
    plan_migration_live(l, &paths(), "etcd0", Some((LIVE, member_id)))
}

#[test]
fn a_running_member_is_snapshotted_online_first_a_stopped_one_offline() {
    let l = layout(
        Some(LEGACY),
        vec![
            loc(CANON, Role::Canonical, None),
            loc(LEGACY, Role::Legacy, Some(OLD)),
        ],
    );
    // Running: the online snapshot is the first step, the only one the
    // charm runs before StopEtcd (before_stop), and nothing after it
    // copies the db.
    let m = plan_live(&l, OLD.member_id);
    assert_eq!(keys(&m), ["migrate-online-snapshot", "migrate-rename"]);
    let Migration::Migrate { steps, .. } = &m else {
        unreachable!()
    };
    assert_eq!(
        steps[0],
        MigrationStep::OnlineSnapshot {
            endpoint: LIVE.into(),
            member_dir: h(LEGACY).join("member"),
            name: "etcd0".into(),
            ids: OLD,
            backup_dir: paths().backup_dir(),
        }
    );
    let before: Vec<bool> = steps.iter().map(|s| s.before_stop()).collect();
    assert_eq!(before, [true, false]);
    // Stopped (or another member answering there): the offline db copy,
    // taken after the stop.
    for m in [plan(&l), plan_live(&l, 7)] {
        assert_eq!(keys(&m), ["migrate-snapshot", "migrate-rename"]);
        let Migration::Migrate { steps, .. } = &m else {
            unreachable!()
        };
        assert!(steps.iter().all(|s| !s.before_stop()));
    }
    // The copy path too: online first, then everything else.
    let mut l = l;
    l.migration.force_copy = true;
    let k = keys(&plan_live(&l, OLD.member_id));
    assert_eq!(k[0], "migrate-online-snapshot");
    assert!(!k.contains(&"migrate-snapshot"), "{k:?}");
    assert!(k.contains(&"migrate-copy"), "{k:?}");
    // A fresh snapshot is not taken again, online either.
    l.migration.snapshots = vec![Snapshot {
        path: PathBuf::from("/r/b/s"),
        member_id: OLD.member_id,
        newest_change: t(1000),
    }];
    l.migration.force_copy = false;
    assert_eq!(keys(&plan_live(&l, OLD.member_id)), ["migrate-rename"]);
}

#[test]
fn snapshot_names_round_trip() {
    let n = snapshot_name("2026-11-29T17-40-05Z", "etcd0", OLD.member_id);
    assert_eq!(n, "2026-11-29T17-40-05Z-migrate-etcd0-8e9e05c52164694d");
    assert_eq!(parse_snapshot_name(&n, "etcd0"), Some(OLD.member_id));
    assert_eq!(parse_snapshot_name(&n, "etcd1"), None);
    assert_eq!(parse_snapshot_name(&format!("{n}.partial"), "etcd0"), None);
    assert_eq!(parse_snapshot_name("member.backup-x", "etcd0"), None);
}

#[test]
fn set_aside_names() {
    assert_eq!(
        aside_base(Path::new("/x/member.incoming"), Aside::Incomplete),
        "member.incomplete"
    );
    assert_eq!(
        aside_base(Path::new("/x/member"), Aside::Migrated),
        "member.migrated"
    );
}

// ------------------------------------------------------------ on disk

/// A member as etcd leaves it: WAL, snap/db, a .snap file, private modes.
fn fake_member(data_dir: &Path, ids: WalIds) {
    use std::os::unix::fs::PermissionsExt;
    write_test_segment(data_dir, ids).unwrap();
    let member = data_dir.join("member");
    std::fs::write(member.join("snap/db"), vec![7u8; 300_000]).unwrap();
    std::fs::write(
        member.join("snap/0000000000000002-0000000000000005.snap"),
        b"snap",
    )
    .unwrap();
    std::fs::write(member.join("wal/0.tmp"), vec![0u8; 1000]).unwrap();
    for (p, mode) in [
        (member.clone(), 0o700),
        (member.join("snap"), 0o700),
        (member.join("wal"), 0o700),
        (member.join("snap/db"), 0o600),
    ] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// relative path → (size, mode, content) of every file under `dir`.
fn manifest(dir: &Path) -> BTreeMap<PathBuf, (u64, u32, Vec<u8>)> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = BTreeMap::new();
    for (rel, _) in tree_sizes(dir, Path::new(""), false).unwrap() {
        let p = dir.join(&rel);
        let meta = std::fs::metadata(&p).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        out.insert(rel, (meta.len(), meta.permissions().mode() & 0o777, bytes));
    }
    out
}

/// Observes, plans and applies at most `budget` steps; None when there was
/// nothing left to do.
fn run_steps(paths: &Paths, force_copy: bool, budget: usize) -> Option<usize> {
    let mut l = crate::layout::observe(paths, "etcd0");
    l.migration.force_copy = force_copy;
    match plan_migration(&l, paths, "etcd0") {
        Migration::Nothing => None,
        Migration::Conflict { message } => panic!("conflict: {message}"),
        Migration::Migrate { steps, .. } => {
            let mut n = 0;
            for s in steps.iter().take(budget) {
                let blocked = apply(s, &mut |_| {}).unwrap();
                assert_eq!(blocked, None, "{s}");
                n += 1;
            }
            Some(n)
        }
    }
}

fn legacy_root(config_data_dir: &str) -> (tempfile::TempDir, Paths) {
    let tmp = tempfile::tempdir().unwrap();
    let paths = Paths::new(tmp.path());
    fake_member(&paths.legacy_data_dir("etcd0"), OLD);
    std::fs::create_dir_all(paths.common_dir()).unwrap();
    std::fs::write(
        paths.config_file(),
        format!("name: 'etcd0'\ndata-dir: '{config_data_dir}'\nwal-dir: ''\n"),
    )
    .unwrap();
    (tmp, paths)
}

#[test]
fn a_kill_after_any_step_converges_with_every_file_kept() {
    for force_copy in [false, true] {
        let (_tmp, paths) = legacy_root(LEGACY);
        let want = manifest(&paths.legacy_data_dir("etcd0").join("member"));
        let mut l = crate::layout::observe(&paths, "etcd0");
        l.migration.force_copy = force_copy;
        let total = keys(&plan_migration(&l, &paths, "etcd0")).len();
        drop(_tmp);
        for kill_after in 0..=total {
            let (_tmp, paths) = legacy_root(LEGACY);
            // First run dies after `kill_after` steps; reruns converge.
            run_steps(&paths, force_copy, kill_after);
            let mut reruns = 0;
            while run_steps(&paths, force_copy, usize::MAX).is_some() {
                reruns += 1;
                assert!(reruns < 3, "no convergence (kill after {kill_after})");
            }
            let canon = paths.data_dir().join("member");
            assert_eq!(
                manifest(&canon),
                want,
                "copy={force_copy} kill after {kill_after}"
            );
            assert_eq!(crate::wal::read_ids(&paths.data_dir()), Ok(Some(OLD)));
            let legacy = paths.legacy_data_dir("etcd0");
            assert!(!legacy.join("member").exists());
            let names: Vec<String> = std::fs::read_dir(&legacy)
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if force_copy {
                assert_eq!(names.len(), 1, "{names:?}");
                assert!(names[0].starts_with("member.migrated-"), "{names:?}");
                assert_eq!(manifest(&legacy.join(&names[0])), want);
            } else {
                assert!(names.is_empty(), "{names:?}");
            }
            let snaps: Vec<_> = std::fs::read_dir(paths.backup_dir())
                .unwrap()
                .flatten()
                .collect();
            assert_eq!(snaps.len(), 1, "one snapshot, kill after {kill_after}");
            let db = snaps[0].path().join("db");
            assert_eq!(std::fs::read(db).unwrap(), vec![7u8; 300_000]);
        }
    }
}

#[test]
fn a_kill_during_the_copy_sets_the_partial_copy_aside_and_copies_again() {
    let (_tmp, paths) = legacy_root(LEGACY);
    let want = manifest(&paths.legacy_data_dir("etcd0").join("member"));
    run_steps(&paths, true, 1); // the snapshot
                                // What a kill half-way through the copy leaves.
    let incoming = paths.data_dir().join(INCOMING);
    std::fs::create_dir_all(incoming.join("snap")).unwrap();
    std::fs::write(incoming.join("snap/db"), vec![7u8; 1000]).unwrap();
    while run_steps(&paths, true, usize::MAX).is_some() {}
    assert_eq!(manifest(&paths.data_dir().join("member")), want);
    let aside: Vec<String> = std::fs::read_dir(paths.data_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("member.incomplete-"))
        .collect();
    assert_eq!(aside.len(), 1, "the partial copy is kept aside");
    let kept = paths.data_dir().join(&aside[0]).join("snap/db");
    assert_eq!(std::fs::read(kept).unwrap().len(), 1000);
}

#[test]
fn a_copy_that_does_not_match_is_not_used() {
    let (_tmp, paths) = legacy_root(LEGACY);
    let src = paths.legacy_data_dir("etcd0").join("member");
    let incoming = paths.data_dir().join(INCOMING);
    copy_member(&src, None, &incoming, &mut |_| {}).unwrap();
    std::fs::write(incoming.join("snap/db"), b"short").unwrap();
    let step = MigrationStep::Verify {
        from: src.clone(),
        wal_dir: None,
        copy: incoming.clone(),
        ids: OLD,
        to: paths.data_dir().join(VERIFIED),
    };
    let msg = apply(&step, &mut |_| {}).unwrap().expect("blocked");
    assert!(
        msg.contains("snap/db") && msg.contains("does not match"),
        "{msg}"
    );
    assert!(incoming.exists() && !paths.data_dir().join(VERIFIED).exists());
    // A copy of another member is refused too.
    let other = tempfile::tempdir().unwrap();
    fake_member(other.path(), NEW);
    let copy = paths.data_dir().join("other.incoming");
    copy_member(&other.path().join("member"), None, &copy, &mut |_| {}).unwrap();
    let step = MigrationStep::Verify {
        from: other.path().join("member"),
        wal_dir: None,
        copy,
        ids: OLD,
        to: paths.data_dir().join(VERIFIED),
    };
    let msg = apply(&step, &mut |_| {}).unwrap().expect("blocked");
    assert!(msg.contains("member 1111"), "{msg}");
}

#[test]
fn a_separate_wal_dir_is_copied_into_the_member_and_set_aside() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = Paths::new(tmp.path());
    let data = paths.host("/srv/etcd");
    let wal_dir = paths.host("/srv/etcd-wal");
    fake_member(&data, OLD);
    // With wal-dir set, the segments live there, not in member/wal.
    std::fs::rename(data.join("member/wal"), &wal_dir).unwrap();
    std::fs::create_dir_all(paths.common_dir()).unwrap();
    std::fs::write(
        paths.config_file(),
        "name: etcd0\ndata-dir: /srv/etcd\nwal-dir: /srv/etcd-wal\n",
    )
    .unwrap();
    let l = crate::layout::observe(&paths, "etcd0");
    assert!(matches!(
        plan_migration(&l, &paths, "etcd0"),
        Migration::Migrate {
            method: Method::Copy { .. },
            ids: OLD,
            ..
        }
    ));
    while run_steps(&paths, false, usize::MAX).is_some() {}
    assert_eq!(crate::wal::read_ids(&paths.data_dir()), Ok(Some(OLD)));
    let wal_names: Vec<String> = std::fs::read_dir(&wal_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(wal_names.len(), 1);
    assert!(wal_names[0].starts_with("migrated-"), "{wal_names:?}");
    assert_eq!(crate::wal::read_ids_in_wal_dir(&wal_dir), Ok(None));
    assert!(paths.data_dir().join("member/wal/0.tmp").is_file());
}

#[test]
fn progress_is_reported_in_percent() {
    let (_tmp, paths) = legacy_root(LEGACY);
    let src = paths.legacy_data_dir("etcd0").join("member");
    let mut seen = Vec::new();
    copy_member(&src, None, &paths.data_dir().join(INCOMING), &mut |m| {
        seen.push(m.to_string())
    })
    .unwrap();
    assert!(seen.iter().any(|m| m.contains('%')), "{seen:?}");
    assert!(seen.last().unwrap().contains("100%"), "{seen:?}");
}

#[test]
fn two_snapshots_in_one_second_both_land_and_both_count() {
    // The offline snapshot after a kill right after the online one can
    // fall in the same second: it must not collide with it.
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("etcd0.etcd");
    fake_member(&data, OLD);
    let backups = tmp.path().join("backups");
    let step = MigrationStep::Snapshot {
        member_dir: data.join("member"),
        name: "etcd0".into(),
        ids: OLD,
        backup_dir: backups.clone(),
    };
    for _ in 0..2 {
        assert_eq!(apply(&step, &mut |_| {}).unwrap(), None);
    }
    let got: Vec<Option<u64>> = std::fs::read_dir(&backups)
        .unwrap()
        .flatten()
        .map(|e| parse_snapshot_name(&e.file_name().to_string_lossy(), "etcd0"))
        .collect();
    assert_eq!(got, [Some(OLD.member_id); 2]);
}
