//! The only code that runs Juju hook tools. One thin method per tool, in the
//! exact forms of shared/juju-contract.md; every exit status is checked and a
//! failure becomes a [`HookToolError`] carrying the tool, its args and stderr.
//!
//! HELPER TASK (context/hooktools helper): implement; keep signatures.

use serde_json::Value;
use std::collections::BTreeMap;

/// A string map as Juju databags and leadership data hold them.
pub type Databag = BTreeMap<String, String>;

#[derive(Debug)]
pub struct HookToolError {
    pub tool: String,
    pub args: Vec<String>,
    /// None when the tool could not be spawned at all.
    pub exit_code: Option<i32>,
    /// The tool's stderr, or the spawn/parse error.
    pub stderr: String,
}

impl std::fmt::Display for HookToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.exit_code {
            Some(c) => write!(f, "{} {} exited {}: {}", self.tool, self.args.join(" "), c, self.stderr.trim()),
            None => write!(f, "{} {}: {}", self.tool, self.args.join(" "), self.stderr.trim()),
        }
    }
}
impl std::error::Error for HookToolError {}

pub type Result<T> = std::result::Result<T, HookToolError>;

/// Workload status, ordered by the priority in which a hook reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StatusKind {
    Active,
    Waiting,
    Maintenance,
    Blocked,
}

impl StatusKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StatusKind::Active => "active",
            StatusKind::Waiting => "waiting",
            StatusKind::Maintenance => "maintenance",
            StatusKind::Blocked => "blocked",
        }
    }
}

/// One invocation, built by a pure function so argument forms are unit-tested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub tool: &'static str,
    pub args: Vec<String>,
    pub stdin: Option<String>,
}

/// Runs hook tools found on PATH (Juju puts its tools dir first).
#[derive(Debug, Clone, Default)]
pub struct HookTools {
    _private: (),
}

impl HookTools {
    pub fn new() -> Self {
        HookTools { _private: () }
    }

    /// Runs one invocation; Ok(stdout) on exit 0, else a typed error.
    pub fn run(&self, inv: &Invocation) -> Result<String> {
        let _ = inv;
        todo!()
    }

    pub fn is_leader(&self) -> Result<bool> { todo!() }
    /// `config-get --format=json`: typed values, unset options omitted.
    pub fn config_get(&self) -> Result<serde_json::Map<String, Value>> { todo!() }
    pub fn leader_get(&self) -> Result<Databag> { todo!() }
    /// `k=` deletes a key (pass an empty value).
    pub fn leader_set(&self, kv: &Databag) -> Result<()> { let _ = kv; todo!() }
    pub fn relation_ids(&self, endpoint: &str) -> Result<Vec<String>> { let _ = endpoint; todo!() }
    pub fn relation_list(&self, relation_id: &str) -> Result<Vec<String>> { let _ = relation_id; todo!() }
    /// A unit's databag (`unit` may be this unit or a remote one).
    pub fn relation_get(&self, relation_id: &str, unit: &str) -> Result<Databag> { let _ = (relation_id, unit); todo!() }
    /// An application databag.
    pub fn relation_get_app(&self, relation_id: &str, app: &str) -> Result<Databag> { let _ = (relation_id, app); todo!() }
    /// Writes this unit's databag (`--file -` with a YAML map on stdin); empty values delete.
    pub fn relation_set(&self, relation_id: &str, kv: &Databag) -> Result<()> { let _ = (relation_id, kv); todo!() }
    /// Leader only.
    pub fn relation_set_app(&self, relation_id: &str, kv: &Databag) -> Result<()> { let _ = (relation_id, kv); todo!() }
    /// The first ingress address of a binding (`network-get <b> --format=json`).
    pub fn network_get_ingress(&self, binding: &str) -> Result<String> { let _ = binding; todo!() }
    pub fn status_set(&self, kind: StatusKind, message: &str) -> Result<()> { let _ = (kind, message); todo!() }
    pub fn application_version_set(&self, version: &str) -> Result<()> { let _ = version; todo!() }
    /// `port/tcp`
    pub fn open_port(&self, port: u16) -> Result<()> { let _ = port; todo!() }
    pub fn close_port(&self, port: u16) -> Result<()> { let _ = port; todo!() }
    pub fn action_get(&self) -> Result<serde_json::Map<String, Value>> { todo!() }
    /// Keys: lowercase, digits, `-`; dots nest.
    pub fn action_set(&self, kv: &Databag) -> Result<()> { let _ = kv; todo!() }
    pub fn action_fail(&self, message: &str) -> Result<()> { let _ = message; todo!() }
    pub fn action_log(&self, message: &str) -> Result<()> { let _ = message; todo!() }
    /// `level`: DEBUG, INFO, WARNING, ERROR.
    pub fn juju_log(&self, level: &str, message: &str) -> Result<()> { let _ = (level, message); todo!() }
    pub fn goal_state(&self) -> Result<Value> { todo!() }
}
