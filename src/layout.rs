//! What is on disk: etcd.conf.yml as it really may be (ours, the Python
//! charm's, or the snap's 2.x → 3.x rewrite), etcd.conf / etcd.conf.2x, and
//! every place a member may live, each with the IDs its WAL records.
//!
//! HELPER TASK (wal/layout helper): implement; keep signatures.

use crate::paths::Paths;
use crate::wal::{WalError, WalIds};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// An etcd.conf.yml as found: every key optional, empty values as None.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoundConfig {
    pub name: Option<String>,
    pub data_dir: Option<String>,
    pub wal_dir: Option<String>,
    pub initial_cluster: Option<String>,
    pub initial_cluster_token: Option<String>,
    pub initial_cluster_state: Option<String>,
    pub initial_advertise_peer_urls: Option<String>,
    pub advertise_client_urls: Option<String>,
    /// Every key as text (empty values as ""), for diffs and messages.
    pub raw: BTreeMap<String, String>,
}

/// Lenient: accepts quoted values, `wal-dir: ''`, `snapshot-count:` with
/// nothing, lists or comma strings for URL keys. Err names what is wrong.
pub fn parse_found_config(text: &str) -> Result<FoundConfig, String> {
    let _ = text;
    todo!()
}

/// `ETCD_NAME=etcd0` lines (optionally quoted values, `#` comments).
pub fn parse_env_config(text: &str) -> BTreeMap<String, String> {
    let _ = text;
    todo!()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `/var/snap/etcd/current`
    Canonical,
    /// `/var/snap/etcd/current/<name>.etcd`
    Legacy,
    /// A `data-dir` named by the found config that is neither of the above.
    Configured,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Host path (under the root).
    pub path: PathBuf,
    pub role: Role,
    pub exists: bool,
    /// What its WAL says: Ok(None) no member, Ok(Some) a member, Err unreadable.
    pub member: Result<Option<WalIds>, WalError>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskLayout {
    /// None: no etcd.conf.yml. Some(Err): present but unreadable/unparseable.
    pub config: Option<Result<FoundConfig, String>>,
    /// etcd.conf, then etcd.conf.2x, whichever exist.
    pub env_configs: Vec<(PathBuf, BTreeMap<String, String>)>,
    /// Canonical first, then legacy, then configured; no duplicates.
    pub locations: Vec<Location>,
}

/// Reads everything above. Never writes. `member_name` is e.g. `etcd0`.
pub fn observe(paths: &Paths, member_name: &str) -> DiskLayout {
    let _ = (paths, member_name);
    todo!()
}

/// The start guard (rule 2 made physical): Err with a message naming both
/// paths when the configured data dir holds no member but another known
/// location does. Run as ExecStartPre and by the direct backend.
pub fn start_guard(paths: &Paths) -> Result<(), String> {
    let _ = paths;
    Ok(())
}
