//! The plan's vocabulary: the steps a hook may take and the plan that
//! lists them. Below plan.rs, apply.rs and every concern, so a concern
//! plans with these without importing the orchestrators. Each concern's
//! own step type is defined here; its Display and helpers stay with it.

use crate::hooktools::{Databag, StatusKind};
use crate::migrate::MigrationStep;
use crate::render::EtcdConfig;
use crate::wal::WalIds;
use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    InstallEtcd,
    /// Writes the drop-in and reloads systemd (snap backend).
    WriteDropIn,
    /// The remove hook: once the charm is gone its ExecStartPre would
    /// point at nothing.
    RemoveDropIn,
    /// Leadership data, written to the peer app databag and (Juju < 4) leader-set.
    SetLeaderData(Databag),
    /// This unit's peer databag.
    Publish(Databag),
    /// This unit's databag in a client (`db`) relation.
    PublishClient {
        relation: String,
        data: Databag,
    },
    WriteConfig {
        text: String,
        why: String,
        /// What `text` renders; apply validates it before writing.
        config: Box<EtcdConfig>,
    },
    /// `member update`: the unit's peer address changed.
    UpdatePeerUrl {
        id: u64,
        peer_url: String,
    },
    StartEtcd,
    RestartEtcd,
    StopEtcd,
    /// Until this unit's member answers, bounded.
    WaitMember,
    /// Leader: record the live cluster's ID and voters in leadership data.
    RecordCluster,
    /// Leader: `member add --learner` (idempotent) and publish the join record.
    AddMember {
        name: String,
        peer_url: String,
    },
    PromoteLearner {
        name: String,
        id: u64,
    },
    /// Against a healthy cluster only; moves raft leadership off it first.
    RemoveMember {
        name: String,
        id: u64,
    },
    /// Moves a data dir's `member/` to a dated backup beside it.
    MoveDataAside {
        data_dir: PathBuf,
        reason: String,
    },
    OpenPort(u16),
    /// The client port etcd.conf.yml advertised before `port` changed.
    ClosePort(u16),
    SetVersion(String),
    /// Moves this unit's member toward the canonical data dir (migrate.rs).
    Migrate(MigrationStep),
    /// The running member must be the one its WAL records; else blocked.
    VerifyMember(WalIds),
    /// Snap backend: hold etcd's auto-refresh, or set snapd's timer (options.rs).
    SnapdRefresh(super::config::SnapdRefresh),
    /// prometheus, grafana, nrpe-external-master (monitoring.rs).
    Monitoring(MonitoringStep),
    /// Waits (bounded) for the cluster-wide rolling turn (charm/turn.rs).
    TakeTurn {
        reason: String,
    },
    /// Once every voter is healthy again.
    ReleaseTurn,
    /// Prepares or releases the `data` storage volume (storage.rs).
    Volume(crate::storage::VolumeStep),
    /// An etcd version upgrade through the snap channel (snap_upgrade.rs).
    SnapUpgrade(UpgradeStep),
    /// A step of a restore (restore.rs).
    Restore(RestoreStep),
    /// A step of the `rebuild-cluster` action (rebuild.rs).
    Rebuild(RebuildStep),
    /// Starts, replaces or stops the maintenance agent (charm/agent.rs).
    Agent(AgentStep),
    /// The `certificates` relation's steps (certificates.rs).
    Tls(TlsStep),
    /// Keyspace copies and their dirs made root-only (backups.rs).
    TightenBackups(Vec<PathBuf>),
    /// The bucket's parameters for the agent's uploads (s3_handoff.rs).
    S3(super::s3_handoff::S3Step),
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::InstallEtcd => write!(f, "install etcd"),
            Step::WriteDropIn => write!(f, "write the systemd drop-in"),
            Step::RemoveDropIn => write!(f, "remove the systemd drop-in"),
            Step::TightenBackups(ps) => {
                let names: Vec<String> = ps.iter().map(|p| p.display().to_string()).collect();
                write!(
                    f,
                    "make keyspace copies root-only (dirs 0700, files 0600): {}",
                    names.join(", ")
                )
            }
            Step::SetLeaderData(d) => {
                let keys: Vec<&str> = d.keys().map(|k| k.as_str()).collect();
                write!(f, "set leadership data {}", keys.join(", "))
            }
            Step::Publish(d) => {
                let keys: Vec<&str> = d.keys().map(|k| k.as_str()).collect();
                write!(f, "publish {} in this unit's peer databag", keys.join(", "))
            }
            Step::PublishClient { relation, data } => {
                let keys: Vec<&str> = data.keys().map(|k| k.as_str()).collect();
                write!(f, "publish {} on {relation}", keys.join(", "))
            }
            Step::WriteConfig { why, .. } => write!(f, "write etcd.conf.yml ({why})"),
            Step::StartEtcd => write!(f, "start etcd"),
            Step::RestartEtcd => write!(f, "restart etcd"),
            Step::StopEtcd => write!(f, "stop etcd"),
            Step::WaitMember => write!(f, "wait for this member to answer"),
            Step::RecordCluster => {
                write!(f, "record the cluster ID and members in leadership data")
            }
            Step::AddMember { name, peer_url } => {
                write!(f, "add {name} ({peer_url}) as a learner")
            }
            Step::PromoteLearner { name, id } => write!(f, "promote learner {name} ({id:x})"),
            Step::UpdatePeerUrl { id, peer_url } => {
                write!(f, "update member {id:x}'s peer URL to {peer_url}")
            }
            Step::RemoveMember { name, id } => write!(f, "remove member {name} ({id:x})"),
            Step::MoveDataAside { data_dir, reason } => {
                write!(f, "move {}/member aside ({reason})", data_dir.display())
            }
            Step::OpenPort(p) => write!(f, "open port {p}/tcp"),
            Step::ClosePort(p) => write!(f, "close port {p}/tcp"),
            Step::SetVersion(v) => write!(f, "set the application version to {v}"),
            Step::Migrate(m) => write!(f, "{m}"),
            Step::VerifyMember(ids) => {
                write!(f, "check that the running member is {ids}")
            }
            Step::SnapdRefresh(r) => write!(f, "{r}"),
            Step::Monitoring(m) => write!(f, "{m}"),
            Step::TakeTurn { reason } => {
                write!(f, "take the cluster's rolling turn ({reason})")
            }
            Step::ReleaseTurn => {
                write!(f, "give back the rolling turn once every voter is healthy")
            }
            Step::Volume(v) => write!(f, "{v}"),
            Step::SnapUpgrade(u) => write!(f, "{u}"),
            Step::Restore(r) => write!(f, "{r}"),
            Step::Rebuild(r) => write!(f, "{r}"),
            Step::Agent(a) => write!(f, "{a}"),
            Step::Tls(t) => write!(f, "{t}"),
            Step::S3(s) => write!(f, "{s}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub steps: Vec<Step>,
    /// Statuses the plan already knows (blocked/waiting reasons).
    pub status: Vec<(StatusKind, String)>,
    pub token: Option<(String, TokenSource)>,
    /// What this plan writes commits only when the hook exits 0 (the
    /// bootstrap decision under Juju 4): end the hook after it, no next pass.
    pub commit_first: bool,
    /// Said after "Healthy with N known peers" when the unit is active.
    pub notes: Vec<String>,
}

impl Plan {
    /// Blocked means nothing touched: the steps planned before the reason
    /// was found (install etcd, the drop-in and its daemon-reload, a
    /// migration's stop and moves) are dropped, and only the status stays.
    /// None must survive: the status is not a step (the hook sets it at the
    /// end), and what was dropped is planned again once the operator fixes
    /// the input.
    pub(super) fn block(mut self, msg: impl Into<String>) -> Plan {
        self.steps.clear();
        self.status.push((StatusKind::Blocked, msg.into()));
        self
    }
    pub(super) fn wait(&mut self, msg: impl Into<String>) {
        self.status.push((StatusKind::Waiting, msg.into()));
    }
}

// ---- the concerns' steps ----

/// prometheus, grafana, nrpe-external-master (monitoring.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MonitoringStep {
    /// This unit's databag in a monitoring relation (an empty value deletes).
    Publish { relation: String, data: Databag },
    /// Nagios check files (canonical paths) written atomically or removed,
    /// then nagios-nrpe-server restarted where it is installed.
    NrpeFiles {
        write: BTreeMap<PathBuf, String>,
        remove: Vec<PathBuf>,
    },
    /// A provider answered our request with a failure: logged as a warning.
    Refused {
        relation: String,
        unit: String,
        reason: String,
    },
}

/// An etcd version upgrade (snap_upgrade.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpgradeStep {
    /// Inside the turn, live: every voter healthy, versions within the roll.
    Check { tracking: String, wanted: String },
    /// An online snapshot into the backup dir before the refresh (rule 4).
    Snapshot {
        endpoint: String,
        name: String,
        member_id: u64,
        backup_dir: PathBuf,
    },
    /// `snap refresh etcd --channel`: takes the member down and back up.
    Refresh { channel: String },
    /// The same member back, a healthy voter, at the channel's minor.
    Verify { wanted: String, ids: WalIds },
}

/// A rebuild from one surviving member (rebuild.rs; apply: rebuild_apply.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RebuildStep {
    /// A snapshot of the member before anything changes (rule 4).
    Snapshot { endpoint: String, file: PathBuf },
    /// A copy of `member/` beside it (`member.pre-rebuild-<stamp>`): the old
    /// membership, which `force-new-cluster` rewrites, kept.
    CopyAside { data_dir: PathBuf, stamp: String },
    /// Until this unit's member answers as the only voter, leading.
    WaitAlone { member_id: u64 },
}

/// A restore (restore.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreStep {
    /// Restores `file` into `<data_dir>/restore-<id>.tmp`, then renames its
    /// `member/` to `<data_dir>/member`.
    Snapshot {
        id: String,
        file: PathBuf,
        sha256: String,
        name: String,
        peer_url: String,
        /// The cluster token plus the restore id (module doc).
        token: String,
        data_dir: PathBuf,
        /// etcd 3.5: `--bump-revision <n> --mark-compacted` (etcdutl).
        bump: Option<u64>,
    },
    /// The restored member answers alone: record its cluster and the id.
    Record { id: String, old_cluster: u64 },
}

/// The maintenance agent (agent.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentStep {
    /// Start it with these arguments, replacing one that runs with others.
    Ensure(Vec<String>),
    /// Restart it on the charm's binary: the one it runs was replaced
    /// (`juju refresh`), so it runs old code until restarted.
    Replace(Vec<String>),
    Stop,
    /// The remove hook: stopped, and its unit file gone.
    Remove,
}

/// What this plan adds for `certificates` (apply's half: certificates_apply.rs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsStep {
    /// Our v4 request: a key (kept if there is one) and a CSR for these names.
    NewCsr {
        common_name: String,
        sans: Vec<String>,
    },
    /// The five files, as issued.
    WriteFiles(Box<crate::tls::files::Material>),
    /// ca.crt alone (a CA rotation's bundle, or the new CA once the old
    /// one is dropped: certificates_rotation.rs).
    WriteCa { pem: String, why: String },
    /// Raft leadership to `to` before this member's peer URL changes.
    MoveLeader { from_endpoint: String, to: u64 },
    /// Leader: a CSR for the shared client certificate (for `key`, or a
    /// new key), kept in leadership data and asked for in `relation`'s app
    /// databag (certificates_client.rs).
    NewClientCsr {
        relation: String,
        key: Option<crate::tls::key::PrivateKey>,
    },
    /// Leader: this application's databag in `relation`.
    PublishApp { relation: String, data: Databag },
}

/// Where the token we will use came from, for logs and the dry run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// The peer relation's application databag (Juju 4's leadership data).
    AppDatabag,
    /// `leader-get token`, where the Python charm kept it.
    LeaderGet,
    /// `initial-cluster-token` in this unit's etcd.conf.yml.
    ConfigFile(PathBuf),
    /// `ETCD_INITIAL_CLUSTER_TOKEN` in etcd.conf or etcd.conf.2x.
    EnvConfig(PathBuf),
    /// Nothing recorded it anywhere: a new cluster.
    Generated,
}
