//! The migration executor: performs one [`MigrationStep`] at a time, each a
//! rename or a write under a name nothing else reads.

use super::copy::{copy_checked, tree_sizes};
use super::fsops::{create_private_dir, parent, sync_dir, Report};
use super::{aside_base, snapshot_name, Aside, MigrationStep};
use crate::error::{io, Error, Result};
use crate::wal::{self, WalIds};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Performs one step. `Ok(Some(message))`: the step found something an
/// operator must look at (blocked); nothing was lost.
pub fn apply(step: &MigrationStep, report: Report<'_>) -> Result<Option<String>> {
    let stamp = crate::stamp::utc_stamp(SystemTime::now());
    match step {
        MigrationStep::Snapshot {
            member_dir,
            name,
            ids,
            backup_dir,
        } => snapshot_checked(member_dir, name, *ids, backup_dir, &stamp, None, report),
        MigrationStep::OnlineSnapshot {
            endpoint,
            member_dir,
            name,
            ids,
            backup_dir,
        } => snapshot_checked(
            member_dir,
            name,
            *ids,
            backup_dir,
            &stamp,
            Some(endpoint),
            report,
        ),
        MigrationStep::SetAside { path, kind } => set_aside(path, *kind, &stamp).map(|_| None),
        MigrationStep::SetAsideWalDir { wal_dir } => {
            set_aside_wal_dir(wal_dir, &stamp).map(|_| None)
        }
        MigrationStep::Rename { from, to } => rename_member(from, to).map(|_| None),
        MigrationStep::Copy { from, wal_dir, to } => {
            copy_checked(from, wal_dir.as_deref(), to, report)
        }
        MigrationStep::Verify {
            from,
            wal_dir,
            copy,
            ids,
            to,
        } => verify(from, wal_dir.as_deref(), copy, *ids, to),
        MigrationStep::MoveIntoPlace { from, to } => move_into_place(from, to).map(|_| None),
    }
}

/// `<path>.<suffix>-<stamp>`, with `-2`, `-3`… when that exists already.
fn aside_target(path: &Path, kind: Aside, stamp: &str) -> PathBuf {
    crate::aside::free_name(parent(path), &aside_base(path, kind), stamp)
}

/// Renames `path` aside; a missing `path` is already done.
pub fn set_aside(path: &Path, kind: Aside, stamp: &str) -> Result<Option<PathBuf>> {
    if path.symlink_metadata().is_err() {
        return Ok(None);
    }
    let to = aside_target(path, kind, stamp);
    std::fs::rename(path, &to).map_err(io("setting aside", path))?;
    sync_dir(parent(path))?;
    tracing::info!("set {} aside as {}", path.display(), to.display());
    if kind == Aside::Incomplete {
        drop_older_incomplete(path, &to);
    }
    Ok(Some(to))
}

/// Keeps one unverified copy aside, the newest: every `member.incomplete-*`
/// is a partial copy of a member that is still in place (its source, or a
/// verified copy), so an older one holds nothing the newest does not, and
/// keeping one per killed attempt is what would fill the disk.
fn drop_older_incomplete(path: &Path, kept: &Path) {
    let prefix = format!("{}-", aside_base(path, Aside::Incomplete));
    let Ok(rd) = std::fs::read_dir(parent(path)) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p != kept && e.file_name().to_string_lossy().starts_with(&prefix) {
            match std::fs::remove_dir_all(&p) {
                Ok(()) => tracing::warn!("removed the older partial copy {}", p.display()),
                Err(err) => tracing::warn!("cannot remove {}: {err}", p.display()),
            }
        }
    }
}

fn set_aside_wal_dir(wal_dir: &Path, stamp: &str) -> Result<()> {
    let entries: Vec<PathBuf> = match std::fs::read_dir(wal_dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                !p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("migrated-"))
            })
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io("listing", wal_dir)(e)),
    };
    if entries.is_empty() {
        return Ok(());
    }
    let mut dest = wal_dir.join(format!("migrated-{stamp}"));
    let mut n = 2;
    while dest.exists() {
        dest = wal_dir.join(format!("migrated-{stamp}-{n}"));
        n += 1;
    }
    create_private_dir(&dest)?;
    for e in entries {
        let to = dest.join(e.file_name().unwrap_or_default());
        std::fs::rename(&e, &to).map_err(io("setting aside", &e))?;
    }
    sync_dir(&dest)?;
    sync_dir(wal_dir)
}

fn rename_member(from: &Path, to: &Path) -> Result<()> {
    if from.symlink_metadata().is_err() && to.join("wal").is_dir() {
        return Ok(()); // done before a kill
    }
    create_private_dir(parent(to))?;
    std::fs::rename(from, to).map_err(|e| {
        Error::Other(format!(
            "moving {} to {}: {e}",
            from.display(),
            to.display()
        ))
    })?;
    sync_dir(parent(to))?;
    sync_dir(parent(from))
}

fn move_into_place(from: &Path, to: &Path) -> Result<()> {
    rename_member(from, to)
}

fn fsync_tree(p: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(p).map_err(io("reading", p))?;
    if meta.is_dir() {
        for e in std::fs::read_dir(p).map_err(io("listing", p))?.flatten() {
            fsync_tree(&e.path())?;
        }
        sync_dir(p)
    } else if meta.is_file() {
        std::fs::File::open(p)
            .and_then(|f| f.sync_all())
            .map_err(io("syncing", p))
    } else {
        Ok(())
    }
}

fn verify(
    from: &Path,
    wal_dir: Option<&Path>,
    copy: &Path,
    ids: WalIds,
    to: &Path,
) -> Result<Option<String>> {
    let mut want = tree_sizes(from, Path::new(""), wal_dir.is_some())?;
    if let Some(w) = wal_dir {
        want.extend(tree_sizes(w, Path::new("wal"), false)?);
    }
    let have = tree_sizes(copy, Path::new(""), false)?;
    let blocked = |why: String| {
        Ok(Some(format!(
            "the copy {} of {} does not match its source ({why}); nothing was set aside, the next hook copies again",
            copy.display(),
            from.display()
        )))
    };
    if want != have {
        let differs: Vec<String> = want
            .iter()
            .filter(|(k, v)| have.get(*k) != Some(v))
            .map(|(k, _)| k.display().to_string())
            .chain(
                have.keys()
                    .filter(|k| !want.contains_key(*k))
                    .map(|k| k.display().to_string()),
            )
            .take(5)
            .collect();
        return blocked(format!("differs in {}", differs.join(", ")));
    }
    match wal::read_ids_in_wal_dir(&copy.join("wal")) {
        Ok(Some(got)) if got == ids => {}
        Ok(Some(got)) => return blocked(format!("its WAL holds {got}, not {ids}")),
        Ok(None) => return blocked("it holds no WAL".into()),
        Err(e) => return blocked(format!("its WAL cannot be read: {e}")),
    }
    // The stamp tells a later run whether the source changed after this.
    let now = SystemTime::now();
    std::fs::File::open(copy)
        .and_then(|d| d.set_modified(now))
        .map_err(io("stamping", copy))?;
    sync_dir(copy)?;
    if to.symlink_metadata().is_ok() {
        // Only an empty leftover can be here (the planner set others aside).
        std::fs::remove_dir(to).map_err(io("removing the empty", to))?;
    }
    std::fs::rename(copy, to).map_err(io("renaming the verified copy", copy))?;
    sync_dir(parent(to))?;
    Ok(None)
}

/// [`snapshot`] when it fits the backup dir's free space now; first drops
/// this member's `.partial` snapshots left by killed attempts (never a
/// backup: the db they copy is still in place), and a snapshot that fails
/// part way removes its own `.partial`, so retries never pile them up.
/// With `online`, the snapshot is streamed from the member running there.
fn snapshot_checked(
    member_dir: &Path,
    name: &str,
    ids: WalIds,
    backup_dir: &Path,
    stamp: &str,
    online: Option<&str>,
    report: Report<'_>,
) -> Result<Option<String>> {
    let marker = format!("-migrate-{name}-{:x}.partial", ids.member_id);
    if let Ok(rd) = std::fs::read_dir(backup_dir) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().ends_with(&marker) {
                remove_partial(&e.path());
            }
        }
    }
    let db = member_dir.join("snap").join("db");
    let size = match std::fs::metadata(&db) {
        Ok(m) if m.is_file() => m.len(),
        _ => crate::layout::tree_bytes(&member_dir.join("snap")),
    };
    let stamp = &free_stamp(backup_dir, stamp, name, ids.member_id);
    let what = format!("the pre-migration snapshot of {}", member_dir.display());
    if let Some(msg) = crate::space::check(&what, size, backup_dir) {
        return Ok(Some(msg));
    }
    match snapshot(member_dir, name, ids, backup_dir, stamp, online, report) {
        Ok(_) => Ok(None),
        Err(e) => {
            let partial = backup_dir.join(format!(
                "{}.partial",
                snapshot_name(stamp, name, ids.member_id)
            ));
            remove_partial(&partial);
            Err(e)
        }
    }
}

/// `stamp`, or `<stamp>-2`, `-3`… when a snapshot of that name exists (a
/// retry within the same second, e.g. the offline one after a kill right
/// after the online one): the name still parses as this member's.
fn free_stamp(backup_dir: &Path, stamp: &str, name: &str, member_id: u64) -> String {
    let mut s = stamp.to_string();
    let mut n = 2;
    while backup_dir
        .join(snapshot_name(&s, name, member_id))
        .symlink_metadata()
        .is_ok()
    {
        s = format!("{stamp}-{n}");
        n += 1;
    }
    s
}

fn remove_partial(p: &Path) {
    if p.symlink_metadata().is_err() {
        return;
    }
    match std::fs::remove_dir_all(p) {
        Ok(()) => tracing::warn!("removed the partial snapshot {}", p.display()),
        Err(e) => tracing::warn!("cannot remove the partial snapshot {}: {e}", p.display()),
    }
}

fn snapshot(
    member_dir: &Path,
    name: &str,
    ids: WalIds,
    backup_dir: &Path,
    stamp: &str,
    online: Option<&str>,
    report: Report<'_>,
) -> Result<PathBuf> {
    let dest = backup_dir.join(snapshot_name(stamp, name, ids.member_id));
    let partial = backup_dir.join(format!(
        "{}.partial",
        snapshot_name(stamp, name, ids.member_id)
    ));
    create_private_dir(&partial)?;
    let db = member_dir.join("snap").join("db");
    let note;
    if let Some(endpoint) = online {
        report("Migrating the etcd member: taking a snapshot while it runs");
        let bytes = crate::etcd::block_on(crate::etcd::snapshot_to(endpoint, &partial.join("db")))?;
        note = format!(
            "A v3 snapshot of etcd {ids} ({bytes} bytes), streamed from the running\n\
             member at {endpoint} right before etcd-charm stopped it to move the\n\
             member to the canonical data dir. It is consistent at its revision;\n\
             writes acknowledged after it are in the WAL that moved with the member.\n\
             Restore with: etcdctl snapshot restore db ...\n"
        );
    } else if db.is_file() {
        let size = std::fs::metadata(&db).map_err(io("reading", &db))?.len();
        report(&format!(
            "Migrating the etcd member: snapshotting its db ({} MiB)",
            size >> 20
        ));
        std::fs::copy(&db, partial.join("db")).map_err(io("copying", &db))?;
        note = format!(
            "The bbolt db of etcd {ids}, copied from {} while etcd was stopped,\n\
             before etcd-charm moved the member to the canonical data dir.\n\
             Restore with: etcdctl snapshot restore db --skip-hash-check ...\n",
            db.display()
        );
    } else {
        // An etcd 2.x member never run on 3.x has no db: keep its snap/.
        let snap = member_dir.join("snap");
        if snap.is_dir() {
            let mut opts = fs_extra::dir::CopyOptions::new();
            opts.content_only = true;
            let to = partial.join("snap");
            create_private_dir(&to)?;
            fs_extra::dir::copy(&snap, &to, &opts)
                .map_err(|e| Error::Other(format!("copying {}: {e}", snap.display())))?;
        }
        note = format!(
            "etcd {ids} had no bbolt db (an etcd 2.x member): this holds its\n\
             snap/ dir as found in {}, copied while etcd was stopped.\n",
            member_dir.display()
        );
    }
    std::fs::write(partial.join("README"), note).map_err(io("writing", &partial))?;
    fsync_tree(&partial)?;
    std::fs::rename(&partial, &dest).map_err(io("renaming", &partial))?;
    sync_dir(backup_dir)?;
    tracing::info!("snapshot of {ids} in {}", dest.display());
    Ok(dest)
}
