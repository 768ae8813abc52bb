//! Operator actions: `snapshot` (the keyspace into a dated file) and
//! `health` (every member as this unit sees it). Results go to action-set;
//! a failure is action-fail with the reason, never a failed hook.

use super::config::CharmConfig;
use crate::error::{Error, Result};
use crate::etcd;
use crate::hooktools::{Databag, HookTools};
use crate::paths::Paths;
use std::path::PathBuf;
use std::time::SystemTime;

fn own_endpoint(tools: &HookTools) -> Result<String> {
    let cfg = CharmConfig::parse(&tools.config_get()?).map_err(Error::Config)?;
    let addr = tools.network_get_ingress(super::observe::CLIENT_ENDPOINT)?;
    Ok(crate::addr::http(&addr, cfg.port))
}

pub fn run(name: &str, tools: &HookTools, paths: &Paths) -> Result<Databag> {
    match name {
        "snapshot" => snapshot(tools, &crate::storage::paths(paths.clone())),
        "health" => health(tools),
        other => Err(Error::Other(format!("unknown action {other}"))),
    }
}

fn snapshot(tools: &HookTools, paths: &Paths) -> Result<Databag> {
    let params = tools.action_get()?;
    let dir = match params.get("target").and_then(|v| v.as_str()) {
        Some(t) if !t.is_empty() => paths.from_config(t),
        _ => paths.backup_dir(),
    };
    std::fs::create_dir_all(&dir).map_err(crate::error::io("creating", &dir))?;
    let stamp = super::apply::utc_stamp(SystemTime::now());
    let file: PathBuf = dir.join(format!("etcd-snapshot-{stamp}.db"));
    // The snapshot is about the size of the member's db: check it fits.
    let db = paths.data_dir().join("member/snap/db");
    let size = std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
    if let Some(msg) = crate::space::check("the snapshot", size, &dir) {
        return Err(Error::Other(msg));
    }
    let ep = own_endpoint(tools)?;
    let _ = tools.action_log(&format!("streaming a snapshot from {ep}"));
    // A stream that fails part way leaves its `.part`: remove it, so
    // retries of the action never pile partial snapshots up.
    let size = etcd::block_on(etcd::snapshot_to(&ep, &file)).inspect_err(|_| {
        let _ = std::fs::remove_file(file.with_extension("part"));
    })?;
    let mut out = Databag::new();
    out.insert("path".into(), file.display().to_string());
    out.insert("size".into(), size.to_string());
    Ok(out)
}

fn health(tools: &HookTools) -> Result<Databag> {
    let ep = own_endpoint(tools)?;
    let view = etcd::block_on(etcd::view_from(&ep))?;
    let mut out = Databag::new();
    out.insert("cluster-id".into(), format!("{:x}", view.cluster_id()));
    out.insert("leader".into(), format!("{:x}", view.status.leader));
    let mut healthy_all = true;
    for m in &view.members {
        let key = if m.name.is_empty() {
            format!("unstarted-{:x}", m.id)
        } else {
            m.name.to_lowercase()
        };
        let healthy = m
            .client_urls
            .first()
            .is_some_and(|u| etcd::block_on(etcd::member_status(u)).is_ok());
        healthy_all &= healthy;
        out.insert(format!("members.{key}.id"), format!("{:x}", m.id));
        out.insert(format!("members.{key}.healthy"), healthy.to_string());
        out.insert(format!("members.{key}.learner"), m.is_learner.to_string());
        out.insert(format!("members.{key}.peer-url"), m.peer_urls.join(","));
    }
    out.insert("healthy".into(), healthy_all.to_string());
    Ok(out)
}
