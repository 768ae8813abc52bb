//! The `jujusim` command line.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "jujusim",
    version,
    about = "A local, multi-unit Juju model that runs a machine charm's hooks",
    after_help = "Exit status: 0 done; 1 the command failed; 2 a unit is in error; 3 --max-hooks was reached before the model settled."
)]
pub struct Cli {
    /// Model directory [default: $JUJUSIM_MODEL, else ./jujusim-model]
    #[arg(long, global = true, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// Re-seed the generator that orders the starts of ready units' hooks
    #[arg(long, global = true)]
    pub seed: Option<u64>,
    /// Most hook runs one command may make before it stops and reports
    #[arg(long, global = true, default_value_t = 1000)]
    pub max_hooks: usize,
    /// Seconds a hook, action or exec may run before it is killed
    #[arg(long, global = true, default_value_t = 600)]
    pub hook_timeout: u64,
    /// Runs of a failing hook before its unit is put in error
    #[arg(long, global = true, default_value_t = 3)]
    pub attempts: u32,
    /// Milliseconds between runs of a failing hook
    #[arg(long, global = true, default_value_t = 500)]
    pub retry_delay_ms: u64,
    /// Seconds between SIGTERM and SIGKILL when stopping workloads
    #[arg(long, global = true, default_value_t = 15)]
    pub kill_timeout: u64,
    /// One hook at a time across the whole model, not one per unit (for
    /// debugging; also JUJUSIM_SERIAL=1)
    #[arg(long, global = true)]
    pub serial: bool,
    /// The loopback /24 the model's machines take their addresses from
    /// (`127.X.Y.0/24`), fixed when deploy creates the model [default:
    /// $JUJUSIM_ADDRESS_RANGE, else one derived from the model directory]
    #[arg(long, global = true, value_name = "CIDR")]
    pub address_range: Option<String>,
    /// No per-hook progress lines on stderr
    #[arg(long, short, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Deploy a charm directory as an application
    Deploy {
        charm_dir: PathBuf,
        /// Application name [default: the charm's name]
        #[arg(long)]
        name: Option<String>,
        #[arg(short = 'n', long = "num-units", default_value_t = 1)]
        num_units: u32,
        /// key=value, checked against config.yaml (repeatable)
        #[arg(long = "config", value_name = "K=V")]
        config: Vec<String>,
        /// Variable passed to every hook; `{unit}` and `{unit_root}` are expanded per unit (repeatable)
        #[arg(long = "env", value_name = "K=V")]
        env: Vec<String>,
        /// JUJU_VERSION the hooks see (4.x has no leader-get/leader-set/unit-get) [default: 3.6.4]
        #[arg(long)]
        juju_version: Option<String>,
        /// The machines' base; the charm must list it, unless it lists none
        #[arg(long, default_value = "ubuntu@22.04")]
        base: String,
        /// Upload a file resource the charm declares (repeatable)
        #[arg(long = "resource", value_name = "NAME=PATH")]
        resources: Vec<String>,
        /// NAME=SIZE (1G, 512M): one instance of a storage metadata.yaml declares, per unit (repeatable)
        #[arg(long = "storage", value_name = "NAME=SIZE")]
        storage: Vec<String>,
        #[command(flatten)]
        machines: MachineArgs,
    },
    /// Add units to an application
    AddUnit {
        app: Option<String>,
        #[arg(short = 'n', long = "num-units", default_value_t = 1)]
        num_units: u32,
        /// NAME=SIZE for the new units [default: what deploy was given]
        #[arg(long = "storage", value_name = "NAME=SIZE")]
        storage: Vec<String>,
    },
    /// Detach a storage instance from a unit: it runs <name>-storage-detaching, then the device is released
    DetachStorage { unit: String, storage_id: String },
    /// Remove a unit: it leaves its relations, stops, is removed, and its processes are killed
    RemoveUnit {
        unit: String,
        /// Also remove a unit that is in error: an alive one begins its removal (its failed hook is dropped); a dying one is removed at once, no further hook run, its processes stopped
        #[arg(long)]
        force: bool,
        /// With --force: remove the unit at once, as Juju does when its machine is lost: none of its hooks run, its processes are stopped, the units related to it run their departed hooks
        #[arg(long, requires = "force")]
        no_wait: bool,
    },
    /// Print an application's config, or set options (k=v) and reset them
    Config {
        /// [APP] [k=v ...]
        args: Vec<String>,
        /// Options to return to their defaults (comma-separated, repeatable)
        #[arg(long, value_delimiter = ',')]
        reset: Vec<String>,
        #[arg(long, default_value = "yaml")]
        format: String,
    },
    /// Upgrade an application to a new charm directory
    Refresh {
        app: Option<String>,
        #[arg(long)]
        path: PathBuf,
        /// Change nothing: run `<new charm>/dispatch upgrade-charm --dry-run [ARGS after --]` on each unit
        #[arg(long)]
        dry_run: bool,
        /// Also refresh units in error (they skip upgrade-charm and config-changed)
        #[arg(long)]
        force_units: bool,
        /// Upload a file resource; required for one new to the application (repeatable)
        #[arg(long = "resource", value_name = "NAME=PATH")]
        resources: Vec<String>,
        #[arg(last = true)]
        extra: Vec<String>,
    },
    /// Move leadership to a unit (it runs leader-elected)
    Elect { unit: String },
    /// Run an action on a unit and print its results
    RunAction {
        unit: String,
        action: String,
        /// key=value parameters (values are read as YAML scalars)
        params: Vec<String>,
        #[arg(long, default_value = "yaml")]
        format: String,
    },
    /// Reboot a unit's machine: its processes are killed, then start runs
    Reboot {
        unit: String,
        /// The machine comes up without its block storage (a volume the
        /// cloud has not attached again, or lost): each loop device is
        /// released while the machine is down; Juju still has the storage
        /// attached. `plug-volumes` brings the volumes back
        #[arg(long)]
        volumes_missing: bool,
    },
    /// Attach again, to the running machine, the volumes `reboot
    /// --volumes-missing` left off (a late volume arriving): new loop
    /// devices for the same images; no hook runs
    PlugVolumes { unit: String },
    /// Relate two applications: APP:ENDPOINT APP:ENDPOINT
    Integrate { a: String, b: String },
    /// Run update-status on one unit, or on all
    UpdateStatus { unit: Option<String> },
    /// Clear a unit's error and retry the failed hook
    Resolve {
        unit: String,
        /// Skip the failed hook instead of retrying it
        #[arg(long)]
        no_retry: bool,
    },
    /// Run a command in a unit's hook context (tools, JUJU_* variables), like `juju exec`
    Exec {
        unit: String,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Run queued hooks until the model is quiescent
    Settle,
    /// The model's applications and units
    Status {
        #[arg(long, default_value = "tabular")]
        format: String,
    },
    /// The hook log (or juju-log lines, or hook-tool calls)
    Log {
        #[arg(long)]
        unit: Option<String>,
        /// Print juju-log lines instead
        #[arg(long, conflicts_with = "tool_calls")]
        juju_log: bool,
        /// Print hook-tool calls instead
        #[arg(long)]
        tool_calls: bool,
        /// text or json (JSON lines)
        #[arg(long, default_value = "text")]
        format: String,
    },
    /// Stop every workload the model started and remove its units
    Destroy,
}

impl MachineArgs {
    /// `--machines`, else `JUJUSIM_MACHINES` (a model-wide default), else direct.
    pub fn mode(&self) -> String {
        self.machines
            .clone()
            .or_else(|| std::env::var("JUJUSIM_MACHINES").ok())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "direct".into())
    }
}

/// How `deploy` makes the application's machines.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MachineArgs {
    /// `systemd`: each machine is a PID + mount namespace booting the host's
    /// systemd (needs root; falls back to direct, saying why, where it cannot);
    /// `direct`: hooks run on the host [default: $JUJUSIM_MACHINES, else direct]
    #[arg(long = "machines", value_name = "MODE")]
    pub machines: Option<String>,
    /// Bind SRC onto DST inside each systemd machine; `{unit}`/`{unit_root}` expanded (repeatable)
    #[arg(long = "machine-bind", value_name = "SRC:DST")]
    pub binds: Vec<String>,
    /// Variable set over `--env` for hooks on systemd machines only (repeatable)
    #[arg(long = "systemd-env", value_name = "K=V")]
    pub systemd_env: Vec<String>,
}
