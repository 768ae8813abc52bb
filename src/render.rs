//! etcd.conf.yml and the systemd drop-in, rendered from templates/ (pulled in
//! with `include_str!`) and fed by typed structs. Every value is emitted as a
//! quoted YAML scalar, so no config value can inject YAML.
//!
//! HELPER TASK (render/service helper): implement; keep signatures.

use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterState {
    New,
    Existing,
}

impl ClusterState {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::New => "new",
            ClusterState::Existing => "existing",
        }
    }
}

/// What etcd reads from `--config-file`. Field order is the file's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    pub name: String,
    /// As etcd sees it (a host path, not under ETCD_CHARM_ROOT's prefix
    /// unless the root is `/`); callers decide.
    pub data_dir: String,
    pub listen_peer_urls: Vec<String>,
    pub listen_client_urls: Vec<String>,
    pub initial_advertise_peer_urls: Vec<String>,
    pub advertise_client_urls: Vec<String>,
    /// `name=peerURL` pairs.
    pub initial_cluster: Vec<(String, String)>,
    pub initial_cluster_token: String,
    pub initial_cluster_state: ClusterState,
    pub snapshot_count: Option<u64>,
    pub heartbeat_interval: u64,
    pub election_timeout: u64,
    pub strict_reconfig_check: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderError {
    pub what: String,
    pub problem: String,
}

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.problem)
    }
}
impl std::error::Error for RenderError {}

/// Renders templates/etcd.conf.yml.
pub fn render_etcd_config(cfg: &EtcdConfig) -> String {
    let _ = cfg;
    todo!()
}

/// Parses a file we rendered back into the struct (strict: every key we
/// write must be there with the right type).
pub fn parse_etcd_config(text: &str) -> Result<EtcdConfig, RenderError> {
    let _ = text;
    todo!()
}

/// What the drop-in for `snap.etcd.etcd.service` needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropIn {
    /// The charm binary, run as `ExecStartPre=<bin> guard` (the start guard).
    pub charm_binary: PathBuf,
    /// `ETCD_CHARM_ROOT` the guard must use (`/` in production).
    pub root: PathBuf,
}

/// Renders templates/snap.etcd.etcd.service.d.conf.
pub fn render_dropin(d: &DropIn) -> String {
    let _ = d;
    todo!()
}
