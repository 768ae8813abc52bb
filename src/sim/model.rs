//! The model's state, as stored in `<model>/model.json`: applications,
//! units, relations and their databags, leadership, hook queues, and the
//! per-hook contexts whose changes wait for the hook's exit status.
//!
//! Plain data with small lookups; every rule about *when* things change lives
//! in `events`, `commit` and `tools`.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// A string map, as databags, leadership data and the unit state store hold.
pub type Databag = BTreeMap<String, String>;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Model {
    pub name: String,
    pub uuid: String,
    /// `X.Y` of the 127.X.Y.N unit addresses.
    pub address_prefix: String,
    pub juju_version: String,
    pub destroyed: bool,
    pub seed: u64,
    pub prng: u64,
    pub next_machine: u32,
    pub next_relation: u32,
    pub next_context: u64,
    pub next_charm_rev: u32,
    pub applications: BTreeMap<String, Application>,
    pub units: BTreeMap<String, Unit>,
    pub relations: BTreeMap<u32, Relation>,
    /// Open hook/exec/action contexts, by JUJU_CONTEXT_ID.
    pub contexts: BTreeMap<String, Context>,
    /// Action results, by JUJU_ACTION_UUID.
    pub actions: BTreeMap<String, ActionRecord>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Application {
    pub name: String,
    pub charm: CharmMeta,
    /// The model's stored copy of the charm the units copy from.
    pub charm_dir: PathBuf,
    pub charm_rev: u32,
    /// Options set by the operator (defaults live in `charm.config`).
    pub config: serde_json::Map<String, Value>,
    pub leader: Option<String>,
    pub leader_data: Databag,
    pub next_unit: u32,
    /// `--env K=V` passthrough, with `{unit}`/`{unit_root}` still unexpanded.
    pub env: BTreeMap<String, String>,
    /// Set by the leader with `status-set --application`.
    pub status: Option<Status>,
    /// `deploy --base` (`ubuntu@22.04`): the base of the machines it gets.
    #[serde(default = "default_base")]
    pub base: String,
    /// Resource name → the model's stored copy of what `--resource` gave.
    #[serde(default)]
    pub resources: BTreeMap<String, PathBuf>,
    /// `--storage name=size` given at deploy: new units get the same.
    #[serde(default)]
    pub storage_directives: BTreeMap<String, u64>,
    /// `deploy --machines`: `systemd` (see `machine`) or the direct mode.
    #[serde(default)]
    pub machines: String,
    /// `--machine-bind SRC:DST`, `{unit}`/`{unit_root}` unexpanded.
    #[serde(default)]
    pub machine_binds: Vec<String>,
    /// `--systemd-env K=V`: on systemd machines, set over `env`.
    #[serde(default)]
    pub systemd_env: BTreeMap<String, String>,
}

/// The base `deploy` gives machines when `--base` is not passed (jammy).
pub const DEFAULT_BASE: &str = "ubuntu@22.04";

fn default_base() -> String {
    DEFAULT_BASE.into()
}

/// What the simulator needs from metadata.yaml, config.yaml and actions.yaml.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CharmMeta {
    pub name: String,
    pub peers: BTreeMap<String, String>,
    pub provides: BTreeMap<String, String>,
    pub requires: BTreeMap<String, String>,
    pub storage: Vec<String>,
    pub options: BTreeMap<String, OptionSpec>,
    pub actions: BTreeMap<String, ActionSpec>,
    /// Every endpoint (peers, provides, requires) with role and scope, for
    /// the refresh checks.
    #[serde(default)]
    pub endpoint_specs: BTreeMap<String, EndpointSpec>,
    /// metadata.yaml `storage:` in full (`storage` keeps just the names).
    #[serde(default)]
    pub storage_specs: BTreeMap<String, StorageSpec>,
    /// metadata.yaml `resources:`.
    #[serde(default)]
    pub resources: BTreeMap<String, ResourceSpec>,
    /// The bases it runs on (`ubuntu@22.04`), from manifest.yaml or
    /// charmcraft.yaml `bases:` and metadata.yaml `series:`; empty for an
    /// old-style charm that declares none.
    #[serde(default)]
    pub bases: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointSpec {
    /// peer, provider or requirer (as `Endpoint::role`).
    pub role: String,
    pub interface: String,
    /// global or container.
    pub scope: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorageSpec {
    /// filesystem or block.
    pub kind: String,
    /// "" when the charm names none.
    pub location: String,
    pub shared: bool,
    pub read_only: bool,
    /// `multiple: range:` (1-1 without it); a max of -1 is unbounded.
    pub count_min: i64,
    pub count_max: i64,
    /// `minimum-size` in bytes, when declared.
    #[serde(default)]
    pub minimum_size: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceSpec {
    /// file (or oci-image).
    pub kind: String,
    pub filename: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct OptionSpec {
    /// string, int, float, boolean or secret.
    pub kind: String,
    pub default: Option<Value>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ActionSpec {
    /// Parameter name → JSON-schema fragment (`type`, `default`).
    pub params: serde_json::Map<String, Value>,
    pub required: Vec<String>,
    /// `additionalProperties: false` refuses parameters not in `params`.
    #[serde(default)]
    pub closed: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Life {
    #[default]
    Alive,
    Dying,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "state", content = "hook")]
pub enum Agent {
    #[default]
    Idle,
    Executing(String),
    Error(String),
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub current: String,
    pub message: String,
    pub since: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Unit {
    pub name: String,
    pub app: String,
    pub number: u32,
    pub machine: u32,
    pub dir: PathBuf,
    pub address: String,
    pub life: Life,
    pub agent: Agent,
    pub workload: Status,
    pub history: Vec<Status>,
    pub ports: BTreeSet<String>,
    pub version: String,
    pub queue: VecDeque<Event>,
    /// state-get/state-set store.
    pub store: Databag,
    /// Its machine's base (`ubuntu@22.04`), the application's at creation.
    #[serde(default = "default_base")]
    pub base: String,
    /// Storage instances attached to the unit.
    #[serde(default)]
    pub storage: Vec<Attachment>,
    /// How its machine runs: `systemd`, `direct`, or `direct (why not systemd)`;
    /// empty until it is provisioned.
    #[serde(default)]
    pub machine_mode: String,
}

/// The message Juju shows while a unit installs, until the charm sets one.
pub const INSTALLING: &str = "installing charm software";

impl Unit {
    /// Sets the workload status, keeping a bounded history.
    pub fn set_workload(&mut self, status: Status) {
        self.history.push(status.clone());
        if self.history.len() > 100 {
            self.history.remove(0);
        }
        self.workload = status;
    }

    pub fn charm_dir(&self) -> PathBuf {
        self.dir.join("charm")
    }
    pub fn root(&self) -> PathBuf {
        self.dir.join("root")
    }
}

/// The hooks Juju runs on a machine charm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HookKind {
    Install,
    Start,
    Stop,
    Remove,
    ConfigChanged,
    UpgradeCharm,
    UpdateStatus,
    LeaderElected,
    LeaderSettingsChanged,
    RelationCreated,
    RelationJoined,
    RelationChanged,
    RelationDeparted,
    RelationBroken,
    StorageAttached,
    StorageDetaching,
}

/// One queued hook for one unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub kind: HookKind,
    /// The hook name as Juju spells it (`cluster-relation-joined`).
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_app: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub departing_unit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
}

impl Event {
    pub fn simple(kind: HookKind) -> Event {
        let name = match kind {
            HookKind::Install => "install",
            HookKind::Start => "start",
            HookKind::Stop => "stop",
            HookKind::Remove => "remove",
            HookKind::ConfigChanged => "config-changed",
            HookKind::UpgradeCharm => "upgrade-charm",
            HookKind::UpdateStatus => "update-status",
            HookKind::LeaderElected => "leader-elected",
            HookKind::LeaderSettingsChanged => "leader-settings-changed",
            other => panic!("{other:?} needs a relation or storage"),
        };
        Event {
            kind,
            name: name.into(),
            relation: None,
            remote_unit: None,
            remote_app: None,
            departing_unit: None,
            storage: None,
        }
    }

    pub fn relation(kind: HookKind, endpoint: &str, id: u32, remote_app: &str) -> Event {
        let suffix = match kind {
            HookKind::RelationCreated => "created",
            HookKind::RelationJoined => "joined",
            HookKind::RelationChanged => "changed",
            HookKind::RelationDeparted => "departed",
            HookKind::RelationBroken => "broken",
            other => panic!("{other:?} is not a relation hook"),
        };
        Event {
            kind,
            name: format!("{endpoint}-relation-{suffix}"),
            relation: Some(id),
            remote_unit: None,
            remote_app: Some(remote_app.into()),
            departing_unit: None,
            storage: None,
        }
    }

    pub fn storage(kind: HookKind, storage: &str) -> Event {
        let suffix = match kind {
            HookKind::StorageAttached => "attached",
            HookKind::StorageDetaching => "detaching",
            other => panic!("{other:?} is not a storage hook"),
        };
        Event {
            kind,
            name: format!("{storage}-storage-{suffix}"),
            relation: None,
            remote_unit: None,
            remote_app: None,
            departing_unit: None,
            storage: Some(storage.into()),
        }
    }

    pub fn with_remote_unit(mut self, unit: &str) -> Event {
        self.remote_unit = Some(unit.into());
        self
    }

    /// Hooks Juju coalesces: a second one pending adds nothing.
    pub fn coalesces(&self) -> bool {
        matches!(
            self.kind,
            HookKind::RelationChanged
                | HookKind::LeaderSettingsChanged
                | HookKind::ConfigChanged
                | HookKind::UpdateStatus
        )
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Endpoint {
    pub app: String,
    pub name: String,
    pub interface: String,
    /// peer, provider or requirer.
    pub role: String,
    /// The relation's scope: container when either side declared it, as
    /// Juju records it; "" (older models) is global.
    #[serde(default)]
    pub scope: String,
}

/// A unit's place in one relation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Member {
    /// True once its `-relation-created` succeeded: others may join it.
    pub in_scope: bool,
    /// The remote units it has joined (what relation-list prints).
    pub joined: BTreeSet<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Relation {
    pub id: u32,
    /// One endpoint for a peer relation, two otherwise.
    pub endpoints: Vec<Endpoint>,
    pub members: BTreeMap<String, Member>,
    pub unit_bags: BTreeMap<String, Databag>,
    pub app_bags: BTreeMap<String, Databag>,
}

impl Relation {
    pub fn is_peer(&self) -> bool {
        self.endpoints.len() == 1
    }

    pub fn endpoint_of(&self, app: &str) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.app == app)
    }

    /// The application on the other side (itself for a peer relation).
    pub fn remote_app_of(&self, app: &str) -> Option<&str> {
        if self.is_peer() {
            return self.endpoint_of(app).map(|e| e.app.as_str());
        }
        self.endpoints
            .iter()
            .find(|e| e.app != app)
            .map(|e| e.app.as_str())
    }

    /// `cluster:3`, as seen from `app`.
    pub fn key_for(&self, app: &str) -> Option<String> {
        self.endpoint_of(app)
            .map(|e| format!("{}:{}", e.name, self.id))
    }
}

/// What a hook (or exec, or action) changed that only lands on exit 0.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Staged {
    /// relation id → key → value ("" deletes).
    pub unit_bags: BTreeMap<u32, Databag>,
    pub app_bags: BTreeMap<u32, Databag>,
    /// (open?, port) in call order.
    pub ports: Vec<(bool, String)>,
    /// state-set/state-delete: key → value ("" deletes).
    pub store: Databag,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Context {
    pub id: String,
    pub unit: String,
    /// None for `exec` and dry runs.
    pub event: Option<Event>,
    pub action: Option<String>,
    /// A dry run: every change, even immediate ones, is discarded.
    pub dry_run: bool,
    pub tool_calls: u32,
    pub staged: Staged,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ActionRecord {
    pub id: String,
    pub unit: String,
    pub name: String,
    pub params: serde_json::Map<String, Value>,
    /// running, completed or failed.
    pub status: String,
    pub message: String,
    pub results: serde_json::Map<String, Value>,
    pub log: Vec<String>,
}

impl Model {
    pub fn unit(&self, name: &str) -> crate::sim::error::Result<&Unit> {
        self.units
            .get(name)
            .ok_or_else(|| crate::sim::error::SimError::new(format!("unit {name:?} not found")))
    }

    pub fn unit_mut(&mut self, name: &str) -> crate::sim::error::Result<&mut Unit> {
        self.units
            .get_mut(name)
            .ok_or_else(|| crate::sim::error::SimError::new(format!("unit {name:?} not found")))
    }

    pub fn app(&self, name: &str) -> crate::sim::error::Result<&Application> {
        self.applications.get(name).ok_or_else(|| {
            crate::sim::error::SimError::new(format!("application {name:?} not found"))
        })
    }

    pub fn app_mut(&mut self, name: &str) -> crate::sim::error::Result<&mut Application> {
        self.applications.get_mut(name).ok_or_else(|| {
            crate::sim::error::SimError::new(format!("application {name:?} not found"))
        })
    }

    /// The units of `app`, by unit number (`etcd/2` before `etcd/10`).
    pub fn units_of(&self, app: &str) -> Vec<String> {
        let mut units: Vec<&Unit> = self.units.values().filter(|u| u.app == app).collect();
        units.sort_by_key(|u| u.number);
        units.into_iter().map(|u| u.name.clone()).collect()
    }

    /// Every unit, by application then number.
    pub fn all_units(&self) -> Vec<String> {
        let mut units: Vec<&Unit> = self.units.values().collect();
        units.sort_by(|a, b| (&a.app, a.number).cmp(&(&b.app, b.number)));
        units.into_iter().map(|u| u.name.clone()).collect()
    }

    pub fn is_leader(&self, unit: &str) -> bool {
        let app = app_of(unit);
        self.applications.get(app).and_then(|a| a.leader.as_deref()) == Some(unit)
    }

    pub fn context(&self, id: &str) -> crate::sim::error::Result<&Context> {
        self.contexts
            .get(id)
            .ok_or_else(|| crate::sim::error::SimError::new(format!("context {id:?} is not open")))
    }

    pub fn context_mut(&mut self, id: &str) -> crate::sim::error::Result<&mut Context> {
        self.contexts
            .get_mut(id)
            .ok_or_else(|| crate::sim::error::SimError::new(format!("context {id:?} is not open")))
    }

    /// The application named by the only one deployed, for commands whose
    /// APP argument is optional.
    pub fn default_app(&self, given: Option<&str>) -> crate::sim::error::Result<String> {
        if let Some(app) = given {
            self.app(app)?;
            return Ok(app.to_string());
        }
        let mut names = self.applications.keys();
        match (names.next(), names.next()) {
            (Some(only), None) => Ok(only.clone()),
            (None, _) => Err(crate::sim::error::SimError::new(
                "no application is deployed",
            )),
            _ => Err(crate::sim::error::SimError::new(
                "several applications are deployed: name one",
            )),
        }
    }
}

/// `etcd/0` → `etcd`.
pub fn app_of(unit: &str) -> &str {
    unit.split('/').next().unwrap_or(unit)
}
/// One storage instance attached to a unit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// `data/3`.
    pub id: String,
    pub name: String,
    /// `filesystem` or `block`.
    pub kind: String,
    pub size: u64,
    /// What `storage-get location` says: the device, or the directory.
    pub location: PathBuf,
    /// The sparse file behind a loop device.
    pub backing: Option<PathBuf>,
    /// `/dev/loopN` when one is attached.
    pub loop_device: Option<String>,
    /// Why a directory stands in for a block device, when it does.
    pub stand_in: Option<String>,
    /// The volume is not on the machine (`reboot --volumes-missing`): its
    /// loop device was released, `location` is where it was; Juju still
    /// has it attached. `plug-volumes` brings it back.
    #[serde(default)]
    pub unplugged: bool,
}

/// Expands `{unit}` and `{unit_root}` in a passthrough value.
pub fn expand(template: &str, unit: &str, unit_root: &Path) -> String {
    template
        .replace("{unit_root}", &unit_root.to_string_lossy())
        .replace("{unit}", unit)
}
