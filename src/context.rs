//! Which hook or action Juju is running, and the frozen JUJU_* context.
//!
//! HELPER TASK (context/hooktools helper): implement the bodies; keep the
//! public signatures (other modules use them). Unit tests beside the code.

use std::collections::HashMap;
use std::path::PathBuf;

/// A hook or action, parsed from `JUJU_DISPATCH_PATH` (`hooks/config-changed`,
/// `actions/snapshot`) or, for `hooks/<name>` links, argv[0]'s basename.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Install,
    Start,
    Stop,
    Remove,
    ConfigChanged,
    UpgradeCharm,
    UpdateStatus,
    LeaderElected,
    LeaderSettingsChanged,
    /// `<endpoint>-relation-{created,joined,changed,departed,broken}`.
    Relation { endpoint: String, kind: RelationKind },
    /// `<storage>-storage-{attached,detaching}`.
    Storage { name: String, attached: bool },
    Action(String),
    /// A hook name we do not recognise; the charm exits 0 on it.
    Other(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelationKind {
    Created,
    Joined,
    Changed,
    Departed,
    Broken,
}

impl Event {
    /// Parses `hooks/<name>` / `actions/<name>` or a bare hook name.
    pub fn parse(dispatch_path: &str) -> Event {
        let _ = dispatch_path;
        todo!()
    }

    /// The hook name as Juju spells it (`cluster-relation-joined`), or the action name.
    pub fn name(&self) -> String {
        todo!()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationContext {
    pub endpoint: String,
    /// `cluster:3`
    pub id: String,
    /// Empty for created/broken hooks.
    pub remote_unit: Option<String>,
    pub remote_app: Option<String>,
    pub departing_unit: Option<String>,
}

/// Everything Juju told this process through its environment, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookContext {
    pub event: Event,
    pub charm_dir: PathBuf,
    pub unit_name: String,
    pub model_name: String,
    pub model_uuid: String,
    pub machine_id: String,
    pub juju_version: String,
    pub context_id: String,
    pub relation: Option<RelationContext>,
    pub action_uuid: Option<String>,
    pub storage_location: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextError {
    /// The missing or malformed variable.
    pub variable: String,
    pub problem: String,
}

impl std::fmt::Display for ContextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.variable, self.problem)
    }
}
impl std::error::Error for ContextError {}

impl HookContext {
    /// `Ok(None)` when this is not a Juju hook at all (no `JUJU_UNIT_NAME` and
    /// no `JUJU_DISPATCH_PATH`): the binary then behaves as an ordinary CLI.
    /// `argv0` is used when `JUJU_DISPATCH_PATH` is unset (hooks/<name> links).
    pub fn from_env(env: &HashMap<String, String>, argv0: &str) -> Result<Option<HookContext>, ContextError> {
        let _ = (env, argv0);
        todo!()
    }

    /// Member name etcd knows this unit by: `etcd/0` → `etcd0`.
    pub fn member_name(&self) -> String {
        self.unit_name.replace('/', "")
    }

    /// `etcd/0` → `etcd`.
    pub fn app_name(&self) -> &str {
        self.unit_name.split('/').next().unwrap_or(&self.unit_name)
    }

    /// Juju 4 has no leader-get/leader-set.
    pub fn has_leader_tools(&self) -> bool {
        !self.juju_version.starts_with("4.")
    }
}
