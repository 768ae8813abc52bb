//! The `restore` action, with the Python charm's parameters (`target`,
//! `skip-backup`) and results (`backup.path`, `backup.sha256sum` or
//! `backup.error`), plus `path`: a snapshot file on the unit, else the
//! `snapshot` resource. On the leader: it checks the file first (sha256,
//! `snapshot status`), backs the current data up unless told to skip,
//! records the request in leadership data and runs the hook's reconcile
//! loop, which restores this unit's member (restore.rs). The other units
//! rejoin in their own hooks, one at a time. Killed part way, the next hook
//! continues from the request; run again, the action resumes it.

use super::action_support::{sha256_file, ActionCtx};
use super::observed::LeaderData;
use super::restore::{self, Request};
use crate::context::HookContext;
use crate::error::{io, Error, Result};
use crate::hooktools::Databag;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What a restore costs the writers (issue 19.14: it was said nowhere).
pub const WRITES_DISCARDED: &str = "every write since the snapshot is discarded, and so is any \
     write the other members accept until each has set its old data aside and rejoined the \
     restored cluster (they keep serving the old one meanwhile): stop the writers \
     (kube-apiserver) before a restore and start them once every unit is healthy again";

pub fn restore(ctx: &ActionCtx) -> Result<Databag> {
    if !ctx.tools.is_leader()? {
        return Err(Error::Other(
            "restore runs on the leader unit (marked * in juju status): run the action there; nothing was changed".into(),
        ));
    }
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let argv0 = std::env::args().next().unwrap_or_default();
    let hook = HookContext::from_env(&env, &argv0)
        .map_err(|e| Error::Other(format!("reading the action's context: {e}")))?
        .ok_or_else(|| Error::Other("not run by Juju (no JUJU_* context)".into()))?;
    let leader = leader_data(ctx, &hook)?;
    let mut out = Databag::new();
    let req = match get(&leader, restore::REQUEST).and_then(Request::parse) {
        Some(r) if get(&leader, restore::DONE) != Some(r.id.as_str()) && r.unit != ctx.unit => {
            return Err(Error::Other(format!(
                "restore {} begun on {} is unfinished: it completes there (its hooks, or this action run on {} once it leads again); nothing was changed here",
                r.id, r.unit, r.unit
            )));
        }
        Some(r) if get(&leader, restore::DONE) != Some(r.id.as_str()) => {
            ctx.log(&format!("restore {} is unfinished: resuming it", r.id));
            out.insert(
                "backup.error".into(),
                format!(
                    "resumed restore {}: its backup was taken when it began",
                    r.id
                ),
            );
            r
        }
        _ => {
            let req = prepare(ctx, &leader, &mut out)?;
            let mut d = Databag::new();
            d.insert(restore::REQUEST.into(), req.format());
            set_leader_data(ctx, &hook, &d)?;
            req
        }
    };
    ctx.log(&format!("restoring {} on {}", req.file.display(), ctx.unit));
    // The other members keep serving the old cluster until each of them
    // sets its data aside: say that what they take meanwhile is lost.
    ctx.log(WRITES_DISCARDED);
    out.insert("restore.warning".into(), WRITES_DISCARDED.into());
    let (kind, msg) = super::reconcile(&hook, ctx.tools)?;
    let _ = ctx.tools.status_set(kind, &msg);
    let after = leader_data(ctx, &hook)?;
    if get(&after, restore::DONE) != Some(req.id.as_str()) {
        let _ = ctx.tools.action_set(&out);
        return Err(Error::Other(format!(
            "restore {}: not finished on this unit ({msg}); the next hooks continue it, or run the action again",
            req.id
        )));
    }
    out.insert("restore.id".into(), req.id.clone());
    out.insert(
        "restore.cluster-id".into(),
        get(&after, super::observed::CLUSTER_ID)
            .unwrap_or("")
            .into(),
    );
    out.insert("restore.sha256".into(), req.sha256.clone());
    out.insert("restore.revisions".into(), revisions(ctx));
    out.insert(
        "output".into(),
        format!(
            "restored {} on {}; the other units set their data aside and rejoin one at a time",
            req.file.display(),
            ctx.unit
        ),
    );
    Ok(out)
}

/// leader-get first (it lands at once; restore.rs).
fn get<'a>(l: &'a LeaderData, key: &str) -> Option<&'a str> {
    l.legacy
        .get(key)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .or_else(|| l.get(key))
}

/// What the restore did to revisions, by the tool it used (restore.rs).
fn revisions(ctx: &ActionCtx) -> String {
    let service = crate::service::Service::from_env(ctx.paths.clone(), "auto");
    let v35 = restore::bump_for(service.version().as_deref()).is_some();
    let bumped =
        v35 && restore::snapshot_tool(&service, true).is_some_and(|t| restore::can_bump(&t));
    if bumped {
        format!(
            "moved forward by {}; older revisions read as compacted (watchers re-list)",
            restore::BUMP
        )
    } else {
        "as in the snapshot: they went back (this etcd cannot bump them); restart kube-apiserver and other watchers".into()
    }
}

fn leader_data(ctx: &ActionCtx, hook: &HookContext) -> Result<LeaderData> {
    let mut l = LeaderData::default();
    if let Some(rel) = ctx
        .tools
        .relation_ids(super::observed::PEER_ENDPOINT)?
        .into_iter()
        .next()
    {
        let app = ctx.unit.split('/').next().unwrap_or_default();
        l.app = ctx.tools.relation_get_app(&rel, app)?;
    }
    if hook.has_leader_tools() {
        l.legacy = ctx.tools.leader_get()?;
    }
    Ok(l)
}

fn set_leader_data(ctx: &ActionCtx, hook: &HookContext, d: &Databag) -> Result<()> {
    if let Some(rel) = ctx
        .tools
        .relation_ids(super::observed::PEER_ENDPOINT)?
        .into_iter()
        .next()
    {
        ctx.tools.relation_set_app(&rel, d)?;
    }
    if hook.has_leader_tools() {
        ctx.tools.leader_set(d)?;
    }
    Ok(())
}

/// Stages and checks the snapshot, takes the backup: the request, or why
/// not (nothing changed then).
fn prepare(ctx: &ActionCtx, leader: &LeaderData, out: &mut Databag) -> Result<Request> {
    let id = crate::stamp::utc_stamp(SystemTime::now());
    let dir = ctx.paths.backup_dir();
    let dest = dir.join(format!("restore-{id}.db"));
    let backup_id = ctx.string("backup-id");
    let (source, staged) = if backup_id.is_empty() {
        let source = local_source(ctx)?;
        crate::private::dir(&dir).map_err(io("creating", &dir))?;
        let staged = stage(&source, &dest)?;
        (source.display().to_string(), staged)
    } else {
        // From the bucket: checked against its stored sha256 on the way.
        crate::private::dir(&dir).map_err(io("creating", &dir))?;
        super::actions_backup::download(ctx, &backup_id, &dest)?;
        out.insert("restore.backup-id".into(), backup_id.clone());
        (format!("backup {backup_id}"), dest)
    };
    let sha256 = sha256_file(&staged)?;
    let service = crate::service::Service::from_env(ctx.paths.clone(), "auto");
    let tool = restore::snapshot_tool(&service, false)
        .ok_or_else(|| Error::Other("neither etcdutl nor etcdctl is installed".into()))?;
    let status = restore::snapshot_status(&tool, &staged)?;
    ctx.log(&format!("snapshot {source} (sha256 {sha256}): {status}"));
    let old_cluster = old_cluster(ctx, leader)?;
    if ctx.boolean("skip-backup") {
        out.insert(
            "backup.error".into(),
            "no backup taken (skip-backup=true); each unit's old member/ is kept aside, dated"
                .into(),
        );
    } else {
        match backup(ctx, &id) {
            Ok((path, sum)) => {
                out.insert("backup.path".into(), path.display().to_string());
                out.insert("backup.sha256sum".into(), sum);
            }
            Err(e) => {
                let mut fail = Databag::new();
                fail.insert("backup.error".into(), e.to_string());
                let _ = ctx.tools.action_set(&fail);
                return Err(Error::Other(format!(
                    "the backup of the current data failed, nothing was restored: {e}; fix it, or run with skip-backup=true"
                )));
            }
        }
    }
    Ok(Request {
        id,
        unit: ctx.unit.clone(),
        sha256,
        old_cluster,
        file: staged,
    })
}

/// The file `path=` names, else the `snapshot` resource.
fn local_source(ctx: &ActionCtx) -> Result<PathBuf> {
    let given = ctx.string("path");
    let source = if given.is_empty() {
        ctx.tools.resource_get("snapshot").map_err(|e| {
            Error::Other(format!(
                "no path or backup-id given and no snapshot resource ({e}): run with path=<snapshot file on the unit> or backup-id=<one of list-backups>, or attach one with juju attach-resource <app> snapshot=<file>; nothing was changed"
            ))
        })?
    } else {
        ctx.paths.from_config(&given)
    };
    if !source.is_file() {
        return Err(Error::Other(format!(
            "{} is not a file on {}: copy the snapshot there (juju scp) and run again; nothing was changed",
            source.display(),
            ctx.unit
        )));
    }
    Ok(source)
}

/// The snapshot copied (or, from a `.tar.gz` such as the Python charm's
/// snapshots, extracted) beside the backups, written atomically, so the
/// file a resumed restore reads is the one checked.
fn stage(source: &Path, dest: &Path) -> Result<PathBuf> {
    let part = dest.with_extension("part");
    let mut magic = [0u8; 2];
    let gz = std::fs::File::open(source)
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
        .is_ok()
        && magic == [0x1f, 0x8b];
    if gz {
        let tmp = dest.with_extension("extract");
        let _ = std::fs::remove_dir_all(&tmp);
        crate::private::dir(&tmp).map_err(io("creating", &tmp))?;
        let ok = std::process::Command::new("tar")
            .arg("-xzf")
            .arg(source)
            .arg("-C")
            .arg(&tmp)
            .status()
            .is_ok_and(|s| s.success());
        let found = ok.then(|| find_db(&tmp)).flatten();
        let Some(db) = found else {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(Error::Other(format!(
                "{}: a gzip archive without one snapshot (.db) file in it",
                source.display()
            )));
        };
        std::fs::rename(&db, &part).map_err(io("moving", &db))?;
        let _ = std::fs::remove_dir_all(&tmp);
    } else {
        // Not fs::copy: it gives the copy the source's (often 0644) mode.
        let mut from = std::fs::File::open(source).map_err(io("reading", source))?;
        let mut to = crate::private::create(&part).map_err(io("creating", &part))?;
        std::io::copy(&mut from, &mut to).map_err(io("copying", source))?;
    }
    crate::private::tighten(&part, crate::private::FILE_MODE).map_err(io("securing", &part))?;
    std::fs::File::open(&part)
        .and_then(|f| f.sync_all())
        .map_err(io("syncing", &part))?;
    std::fs::rename(&part, dest).map_err(io("renaming", &part))?;
    if let Some(d) = dest.parent() {
        crate::durable::sync_dir(d).map_err(io("syncing", d))?;
    }
    Ok(dest.to_path_buf())
}

/// The one regular file in an extracted archive, or the one named `*.db`.
fn find_db(dir: &Path) -> Option<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).ok()?.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() => files.push(p),
                _ => {}
            }
        }
    }
    if files.len() == 1 {
        return files.pop();
    }
    let dbs: Vec<_> = files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "db"))
        .collect();
    (dbs.len() == 1).then(|| dbs[0].clone())
}

/// The cluster being replaced: as a member answers, else as recorded, else
/// as this unit's WAL says.
fn old_cluster(ctx: &ActionCtx, leader: &LeaderData) -> Result<u64> {
    if let Ok(v) = ctx.view() {
        return Ok(v.cluster_id());
    }
    if let Some(id) = leader
        .get(super::observed::CLUSTER_ID)
        .and_then(|s| u64::from_str_radix(s, 16).ok())
    {
        return Ok(id);
    }
    match crate::wal::read_ids(&ctx.paths.data_dir()) {
        Ok(Some(ids)) => Ok(ids.cluster_id),
        _ => Err(Error::Other(
            "no cluster to restore over: no member answers, none is recorded and this unit holds none; deploy the cluster first".into(),
        )),
    }
}

/// A snapshot of the current data, streamed from a healthy member into
/// `target` (default: the Python charm's /home/ubuntu).
fn backup(ctx: &ActionCtx, id: &str) -> Result<(PathBuf, String)> {
    let target = ctx.string("target");
    let dir = if target.is_empty() {
        ctx.paths.backup_dir()
    } else {
        ctx.paths.from_config(&target)
    };
    super::backups::prepare_dir(ctx.paths, &dir).map_err(io("creating", &dir))?;
    let (ep, detail) = super::action_support::snapshot_source(ctx)?;
    let size = u64::try_from(detail.db_size).unwrap_or(0);
    if let Some(msg) = crate::space::check("the backup", size, &dir) {
        return Err(Error::Other(msg));
    }
    let file = dir.join(format!("etcd-backup-before-restore-{id}.db"));
    crate::etcd::block_on(crate::etcd::snapshot_to(&ep, &file)).inspect_err(|_| {
        let _ = std::fs::remove_file(file.with_extension("part"));
    })?;
    let sum = sha256_file(&file)?;
    Ok((file, sum))
}
