//! What observe found, as plain data: the vocabulary every concern reads.
//! Below observe.rs (which fills it) and below every concern, so a concern
//! imports this and never the orchestrator. The concerns' own parts of it
//! (monitoring, endpoints, alarms, certificates, …) are defined here; their
//! methods stay with the concern.

use super::config::CharmConfig;
use crate::agent::service::Installed;
use crate::agent::state::AgentState;
use crate::context::{Event, RelationKind};
use crate::error::Result;
use crate::etcd::{self, ClusterView};
use crate::hooktools::Databag;
use crate::layout::{self, DiskLayout};
use crate::tls::{Pair, Protocol};
use crate::wal::WalIds;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Keys in leadership data.
pub const TOKEN: &str = "token";
pub const CLUSTER_ID: &str = "cluster-id";
pub const CLUSTER: &str = "cluster";
pub const JOIN_PREFIX: &str = "join-";

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

/// What observe saw of the voters when this unit's member had no leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumSeen {
    /// Every voter this unit's member lists, with its raft index when it
    /// answered a status call.
    pub voters: Vec<(crate::etcd::Member, Option<u64>)>,
    /// The clock, unix seconds.
    pub now: i64,
    /// majority.rs's `WAIT_ENV`, read by observe.
    pub wait_secs: i64,
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
    /// Client relations on `db`, each with this unit's databag in it.
    pub clients: Vec<(String, Databag)>,
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
    /// The prometheus, grafana and nrpe-external-master endpoints.
    pub monitoring: Monitoring,
    /// The s3-parameters relation and the agent's copy of it.
    pub s3: super::s3_handoff::S3Seen,
    /// A freshly generated candidate token (or why none could be had): the
    /// randomness is read here so the plan stays pure; the plan uses it
    /// only when no record of a token exists and it must create one.
    pub fresh_token: std::result::Result<String, String>,
    /// When is-leader was asked, if it answered true (see lease.rs).
    pub leader_seen: Option<std::time::Instant>,
    /// goal-state's units (name → status), read by the leader only when a
    /// started member matches no peer unit; None when not read.
    pub goal_units: Option<BTreeMap<String, String>>,
    /// The proxy and certificates endpoints (endpoints.rs).
    pub endpoints: Endpoints,
    /// The `data` storage volume: fstab, mount, attached device.
    pub storage: crate::storage::StorageFacts,
    /// Alarms raised in the cluster (read only when this unit's member
    /// answers: one call).
    pub alarms: Vec<AlarmSeen>,
    /// Size of the file system holding the data dir (to judge the quota).
    pub data_fs_bytes: Option<u64>,
    /// The client pair and CA in /var/snap/etcd/common, read only when
    /// etcd.conf.yml serves https (a TLS member of the Python charm, or one
    /// this charm took over): then this unit keeps TLS with those files.
    pub tls: Option<etcd::ClientTls>,
    /// The key type of the server certificate the kept TLS serves with:
    /// `tls_cipher_suites` must fit it (interfaces.md §4).
    pub server_key: Option<crate::tls::cert::KeyType>,
    /// The notAfter of the certificates the kept TLS serves with, and the
    /// clock (expiry.rs); None without TLS.
    pub cert_dates: Option<CertDates>,
    /// The etcd snap as `snap list` shows it (snap backend; snap_upgrade.rs).
    pub snap: Option<SnapSeen>,
    /// The maintenance agent as it runs now (hooks only; None in a dry run).
    pub agent: Option<AgentSeen>,
    /// The `certificates` relation and the files (certificates.rs).
    pub certs: Certs,
    /// Keyspace copies of ours (and their dirs) other accounts may read,
    /// with their modes (backups.rs).
    pub open_backups: Vec<(PathBuf, u32)>,
    /// Every voter's answer, read only when this unit's member answers
    /// without a raft leader (majority.rs).
    pub quorum: Option<QuorumSeen>,
    /// A `member.pre-rebuild-*` copy in the data dir newer than
    /// etcd.conf.yml: a rebuild killed part-way already set the old data
    /// aside (rebuild.rs).
    pub rebuild_copied: bool,
}

impl Observed {
    /// The cluster as the best-informed member sees it: this unit's own
    /// member when it is a voter (fresher, and it is the one we run), else
    /// the view read from any peer.
    pub fn member_view(&self) -> Option<&ClusterView> {
        self.local
            .as_ref()
            .filter(|v| !v.status.is_learner)
            .or(self.cluster.as_ref())
    }

    /// The member this unit's canonical data dir holds, if any.
    pub fn local_ids(&self) -> Option<WalIds> {
        self.disk
            .locations
            .iter()
            .find(|l| l.role == layout::Role::Canonical)
            .and_then(|l| l.member.as_ref().ok().copied().flatten())
    }

    /// A departed hook for this unit itself, or the peer relation broken:
    /// Juju is tearing this unit down.
    pub fn is_leaving(&self) -> bool {
        let own_departure =
            self.is_departed_hook() && self.departing_unit.as_deref() == Some(self.unit.as_str());
        let broken = matches!(
            &self.event,
            Event::Relation { endpoint, kind: RelationKind::Broken } if endpoint == PEER_ENDPOINT
        );
        own_departure || broken
    }

    pub fn is_departed_hook(&self) -> bool {
        matches!(
            &self.event,
            Event::Relation { endpoint, kind: RelationKind::Departed } if endpoint == PEER_ENDPOINT
        )
    }
}

/// How observe treats the model's hook tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A hook: every tool must answer, or the hook fails (and is retried).
    Hook,
    /// The upgrade dry run: a tool that fails is noted and a stand-in
    /// value used. `tools: false` when no hook tools are on PATH at all
    /// (run over plain ssh): then none is called.
    DryRun { tools: bool },
}

/// A hook tool's answer, or in a dry run its stand-in (and a note of what
/// could not be read).
pub fn tolerate<T>(
    mode: Mode,
    unread: &mut Vec<String>,
    what: &str,
    call: impl FnOnce() -> std::result::Result<T, crate::hooktools::HookToolError>,
    stand_in: impl FnOnce() -> T,
) -> Result<T> {
    match mode {
        Mode::Hook => Ok(call()?),
        Mode::DryRun { tools: false } => Ok(stand_in()),
        Mode::DryRun { tools: true } => match call() {
            Ok(v) => Ok(v),
            Err(e) => {
                unread.push(format!("{what}: {e}"));
                Ok(stand_in())
            }
        },
    }
}

/// The etcd.conf.yml keys that say which scheme a member serves.
pub const URL_KEYS: [&str; 4] = [
    "initial-advertise-peer-urls",
    "advertise-client-urls",
    "listen-peer-urls",
    "listen-client-urls",
];

/// Whether a found etcd.conf.yml serves any URL over https.
pub fn serves_https(c: &layout::FoundConfig) -> bool {
    URL_KEYS
        .iter()
        .any(|k| c.raw.get(*k).is_some_and(|v| v.contains("https://")))
}

// ---- the concerns' parts ----

/// One relation on a monitoring endpoint, as this unit sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RelationData {
    pub id: String,
    /// This unit's databag in it.
    pub own: Databag,
    /// Remote units still in the relation (not the departing one), with
    /// their databags.
    pub remotes: BTreeMap<String, Databag>,
    /// A uuid4 drawn by observe for a request that has none yet (leader,
    /// prometheus and grafana only; empty otherwise).
    pub fresh_id: String,
    /// The same for the agent's scrape job (`etcd-charm-agent`; leader,
    /// prometheus only).
    pub fresh_agent_id: String,
}

/// What the monitoring endpoints need, read once per pass.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Monitoring {
    /// False when the relations could not be read (an upgrade dry run
    /// without hook tools): then nothing is planned for them.
    pub known: bool,
    pub prometheus: Vec<RelationData>,
    pub grafana: Vec<RelationData>,
    pub nrpe: Vec<RelationData>,
    /// Nagios check files of ours found on disk: canonical path → text.
    pub nrpe_files: BTreeMap<PathBuf, String>,
    /// The binary nrpe runs for our checks.
    pub check_binary: PathBuf,
    pub snap_backend: bool,
    /// Every endpoint goal-state says has a relation (read once here; the
    /// proxy and certificates endpoints use it too).
    pub related: BTreeSet<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
/// The proxy and certificates endpoints (endpoints.rs).
pub struct Endpoints {
    /// Each `proxy` relation and this unit's databag in it.
    pub proxies: Vec<(String, Databag)>,
    pub certificates: bool,
}

/// One raised alarm, with the db size of the member that raised it (when
/// that member answered).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmSeen {
    pub member: u64,
    /// etcd-client's name: `Nospace`, `Corrupt`.
    pub name: String,
    pub db_size: Option<i64>,
}

/// What the certificates this unit serves with say about their end, and
/// when that was read (the plan compares, it does not read the clock).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertDates {
    /// Seconds since the epoch when observe looked.
    pub now: i64,
    /// Each certificate (`server certificate`, …) and its notAfter.
    pub certs: Vec<(String, i64)>,
    /// Certificates that are missing or unreadable, with why.
    pub unreadable: Vec<(String, String)>,
}

/// What observe read of the snap (snap backend only).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SnapSeen {
    /// The channel `snap list` says etcd tracks; None if from a file.
    pub tracking: Option<String>,
    /// The version `snap list` shows (after a `snap revert` the snap still
    /// tracks the newer channel but runs the older version).
    pub installed: Option<String>,
    /// Read only when `channel` asks for another channel (else 0).
    pub snap_data_bytes: u64,
    pub free_bytes: u64,
}

/// The maintenance agent as observe found it (agent.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentSeen {
    pub installed: Option<Installed>,
    /// The identity of the binary the agent should run: the charm's own
    /// (`crate::agent::state::exe_id`).
    pub program: Option<String>,
    /// Its state, when it runs (Err: it did not answer).
    pub state: Option<std::result::Result<AgentState, String>>,
}

/// A private key's PEM; never printed.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(pub String);

/// Our v4 key and its CSR as kept on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    pub csr: String,
    pub key: Secret,
}

/// What the provider issued for this unit (parsed; keys redacted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Offer {
    pub ca: Option<String>,
    pub server: Option<Pair>,
    pub client: Option<Pair>,
}

/// The certificate texts in SNAP_COMMON (no keys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OnDiskPems {
    pub ca: Option<String>,
    pub server: Option<String>,
    pub client: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Certs {
    /// `certificates:N` while related.
    pub relation: Option<String>,
    /// The provider application's name.
    pub provider: Option<String>,
    /// Our unit's databag in that relation.
    pub own: Databag,
    pub protocol: Option<Protocol>,
    pub offer: Offer,
    /// A provider message that did not parse.
    pub problem: Option<String>,
    pub pending: Option<Pending>,
    pub disk: OnDiskPems,
    /// The five files are there and consistent (`files::OnDisk::complete`).
    pub files_complete: bool,
    pub hostname: String,
    /// The bind addresses of the cluster and db endpoints (network-get).
    pub binds: Vec<String>,
    /// A v4 provider's `certificates` list (no keys in it).
    pub v4_answers: Vec<crate::tls::v4::ProviderCertificate>,
    /// Our application's databag in the relation (read by the leader only).
    pub own_app: Databag,
    /// When observe ran, in seconds since the epoch.
    pub now: i64,
}
