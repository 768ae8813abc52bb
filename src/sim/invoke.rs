//! One context from open to close: allocate its id, build its environment,
//! run the process, then commit what it staged (exit 0) or drop it.

use crate::sim::commit;
use crate::sim::error::Result;
use crate::sim::hookenv::{self, Work};
use crate::sim::machine;
use crate::sim::model::{Context, Model};
use crate::sim::runner::{self, Capture, Outcome, Spawn};
use crate::sim::store::ModelDir;
use std::path::PathBuf;
use std::time::Duration;

/// Everything needed to run a context once the lock is released.
pub struct Opened {
    pub unit: String,
    pub context: String,
    pub env: Vec<(String, String)>,
    pub charm_dir: PathBuf,
    pub unit_dir: PathBuf,
    /// Set on a systemd machine: the work runs inside it.
    pub systemd: bool,
}

/// Registers a context for `unit` (under the caller's lock).
pub fn open(model: &mut Model, dir: &ModelDir, unit: &str, work: &Work, dry_run: bool) -> Opened {
    model.next_context += 1;
    let context = format!("{unit}-{}-{}", work.label(), model.next_context);
    let (event, action) = match work {
        Work::Hook(ev) => (Some(ev.clone()), None),
        Work::Action { id, .. } => (None, Some(id.clone())),
        Work::Exec => (None, None),
    };
    model.contexts.insert(
        context.clone(),
        Context {
            id: context.clone(),
            unit: unit.into(),
            event,
            action,
            dry_run,
            ..Default::default()
        },
    );
    let env = hookenv::build(model, dir, unit, &context, work);
    let u = &model.units[unit];
    Opened {
        unit: unit.into(),
        context,
        env,
        charm_dir: u.charm_dir(),
        unit_dir: u.dir.clone(),
        systemd: u.machine_mode == machine::SYSTEMD_MODE,
    }
}

/// Closes a context: its staged changes land if `ok` (and it is no dry run).
/// Returns the context, with its tool-call count.
pub fn close(model: &mut Model, context: &str, ok: bool) -> Option<Context> {
    let ctx = model.contexts.remove(context)?;
    if ok && !ctx.dry_run {
        commit::commit(model, &ctx.unit, &ctx.staged);
    }
    Some(ctx)
}

/// Runs the charm for a hook or action in an opened context; a missing hook
/// succeeds at once (Juju skips it).
pub fn run_charm(
    opened: &Opened,
    work: &Work,
    timeout: Duration,
    capture: Capture,
    still_running: Option<Box<dyn Fn(Duration)>>,
) -> Result<Outcome> {
    let Some(program) = hookenv::program(&opened.charm_dir, work) else {
        let missing_action = matches!(work, Work::Action { .. });
        return Ok(Outcome {
            code: i32::from(missing_action),
            timed_out: false,
            duration: Duration::ZERO,
        });
    };
    run_in(
        opened,
        Spawn {
            program,
            args: Vec::new(),
            cwd: opened.charm_dir.clone(),
            env: opened.env.clone(),
            timeout,
            capture,
            still_running,
        },
    )
}

/// Runs `spawn` where the unit's work runs: on the host, or inside its
/// systemd machine (which must be up: a stopped machine fails the work).
pub fn run_in(opened: &Opened, spawn: Spawn) -> Result<Outcome> {
    if !opened.systemd {
        return runner::run(&spawn);
    }
    match machine::running(&opened.unit_dir) {
        Some(pid) => runner::run(&machine::wrap(pid, spawn)),
        None => crate::sim::error::bail!(
            "{}: its systemd machine is not running (see `jujusim reboot {}`)",
            opened.unit,
            opened.unit
        ),
    }
}

/// Where a unit's last hook output goes.
pub fn output_file(opened: &Opened) -> PathBuf {
    opened.unit_dir.join("hook-output.log")
}
