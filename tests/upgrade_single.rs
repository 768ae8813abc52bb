//! One unit upgraded from the Python charm's layout, on real etcd through
//! jujusim: the member born under `etcd0.etcd` ends up under the canonical
//! data dir with every key, the same IDs and the same token; by rename on one
//! file system, by copy across two; a conflict blocks with nothing moved.

mod upgrade_support;
use upgrade_support::*;

use etcd_charm::paths::Paths;
use std::path::{Path, PathBuf};
use std::process::Command;

const KEYS: usize = 50;

#[test]
fn a_running_legacy_unit_is_migrated_by_rename_with_every_key_kept() {
    let up = Upgrade::deploy(1, &[]);
    let u = "etcd/0";
    let legacy = bootstrap_legacy(&up, KEYS, true);
    up.start_old_etcd();
    let ep = up.m.endpoint(u);
    assert_eq!(
        live_ids(&ep),
        legacy.ids[0].1,
        "the old etcd runs the legacy member"
    );

    // The dry run through jujusim sees the plan the hooks will run.
    let runs = up.dry_run();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let (_, code, report) = &runs[0];
    assert_eq!(*code, 0, "{report:#}");
    assert_eq!(report["verdict"], "proceed");
    assert_eq!(report["migration"]["kind"], "migrate");
    assert_eq!(report["migration"]["method"], "rename (same file system)");
    assert_eq!(report["token"]["value"], TOKEN);
    let keys: Vec<&str> = report["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap())
        .collect();
    let pos = |k: &str| {
        keys.iter()
            .position(|x| *x == k)
            .unwrap_or_else(|| panic!("{k} in {keys:?}"))
    };
    // etcd answers: its snapshot is streamed online before the stop, and
    // the db is not copied again while it is down.
    assert!(pos("migrate-online-snapshot") < pos("stop"));
    assert!(!keys.contains(&"migrate-snapshot"), "{keys:?}");
    assert!(pos("migrate-rename") < pos("write-config"));
    assert!(pos("write-config") < pos("start"));
    assert!(pos("start") < pos("verify-member"));

    let out = up.refresh(&[]);
    assert!(
        out.status.success(),
        "refresh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    up.m.assert_all_healthy(1);
    assert_migrated(&up, u, legacy.ids[0].1);
    // The online snapshot is a v3 snapshot etcdctl can read (and restore).
    let backups = up.paths(u).backup_dir();
    let snap = names(&backups)
        .into_iter()
        .find(|n| n.contains("-migrate-"))
        .map(|n| backups.join(n).join("db"))
        .expect("a migration snapshot");
    let status = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["snapshot", "status", "-w", "json"])
        .arg(&snap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{}: {text}", snap.display());
    let total: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert!(
        total["totalKey"].as_u64().unwrap_or(0) >= KEYS as u64,
        "{}: {total}",
        snap.display()
    );
    assert_eq!(live_ids(&ep), legacy.ids[0].1);
    assert_keys(&ep, "legacy", KEYS);
    assert_eq!(
        up.m.token(),
        TOKEN,
        "the leader recorded the recovered token"
    );
    // The rename moved the member: the legacy dir is empty, not a copy.
    assert!(
        names(&up.legacy_dir(u)).is_empty(),
        "{:?}",
        names(&up.legacy_dir(u))
    );

    // Every later hook converges: nothing more to move, still healthy.
    up.m.ok(&["reboot", u]);
    up.m.assert_all_healthy(1);
    assert_eq!(live_ids(&ep), legacy.ids[0].1);
    assert_keys(&ep, "legacy", KEYS);
}

/// Where the legacy member lives on another file system: a tmpfs mounted
/// at `etcd0.etcd` when the machine lets us mount, else a dir on /dev/shm
/// linked there when /dev/shm is another file system, else none (the test
/// then forces the copy path with ETCD_CHARM_MIGRATE=copy).
struct OtherFs {
    mounted: Option<PathBuf>,
    _shm: Option<tempfile::TempDir>,
    how: &'static str,
}

impl OtherFs {
    fn at(dir: &Path) -> OtherFs {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=512m,mode=0700", "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return OtherFs {
                mounted: Some(dir.to_path_buf()),
                _shm: None,
                how: "a tmpfs mounted at the legacy dir",
            };
        }
        use std::os::unix::fs::MetadataExt;
        let dev = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
        if Path::new("/dev/shm").is_dir() && dev(Path::new("/dev/shm")) != dev(dir) {
            let shm = tempfile::tempdir_in("/dev/shm").unwrap();
            std::fs::remove_dir(dir).unwrap();
            std::os::unix::fs::symlink(shm.path(), dir).unwrap();
            return OtherFs {
                mounted: None,
                _shm: Some(shm),
                how: "a /dev/shm dir linked at the legacy dir",
            };
        }
        OtherFs {
            mounted: None,
            _shm: None,
            how: "no second file system: ETCD_CHARM_MIGRATE=copy",
        }
    }

    fn forced(&self) -> bool {
        self.mounted.is_none() && self._shm.is_none()
    }
}

impl Drop for OtherFs {
    fn drop(&mut self) {
        if let Some(d) = &self.mounted {
            let _ = Command::new("umount").arg(d).status();
        }
    }
}

#[test]
fn a_member_on_another_file_system_is_copied_verified_and_its_source_set_aside() {
    // Declared first, dropped last: unmounted after every etcd is stopped.
    let mut other: Option<OtherFs> = None;
    let probe = tempfile::tempdir().unwrap();
    let forced = OtherFs::at(&probe.path().join("probe")).forced();
    drop(probe);
    let env: &[&str] = if forced {
        &["ETCD_CHARM_MIGRATE=copy"]
    } else {
        &[]
    };
    let up = Upgrade::deploy(1, env);
    let u = "etcd/0";
    other.replace(OtherFs::at(&up.legacy_dir(u)));
    let how = other.as_ref().unwrap().how;
    eprintln!("copy path exercised with {how}");
    let legacy = bootstrap_legacy(&up, KEYS, true);
    up.start_old_etcd();

    let runs = up.dry_run();
    let method = runs[0].2["migration"]["method"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(method.starts_with("copy"), "{method} ({how})");

    let out = up.refresh(&[]);
    assert!(
        out.status.success(),
        "refresh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    up.m.assert_all_healthy(1);
    let ep = up.m.endpoint(u);
    assert_migrated(&up, u, legacy.ids[0].1);
    assert_eq!(live_ids(&ep), legacy.ids[0].1);
    assert_keys(&ep, "legacy", KEYS);
    // The source is kept, set aside beside itself; no staging dir is left.
    let left = names(&up.legacy_dir(u));
    assert!(
        left.len() == 1 && left[0].starts_with("member.migrated-"),
        "{left:?}"
    );
    let aside = up.legacy_dir(u).join(&left[0]);
    assert_eq!(
        etcd_charm::wal::read_ids_in_wal_dir(&aside.join("wal")),
        Ok(Some(legacy.ids[0].1))
    );
    let canon = names(&up.m.data_dir(u));
    assert!(!canon.iter().any(|n| n.starts_with("member.")), "{canon:?}");
    // Progress went through status-set as percentages.
    let calls = up.m.ok(&["log", "--tool-calls", "--unit", u]);
    assert!(
        calls.contains("copying") && calls.contains('%'),
        "no copy progress in the status-set calls:\n{}",
        tail(&calls, 30)
    );
}

#[test]
fn a_unit_with_two_different_members_blocks_with_nothing_moved() {
    let up = Upgrade::deploy(1, &[]);
    let u = "etcd/0";
    let legacy = bootstrap_legacy(&up, 5, true);
    // The aftermath of the reported failure: etcd was started on the empty
    // canonical dir with a regenerated config and made a new member there.
    let paths = up.paths(u);
    let logs = tempfile::tempdir().unwrap();
    let ip = up.m.address(u);
    let mut fresh = hand_etcd(
        "etcd0",
        &ip,
        &paths.data_dir(),
        logs.path(),
        &[("etcd0".into(), ip.clone())],
        "OTHER1",
    );
    fresh.wait_healthy();
    let other = live_ids(&fresh.endpoint());
    fresh.stop();
    assert_ne!(other.cluster_id, legacy.cluster_id);

    let before = hash_tree(&paths.root().join("var/snap"));
    let out = up.refresh(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (status, msg) = workload(&up.m, u);
    assert_eq!(status, "blocked", "{msg}");
    for want in [
        "two different members".to_string(),
        format!("{other} at /var/snap/etcd/current "),
        format!("{} at /var/snap/etcd/current/etcd0.etcd", legacy.ids[0].1),
    ] {
        assert!(msg.contains(&want), "{want:?} not in {msg:?}");
    }
    assert_eq!(
        hash_tree(&paths.root().join("var/snap")),
        before,
        "nothing moved, written or deleted"
    );
    assert!(!etcd_charm::service::Service {
        backend: etcd_charm::service::Backend::Direct {
            etcd_bin: "etcd".into()
        },
        paths: Paths::new(paths.root()),
    }
    .is_active()
    .unwrap());
}
