//! Moving this unit's member out of a legacy location into the canonical
//! data dir, before etcd.conf.yml is regenerated (rule 2).
//!
//! A legacy location is `<data dir>/<name>.etcd` (clusters born on etcd
//! 2.3), or any other `data-dir` (and `wal-dir`) the found etcd.conf.yml
//! names. [`plan_migration`] is pure: from the observed [`DiskLayout`] it
//! answers nothing to do, a conflict (blocked; nothing touched), or the steps
//! that move the member. The charm's planner puts those steps first and then
//! plans as if the member were already in place: write etcd.conf.yml, start,
//! check that the running member has the IDs its WAL had. [`apply`] performs
//! one step.
//!
//! # Expected flow
//! Same file system (`S` the source data dir, `C` the canonical one), the
//! member answering: an online snapshot through the etcd API → stop etcd →
//! rename `S/member` to `C/member`. etcd is down only for the stop, one
//! rename, the config and the start: flat with the size of the data.
//! When etcd is not running, the snapshot is an offline copy of its db
//! after the stop (the only way to take one then).
//!
//! Across file systems, with a separate wal-dir, or with
//! `ETCD_CHARM_MIGRATE=copy`: (online snapshot →) stop etcd → (offline
//! snapshot →) copy `S/member`
//! (and the wal-dir's segments) into `C/member.incoming`, fsync → verify sizes
//! and the WAL's IDs, stamp its mtime, rename it to `C/member.verified` →
//! set the source aside (`S/member.migrated-<stamp>`) → rename
//! `C/member.verified` to `C/member`.
//!
//! # Guarantees
//! - Each step is one rename, or writes only under a name nothing else reads
//!   (`member.incoming`, a `.partial` snapshot), so a kill after any step
//!   leaves a state the planner recognises and carries on from:
//!   - `member.incoming` is never trusted: it is set aside as
//!     `member.incomplete-<stamp>` and the copy is redone (only the newest
//!     such copy is kept: see below);
//!   - `member.verified` beside a source with the same IDs is used, unless
//!     the source changed after it was verified (etcd ran on it again): then
//!     it is set aside as `member.stale-<stamp>` and the copy is redone;
//!   - `member.verified` with the source already set aside is put in place.
//! - Nothing is deleted (rule 4): whatever must go is renamed to a dated
//!   name beside it. The issue asked for the source to be removed after a
//!   verified copy; rule 4 wins, so it is set aside instead. The one
//!   exception is our own partial copies of a member still in place (an
//!   older `member.incomplete-*`, a `.partial` snapshot, the copy a failed
//!   attempt was writing): they hold nothing the member does not, and one
//!   per retry would fill the disk (issue 9.4), so at most one is kept.
//! - Every copy first checks the target's free space ([`crate::space`]).
//! - A snapshot of the member is taken before anything moves, unless a
//!   snapshot of this member newer than its last change already exists.
//!   Its free space is checked first, whichever kind it is. It is for
//!   disaster recovery (the member itself moves with its WAL):
//!   - online ([`MigrationStep::OnlineSnapshot`], the member answers): a
//!     v3 snapshot streamed from the running member, consistent at its
//!     revision. Writes acknowledged between it and the stop are in the
//!     WAL, which the rename (or copy) carries along, so nothing
//!     acknowledged is lost; only a restore from the snapshot alone would
//!     lack them. It is taken inside the rolling turn, right before the
//!     stop (charm/turn.rs says why);
//!   - offline ([`MigrationStep::Snapshot`], etcd not running): a copy of
//!     the stopped member's bbolt db, consistent because nothing writes it,
//!     and exactly the data the WAL's last commit left.
//! - The migration never generates a token: the member keeps its WAL, and
//!   the planner only ever reads the token back (rule 1).
//!
//! # Assumptions
//! - etcd is stopped before the first step that touches the disk (only an
//!   online snapshot runs before the stop), and nothing restarts it meanwhile on
//!   an empty dir: the start guard (ExecStartPre and the direct backend)
//!   counts `member.incoming` and `member.verified` as this member.
//!
//! # Caveats
//! - Two different members (by member or cluster ID), or a copy whose
//!   source is gone, are conflicts for an operator: blocked, naming both
//!   paths and IDs.

mod apply;
mod copy;
mod fsops;
mod plan;

pub use apply::{apply, set_aside};
pub use fsops::Report;
pub use plan::{plan_migration, plan_migration_live};

/// A durable copy of the member dir `from` at `to` (which must not exist),
/// with the migration's copy engine, the space checked first: Ok(Some(why))
/// when the file system cannot hold it (nothing written then). The
/// rebuild's old membership, kept beside the live member.
pub fn copy_aside(from: &Path, to: &Path) -> crate::error::Result<Option<String>> {
    let mut quiet = |msg: &str| tracing::debug!("{msg}");
    copy::copy_checked(from, None, to, &mut quiet)
}

use crate::wal::WalIds;
use std::path::{Path, PathBuf};

// The names a migration leaves on disk belong to the layout (floor 2), which
// reads them back; the migration (floor 3) only writes them.
pub use crate::layout::{parse_snapshot_name, snapshot_name, FORCE_ENV, INCOMING, VERIFIED};

/// Why something is set aside; the suffix of its new name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aside {
    /// A copy that was never verified.
    Incomplete,
    /// A copy older than its source.
    Stale,
    /// The source, once its copy was verified.
    Migrated,
    /// A `member/` without a WAL (e.g. a failed start on an empty dir).
    NoWal,
}

impl Aside {
    pub fn suffix(self) -> &'static str {
        match self {
            Aside::Incomplete => "incomplete",
            Aside::Stale => "stale",
            Aside::Migrated => "migrated",
            Aside::NoWal => "nowal",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MigrationStep {
    /// Copies the stopped member's `snap/db` (or its whole `snap/` when it
    /// has no db yet) to `<backup_dir>/<stamp>-migrate-<name>-<member id>`.
    Snapshot {
        member_dir: PathBuf,
        name: String,
        ids: WalIds,
        backup_dir: PathBuf,
    },
    /// Streams a v3 snapshot from the RUNNING member at `endpoint` (this
    /// member: the planner checked its ID) to
    /// `<backup_dir>/<stamp>-migrate-<name>-<member id>/db`, before etcd is
    /// stopped. `member_dir` sizes the free-space check (its db).
    OnlineSnapshot {
        endpoint: String,
        member_dir: PathBuf,
        name: String,
        ids: WalIds,
        backup_dir: PathBuf,
    },
    /// Renames `path` to `<path>.<suffix>-<stamp>` beside it.
    SetAside { path: PathBuf, kind: Aside },
    /// Moves a separate wal-dir's entries into `<wal_dir>/migrated-<stamp>/`
    /// (the dir itself may be a mount point, so it stays).
    SetAsideWalDir { wal_dir: PathBuf },
    /// One rename within a file system: `S/member` → `C/member`.
    Rename { from: PathBuf, to: PathBuf },
    /// Copies the member dir `from` (and `wal_dir`'s entries as its `wal/`)
    /// into `to`, reporting progress, then syncs its file system (syncfs)
    /// and fsyncs every copied dir.
    Copy {
        from: PathBuf,
        wal_dir: Option<PathBuf>,
        to: PathBuf,
    },
    /// Checks `copy` against `from` (same files, same sizes) and its WAL
    /// against `ids`, stamps it and renames it to `to`.
    Verify {
        from: PathBuf,
        wal_dir: Option<PathBuf>,
        copy: PathBuf,
        ids: WalIds,
        to: PathBuf,
    },
    /// Renames the verified copy to `C/member`.
    MoveIntoPlace { from: PathBuf, to: PathBuf },
}

impl MigrationStep {
    /// Whether the step runs while etcd still runs, before it is stopped.
    pub fn before_stop(&self) -> bool {
        matches!(self, MigrationStep::OnlineSnapshot { .. })
    }

    /// A stable failpoint name (`after:<key>`), distinct per kind of step.
    pub fn key(&self) -> &'static str {
        match self {
            MigrationStep::Snapshot { .. } => "migrate-snapshot",
            MigrationStep::OnlineSnapshot { .. } => "migrate-online-snapshot",
            MigrationStep::SetAside { kind, .. } => match kind {
                Aside::Incomplete => "migrate-set-aside-incomplete",
                Aside::Stale => "migrate-set-aside-stale",
                Aside::Migrated => "migrate-set-aside-source",
                Aside::NoWal => "migrate-set-aside-nowal",
            },
            MigrationStep::SetAsideWalDir { .. } => "migrate-set-aside-wal-dir",
            MigrationStep::Rename { .. } => "migrate-rename",
            MigrationStep::Copy { .. } => "migrate-copy",
            MigrationStep::Verify { .. } => "migrate-verify",
            // The key predates the name; crash tests arm it.
            MigrationStep::MoveIntoPlace { .. } => "migrate-promote",
        }
    }
}

impl std::fmt::Display for MigrationStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = |p: &PathBuf| p.display().to_string();
        match self {
            MigrationStep::Snapshot {
                member_dir,
                ids,
                backup_dir,
                ..
            } => write!(
                f,
                "snapshot the bbolt db of {ids} ({}/snap/db) into {}",
                d(member_dir),
                d(backup_dir)
            ),
            MigrationStep::OnlineSnapshot {
                endpoint,
                ids,
                backup_dir,
                ..
            } => write!(
                f,
                "snapshot {ids} online from {endpoint} (etcd still running) into {}",
                d(backup_dir)
            ),
            MigrationStep::SetAside { path, kind } => write!(
                f,
                "set {} aside as {}-<UTC time> beside it",
                d(path),
                aside_base(path, *kind)
            ),
            MigrationStep::SetAsideWalDir { wal_dir } => write!(
                f,
                "set the WAL segments in {} aside into {}/migrated-<UTC time>",
                d(wal_dir),
                d(wal_dir)
            ),
            MigrationStep::Rename { from, to } => {
                write!(f, "move {} to {} (one rename)", d(from), d(to))
            }
            MigrationStep::Copy { from, wal_dir, to } => match wal_dir {
                Some(w) => write!(
                    f,
                    "copy {} and the WAL in {} to {}, then fsync",
                    d(from),
                    d(w),
                    d(to)
                ),
                None => write!(f, "copy {} to {}, then fsync", d(from), d(to)),
            },
            MigrationStep::Verify { copy, ids, to, .. } => write!(
                f,
                "verify {} (file sizes, WAL holds {ids}) and rename it to {}",
                d(copy),
                d(to)
            ),
            MigrationStep::MoveIntoPlace { from, to } => {
                write!(f, "rename {} to {}", d(from), d(to))
            }
        }
    }
}

/// How the member gets to the canonical dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// One rename on one file system.
    Rename,
    /// Copy, verify, set the source aside, put the copy in place.
    Copy { why: String },
    /// The member already is in place; only a duplicate is set aside.
    InPlace,
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Method::Rename => write!(f, "rename (same file system)"),
            Method::Copy { why } => write!(f, "copy ({why})"),
            Method::InPlace => write!(f, "already in place (a duplicate is set aside)"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Migration {
    Nothing,
    /// Blocked: the message names both paths and their IDs.
    Conflict {
        message: String,
    },
    Migrate {
        /// Where the member is now (host path).
        from: PathBuf,
        /// Its IDs, which the started member must report.
        ids: WalIds,
        method: Method,
        /// etcd must be stopped before the first step.
        stop_etcd: bool,
        steps: Vec<MigrationStep>,
    },
}

fn aside_base(path: &Path, kind: Aside) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // `member.incoming` → `member.incomplete-…`, not `member.incoming.incomplete-…`.
    let stem = match name.split_once('.') {
        Some((stem, _)) if stem == "member" => stem.to_string(),
        _ => name,
    };
    format!("{stem}.{}", kind.suffix())
}

#[cfg(test)]
mod space_tests;
#[cfg(test)]
mod tests;
