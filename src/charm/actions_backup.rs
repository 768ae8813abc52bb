//! Backups off the machine (charmed-etcd-operator's action names):
//! `create-backup` streams a snapshot from a healthy member and uploads it
//! with its sha256 to the bucket s3-integrator names on `s3-parameters`;
//! `list-backups` lists them; `restore backup-id=…` (actions_restore.rs)
//! downloads one, checks its sha256, and restores it as any snapshot.
//! Nothing here changes the cluster, and no key is ever in a result.

use super::action_support::{snapshot_source, ActionCtx};
use super::s3_params::{self, S3Params};
use crate::error::{Error, Result};
use crate::hooktools::Databag;
use std::path::Path;
use std::time::SystemTime;

/// The parameters of the related s3-integrator, or what to do.
pub fn params(ctx: &ActionCtx) -> Result<S3Params> {
    let no = || {
        Error::Other(
            "no s3-parameters relation: deploy s3-integrator, configure it, and juju integrate <app>:s3-parameters s3-integrator"
                .into(),
        )
    };
    let rel = ctx
        .tools
        .relation_ids(s3_params::ENDPOINT)?
        .into_iter()
        .next()
        .ok_or_else(no)?;
    let app = ctx
        .tools
        .relation_list(&rel)?
        .into_iter()
        .next()
        .and_then(|u| u.split('/').next().map(str::to_string))
        .ok_or_else(|| {
            Error::Other(format!(
                "the s3-parameters relation {rel} has no unit yet: wait for s3-integrator to join"
            ))
        })?;
    let bag = ctx.tools.relation_get_app(&rel, &app)?;
    s3_params::parse(&bag).map_err(Error::Other)
}

fn bucket(p: &S3Params) -> Result<crate::s3::Bucket> {
    crate::s3::Bucket::new(p).map_err(|e| Error::Other(e.to_string()))
}

pub fn create_backup(ctx: &ActionCtx) -> Result<Databag> {
    let p = params(ctx)?;
    let b = bucket(&p)?;
    let (ep, detail) = snapshot_source(ctx)?;
    let dir = ctx.paths.backup_dir();
    let size = u64::try_from(detail.db_size).unwrap_or(0);
    if let Some(msg) = crate::space::check("the backup's snapshot", size, &dir) {
        return Err(Error::Other(msg));
    }
    crate::private::dir(&dir).map_err(crate::error::io("creating", &dir))?;
    let id = crate::s3::block_on(b.free_id()).map_err(|e| Error::Other(e.to_string()))?;
    let file = dir.join(format!(
        "s3-upload-{}.db",
        crate::stamp::utc_stamp(SystemTime::now())
    ));
    ctx.log(&format!("streaming a snapshot from {ep}"));
    let _ = crate::etcd::block_on(crate::etcd::snapshot_to(&ep, &file)).inspect_err(|_| {
        let _ = std::fs::remove_file(file.with_extension("part"));
    })?;
    ctx.log(&format!("uploading backup {id} to {}", p.url()));
    let up = upload(&b, &id, &file);
    // The local copy was only the upload's source (the agent keeps its
    // own rolling copies): it goes either way.
    let _ = std::fs::remove_file(&file);
    let (bytes, sum) = up?;
    let mut out = Databag::new();
    out.insert("backup-id".into(), id.clone());
    out.insert("backup.size".into(), bytes.to_string());
    out.insert("backup.sha256".into(), sum);
    out.insert(
        "backup.location".into(),
        format!("{}/{id}", p.url().trim_end_matches('/')),
    );
    out.insert(
        "output".into(),
        format!("backup {id} uploaded ({bytes} bytes); restore it with: juju run <leader> restore backup-id={id}"),
    );
    Ok(out)
}

/// Uploads `file` as backup `id`: (bytes, sha256).
pub fn upload(b: &crate::s3::Bucket, id: &str, file: &Path) -> Result<(u64, String)> {
    crate::s3::block_on(b.upload(id, file))
        .map_err(|e| Error::Other(format!("backup {id} not uploaded: {e}")))
}

pub fn list_backups(ctx: &ActionCtx) -> Result<Databag> {
    let p = params(ctx)?;
    let b = bucket(&p)?;
    let listed = crate::s3::block_on(b.list()).map_err(|e| Error::Other(e.to_string()))?;
    let mut out = Databag::new();
    out.insert("backups".into(), table(&listed));
    out.insert("count".into(), listed.len().to_string());
    out.insert("location".into(), p.url());
    Ok(out)
}

/// The list as charmed-etcd-operator prints it, with sizes and whether
/// the backup can be restored (its sha256 is there).
pub fn table(listed: &[crate::s3::Listed]) -> String {
    let mut lines = vec![format!(
        "{:<21} | {:>12} | backup-status",
        "backup-id", "size"
    )];
    lines.push("-".repeat(lines[0].len()));
    for l in listed {
        let status = if l.has_sum {
            "finished"
        } else {
            "incomplete (no sha256)"
        };
        lines.push(format!("{:<21} | {:>12} | {status}", l.id, l.size));
    }
    lines.join("\n")
}

/// Downloads and checks backup `id` into `dest`: its sha256.
pub fn download(ctx: &ActionCtx, id: &str, dest: &Path) -> Result<String> {
    if !s3_params::is_backup_id(id) {
        return Err(Error::Other(format!(
            "backup-id {id:?} is not a backup id (YYYY-MM-DDTHH:MM:SSZ, as list-backups shows them); nothing was changed"
        )));
    }
    let p = params(ctx)?;
    let b = bucket(&p)?;
    ctx.log(&format!("downloading backup {id} from {}", p.url()));
    crate::s3::block_on(b.download(id, dest))
        .map_err(|e| Error::Other(format!("{e}; nothing was changed")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s3::Listed;

    #[test]
    fn the_list_says_which_backups_can_be_restored() {
        let t = table(&[
            Listed {
                id: "2026-12-07T15:04:05Z".into(),
                size: 151_584,
                has_sum: true,
            },
            Listed {
                id: "2026-12-06T15:04:05Z".into(),
                size: 10,
                has_sum: false,
            },
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("backup-id"), "{t}");
        assert!(
            lines[2].starts_with("2026-12-07T15:04:05Z ") && lines[2].ends_with("| finished"),
            "{t}"
        );
        assert!(lines[3].ends_with("incomplete (no sha256)"), "{t}");
    }
}
