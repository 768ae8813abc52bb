//! Operator actions, with the Python etcd charm's names, parameters and
//! result keys so its runbooks keep working after a refresh: `snapshot`
//! here; the maintenance actions in `actions_ops`, `debug` in
//! `actions_debug`. Results go to action-set; a failure is action-fail
//! with a message saying what to do, never a failed hook. No result or
//! message carries key material.

use super::action_support::snapshot_source;
pub use super::action_support::{sha256_file, ActionCtx};
use super::config::CharmConfig;
use crate::error::{Error, Result};
use crate::etcd;
use crate::hooktools::{Databag, HookTools};
use crate::paths::Paths;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

fn context<'a>(tools: &'a HookTools, paths: &'a Paths) -> Result<ActionCtx<'a>> {
    let cfg = CharmConfig::parse(&tools.config_get()?).map_err(Error::Config)?;
    let addr = tools.network_get_ingress(super::observed::CLIENT_ENDPOINT)?;
    let scheme = match super::observe::local_tls(paths) {
        Some(_) => "https",
        None => "http",
    };
    let own = crate::addr::url(scheme, &addr, cfg.port);
    let mut endpoints = vec![own.clone()];
    if let Some(rel) = tools
        .relation_ids(super::observed::PEER_ENDPOINT)?
        .into_iter()
        .next()
    {
        for unit in tools.relation_list(&rel)? {
            if let Some(url) = tools.relation_get(&rel, &unit)?.get("client-url") {
                if !endpoints.contains(url) {
                    endpoints.push(url.clone());
                }
            }
        }
    }
    Ok(ActionCtx {
        tools,
        paths,
        params: tools.action_get()?,
        unit: std::env::var("JUJU_UNIT_NAME").unwrap_or_default(),
        own,
        endpoints,
    })
}

pub fn run(name: &str, tools: &HookTools, paths: &Paths) -> Result<Databag> {
    // The data dir may be on the `data` volume (storage.rs).
    let paths = crate::storage::paths(paths.clone());
    let ctx = context(tools, &paths)?;
    use super::actions_ops as ops;
    match name {
        "snapshot" => snapshot(&ctx),
        "health" => ops::health(&ctx),
        "member-list" => ops::member_list(&ctx),
        "alarm-list" => ops::alarm_list(&ctx),
        "alarm-disarm" => ops::alarm_disarm(&ctx),
        "compact" => ops::compact(&ctx),
        "defrag" => ops::defrag(&ctx),
        "package-client-credentials" => super::actions_creds::package(&ctx),
        "debug" => super::actions_debug::debug(&ctx),
        "restore" => super::actions_restore::restore(&ctx),
        "create-backup" => super::actions_backup::create_backup(&ctx),
        "list-backups" => super::actions_backup::list_backups(&ctx),
        // Declared with the Python charm's names so a runbook gets an
        // answer it can act on instead of "action not defined".
        "cis-benchmark" => Err(Error::Other(
            "cis-benchmark: not offered by this charm (it benchmarked the Python charm's \
             Kubernetes snaps); run kube-bench against the control plane instead"
                .into(),
        )),
        other => Err(Error::Other(format!("unknown action {other}"))),
    }
}

/// The snapshot action refuses anything but v3 keys: etcd 3.4 has no v2
/// store to save (pure, for tests).
pub fn check_keys_version(v: &str) -> std::result::Result<(), String> {
    match v {
        "" | "v3" => Ok(()),
        "v2" => Err(
            "keys-version=v2: v2 keys are not supported by etcd 3.4+ (its v2 store is gone); \
             run the action with keys-version=v3"
                .into(),
        ),
        other => Err(format!(
            "keys-version={other:?} is not supported: only v3 (etcd 3.4+ has no v2 keys)"
        )),
    }
}

/// The snapshot action's results, keyed as the Python charm keyed them.
pub fn snapshot_results(
    unit: &str,
    path: &Path,
    size: u64,
    sha256: &str,
    version: &str,
) -> Databag {
    let mut out = Databag::new();
    out.insert("snapshot.path".into(), path.display().to_string());
    out.insert("snapshot.size".into(), size.to_string());
    out.insert("snapshot.sha256".into(), sha256.to_string());
    out.insert("snapshot.version".into(), version.to_string());
    out.insert(
        "copy.cmd".into(),
        super::action_support::copy_cmd(unit, path),
    );
    out
}

fn snapshot(ctx: &ActionCtx) -> Result<Databag> {
    check_keys_version(&ctx.string("keys-version")).map_err(Error::Other)?;
    let target = ctx.string("target");
    let dir: PathBuf = if target.is_empty() {
        ctx.paths.backup_dir()
    } else {
        ctx.paths.from_config(&target)
    };
    let (ep, detail) = snapshot_source(ctx)?;
    // The snapshot is about the size of the member's db: check it fits.
    let size = u64::try_from(detail.db_size).unwrap_or(0);
    if let Some(msg) = crate::space::check("the snapshot", size, &dir) {
        return Err(Error::Other(format!(
            "{msg}; or run the action with target=<a directory with room>"
        )));
    }
    super::backups::prepare_dir(ctx.paths, &dir).map_err(crate::error::io("creating", &dir))?;
    let stamp = crate::stamp::utc_stamp(SystemTime::now());
    let file = dir.join(format!("etcd-snapshot-{stamp}.db"));
    ctx.log(&format!("streaming a snapshot from {ep}"));
    // A stream that fails part way leaves its `.part`: remove it, so
    // retries of the action never pile partial snapshots up.
    let size = etcd::block_on(etcd::snapshot_to(&ep, &file)).inspect_err(|_| {
        let _ = std::fs::remove_file(file.with_extension("part"));
    })?;
    let sum = sha256_file(&file)?;
    Ok(snapshot_results(
        &ctx.unit,
        &file,
        size,
        &sum,
        &detail.version,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_version_v3_only() {
        assert!(check_keys_version("v3").is_ok());
        assert!(check_keys_version("").is_ok());
        let e = check_keys_version("v2").unwrap_err();
        assert!(e.contains("not supported by etcd 3.4+"), "{e}");
        assert!(check_keys_version("v4").is_err());
    }

    #[test]
    fn snapshot_results_have_the_python_charms_keys() {
        let r = snapshot_results(
            "etcd/1",
            Path::new("/home/ubuntu/etcd-snapshots/etcd-snapshot-x.db"),
            20480,
            "ab12",
            "3.4.23",
        );
        let keys: Vec<&str> = r.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "copy.cmd",
                "snapshot.path",
                "snapshot.sha256",
                "snapshot.size",
                "snapshot.version"
            ]
        );
        assert_eq!(
            r["copy.cmd"],
            "juju ssh --pty=false etcd/1 -- sudo cat /home/ubuntu/etcd-snapshots/etcd-snapshot-x.db > etcd-snapshot-x.db"
        );
        assert_eq!(r["snapshot.size"], "20480");
    }

    #[test]
    fn sha256_of_a_known_text() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"abc").unwrap();
        assert_eq!(
            sha256_file(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
