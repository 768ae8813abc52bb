//! The hook tools. The `jujusim` binary answers to each tool's name (the
//! model's `tools/` dir holds symlinks to it); a call finds the model, unit
//! and hook context from JUJUSIM_MODEL, JUJU_UNIT_NAME and JUJU_CONTEXT_ID.
//!
//! Every call: parse → lock the model → check the context → act → save →
//! append to the tool-call log → print. Failures print `ERROR <message>` on
//! stderr and exit non-zero (2 for usage errors), as Juju's tools do.

mod action;
mod args;
mod format;
mod leader;
mod ports;
mod relation;
mod resource;
mod state;
mod unit;

use crate::sim::error::{bail, Result, SimError};
use crate::sim::model::Model;
use crate::sim::store::{self, ModelDir};
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

type ToolFn = fn(&mut Call, &[String]) -> Result<String>;

/// Every tool the simulator provides, and the function behind it.
const TOOLS: &[(&str, ToolFn)] = &[
    ("is-leader", leader::is_leader),
    ("leader-get", leader::leader_get),
    ("leader-set", leader::leader_set),
    ("config-get", unit::config_get),
    ("relation-ids", relation::relation_ids),
    ("relation-list", relation::relation_list),
    ("relation-get", relation::relation_get),
    ("relation-set", relation::relation_set),
    ("network-get", unit::network_get),
    ("unit-get", unit::unit_get),
    ("status-set", unit::status_set),
    ("status-get", unit::status_get),
    ("application-version-set", unit::application_version_set),
    ("open-port", ports::open_port),
    ("close-port", ports::close_port),
    ("opened-ports", ports::opened_ports),
    ("goal-state", unit::goal_state),
    ("juju-log", unit::juju_log),
    ("state-get", state::state_get),
    ("state-set", state::state_set),
    ("state-delete", state::state_delete),
    ("storage-get", state::storage_get),
    ("storage-list", state::storage_list),
    ("resource-get", resource::resource_get),
    ("action-get", action::action_get),
    ("action-set", action::action_set),
    ("action-fail", action::action_fail),
    ("action-log", action::action_log),
];

/// Tools Juju 4 no longer has.
const GONE_IN_JUJU_4: &[&str] = &["leader-get", "leader-set", "unit-get"];

pub fn is_tool(name: &str) -> bool {
    TOOLS.iter().any(|(n, _)| *n == name)
}

/// The tool names present under a given Juju version.
pub fn names_for(juju_version: &str) -> Vec<&'static str> {
    TOOLS
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !(juju_version.starts_with("4.") && GONE_IN_JUJU_4.contains(n)))
        .collect()
}

/// (Re)creates `<model>/tools/` as symlinks to this executable.
pub fn install_links(dir: &ModelDir, juju_version: &str) -> Result<()> {
    let tools = dir.tools_dir();
    let exe = std::env::current_exe()?;
    if tools.exists() {
        std::fs::remove_dir_all(&tools)?;
    }
    std::fs::create_dir_all(&tools)?;
    for name in names_for(juju_version) {
        std::os::unix::fs::symlink(&exe, tools.join(name))?;
    }
    Ok(())
}

/// What the hook's environment says about where the call comes from.
#[derive(Debug, Default, Clone)]
pub struct CallEnv {
    pub relation_id: Option<String>,
    pub remote_unit: Option<String>,
    pub remote_app: Option<String>,
}

/// One tool call, holding the locked model.
pub struct Call<'a> {
    pub model: &'a mut Model,
    pub dir: &'a ModelDir,
    pub unit: String,
    pub context: String,
    pub env: CallEnv,
    /// Standard input, read before the lock was taken (`--file -`).
    pub stdin: Option<String>,
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Entry point when the binary runs as a hook tool.
pub fn main(tool: &str, args: Vec<String>) -> ExitCode {
    let result = run(tool, &args);
    let code = match &result {
        Ok(_) => 0,
        Err(e) => e.code.max(1),
    };
    if let (Some(dir), Some(unit)) = (
        env_nonempty("JUJUSIM_MODEL"),
        env_nonempty("JUJU_UNIT_NAME"),
    ) {
        let record = serde_json::json!({
            "time": store::now_rfc3339(),
            "unit": unit,
            "context": env_nonempty("JUJU_CONTEXT_ID"),
            "tool": tool,
            "args": args,
            "exit": code,
        });
        let _ = store::append_jsonl(&Path::new(&dir).join("tool-calls.jsonl"), &record);
    }
    match result {
        Ok(out) => {
            let mut stdout = std::io::stdout();
            let _ = stdout.write_all(out.as_bytes());
            let _ = stdout.flush();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ERROR {}", e.message);
            ExitCode::from(code)
        }
    }
}

fn run(tool: &str, args: &[String]) -> Result<String> {
    let Some((_, f)) = TOOLS.iter().find(|(n, _)| *n == tool) else {
        bail!("{tool}: not a hook tool");
    };
    let (Some(model_dir), Some(unit), Some(context)) = (
        env_nonempty("JUJUSIM_MODEL"),
        env_nonempty("JUJU_UNIT_NAME"),
        env_nonempty("JUJU_CONTEXT_ID"),
    ) else {
        bail!("{tool}: not running in a hook context (JUJUSIM_MODEL, JUJU_UNIT_NAME and JUJU_CONTEXT_ID must be set)");
    };
    let stdin = if reads_stdin(args) {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        Some(s)
    } else {
        None
    };
    let dir = ModelDir::open(Path::new(&model_dir), false)?;
    let mut locked = dir.lock()?;
    if GONE_IN_JUJU_4.contains(&tool) && locked.model.juju_version.starts_with("4.") {
        return Err(SimError::new(format!("{tool}: command not found")).with_code(127));
    }
    let ctx = locked.model.context(&context)?;
    if ctx.unit != unit {
        bail!("context {context} belongs to {}, not {unit}", ctx.unit);
    }
    let mut call = Call {
        model: &mut locked.model,
        dir: &dir,
        unit,
        context: context.clone(),
        env: CallEnv {
            relation_id: env_nonempty("JUJU_RELATION_ID"),
            remote_unit: env_nonempty("JUJU_REMOTE_UNIT"),
            remote_app: env_nonempty("JUJU_REMOTE_APP"),
        },
        stdin,
    };
    let result = f(&mut call, args);
    if let Ok(ctx) = locked.model.context_mut(&context) {
        ctx.tool_calls += 1;
    }
    locked.save()?;
    result
}

/// `--file -` / `--file=-`: stdin must be read before taking the model lock,
/// since the writer of that pipe may itself be waiting for the lock.
fn reads_stdin(args: &[String]) -> bool {
    args.iter().any(|a| a == "--file=-") || args.windows(2).any(|w| w[0] == "--file" && w[1] == "-")
}

impl Call<'_> {
    pub fn context(&self) -> &crate::sim::model::Context {
        self.model
            .contexts
            .get(&self.context)
            .expect("checked in run")
    }

    pub fn context_mut(&mut self) -> &mut crate::sim::model::Context {
        self.model
            .contexts
            .get_mut(&self.context)
            .expect("checked in run")
    }

    pub fn app(&self) -> &str {
        crate::sim::model::app_of(&self.unit)
    }

    pub fn is_leader(&self) -> bool {
        self.model.is_leader(&self.unit)
    }

    /// Dry runs change nothing, not even what lands at once in a real hook.
    pub fn dry_run(&self) -> bool {
        self.context().dry_run
    }
}
