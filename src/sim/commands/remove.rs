//! `remove-unit` and `destroy`.

use super::Ctx;
use crate::sim::error::{bail, Result};
use crate::sim::events;
use crate::sim::machine;
use crate::sim::model::{Agent, Life};
use crate::sim::procs::{self, Target};

pub fn remove_unit(ctx: &Ctx, unit: &str, force: bool, no_wait: bool) -> Result<u8> {
    let forced = ctx.dir.update(|m| {
        let u = m.unit_mut(unit)?;
        // `--force --no-wait`: the machine is gone; nothing of the unit's
        // own runs again (Juju's forced removal without waiting).
        if force && no_wait {
            let root = u.root();
            if u.life != Life::Dying {
                events::begin_removal(m, unit);
            }
            return Ok(Some(root));
        }
        if u.life == Life::Dying {
            if !force {
                let why = match &u.agent {
                    Agent::Error(hook) => format!(" and is in error (hook {hook:?})"),
                    _ => String::new(),
                };
                bail!("{unit} is already being removed{why}: `resolve` it to retry, or pass --force to remove it whatever its hooks say");
            }
            return Ok(Some(u.root()));
        }
        if let Agent::Error(hook) = &u.agent {
            if !force {
                bail!("{unit} is in error (hook {hook:?}): resolve it first, or pass --force");
            }
            u.agent = Agent::Idle;
            u.queue.pop_front();
        }
        events::begin_removal(m, unit);
        Ok(None)
    })?;
    if let Some(root) = forced {
        force_removal(ctx, unit, &root)?;
    }
    ctx.settle()
}

/// `remove-unit --force` of a unit already dying (stuck in error on a
/// removal hook, typically): as Juju's controller does with a forced
/// removal, the unit is removed from the model whatever its agent is
/// doing, no further hook runs on it, and its machine goes with it (its
/// processes are stopped). The departed hooks of the units it was related
/// to were queued when it began dying.
fn force_removal(ctx: &Ctx, unit: &str, root: &std::path::Path) -> Result<()> {
    if let Some(unit_dir) = root.parent() {
        machine::stop(unit_dir);
    }
    let n = procs::stop(&Target::unit(&ctx.dir.root, root), ctx.opts.kill_grace);
    ctx.dir.update(|m| {
        if let Some(u) = m.units.get_mut(unit) {
            // After its processes stopped, so nothing holds a mount busy.
            crate::sim::storage::release_all(u);
        }
        events::finish_removal(m, unit);
        Ok(())
    })?;
    ctx.progress
        .note(&format!("{unit} removed by force ({n} processes stopped)"));
    Ok(())
}

/// `detach-storage`: the unit runs `<name>-storage-detaching`; once that
/// succeeded the instance is released (see the scheduler's after-effects).
pub fn detach_storage(ctx: &Ctx, unit: &str, storage_id: &str) -> Result<u8> {
    ctx.dir.update(|m| {
        let u = m.unit_mut(unit)?;
        let Some(a) = u.storage.iter().find(|a| a.id == storage_id) else {
            bail!("{unit} has no storage {storage_id:?}");
        };
        let ev = crate::sim::model::Event::storage(
            crate::sim::model::HookKind::StorageDetaching,
            &a.name.clone(),
        );
        if u.queue.contains(&ev) {
            bail!("{storage_id} is already detaching");
        }
        u.queue.push_back(ev);
        Ok(())
    })?;
    ctx.settle()
}

/// Stops every workload of the model, then forgets its applications.
pub fn destroy(ctx: &Ctx) -> Result<u8> {
    let machines = machine::stop_all(&ctx.dir.root);
    let stopped = procs::stop(&Target::whole_model(&ctx.dir.root), ctx.opts.kill_grace);
    ctx.dir.update(|m| {
        // After the workloads stopped, so nothing holds their mounts busy.
        for u in m.units.values_mut() {
            crate::sim::storage::release_all(u);
        }
        m.destroyed = true;
        m.applications.clear();
        m.units.clear();
        m.relations.clear();
        m.contexts.clear();
        Ok(())
    })?;
    eprintln!(
        "destroyed model {} ({stopped} processes stopped{})",
        ctx.dir.root.display(),
        if machines > 0 {
            format!(", {machines} systemd machines")
        } else {
            String::new()
        }
    );
    Ok(0)
}
