//! What this unit's member should be, from what was observed: its URLs,
//! its etcd.conf.yml, and the records of the cluster it belongs to. Pure;
//! shared by the plan and the concerns' planners (below both).

use super::certificates_stage as certs;
use super::config::CharmConfig;
use super::observed::{Observed, CLUSTER_ID};
use crate::paths::Paths;
use crate::render::{ClusterState, EtcdConfig, EtcdTls};

/// `https` when this unit keeps TLS (observe found the files beside an
/// https etcd.conf.yml), `http` otherwise.
pub fn scheme(o: &Observed) -> &'static str {
    if o.tls.is_some() {
        "https"
    } else {
        "http"
    }
}

pub fn peer_url(o: &Observed, c: &CharmConfig) -> String {
    crate::addr::url(certs::peer_scheme(o), &o.address, c.management_port)
}

pub fn client_url(o: &Observed, c: &CharmConfig) -> String {
    crate::addr::url(certs::client_scheme(o), &o.client_address, c.port)
}

/// The TLS parts of etcd.conf.yml when this unit keeps TLS: the files the
/// Python charm wrote, where it wrote them (paths as etcd sees them).
fn etcd_tls(o: &Observed, c: &CharmConfig, paths: &Paths, token: &str) -> Option<EtcdTls> {
    (certs::stage(o) != certs::Stage::Plain).then_some(())?;
    let f = crate::tls::files::TlsPaths::new(paths);
    let s = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
    Some(EtcdTls {
        cert_file: s(f.server_cert),
        key_file: s(f.server_key),
        trusted_ca_file: s(f.ca),
        // Suites that do not fit the key have blocked the plan already
        // (tls_cipher_suites_misfit); an empty list keeps Go's defaults.
        cipher_suites: o
            .server_key
            .as_ref()
            .and_then(|k| crate::tls::ciphers::usable_for(&c.tls_cipher_suites, k).ok())
            .unwrap_or_default(),
        // Only once every member serves it, and with https peers: a
        // bridging member dials with the same certificate, but the move
        // to TLS is hard enough without a second reason to be refused.
        peer_allowed_cn: (certs::stage(o) == certs::Stage::Full)
            .then(|| {
                let own = super::certificates::served_cn(o);
                super::certificates_peer::allowed(o, token, own.as_deref())
            })
            .flatten(),
    })
}

/// Parses a join record: `<member id hex> <initial-cluster>`.
pub fn parse_join(v: &str) -> Option<(u64, String)> {
    let (id, cluster) = v.split_once(' ')?;
    Some((u64::from_str_radix(id, 16).ok()?, cluster.to_string()))
}

pub fn format_join(id: u64, initial_cluster: &str) -> String {
    format!("{id:x} {initial_cluster}")
}

pub(super) fn parse_cluster(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .filter_map(|p| p.split_once('='))
        .map(|(n, u)| (n.trim().to_string(), u.trim().to_string()))
        .collect()
}

pub fn desired_config(
    o: &Observed,
    c: &CharmConfig,
    paths: &Paths,
    token: &str,
    state: ClusterState,
    initial_cluster: Vec<(String, String)>,
) -> EtcdConfig {
    let peer = peer_url(o, c);
    let client = client_url(o, c);
    let (listen_peer, listen_client) = if c.bind_to_all_interfaces {
        (
            crate::addr::url(certs::peer_scheme(o), "0.0.0.0", c.management_port),
            crate::addr::url(certs::client_scheme(o), "0.0.0.0", c.port),
        )
    } else {
        (peer.clone(), client.clone())
    };
    EtcdConfig {
        name: o.member_name.clone(),
        data_dir: paths.data_dir().to_string_lossy().into_owned(),
        listen_peer_urls: vec![listen_peer],
        listen_client_urls: super::options::listen_client_urls(c, listen_client),
        listen_metrics_urls: vec![super::loopback_metrics::url(&o.client_address, c)],
        initial_advertise_peer_urls: vec![peer],
        advertise_client_urls: vec![client],
        initial_cluster,
        initial_cluster_token: token.to_string(),
        initial_cluster_state: state,
        snapshot_count: c.snapshot_count,
        heartbeat_interval: c.heartbeat_interval,
        election_timeout: c.election_timeout,
        strict_reconfig_check: true,
        enable_v2: keeps_v2(o),
        grpc_gateway: true,
        force_new_cluster: continues_rebuild(o),
        storage: c.storage_options(),
        tls: etcd_tls(o, c, paths, token),
    }
}

/// A rebuild the `rebuild-cluster` action began (rebuild.rs) and a kill cut
/// short: etcd.conf.yml on disk says `force-new-cluster` and this unit's
/// member does not yet answer as the only voter, with itself leading. The
/// flag stays until it does; then the next config drops it.
pub(super) fn continues_rebuild(o: &Observed) -> bool {
    let forced = o
        .disk
        .config
        .as_ref()
        .and_then(|c| c.as_ref().ok())
        .and_then(|c| c.raw.get("force-new-cluster"))
        .is_some_and(|v| v.trim() == "true");
    forced && !o.local.as_ref().is_some_and(|v| v.leads_alone())
}

/// etcd's v2 API stays on where the config on disk turned it on (the
/// Python charm's did): its v2 clients and keys would go dark otherwise.
/// Nowhere else is it turned on: v2 is deprecated and unauthenticated
/// by etcd's v3 roles.
pub(super) fn keeps_v2(o: &Observed) -> bool {
    o.disk
        .config
        .as_ref()
        .and_then(|c| c.as_ref().ok())
        .and_then(|c| c.raw.get("enable-v2"))
        .is_some_and(|v| v.trim() == "true")
}

/// The fields whose change needs a restart (etcd ignores `initial-*` once
/// its data dir holds a WAL).
pub(super) fn runtime_part(c: &EtcdConfig) -> EtcdConfig {
    EtcdConfig {
        initial_cluster: vec![],
        initial_cluster_token: String::new(),
        initial_cluster_state: ClusterState::Existing,
        ..c.clone()
    }
}

/// True when anything says a cluster already exists: never bootstrap then.
pub(super) fn cluster_exists(o: &Observed) -> bool {
    o.leader.get(CLUSTER_ID).is_some()
        || o.cluster.is_some()
        || o.local_ids().is_some()
        || o.peers
            .values()
            .any(|b| b.get("member-id").is_some_and(|v| !v.is_empty()))
}

/// No WAL here, etcd down, yet the cluster lists a started member under
/// this unit's peer URL: that is this unit's old voter, whose log is gone.
pub fn stale_own_member(o: &Observed, c: &CharmConfig) -> Option<u64> {
    if o.active || o.local_ids().is_some() {
        return None;
    }
    let m = o.cluster.as_ref()?.by_peer_url(&peer_url(o, c))?;
    (!m.name.is_empty()).then_some(m.id)
}

/// The recorded cluster ID, from leadership data.
pub(super) fn recorded_cluster(o: &Observed) -> Option<u64> {
    o.leader
        .get(CLUSTER_ID)
        .and_then(|s| u64::from_str_radix(s, 16).ok())
}
