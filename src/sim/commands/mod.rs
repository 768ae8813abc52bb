//! The `jujusim` commands. Each takes the model, changes the state under the
//! lock (queueing hooks through `events`), then lets the scheduler run the
//! model until it is quiescent.

mod action;
mod config;
mod deploy;
mod exec;
mod lifecycle;
mod log;
mod refresh;
mod refusal;
mod remove;

use crate::sim::cli::{Cli, Command};
use crate::sim::error::Result;
use crate::sim::scheduler::{self, Options, Progress};
use crate::sim::store::ModelDir;
use std::path::PathBuf;
use std::time::Duration;

/// What every command gets: the model dir and the run options.
pub struct Ctx {
    pub dir: ModelDir,
    pub opts: Options,
    pub progress: Progress,
    /// `--seed`, applied once, at the first settle.
    pub seed: std::cell::Cell<Option<u64>>,
    /// `--address-range` or $JUJUSIM_ADDRESS_RANGE, used when a model is created.
    pub address_range: Option<String>,
}

impl Ctx {
    /// Runs queued hooks until quiescent; the exit code says how it ended.
    pub fn settle(&self) -> Result<u8> {
        if let Some(seed) = self.seed.take() {
            self.dir.update(|m| {
                m.seed = seed;
                m.prng = seed;
                Ok(())
            })?;
            self.progress.note(&format!("seed {seed}"));
        }
        let report = scheduler::run(&self.dir, &self.opts, &self.progress)?;
        let mut code = 0;
        if report.bound_hit {
            eprintln!("jujusim: stopped after {} hook runs (--max-hooks); the model is not quiescent. Still queued:", report.hooks);
            for (unit, hooks) in &report.pending {
                eprintln!("  {unit}: {}", hooks.join(", "));
            }
            eprintln!("Run `jujusim settle` to go on.");
            code = 3;
        }
        for (unit, hook) in &report.errors {
            eprintln!("jujusim: {unit} is in error: hook failed: {hook:?} (see `jujusim log --unit {unit}`; then `jujusim resolve {unit}`)");
            code = code.max(2);
        }
        Ok(code)
    }
}

fn model_path(given: Option<PathBuf>) -> PathBuf {
    given
        .or_else(|| {
            std::env::var_os("JUJUSIM_MODEL")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| PathBuf::from("jujusim-model"))
}

/// `JUJUSIM_SERIAL=1` (any value but empty or 0) asks for `--serial`.
fn serial_from_env() -> bool {
    std::env::var("JUJUSIM_SERIAL").is_ok_and(|v| !v.is_empty() && v != "0")
}

pub fn run(cli: Cli) -> Result<u8> {
    let path = model_path(cli.model);
    let creating = matches!(cli.command, Command::Deploy { .. });
    let dir = ModelDir::open(&path, creating)?;
    let opts = Options {
        max_hooks: cli.max_hooks,
        hook_timeout: Duration::from_secs(cli.hook_timeout),
        attempts: cli.attempts.max(1),
        retry_delay: Duration::from_millis(cli.retry_delay_ms),
        kill_grace: Duration::from_secs(cli.kill_timeout),
        serial: cli.serial || serial_from_env(),
    };
    let ctx = Ctx {
        dir,
        progress: Progress::new(!cli.quiet),
        opts,
        seed: std::cell::Cell::new(cli.seed),
        address_range: cli
            .address_range
            .or_else(|| std::env::var("JUJUSIM_ADDRESS_RANGE").ok())
            .filter(|r| !r.is_empty()),
    };
    // Read-only commands do not wait for a running controller.
    match cli.command {
        Command::Status { format } => return crate::sim::status::print(&ctx.dir, &format),
        Command::Log {
            unit,
            juju_log,
            tool_calls,
            format,
        } => return log::print(&ctx.dir, unit.as_deref(), juju_log, tool_calls, &format),
        _ => {}
    }
    if !ctx.dir.exists() && !creating {
        crate::sim::error::bail!(
            "no model at {} (deploy creates one)",
            ctx.dir.root.display()
        );
    }
    let _controller = ctx.dir.controller_lock()?;
    match cli.command {
        Command::Deploy {
            charm_dir,
            name,
            num_units,
            config,
            env,
            juju_version,
            base,
            resources,
            storage,
            machines,
        } => deploy::deploy(
            &ctx,
            &charm_dir,
            name,
            num_units,
            &[config, env, storage],
            juju_version,
            &base,
            &resources,
            &machines,
        ),
        Command::AddUnit {
            app,
            num_units,
            storage,
        } => deploy::add_unit(&ctx, app.as_deref(), num_units, &storage),
        Command::DetachStorage { unit, storage_id } => {
            remove::detach_storage(&ctx, &unit, &storage_id)
        }
        Command::RemoveUnit {
            unit,
            force,
            no_wait,
        } => remove::remove_unit(&ctx, &unit, force, no_wait),
        Command::Config {
            args,
            reset,
            format,
        } => config::config(&ctx, &args, &reset, &format),
        Command::Refresh {
            app,
            path,
            dry_run,
            force_units,
            resources,
            extra,
        } => {
            if dry_run {
                refresh::dry_run(&ctx, app.as_deref(), &path, &extra)
            } else {
                refresh::refresh(&ctx, app.as_deref(), &path, force_units, &resources)
            }
        }
        Command::Elect { unit } => lifecycle::elect(&ctx, &unit),
        Command::RunAction {
            unit,
            action,
            params,
            format,
        } => action::run_action(&ctx, &unit, &action, &params, &format),
        Command::Reboot {
            unit,
            volumes_missing,
        } => lifecycle::reboot(&ctx, &unit, volumes_missing),
        Command::PlugVolumes { unit } => lifecycle::plug_volumes(&ctx, &unit),
        Command::Integrate { a, b } => lifecycle::integrate(&ctx, &a, &b),
        Command::UpdateStatus { unit } => lifecycle::update_status(&ctx, unit.as_deref()),
        Command::Resolve { unit, no_retry } => lifecycle::resolve(&ctx, &unit, no_retry),
        Command::Exec { unit, cmd } => exec::exec(&ctx, &unit, &cmd),
        Command::Settle => ctx.settle(),
        Command::Destroy => remove::destroy(&ctx),
        Command::Status { .. } | Command::Log { .. } => unreachable!("handled above"),
    }
}

/// `K=V` (the value may be empty).
pub fn split_kv(raw: &str, what: &str) -> Result<(String, String)> {
    match raw.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => crate::sim::error::bail!("{what}: expected KEY=VALUE, got {raw:?}"),
    }
}
