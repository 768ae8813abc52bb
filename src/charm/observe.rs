//! Observe: reads the Juju model, the files and the live cluster into plain
//! data. Reads only; every write is apply's.

use super::config::CharmConfig;
use super::observed::tolerate;
pub use super::observed::{
    serves_https, LeaderData, Mode, Observed, CLIENT_ENDPOINT, PEER_ENDPOINT, URL_KEYS,
};
use crate::context::{Event, HookContext, RelationKind};
use crate::error::Result;
use crate::etcd;
use crate::hooktools::{Databag, HookTools};
use crate::layout;
use crate::paths::Paths;
use crate::service::Service;
use std::collections::BTreeMap;

/// Everything the hook needs, in one pass. Failures of the model's hook
/// tools are errors (the hook is retried); an unreachable cluster is data.
pub fn observe(
    ctx: &HookContext,
    tools: &HookTools,
    paths: &Paths,
    service: &Service,
) -> Result<Observed> {
    observe_with(ctx, tools, paths, service, Mode::Hook).map(|(o, _)| o)
}

/// The host part of the first URL in a comma-separated list.
fn url_host(urls: &str) -> Option<String> {
    let first = urls.split(',').next()?.trim();
    let rest = first.split_once("://").map_or(first, |(_, r)| r);
    let hostport = rest.split('/').next()?;
    let host = match hostport.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => hostport.rsplit_once(':').map_or(hostport, |(h, _)| h),
    };
    (!host.is_empty()).then(|| host.to_string())
}

/// [`observe`], and in [`Mode::DryRun`] the list of model data it could not
/// read (each with why, and what stood in for it).
pub fn observe_with(
    ctx: &HookContext,
    tools: &HookTools,
    paths: &Paths,
    service: &Service,
    mode: Mode,
) -> Result<(Observed, Vec<String>)> {
    let mut unread = Vec::new();
    if mode == (Mode::DryRun { tools: false }) {
        unread.push(
            "no Juju hook tools on PATH (not run under `juju exec`): charm config, leadership \
             and leadership data, relation data and the unit's address were not read; \
             defaults, this unit as a non-leader, and the addresses in etcd.conf.yml stand in"
                .to_string(),
        );
    }
    let u = &mut unread;
    let config = CharmConfig::parse(&tolerate(
        mode,
        u,
        "charm config (config-get; the charm's defaults stand in)",
        || tools.config_get(),
        Default::default,
    )?);
    let asked_leader = std::time::Instant::now();
    let is_leader = tolerate(
        mode,
        u,
        "leadership (is-leader; planned as a non-leader)",
        || tools.is_leader(),
        || false,
    )?;
    let has_leader_tools = ctx.has_leader_tools();
    // perf: in the peer relation's own hooks Juju names it
    // (JUJU_RELATION_ID), so relation-ids would only repeat it; not in
    // -broken, where the relation is gone.
    let named_peer = match (&ctx.event, &ctx.relation) {
        (Event::Relation { endpoint, kind }, Some(r))
            if endpoint == PEER_ENDPOINT && *kind != RelationKind::Broken =>
        {
            Some(r.id.clone())
        }
        _ => None,
    };
    let peer_relation = match named_peer {
        Some(rel) => Some(rel),
        None => tolerate(
            mode,
            u,
            "the peer relation (relation-ids)",
            || tools.relation_ids(PEER_ENDPOINT),
            Vec::new,
        )?
        .into_iter()
        .next(),
    };
    let mut leader = LeaderData::default();
    let mut own_bag = Databag::new();
    let mut peers = BTreeMap::new();
    if let Some(rel) = &peer_relation {
        leader.app = tolerate(
            mode,
            u,
            "the peer relation's app databag (relation-get --app)",
            || tools.relation_get_app(rel, ctx.app_name()),
            Databag::new,
        )?;
        own_bag = tolerate(
            mode,
            u,
            "this unit's peer databag (relation-get)",
            || tools.relation_get(rel, &ctx.unit_name),
            Databag::new,
        )?;
    }
    let mut clients = Vec::new();
    let client_rels = tolerate(
        mode,
        u,
        "the client relations (relation-ids db)",
        || tools.relation_ids(CLIENT_ENDPOINT),
        Vec::new,
    )?;
    for rel in client_rels {
        let bag = tolerate(
            mode,
            u,
            &format!("this unit's databag in {rel} (relation-get)"),
            || tools.relation_get(&rel, &ctx.unit_name),
            Databag::new,
        )?;
        clients.push((rel, bag));
    }
    let member_name = ctx.member_name();
    let disk = layout::observe(paths, &member_name);
    let found = disk.found_config();
    let from_config = |urls: Option<&String>| urls.and_then(|u| url_host(u));
    let peer_fallback = from_config(found.and_then(|c| c.initial_advertise_peer_urls.as_ref()))
        .unwrap_or_else(|| "unknown-address".into());
    let client_fallback = from_config(found.and_then(|c| c.advertise_client_urls.as_ref()))
        .unwrap_or_else(|| peer_fallback.clone());
    let address = tolerate(
        mode,
        u,
        "the unit's peer address (network-get cluster; etcd.conf.yml's stands in)",
        || tools.network_get_ingress(PEER_ENDPOINT),
        || peer_fallback.clone(),
    )?;
    let client_address = tolerate(
        mode,
        u,
        "the unit's client address (network-get db; etcd.conf.yml's stands in)",
        || tools.network_get_ingress(CLIENT_ENDPOINT),
        || client_fallback.clone(),
    )?;
    let config_text = std::fs::read_to_string(paths.config_file()).ok();
    let dropin_text = std::fs::read_to_string(paths.systemd_dropin()).ok();
    let active = service.is_active().unwrap_or(false);

    let tls = found
        .is_some_and(serves_https)
        .then(|| crate::tls::files::client_tls(paths))
        .flatten();
    // Peers moving to TLS serve https before this unit does: the issued
    // client pair reaches them (certificates.rs).
    let files_tls = tls
        .clone()
        .or_else(|| super::certificates::files_client_tls(paths));
    etcd::set_client_tls(files_tls.clone());
    let server_key = files_tls.as_ref().and_then(|_| {
        let pem = std::fs::read_to_string(crate::tls::files::TlsPaths::new(paths).server_cert);
        crate::tls::cert::parse(&pem.ok()?).ok().map(|c| c.key_type)
    });
    let client_port = config.as_ref().map(|c| c.port).unwrap_or(2379);
    let scheme = if tls.is_some() { "https" } else { "http" };
    let own_endpoint = crate::addr::url(scheme, &client_address, client_port);
    // A running member answers where the etcd.conf.yml it was started with
    // says: a changed `port` (or address) takes effect only at its restart,
    // so that URL is asked first (issue 19.5: asking only the planned one
    // found nothing, and the restart went without a turn).
    let running_endpoint = found
        .and_then(|c| c.advertise_client_urls.as_deref())
        .and_then(|u| u.split(',').next())
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty() && *u != own_endpoint);
    let local = if active {
        running_endpoint
            .iter()
            .chain(std::iter::once(&own_endpoint))
            .find_map(|ep| etcd::block_on(etcd::view_from(ep)).ok())
    } else {
        None
    };
    // Every hook-tool call is a round trip to the Juju agent. A non-leader
    // whose own member is a healthy voter needs neither its peers' databags
    // nor leader-get (the app databag has what it needs): skip them then.
    let settled_voter = !is_leader
        && mode == Mode::Hook
        && local
            .as_ref()
            .is_some_and(|v| !v.status.is_learner && v.status.leader != 0);
    // A bridged member moving to TLS needs its peers' stage (certificates.rs).
    // So does a member in a CA rotation (ca.crt holds two CAs).
    // So does a TLS member whose etcd.conf.yml does not yet demand the
    // peer CN: it is turned on once every peer says it serves it.
    let skip_peers = settled_voter
        && clients.is_empty()
        && !super::certificates::bridging(found)
        && !super::certificates_rotation::needs_peers(paths)
        && !super::certificates_peer::needs_peers(tls.is_some(), config_text.as_deref());
    if let (Some(rel), false) = (&peer_relation, skip_peers) {
        let units = tolerate(
            mode,
            u,
            "the peer units (relation-list)",
            || tools.relation_list(rel),
            Vec::new,
        )?;
        for unit in units {
            let bag = tolerate(
                mode,
                u,
                &format!("{unit}'s peer databag (relation-get)"),
                || tools.relation_get(rel, &unit),
                Databag::new,
            )?;
            peers.insert(unit, bag);
        }
    }
    let app_complete = leader.app.contains_key(super::observed::TOKEN)
        && leader.app.contains_key(super::observed::CLUSTER_ID);
    if has_leader_tools && !(settled_voter && app_complete) {
        leader.legacy = tolerate(
            mode,
            u,
            "leadership data (leader-get)",
            || tools.leader_get(),
            Databag::new,
        )?;
    }
    // A running member says its version; asking the binary costs an exec.
    let etcd_version = match &local {
        Some(v) if !v.status.version.is_empty() => Some(v.status.version.clone()),
        _ => service.version(),
    };
    // Without a raft leader here, a peer may know better: one rebuilt
    // alone (rebuild.rs) lists who is still a member.
    let cluster = match &local {
        Some(v) if !v.status.is_learner && v.status.leader != 0 => Some(v.clone()),
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
    // A member no peer unit accounts for: only goal-state can tell a unit
    // not yet joined from one gone for good (leader.rs removes the latter).
    let unmatched = |m: &etcd::Member| {
        !m.name.is_empty()
            && m.name != member_name
            && !peers.iter().any(|(u, b)| {
                u.replace('/', "") == m.name
                    || b.get("peer-url").is_some_and(|p| m.peer_urls.contains(p))
            })
    };
    // No raft leader: is a majority lost (majority.rs)? Every voter asked
    // at once, and goal-state says whose units are gone.
    let quorum = local
        .as_ref()
        .filter(|v| v.status.leader == 0 && !v.status.is_learner)
        .map(|v| super::majority::QuorumSeen {
            voters: {
                let voters: Vec<etcd::Member> = v
                    .members
                    .iter()
                    .filter(|m| !m.is_learner)
                    .cloned()
                    .collect();
                let probe = std::time::Duration::from_secs(3);
                etcd::block_on(async {
                    Ok::<_, etcd::EtcdError>(etcd::raft_indexes(&voters, probe).await)
                })
                .unwrap_or_default()
            },
            now: super::expiry::now_unix(),
            wait_secs: crate::settable::seconds(
                super::majority::WAIT_ENV,
                super::majority::DEFAULT_WAIT,
            )
            .as_secs() as i64,
        });
    let goal_units = match &cluster {
        _ if quorum.is_some() => tolerate(
            mode,
            u,
            "the units the model expects (goal-state; a lost majority is not named)",
            || tools.goal_state_units().map(Some),
            || None,
        )?,
        Some(v) if is_leader && v.members.iter().any(unmatched) => tolerate(
            mode,
            u,
            "the units the model expects (goal-state; no member is removed as unitless)",
            || tools.goal_state_units().map(Some),
            || None,
        )?,
        _ => None,
    };
    let storage = crate::storage::observe(
        paths,
        &ctx.event,
        ctx.storage_location.as_deref(),
        (mode == Mode::Hook).then_some(tools),
    )?;
    let monitoring = super::monitoring::observe(ctx, tools, paths, service, is_leader, mode, u)?;
    let s3 = super::s3_handoff::observe(tools, paths, mode, u)?;
    let alarms = match &local {
        Some(v) => super::alarms::observe(&v.endpoint, Some(v)),
        None => Vec::new(),
    };
    let snap = super::snap_upgrade::observe(service, paths, config.as_ref().ok());
    let related = &monitoring.related;
    let certs = super::certificates::observe(ctx, tools, paths, mode, u, related, is_leader)?;
    let observed = Observed {
        certs,
        storage,
        event: ctx.event.clone(),
        unit: ctx.unit_name.clone(),
        member_name,
        departing_unit: ctx.relation.as_ref().and_then(|r| r.departing_unit.clone()),
        is_leader,
        has_leader_tools,
        config,
        leader,
        peer_relation,
        clients,
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
        endpoints: super::endpoints::observe(ctx, tools, mode, u, &monitoring.related)?,
        monitoring,
        s3,
        fresh_token: super::token::generate(),
        leader_seen: is_leader.then_some(asked_leader),
        goal_units,
        alarms,
        data_fs_bytes: super::alarms::fs_size(&paths.data_dir()),
        open_backups: super::backups::observe(paths),
        quorum,
        rebuild_copied: copied_since_config(paths),
        cert_dates: tls.as_ref().map(|_| super::expiry::observe(paths)),
        snap,
        tls,
        server_key,
        agent: (mode == Mode::Hook).then(|| super::agent::observe(paths, service)),
    };
    Ok((observed, unread))
}

/// A `member.pre-rebuild-*` dir in the data dir at least as new as
/// etcd.conf.yml (rebuild.rs's continuation: a killed rebuild set the old data aside).
pub fn copied_since_config(paths: &Paths) -> bool {
    let modified = |p: &std::path::Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(config) = modified(&paths.config_file()) else {
        return false;
    };
    let Ok(entries) = std::fs::read_dir(paths.data_dir()) else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_name()
            .to_string_lossy()
            .starts_with("member.pre-rebuild-")
            && modified(&e.path()).is_some_and(|t| t >= config)
    })
}

/// For code that runs without observe (actions, nrpe checks): the client
/// pair when this unit's etcd.conf.yml serves https and the files are
/// there, also installed as the process-wide pair (`etcd::set_client_tls`).
pub fn local_tls(paths: &Paths) -> Option<etcd::ClientTls> {
    let https = matches!(layout::read_found_config(paths), Some(Ok(c)) if serves_https(&c));
    let tls = https
        .then(|| crate::tls::files::client_tls(paths))
        .flatten();
    etcd::set_client_tls(tls.clone());
    tls
}

#[cfg(test)]
mod tests {
    use super::url_host;

    #[test]
    fn url_hosts() {
        assert_eq!(
            url_host("https://10.5.0.10:2380").as_deref(),
            Some("10.5.0.10")
        );
        assert_eq!(
            url_host("https://0.0.0.0:2379,http://127.0.0.1:4001").as_deref(),
            Some("0.0.0.0")
        );
        assert_eq!(
            url_host("http://[fd00::1]:2379").as_deref(),
            Some("fd00::1")
        );
        assert_eq!(url_host("10.0.0.1").as_deref(), Some("10.0.0.1"));
        assert_eq!(url_host(""), None);
    }
}
