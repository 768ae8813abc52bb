//! jujusim: a local, generic Juju model for machine charms. It runs a
//! charm's hooks on several local "machines" (directories with their own
//! loopback address) as Juju's contract says (shared/juju-contract.md), with
//! no knowledge of any particular charm.
//!
//! # Layout
//! - `model`     — the state: applications, units, relations, queues, contexts.
//! - `store`     — the model directory, its lock, atomic saves, JSON-lines logs.
//! - `identity`  — model name, UUID and per-unit loopback addresses.
//! - `charmdir`  — reading metadata/config/actions YAML; copying a charm.
//! - `charmspec` — endpoint roles, storage specs, resources, bases.
//! - `config`    — typed config values and the config-get view.
//! - `events`    — which hooks are queued on which units, for each trigger.
//! - `commit`    — what a successful hook's staged changes do.
//! - `hookenv`   — a hook's environment and program.
//! - `runner`    — running one process: clean env, timeout, captured output.
//! - `invoke`    — opening, running and closing one hook/action/exec context.
//! - `scheduler` — units concurrently (seeded start order), retries, errors.
//! - `storage`   — storage instances: directories, or loop devices for block storage.
//! - `machine`   — systemd machines: namespaces booting the host's systemd.
//! - `procs`     — finding and stopping a unit's or model's workloads.
//! - `prng`      — the seeded generator.
//! - `resources` — `--resource` uploads and their stored copies.
//! - `tools`     — the hook tools (the binary answers to their names).
//! - `cli`, `commands`, `status` — the `jujusim` command line.

mod charmdir;
mod charmspec;
mod cli;
mod commands;
mod commit;
mod config;
pub mod error;
mod events;
mod hookenv;
mod identity;
mod invoke;
mod machine;
mod model;
mod prng;
mod procs;
mod resources;
mod runner;
mod scheduler;
mod status;
mod storage;
mod store;
mod tools;

use std::process::ExitCode;

/// Entry point of the `jujusim` binary (also the multi-call hook tools).
pub fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().collect();
    let argv0 = args.first().cloned().unwrap_or_default();
    let name = std::path::Path::new(&argv0)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if tools::is_tool(name) {
        return tools::main(name, args.split_off(1));
    }
    let cli = <cli::Cli as clap::Parser>::parse();
    match commands::run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("jujusim: {e}");
            ExitCode::from(e.code.max(1))
        }
    }
}
