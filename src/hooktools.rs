//! The only code that runs Juju hook tools. One thin method per tool, in the
//! exact forms of shared/juju-contract.md; every exit status is checked and a
//! failure becomes a [`HookToolError`] carrying the tool, its args and stderr.
//!
//! Each method is three steps: a pure [`Invocation`] builder (so argument forms
//! are unit-tested), [`HookTools::run`], and a pure parser of the output.
//!
//! Nothing here logs through `tracing`: forwarding logs to `juju-log` goes
//! through this module, and a log line per call would recurse. Arguments may
//! also carry secrets (the cluster token in `leader-set`).
//!
//! About 500 lines of code (640 with docs): one method per hook tool, kept in
//! one file so the whole contract with Juju reads in one place.

use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

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
            Some(c) => write!(
                f,
                "{} {} exited {}: {}",
                self.tool,
                self.args.join(" "),
                c,
                self.stderr.trim()
            ),
            None => write!(
                f,
                "{} {}: {}",
                self.tool,
                self.args.join(" "),
                self.stderr.trim()
            ),
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

const JSON: &str = "--format=json";

/// Juju's flag parser takes any argument starting with `-` for a flag, even
/// after a positional one. A leading space keeps a free-text message (`-1
/// members left`) a message; the tools that take one have no `--` form in the
/// contract (juju-log does, and uses it).
fn free_text(message: &str) -> String {
    if message.starts_with('-') {
        format!(" {message}")
    } else {
        message.to_string()
    }
}

fn key_values(kv: &Databag) -> Vec<String> {
    kv.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

impl Invocation {
    fn new(tool: &'static str, args: &[&str]) -> Invocation {
        Invocation {
            tool,
            args: args.iter().map(|a| a.to_string()).collect(),
            stdin: None,
        }
    }

    /// `is-leader --format=json`
    pub fn is_leader() -> Invocation {
        Invocation::new("is-leader", &[JSON])
    }

    /// `config-get --format=json`
    pub fn config_get() -> Invocation {
        Invocation::new("config-get", &[JSON])
    }

    /// `leader-get --format=json`
    pub fn leader_get() -> Invocation {
        Invocation::new("leader-get", &[JSON])
    }

    /// `leader-set k=v …`
    pub fn leader_set(kv: &Databag) -> Invocation {
        Invocation {
            tool: "leader-set",
            args: key_values(kv),
            stdin: None,
        }
    }

    /// `relation-ids <endpoint> --format=json`
    pub fn relation_ids(endpoint: &str) -> Invocation {
        Invocation::new("relation-ids", &[endpoint, JSON])
    }

    /// `relation-list -r <id> --format=json`
    pub fn relation_list(relation_id: &str) -> Invocation {
        Invocation::new("relation-list", &["-r", relation_id, JSON])
    }

    /// `relation-get --format=json -r <id> - <unit>`
    pub fn relation_get(relation_id: &str, unit: &str) -> Invocation {
        Invocation::new("relation-get", &[JSON, "-r", relation_id, "-", unit])
    }

    /// `relation-get --format=json -r <id> --app - <app>`
    pub fn relation_get_app(relation_id: &str, app: &str) -> Invocation {
        Invocation::new(
            "relation-get",
            &[JSON, "-r", relation_id, "--app", "-", app],
        )
    }

    /// `relation-set -r <id> [--app] --file -`, the databag as a YAML map on
    /// stdin. serde_yaml quotes every value that YAML would otherwise read as
    /// something other than that string (`''`, `'true'`, `'2379'`, `'null'`).
    pub fn relation_set(relation_id: &str, kv: &Databag, app: bool) -> Invocation {
        let mut args = vec!["-r", relation_id];
        if app {
            args.push("--app");
        }
        args.extend(["--file", "-"]);
        let mut inv = Invocation::new("relation-set", &args);
        // A map of strings to strings always serializes.
        inv.stdin = Some(serde_yaml::to_string(kv).expect("a string map serializes to YAML"));
        inv
    }

    /// `network-get <binding> --format=json`
    pub fn network_get(binding: &str) -> Invocation {
        Invocation::new("network-get", &[binding, JSON])
    }

    /// `status-set <kind> <message>`
    pub fn status_set(kind: StatusKind, message: &str) -> Invocation {
        Invocation::new("status-set", &[kind.as_str(), &free_text(message)])
    }

    /// `application-version-set <version>`
    pub fn application_version_set(version: &str) -> Invocation {
        Invocation::new("application-version-set", &[&free_text(version)])
    }

    /// `open-port <port>/tcp`
    pub fn open_port(port: u16) -> Invocation {
        Invocation::new("open-port", &[&format!("{port}/tcp")])
    }

    /// `close-port <port>/tcp`
    pub fn close_port(port: u16) -> Invocation {
        Invocation::new("close-port", &[&format!("{port}/tcp")])
    }

    /// `action-get --format=json`
    pub fn action_get() -> Invocation {
        Invocation::new("action-get", &[JSON])
    }

    /// `action-set k=v …`
    pub fn action_set(kv: &Databag) -> Invocation {
        Invocation {
            tool: "action-set",
            args: key_values(kv),
            stdin: None,
        }
    }

    /// `action-fail <message>`
    pub fn action_fail(message: &str) -> Invocation {
        Invocation::new("action-fail", &[&free_text(message)])
    }

    /// `action-log <message>`
    pub fn action_log(message: &str) -> Invocation {
        Invocation::new("action-log", &[&free_text(message)])
    }

    /// `juju-log --log-level <LEVEL> -- <message>`
    pub fn juju_log(level: &str, message: &str) -> Invocation {
        Invocation::new(
            "juju-log",
            &["--log-level", &level.to_ascii_uppercase(), "--", message],
        )
    }

    /// `status-get --format=json --include-data` (the debug action).
    pub fn status_get() -> Invocation {
        Invocation::new("status-get", &[JSON, "--include-data"])
    }

    /// `goal-state --format=json`
    pub fn goal_state() -> Invocation {
        Invocation::new("goal-state", &[JSON])
    }

    /// `storage-list --format=json <name>`
    pub fn storage_list(name: &str) -> Invocation {
        Invocation::new("storage-list", &[JSON, name])
    }

    /// `storage-get --format=json -s <id> <key>`
    pub fn storage_get(id: &str, key: &str) -> Invocation {
        Invocation::new("storage-get", &[JSON, "-s", id, key])
    }

    /// Whether this tool's output may hold the token or key material
    /// (leadership data, relation data): never shown in an error then.
    fn secret_output(&self) -> bool {
        matches!(self.tool, "leader-get" | "relation-get")
    }

    /// The arguments as an error shows them: `leader-set` values (the
    /// token) become `<redacted>`, so a failed call logs no secret.
    fn shown_args(&self) -> Vec<String> {
        if self.tool != "leader-set" {
            return self.args.clone();
        }
        self.args
            .iter()
            .map(|a| match a.split_once('=') {
                Some((k, _)) => format!("{k}=<redacted>"),
                None => a.clone(),
            })
            .collect()
    }

    /// `resource-get <name>`: prints the local path of the resource's file.
    pub fn resource_get(name: &str) -> Invocation {
        Invocation::new("resource-get", &[name])
    }

    /// The error for output this invocation's tool printed but we cannot use.
    fn bad_output(&self, problem: impl std::fmt::Display, output: &str) -> HookToolError {
        const SHOWN: usize = 200;
        let mut end = output.len().min(SHOWN);
        while !output.is_char_boundary(end) {
            end -= 1;
        }
        let more = if end < output.len() { "…" } else { "" };
        let shown = if self.secret_output() {
            format!("{} bytes, not shown (it may hold secrets)", output.len())
        } else {
            format!("{:?}{more}", &output[..end])
        };
        HookToolError {
            tool: self.tool.to_string(),
            args: self.shown_args(),
            exit_code: Some(0),
            stderr: format!("unusable output: {problem}; output was {shown}"),
        }
    }
}

// ---- output parsers (pure) ----

/// JSON into `T`; `empty` stands in for blank output or `null` when the tool
/// may print nothing for "nothing" (an empty databag, no relations).
fn parse_json<T: DeserializeOwned>(inv: &Invocation, out: &str, empty: Option<T>) -> Result<T> {
    let text = out.trim();
    if let Some(empty) = empty {
        if text.is_empty() || text == "null" {
            return Ok(empty);
        }
    } else if text.is_empty() {
        return Err(inv.bad_output("expected JSON, got nothing", out));
    }
    serde_json::from_str(text).map_err(|e| inv.bad_output(e, out))
}

fn parse_bool(inv: &Invocation, out: &str) -> Result<bool> {
    parse_json(inv, out, None)
}

fn parse_object(inv: &Invocation, out: &str) -> Result<serde_json::Map<String, Value>> {
    parse_json(inv, out, Some(serde_json::Map::new()))
}

/// An object of strings. Juju only ever stores strings there, so anything
/// else means the tool (or a simulator of it) is broken: say so.
fn parse_databag(inv: &Invocation, out: &str) -> Result<Databag> {
    let object = parse_object(inv, out)?;
    object
        .into_iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k, s)),
            other => Err(inv.bad_output(format!("value of {k:?} is {other}, not a string"), out)),
        })
        .collect()
}

fn parse_string_list(inv: &Invocation, out: &str) -> Result<Vec<String>> {
    parse_json(inv, out, Some(Vec::new()))
}

/// The first ingress address, else the first bind address.
fn parse_network_get(inv: &Invocation, out: &str) -> Result<String> {
    #[derive(serde::Deserialize)]
    struct Network {
        #[serde(rename = "ingress-addresses", default)]
        ingress: Option<Vec<String>>,
        #[serde(rename = "bind-addresses", default)]
        bind: Option<Vec<Bind>>,
    }
    #[derive(serde::Deserialize)]
    struct Bind {
        #[serde(default)]
        addresses: Option<Vec<Address>>,
    }
    #[derive(serde::Deserialize)]
    struct Address {
        // Juju 2.x printed `address` as well; `value` is the current name.
        value: Option<String>,
        address: Option<String>,
    }
    let net: Network = parse_json(inv, out, None)?;
    let ingress = net
        .ingress
        .unwrap_or_default()
        .into_iter()
        .find(|a| !a.is_empty());
    let bind = || {
        net.bind
            .unwrap_or_default()
            .into_iter()
            .flat_map(|b| b.addresses.unwrap_or_default())
            .find_map(|a| a.value.or(a.address).filter(|v| !v.is_empty()))
    };
    ingress
        .or_else(bind)
        .ok_or_else(|| inv.bad_output("no ingress-addresses and no bind-addresses address", out))
}

fn parse_any(inv: &Invocation, out: &str) -> Result<Value> {
    parse_json(inv, out, None)
}

/// Runs hook tools found on PATH (Juju puts its tools dir first).
#[derive(Debug, Clone, Default)]
pub struct HookTools {
    /// Searched before PATH, for spawned tools only (tests, the simulator).
    tools_dir: Option<PathBuf>,
}

impl HookTools {
    pub fn new() -> Self {
        HookTools { tools_dir: None }
    }

    /// Tools are looked up in `dir` first, then on PATH. Only the children's
    /// PATH changes; this process's environment is left alone.
    pub fn with_path(dir: impl Into<PathBuf>) -> Self {
        HookTools {
            tools_dir: Some(dir.into()),
        }
    }

    /// The directory given to [`HookTools::with_path`], if any.
    pub fn tools_dir(&self) -> Option<&std::path::Path> {
        self.tools_dir.as_deref()
    }

    /// The PATH spawned tools get, when it differs from ours.
    fn child_path(&self) -> Option<OsString> {
        let dir = self.tools_dir.as_ref()?;
        let mut dirs = vec![dir.clone()];
        if let Some(path) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&path));
        }
        // Only fails if a dir holds ':'; then the tools dir alone will do.
        Some(std::env::join_paths(dirs).unwrap_or_else(|_| dir.clone().into_os_string()))
    }

    /// Runs one invocation; Ok(stdout) on exit 0, else a typed error.
    pub fn run(&self, inv: &Invocation) -> Result<String> {
        let fail = |exit_code: Option<i32>, stderr: String| HookToolError {
            tool: inv.tool.to_string(),
            args: inv.shown_args(),
            exit_code,
            stderr,
        };
        let mut cmd = Command::new(inv.tool);
        cmd.args(&inv.args)
            .stdin(if inv.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(path) = self.child_path() {
            cmd.env("PATH", path);
        }
        let mut child = cmd.spawn().map_err(|e| {
            fail(
                None,
                format!(
                    "could not run {}: {e} (Juju puts hook tools on PATH only while a hook runs)",
                    inv.tool
                ),
            )
        })?;
        // Feed stdin from a thread so a tool that writes before it has read
        // everything cannot deadlock us. A tool exiting early closes the pipe;
        // its exit status then says what went wrong, so a write error is ignored.
        let feeder = match (child.stdin.take(), inv.stdin.clone()) {
            (Some(mut pipe), Some(input)) => Some(std::thread::spawn(move || {
                let _ = pipe.write_all(input.as_bytes());
            })),
            _ => None,
        };
        let output = child
            .wait_with_output()
            .map_err(|e| fail(None, format!("waiting for {}: {e}", inv.tool)))?;
        if let Some(feeder) = feeder {
            let _ = feeder.join();
        }
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            return Ok(stdout);
        }
        let mut stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if stderr.trim().is_empty() {
            stderr = if stdout.trim().is_empty() {
                "(no output)".to_string()
            } else {
                stdout
            };
        }
        match output.status.code() {
            Some(code) => Err(fail(Some(code), stderr)),
            None => Err(fail(
                None,
                format!("killed by a signal ({:?}): {stderr}", output.status),
            )),
        }
    }

    fn run_unit(&self, inv: &Invocation) -> Result<()> {
        self.run(inv).map(drop)
    }

    pub fn is_leader(&self) -> Result<bool> {
        let inv = Invocation::is_leader();
        parse_bool(&inv, &self.run(&inv)?)
    }
    /// `config-get --format=json`: typed values, unset options omitted.
    pub fn config_get(&self) -> Result<serde_json::Map<String, Value>> {
        let inv = Invocation::config_get();
        parse_object(&inv, &self.run(&inv)?)
    }
    pub fn leader_get(&self) -> Result<Databag> {
        let inv = Invocation::leader_get();
        parse_databag(&inv, &self.run(&inv)?)
    }
    /// `k=` deletes a key (pass an empty value). An empty map runs nothing.
    pub fn leader_set(&self, kv: &Databag) -> Result<()> {
        if kv.is_empty() {
            return Ok(());
        }
        self.run_unit(&Invocation::leader_set(kv))
    }
    pub fn relation_ids(&self, endpoint: &str) -> Result<Vec<String>> {
        let inv = Invocation::relation_ids(endpoint);
        parse_string_list(&inv, &self.run(&inv)?)
    }
    pub fn relation_list(&self, relation_id: &str) -> Result<Vec<String>> {
        let inv = Invocation::relation_list(relation_id);
        parse_string_list(&inv, &self.run(&inv)?)
    }
    /// A unit's databag (`unit` may be this unit or a remote one).
    pub fn relation_get(&self, relation_id: &str, unit: &str) -> Result<Databag> {
        let inv = Invocation::relation_get(relation_id, unit);
        parse_databag(&inv, &self.run(&inv)?)
    }
    /// An application databag.
    pub fn relation_get_app(&self, relation_id: &str, app: &str) -> Result<Databag> {
        let inv = Invocation::relation_get_app(relation_id, app);
        parse_databag(&inv, &self.run(&inv)?)
    }
    /// Writes this unit's databag (`--file -` with a YAML map on stdin); empty
    /// values delete. An empty map runs nothing.
    pub fn relation_set(&self, relation_id: &str, kv: &Databag) -> Result<()> {
        if kv.is_empty() {
            return Ok(());
        }
        self.run_unit(&Invocation::relation_set(relation_id, kv, false))
    }
    /// Leader only. An empty map runs nothing.
    pub fn relation_set_app(&self, relation_id: &str, kv: &Databag) -> Result<()> {
        if kv.is_empty() {
            return Ok(());
        }
        self.run_unit(&Invocation::relation_set(relation_id, kv, true))
    }
    /// `goal-state`'s units of this application: name → status
    /// (`active`, `dying`, …), every unit the model still expects.
    pub fn goal_state_units(&self) -> Result<BTreeMap<String, String>> {
        let inv = Invocation::goal_state();
        let out = self.run(&inv)?;
        let object = parse_object(&inv, &out)?;
        let units = match object.get("units") {
            None | Some(Value::Null) => return Ok(BTreeMap::new()),
            Some(Value::Object(u)) => u,
            Some(other) => {
                return Err(inv.bad_output(format!("units is {other}, not an object"), &out))
            }
        };
        Ok(units
            .iter()
            .map(|(name, v)| {
                let status = v.get("status").and_then(|s| s.as_str()).unwrap_or("");
                (name.clone(), status.to_string())
            })
            .collect())
    }
    /// The first ingress address of a binding (`network-get <b> --format=json`),
    /// else its first bind address.
    pub fn network_get_ingress(&self, binding: &str) -> Result<String> {
        let inv = Invocation::network_get(binding);
        parse_network_get(&inv, &self.run(&inv)?)
    }
    /// The unit's workload status and message as last set (`status-get`).
    pub fn status_get(&self) -> Result<(String, String)> {
        let inv = Invocation::status_get();
        let object = parse_object(&inv, &self.run(&inv)?)?;
        let text = |k: &str| {
            object
                .get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        Ok((text("status"), text("message")))
    }
    pub fn status_set(&self, kind: StatusKind, message: &str) -> Result<()> {
        self.run_unit(&Invocation::status_set(kind, message))
    }
    pub fn application_version_set(&self, version: &str) -> Result<()> {
        self.run_unit(&Invocation::application_version_set(version))
    }
    /// `port/tcp`
    pub fn open_port(&self, port: u16) -> Result<()> {
        self.run_unit(&Invocation::open_port(port))
    }
    /// `port/tcp`
    pub fn close_port(&self, port: u16) -> Result<()> {
        self.run_unit(&Invocation::close_port(port))
    }
    pub fn action_get(&self) -> Result<serde_json::Map<String, Value>> {
        let inv = Invocation::action_get();
        parse_object(&inv, &self.run(&inv)?)
    }
    /// Keys: lowercase, digits, `-`; dots nest. An empty map runs nothing.
    pub fn action_set(&self, kv: &Databag) -> Result<()> {
        if kv.is_empty() {
            return Ok(());
        }
        self.run_unit(&Invocation::action_set(kv))
    }
    pub fn action_fail(&self, message: &str) -> Result<()> {
        self.run_unit(&Invocation::action_fail(message))
    }
    pub fn action_log(&self, message: &str) -> Result<()> {
        self.run_unit(&Invocation::action_log(message))
    }
    /// `level`: DEBUG, INFO, WARNING, ERROR.
    pub fn juju_log(&self, level: &str, message: &str) -> Result<()> {
        self.run_unit(&Invocation::juju_log(level, message))
    }
    pub fn goal_state(&self) -> Result<Value> {
        let inv = Invocation::goal_state();
        parse_any(&inv, &self.run(&inv)?)
    }
    /// The ids of this unit's instances of one storage (`data/0`).
    pub fn storage_list(&self, name: &str) -> Result<Vec<String>> {
        let inv = Invocation::storage_list(name);
        parse_string_list(&inv, &self.run(&inv)?)
    }
    /// One key (`location`, `kind`) of a storage instance.
    pub fn storage_get(&self, id: &str, key: &str) -> Result<Option<String>> {
        let inv = Invocation::storage_get(id, key);
        let v = parse_any(&inv, &self.run(&inv)?)?;
        Ok(v.as_str().map(String::from))
    }
    /// The path of a file resource (`snapshot`), fetched by the agent.
    pub fn resource_get(&self, name: &str) -> Result<std::path::PathBuf> {
        let out = self.run(&Invocation::resource_get(name))?;
        Ok(std::path::PathBuf::from(out.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bag(pairs: &[(&str, &str)]) -> Databag {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn argv(inv: &Invocation) -> String {
        std::iter::once(inv.tool.to_string())
            .chain(inv.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn argument_forms() {
        let kv = bag(&[
            ("token", "ABC123"),
            ("cluster", "etcd0=https://10.0.0.5:2380"),
            ("gone", ""),
        ]);
        let cases: Vec<(Invocation, &str)> = vec![
            (Invocation::is_leader(), "is-leader --format=json"),
            (Invocation::config_get(), "config-get --format=json"),
            (Invocation::leader_get(), "leader-get --format=json"),
            (
                Invocation::leader_set(&kv),
                "leader-set cluster=etcd0=https://10.0.0.5:2380 gone= token=ABC123",
            ),
            (
                Invocation::relation_ids("cluster"),
                "relation-ids cluster --format=json",
            ),
            (
                Invocation::relation_list("cluster:3"),
                "relation-list -r cluster:3 --format=json",
            ),
            (
                Invocation::relation_get("cluster:3", "etcd/1"),
                "relation-get --format=json -r cluster:3 - etcd/1",
            ),
            (
                Invocation::relation_get_app("cluster:3", "etcd"),
                "relation-get --format=json -r cluster:3 --app - etcd",
            ),
            (
                Invocation::relation_set("db:7", &kv, false),
                "relation-set -r db:7 --file -",
            ),
            (
                Invocation::relation_set("cluster:3", &kv, true),
                "relation-set -r cluster:3 --app --file -",
            ),
            (
                Invocation::network_get("cluster"),
                "network-get cluster --format=json",
            ),
            (
                Invocation::status_set(StatusKind::Active, "3 members"),
                "status-set active 3 members",
            ),
            (
                Invocation::status_set(StatusKind::Blocked, ""),
                "status-set blocked ",
            ),
            (
                Invocation::application_version_set("3.4.23"),
                "application-version-set 3.4.23",
            ),
            (Invocation::open_port(2379), "open-port 2379/tcp"),
            (Invocation::action_get(), "action-get --format=json"),
            (
                Invocation::action_set(&bag(&[("snapshot.path", "/tmp/s.db"), ("size", "1 MiB")])),
                "action-set size=1 MiB snapshot.path=/tmp/s.db",
            ),
            (
                Invocation::action_fail("no quorum"),
                "action-fail no quorum",
            ),
            (
                Invocation::action_log("saving snapshot"),
                "action-log saving snapshot",
            ),
            (
                Invocation::juju_log("info", "-- odd message"),
                "juju-log --log-level INFO -- -- odd message",
            ),
            (
                Invocation::juju_log("WARNING", "x"),
                "juju-log --log-level WARNING -- x",
            ),
            (Invocation::goal_state(), "goal-state --format=json"),
        ];
        for (inv, want) in cases {
            assert_eq!(argv(&inv), want);
            if inv.tool != "relation-set" {
                assert_eq!(inv.stdin, None, "{want}");
            }
        }
    }

    #[test]
    fn each_argument_is_one_argv_entry() {
        // Spaces stay inside one argument: no shell is involved.
        let inv = Invocation::status_set(StatusKind::Waiting, "waiting for 2 peers");
        assert_eq!(inv.args, vec!["waiting", "waiting for 2 peers"]);
        let inv = Invocation::action_set(&bag(&[("result", "a b=c")]));
        assert_eq!(inv.args, vec!["result=a b=c"]);
        let inv = Invocation::juju_log("debug", "line one\nline two");
        assert_eq!(
            inv.args,
            vec!["--log-level", "DEBUG", "--", "line one\nline two"]
        );
    }

    #[test]
    fn messages_starting_with_a_dash_are_not_flags() {
        assert_eq!(
            Invocation::status_set(StatusKind::Blocked, "-1 members").args[1],
            " -1 members"
        );
        assert_eq!(
            Invocation::action_fail("--force refused").args[0],
            " --force refused"
        );
        assert_eq!(Invocation::action_log("-").args[0], " -");
    }

    #[test]
    fn relation_set_stdin_is_safely_quoted_yaml() {
        let kv = bag(&[
            ("empty", ""),
            ("bool", "true"),
            ("yes", "yes"),
            ("null", "null"),
            ("tilde", "~"),
            ("number", "2379"),
            ("float", "1e3"),
            ("octal", "0o17"),
            ("colon", "a: b"),
            ("hash", "# not a comment"),
            ("flow", "{x: 1}"),
            ("list", "[1, 2]"),
            ("quote", "it's \"quoted\""),
            ("multi", "line one\nline two\n"),
            (
                "cluster",
                "etcd0=https://10.0.0.5:2380,etcd1=https://10.0.0.6:2380",
            ),
            ("leading-space", "  padded "),
            ("star", "*anchor"),
            ("unicode", "é✓"),
        ]);
        let inv = Invocation::relation_set("cluster:0", &kv, false);
        let yaml = inv.stdin.expect("relation-set feeds stdin");
        // Read back as Juju does (a map of strings), every value is exactly the original.
        let back: BTreeMap<String, String> = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, kv, "YAML was:\n{yaml}");
        // And no value turns into a non-string when read untyped.
        let untyped: BTreeMap<String, serde_yaml::Value> = serde_yaml::from_str(&yaml).unwrap();
        for (k, v) in untyped {
            assert!(v.is_string(), "{k} read back as {v:?}; YAML was:\n{yaml}");
        }
        assert!(yaml.contains("empty: ''"), "{yaml}");
        assert!(yaml.contains("bool: 'true'"), "{yaml}");
        assert!(yaml.contains("number: '2379'"), "{yaml}");
    }

    #[test]
    fn parse_is_leader() {
        let inv = Invocation::is_leader();
        assert!(parse_bool(&inv, "true\n").unwrap());
        assert!(!parse_bool(&inv, "false").unwrap());
        for bad in ["", "  \n", "True", "yes", "\"true\"", "{"] {
            let err = parse_bool(&inv, bad).expect_err(bad);
            assert_eq!(
                (err.tool.as_str(), err.args.clone()),
                ("is-leader", vec!["--format=json".to_string()])
            );
            assert_eq!(err.exit_code, Some(0));
            assert!(err.stderr.contains("unusable output"), "{}", err.stderr);
        }
    }

    #[test]
    fn parse_config_and_action_params() {
        let inv = Invocation::config_get();
        let cfg = parse_object(
            &inv,
            r#"{"port":2379,"management_port":2380,"bind_to_all_interfaces":true,"channel":"auto","snapshot_count":"auto"}"#,
        )
        .unwrap();
        assert_eq!(cfg["port"], json!(2379));
        assert_eq!(cfg["bind_to_all_interfaces"], json!(true));
        assert_eq!(cfg["channel"], json!("auto"));
        assert!(parse_object(&inv, "{}").unwrap().is_empty());
        assert!(parse_object(&inv, "").unwrap().is_empty());
        assert!(parse_object(&inv, "null\n").unwrap().is_empty());
        for bad in ["[]", "\"x\"", "{\"port\":", "port: 2379"] {
            let err = parse_object(&inv, bad).expect_err(bad);
            assert_eq!(err.tool, "config-get");
        }

        let inv = Invocation::action_get();
        let params = parse_object(&inv, r#"{"target":"/home/ubuntu/etcd-snapshots"}"#).unwrap();
        assert_eq!(params["target"], json!("/home/ubuntu/etcd-snapshots"));
        assert!(parse_object(&inv, "").unwrap().is_empty());
    }

    #[test]
    fn parse_databags() {
        let inv = Invocation::leader_get();
        assert_eq!(
            parse_databag(
                &inv,
                r#"{"token":"ABC123","leader_address":"https://10.0.0.5:2379"}"#
            )
            .unwrap(),
            bag(&[
                ("token", "ABC123"),
                ("leader_address", "https://10.0.0.5:2379")
            ])
        );
        // leader-get with no leadership data prints null (or nothing).
        for empty in ["null", "null\n", "", "\n", "{}"] {
            assert_eq!(
                parse_databag(&inv, empty).unwrap(),
                Databag::new(),
                "{empty:?}"
            );
        }
        let err = parse_databag(&inv, r#"{"token":123}"#).unwrap_err();
        assert!(err.stderr.contains("\"token\""), "{}", err.stderr);
        let err = parse_databag(&inv, "{\"token\":\"ABC").unwrap_err();
        assert_eq!(err.tool, "leader-get");

        let inv = Invocation::relation_get("cluster:3", "etcd/1");
        assert_eq!(
            parse_databag(&inv, r#"{"egress-subnets":"10.0.0.6/32","ingress-address":"10.0.0.6","private-address":"10.0.0.6"}"#)
                .unwrap()["ingress-address"],
            "10.0.0.6"
        );
        assert_eq!(parse_databag(&inv, "{}").unwrap(), Databag::new());
        let err = parse_databag(&inv, "[\"etcd/1\"]").unwrap_err();
        assert_eq!(
            err.args,
            vec!["--format=json", "-r", "cluster:3", "-", "etcd/1"]
        );
    }

    #[test]
    fn parse_lists() {
        let inv = Invocation::relation_ids("cluster");
        assert_eq!(
            parse_string_list(&inv, "[\"cluster:0\"]\n").unwrap(),
            vec!["cluster:0"]
        );
        assert_eq!(parse_string_list(&inv, "[]").unwrap(), Vec::<String>::new());
        assert_eq!(parse_string_list(&inv, "").unwrap(), Vec::<String>::new());
        assert_eq!(
            parse_string_list(&inv, "null").unwrap(),
            Vec::<String>::new()
        );
        let inv = Invocation::relation_list("cluster:0");
        assert_eq!(
            parse_string_list(&inv, r#"["etcd/1","etcd/2"]"#).unwrap(),
            vec!["etcd/1", "etcd/2"]
        );
        for bad in ["{}", "[1]", "etcd/1", "[\"etcd/1\""] {
            let err = parse_string_list(&inv, bad).expect_err(bad);
            assert_eq!(err.tool, "relation-list");
        }
    }

    #[test]
    fn parse_network_get_output() {
        let inv = Invocation::network_get("cluster");
        let full = r#"{"bind-addresses":[{"mac-address":"00:16:3e:aa:bb:cc","interface-name":"eth0",
            "addresses":[{"hostname":"","value":"10.0.0.5","cidr":"10.0.0.0/24","address":"10.0.0.5"}],
            "macaddress":"00:16:3e:aa:bb:cc","interfacename":"eth0"}],
            "egress-subnets":["10.0.0.5/32"],"ingress-addresses":["10.0.0.5","10.0.0.99"]}"#;
        assert_eq!(parse_network_get(&inv, full).unwrap(), "10.0.0.5");
        // Ingress wins over bind.
        let cross = r#"{"bind-addresses":[{"addresses":[{"value":"192.168.1.2"}]}],"ingress-addresses":["10.1.1.1"]}"#;
        assert_eq!(parse_network_get(&inv, cross).unwrap(), "10.1.1.1");
        // No ingress: the first bind address with a value.
        let bind_only = r#"{"bind-addresses":[{"interface-name":"lo","addresses":[]},
            {"interface-name":"eth1","addresses":[{"value":"192.168.1.2","cidr":"192.168.1.0/24"}]}],
            "ingress-addresses":[]}"#;
        assert_eq!(parse_network_get(&inv, bind_only).unwrap(), "192.168.1.2");
        // Juju 2.x's `address` key.
        assert_eq!(
            parse_network_get(
                &inv,
                r#"{"bind-addresses":[{"addresses":[{"address":"10.2.2.2"}]}]}"#
            )
            .unwrap(),
            "10.2.2.2"
        );
        for bad in [
            "",
            "{}",
            r#"{"ingress-addresses":[],"bind-addresses":[]}"#,
            "null",
            "[",
            "\"10.0.0.5\"",
        ] {
            let err = parse_network_get(&inv, bad).expect_err(bad);
            assert_eq!(
                (err.tool.as_str(), err.exit_code),
                ("network-get", Some(0)),
                "{bad}"
            );
        }
    }

    #[test]
    fn parse_goal_state() {
        let inv = Invocation::goal_state();
        let gs = parse_any(
            &inv,
            r#"{"units":{"etcd/0":{"status":"active","since":"2024-01-01 00:00:00Z"}},
                "relations":{"cluster":{"etcd/1":{"status":"joined","since":"2024-01-01 00:00:00Z"},
                                        "etcd/2":{"status":"dying","since":"2024-01-01 00:00:00Z"}}}}"#,
        )
        .unwrap();
        assert_eq!(gs["relations"]["cluster"]["etcd/2"]["status"], "dying");
        for bad in ["", "{\"units\":"] {
            assert_eq!(parse_any(&inv, bad).expect_err(bad).tool, "goal-state");
        }
    }

    #[test]
    fn bad_output_shows_a_bounded_prefix() {
        let inv = Invocation::config_get();
        let long = format!("not json {}", "é".repeat(500));
        let err = parse_object(&inv, &long).unwrap_err();
        assert!(err.stderr.contains("not json"), "{}", err.stderr);
        assert!(err.stderr.len() < 400, "{}", err.stderr.len());
        assert!(err.stderr.ends_with('…'));
        assert!(err
            .to_string()
            .starts_with("config-get --format=json exited 0: unusable output"));
    }

    #[test]
    fn errors_show_no_token_or_key() {
        let inv = Invocation::leader_set(&bag(&[("token", "Q7XK2P"), ("cluster-id", "cc")]));
        assert_eq!(
            inv.shown_args(),
            ["cluster-id=<redacted>", "token=<redacted>"]
        );
        let inv = Invocation::relation_get("db:1", "etcd/0");
        let out = r#"{"client_key": "-----BEGIN PRIVATE KEY-----\nMIIE", "n": 1}"#;
        let err = parse_databag(&inv, out).unwrap_err().to_string();
        assert!(
            !err.contains("PRIVATE KEY") && !err.contains("MIIE"),
            "{err}"
        );
        let err = parse_databag(&Invocation::leader_get(), r#"{"token": 7, "t": "Q7XK2P"}"#)
            .unwrap_err()
            .to_string();
        assert!(!err.contains("Q7XK2P"), "{err}");
    }

    /// Writes an executable script named `name` into `dir`.
    fn script(dir: &std::path::Path, name: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn run_reports_failure_with_tool_args_code_and_stderr() {
        let dir = tempfile::tempdir().unwrap();
        script(
            dir.path(),
            "leader-set",
            "echo 'ERROR cannot write settings: not the leader' >&2\nexit 1",
        );
        let tools = HookTools::with_path(dir.path());
        assert_eq!(tools.tools_dir(), Some(dir.path()));
        let err = tools.leader_set(&bag(&[("token", "ABC123")])).unwrap_err();
        assert_eq!(err.tool, "leader-set");
        // The token is never shown (rule 7).
        assert_eq!(err.args, vec!["token=<redacted>"]);
        assert_eq!(err.exit_code, Some(1));
        assert_eq!(
            err.stderr.trim(),
            "ERROR cannot write settings: not the leader"
        );
        assert_eq!(
            err.to_string(),
            "leader-set token=<redacted> exited 1: ERROR cannot write settings: not the leader"
        );
        // Our own PATH is untouched.
        let ours = std::env::var_os("PATH").unwrap_or_default();
        assert!(!std::env::split_paths(&ours).any(|p| p == dir.path()));
    }

    #[test]
    fn run_passes_args_stdin_and_stdout() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls");
        // Records its args and stdin, then answers like Juju would.
        script(
            dir.path(),
            "relation-set",
            &format!(
                "printf '%s|' \"$@\" >> '{0}'\necho >> '{0}'\ncat >> '{0}'",
                log.display()
            ),
        );
        script(dir.path(), "is-leader", "echo true");
        script(dir.path(), "leader-get", "echo null");
        script(dir.path(), "relation-ids", "echo '[\"cluster:0\"]'");
        script(
            dir.path(),
            "network-get",
            "echo '{\"ingress-addresses\":[\"10.0.0.5\"]}'",
        );
        script(dir.path(), "config-get", "echo 'oops'");
        let tools = HookTools::with_path(dir.path());

        assert!(tools.is_leader().unwrap());
        assert_eq!(tools.leader_get().unwrap(), Databag::new());
        assert_eq!(tools.relation_ids("cluster").unwrap(), vec!["cluster:0"]);
        assert_eq!(tools.network_get_ingress("cluster").unwrap(), "10.0.0.5");
        let err = tools.config_get().unwrap_err();
        assert_eq!((err.tool.as_str(), err.exit_code), ("config-get", Some(0)));
        assert!(err.stderr.contains("oops"), "{}", err.stderr);

        tools
            .relation_set_app("cluster:0", &bag(&[("token", "ABC123"), ("port", "2379")]))
            .unwrap();
        // An empty map runs nothing.
        tools.relation_set("cluster:0", &Databag::new()).unwrap();
        let calls = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            calls,
            "-r|cluster:0|--app|--file|-|\nport: '2379'\ntoken: ABC123\n"
        );
    }

    #[test]
    fn run_reports_a_missing_tool() {
        let dir = tempfile::tempdir().unwrap();
        let tools = HookTools::with_path(dir.path());
        let inv = Invocation {
            tool: "no-such-hook-tool-xyz",
            args: vec!["a".into()],
            stdin: None,
        };
        let err = tools.run(&inv).unwrap_err();
        assert_eq!(
            (err.tool.as_str(), err.args.clone(), err.exit_code),
            ("no-such-hook-tool-xyz", vec!["a".into()], None)
        );
        assert!(err.stderr.contains("could not run"), "{}", err.stderr);
    }

    #[test]
    fn run_uses_stdout_when_stderr_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        script(
            dir.path(),
            "status-set",
            "echo 'invalid status \"bogus\"'\nexit 2",
        );
        let err = HookTools::with_path(dir.path())
            .status_set(StatusKind::Active, "")
            .unwrap_err();
        assert_eq!(err.exit_code, Some(2));
        assert!(err.stderr.contains("invalid status"), "{}", err.stderr);
    }
}
