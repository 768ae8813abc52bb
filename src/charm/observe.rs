//! Observe: reads the Juju model, the files and the live cluster into plain
//! data. Reads only; every write is apply's.

use super::config::CharmConfig;
use crate::context::{Event, HookContext, RelationKind};
use crate::error::Result;
use crate::etcd::{self, ClusterView};
use crate::hooktools::{Databag, HookTools};
use crate::layout::{self, DiskLayout};
use crate::paths::Paths;
use crate::service::Service;
use crate::wal::WalIds;
use std::collections::BTreeMap;

pub const PEER_ENDPOINT: &str = "cluster";
pub const CLIENT_ENDPOINT: &str = "db";

/// Leadership data as read from both places Juju may keep it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderData {
    /// The peer relation's app databag (Juju 4's home for it).
    pub app: Databag,
    /// `leader-get` (empty under Juju 4).
    pub legacy: Databag,
}

impl LeaderData {
    /// App databag first, then leader-get.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.app
            .get(key)
            .or_else(|| self.legacy.get(key))
            .map(|s| s.as_str())
            .filter(|s| !s.is_empty())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub event: Event,
    pub unit: String,
    pub member_name: String,
    /// Set in relation-departed hooks.
    pub departing_unit: Option<String>,
    pub is_leader: bool,
    pub has_leader_tools: bool,
    pub config: std::result::Result<CharmConfig, String>,
    pub leader: LeaderData,
    /// `cluster:N` once the peer relation exists.
    pub peer_relation: Option<String>,
    pub own_bag: Databag,
    /// Remote peer units and their databags.
    pub peers: BTreeMap<String, Databag>,
    pub address: String,
    pub client_address: String,
    pub disk: DiskLayout,
    /// etcd.conf.yml as it is now, for diffs and change detection.
    pub config_text: Option<String>,
    /// The drop-in as it is now (snap backend only).
    pub dropin_text: Option<String>,
    /// The etcd version we can run, None when etcd is not installed.
    pub etcd_version: Option<String>,
    pub active: bool,
    /// This unit's own member, when it answers.
    pub local: Option<ClusterView>,
    /// The cluster as any reachable member sees it (own member first).
    pub cluster: Option<ClusterView>,
}

impl Observed {
    /// The member this unit's canonical data dir holds, if any.
    pub fn local_ids(&self) -> Option<WalIds> {
        self.disk
            .locations
            .iter()
            .find(|l| l.role == layout::Role::Canonical)
            .and_then(|l| l.member.as_ref().ok().copied().flatten())
    }

    pub fn is_departed_hook(&self) -> bool {
        matches!(
            &self.event,
            Event::Relation { endpoint, kind: RelationKind::Departed } if endpoint == PEER_ENDPOINT
        )
    }
}

/// Everything the hook needs, in one pass. Failures of the model's hook
/// tools are errors (the hook is retried); an unreachable cluster is data.
pub fn observe(
    ctx: &HookContext,
    tools: &HookTools,
    paths: &Paths,
    service: &Service,
) -> Result<Observed> {
    let config = CharmConfig::parse(&tools.config_get()?);
    let is_leader = tools.is_leader()?;
    let has_leader_tools = ctx.has_leader_tools();
    let peer_relation = tools.relation_ids(PEER_ENDPOINT)?.into_iter().next();
    let mut leader = LeaderData::default();
    let mut own_bag = Databag::new();
    let mut peers = BTreeMap::new();
    if let Some(rel) = &peer_relation {
        leader.app = tools.relation_get_app(rel, ctx.app_name())?;
        own_bag = tools.relation_get(rel, &ctx.unit_name)?;
        for u in tools.relation_list(rel)? {
            let bag = tools.relation_get(rel, &u)?;
            peers.insert(u, bag);
        }
    }
    if has_leader_tools {
        leader.legacy = tools.leader_get()?;
    }
    let address = tools.network_get_ingress(PEER_ENDPOINT)?;
    let client_address = tools.network_get_ingress(CLIENT_ENDPOINT)?;
    let member_name = ctx.member_name();
    let disk = layout::observe(paths, &member_name);
    let config_text = std::fs::read_to_string(paths.config_file()).ok();
    let dropin_text = std::fs::read_to_string(paths.systemd_dropin()).ok();
    let etcd_version = service.version();
    let active = service.is_active().unwrap_or(false);

    let client_port = config.as_ref().map(|c| c.port).unwrap_or(2379);
    let own_endpoint = format!("http://{client_address}:{client_port}");
    let local = if active {
        etcd::block_on(etcd::view_from(&own_endpoint)).ok()
    } else {
        None
    };
    let cluster = match &local {
        Some(v) if !v.status.is_learner => Some(v.clone()),
        _ => {
            let eps: Vec<String> = peers
                .values()
                .filter_map(|b| b.get("client-url").cloned())
                .collect();
            if eps.is_empty() {
                local.clone()
            } else {
                etcd::block_on(etcd::view(&eps)).ok().or(local.clone())
            }
        }
    };
    Ok(Observed {
        event: ctx.event.clone(),
        unit: ctx.unit_name.clone(),
        member_name,
        departing_unit: ctx.relation.as_ref().and_then(|r| r.departing_unit.clone()),
        is_leader,
        has_leader_tools,
        config,
        leader,
        peer_relation,
        own_bag,
        peers,
        address,
        client_address,
        disk,
        config_text,
        dropin_text,
        etcd_version,
        active,
        local,
        cluster,
    })
}
