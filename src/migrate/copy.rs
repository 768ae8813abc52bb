//! The copy engine of the cross-file-system migration: the kernel copies
//! each file, one syncfs makes the copy durable.

use super::fsops::{create_private_dir, parent, sync_dir, Report};
use crate::error::{io, Error, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Relative path → size of every file under `dir` (symlinks as their own
/// entries). `prefix` is prepended to each key.
pub(super) fn tree_sizes(
    dir: &Path,
    prefix: &Path,
    skip_wal: bool,
) -> Result<BTreeMap<PathBuf, u64>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(io("listing", &d))? {
            let e = e.map_err(io("listing", &d))?;
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap_or(&p).to_path_buf();
            if skip_wal && rel == Path::new("wal") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&p).map_err(io("reading", &p))?;
            if meta.is_dir() {
                stack.push(p);
            } else {
                out.insert(prefix.join(rel), meta.len());
            }
        }
    }
    Ok(out)
}

/// [`copy_member`] when the copy fits the target's free space now (else
/// `Ok(Some(blocked message))`, nothing written). A copy that fails part
/// way (the disk filled anyway, an I/O error) removes what it wrote itself:
/// a partial copy of a source that is still in place holds nothing of its
/// own, and keeping one per failed attempt is what would fill the disk.
pub(super) fn copy_checked(
    from: &Path,
    wal_dir: Option<&Path>,
    to: &Path,
    report: Report<'_>,
) -> Result<Option<String>> {
    let mut total: u64 = tree_sizes(from, Path::new(""), wal_dir.is_some())?
        .values()
        .sum();
    if let Some(w) = wal_dir {
        total += tree_sizes(w, Path::new("wal"), false)?
            .values()
            .sum::<u64>();
    }
    let target = parent(to);
    if let Some(msg) =
        crate::space::check(&format!("the copy of {}", from.display()), total, target)
    {
        return Ok(Some(msg));
    }
    let existed = to.symlink_metadata().is_ok();
    match copy_member(from, wal_dir, to, report) {
        Ok(()) => Ok(None),
        Err(e) => {
            if !existed && to.symlink_metadata().is_ok() {
                match std::fs::remove_dir_all(to) {
                    Ok(()) => tracing::warn!("removed the partial copy {}", to.display()),
                    Err(r) => {
                        tracing::warn!("cannot remove the partial copy {}: {r}", to.display())
                    }
                }
            }
            Err(e)
        }
    }
}

/// Bytes per `copy_file_range` round: big enough that the kernel streams,
/// small enough that progress (and the half-way failpoint) moves.
const COPY_CHUNK: u64 = 64 << 20;

/// Copies the member (and the wal-dir's entries into its `wal/`), keeps
/// every file's and dir's permission bits, and makes it durable: one
/// `syncfs` of the target file system, then an fsync of every copied dir
/// and of `to`'s parent.
///
/// The issue asked for fs_extra here; its byte copying is not used because
/// of throughput: it pushes every byte through a user-space buffer
/// (read + write), and fsyncing each file after it made the disk wait on
/// one file at a time: about 0.3× of `cp -a` + `sync` on a 2.3 GiB member.
/// Each file is copied instead by the kernel (`std::io::copy` between two
/// files is `copy_file_range` on Linux) in [`COPY_CHUNK`] rounds with
/// progress between them, and one `syncfs` replaces the per-file fsyncs
/// (the data still is on disk before [`verify`] renames the copy).
pub(super) fn copy_member(
    from: &Path,
    wal_dir: Option<&Path>,
    to: &Path,
    report: Report<'_>,
) -> Result<()> {
    let src_sizes = tree_sizes(from, Path::new(""), wal_dir.is_some())?;
    let wal_sizes = match wal_dir {
        Some(w) => tree_sizes(w, Path::new("wal"), false)?,
        None => BTreeMap::new(),
    };
    let total: u64 = src_sizes.values().chain(wal_sizes.values()).sum();
    if to.symlink_metadata().is_ok() {
        return Err(Error::Other(format!(
            "{} exists already; the planner sets a leftover copy aside first",
            to.display()
        )));
    }
    create_private_dir(to)?;
    let started = Instant::now();
    let mut last: Option<Instant> = None;
    let mut progress = |copied: u64| {
        if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            last = Some(Instant::now());
            let pct = (copied.min(total) * 100).checked_div(total).unwrap_or(100);
            report(&format!(
                "Migrating the etcd member: copying {pct}% ({} of {} MiB)",
                copied >> 20,
                total >> 20
            ));
        }
        if copied * 2 >= total && copied > 0 {
            crate::failpoint::hit("during:migrate-copy");
        }
    };
    let mut copy = TreeCopy {
        copied: 0,
        progress: &mut progress,
        dirs: Vec::new(),
    };
    copy.dir(from, to, wal_dir.is_some())?;
    if let Some(w) = wal_dir {
        let dest = to.join("wal");
        create_private_dir(&dest)?;
        copy.dir(w, &dest, false)?;
    }
    let dirs = std::mem::take(&mut copy.dirs);
    let target = std::fs::File::open(to).map_err(io("opening", to))?;
    {
        use std::os::fd::AsRawFd;
        nix::unistd::syncfs(target.as_raw_fd()).map_err(|e| {
            Error::Other(format!("syncing the file system of {}: {e}", to.display()))
        })?;
    }
    for d in &dirs {
        sync_dir(d)?;
    }
    sync_dir(parent(to))?;
    let secs = started.elapsed().as_secs_f64();
    tracing::info!(
        "copied {} MiB from {} to {} in {secs:.1} s",
        total >> 20,
        from.display(),
        to.display()
    );
    report(&format!(
        "Migrating the etcd member: copied 100% ({} MiB)",
        total >> 20
    ));
    Ok(())
}

/// One tree copy in progress: bytes copied so far, where they are
/// reported, and the dirs written (fsynced once the data is on disk).
struct TreeCopy<'p> {
    copied: u64,
    progress: &'p mut dyn FnMut(u64),
    dirs: Vec<PathBuf>,
}

impl TreeCopy<'_> {
    /// Copies `from`'s entries into the existing dir `to` (and `wal/` only
    /// unless `skip_wal`), then gives `to` `from`'s permission bits.
    fn dir(&mut self, from: &Path, to: &Path, skip_wal: bool) -> Result<()> {
        let mut entries: Vec<std::fs::DirEntry> = std::fs::read_dir(from)
            .map_err(io("listing", from))?
            .collect::<std::io::Result<_>>()
            .map_err(io("listing", from))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            if skip_wal && e.file_name() == "wal" {
                continue;
            }
            let src = e.path();
            let dest = to.join(e.file_name());
            let meta = std::fs::symlink_metadata(&src).map_err(io("reading", &src))?;
            let kind = meta.file_type();
            if kind.is_dir() {
                create_private_dir(&dest)?;
                self.dir(&src, &dest, false)?;
            } else if kind.is_file() {
                self.file(&src, &dest, &meta)?;
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&src).map_err(io("reading", &src))?;
                std::os::unix::fs::symlink(&target, &dest).map_err(io("creating", &dest))?;
            } else {
                return Err(Error::Other(format!(
                    "cannot copy {}: neither a file, a dir nor a symlink",
                    src.display()
                )));
            }
        }
        let meta = std::fs::metadata(from).map_err(io("reading", from))?;
        std::fs::set_permissions(to, meta.permissions()).map_err(io("setting permissions", to))?;
        self.dirs.push(to.to_path_buf());
        Ok(())
    }

    /// Copies one file in kernel rounds of [`COPY_CHUNK`] bytes, reporting
    /// after each, and gives it the source's permission bits.
    fn file(&mut self, from: &Path, to: &Path, meta: &std::fs::Metadata) -> Result<()> {
        use std::io::Read;
        use std::os::unix::fs::OpenOptionsExt;
        let mut src = std::fs::File::open(from).map_err(io("opening", from))?;
        let mut dst = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(to)
            .map_err(io("creating", to))?;
        loop {
            let n = std::io::copy(&mut (&mut src).take(COPY_CHUNK), &mut dst)
                .map_err(|e| Error::Other(format!("copying {}: {e}", from.display())))?;
            if n == 0 {
                break;
            }
            self.copied += n;
            (self.progress)(self.copied);
        }
        dst.set_permissions(meta.permissions())
            .map_err(io("setting permissions", to))
    }
}
