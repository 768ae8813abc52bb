//! `elect`, `reboot`, `integrate`, `update-status`, `resolve`.

use super::Ctx;
use crate::sim::error::{bail, Result};
use crate::sim::events;
use crate::sim::machine;
use crate::sim::model::{Agent, Endpoint, Event, HookKind, Life, Model, Relation};
use crate::sim::procs::{self, Target};

pub fn elect(ctx: &Ctx, unit: &str) -> Result<u8> {
    ctx.dir.update(|m| {
        if m.unit(unit)?.life != Life::Alive {
            bail!("{unit} is dying");
        }
        if m.is_leader(unit) {
            ctx.progress.note(&format!("{unit} already leads"));
            return Ok(());
        }
        events::elect(m, unit);
        Ok(())
    })?;
    ctx.settle()
}

/// The machine restarts: the unit's processes die with it, then `start`.
/// A systemd machine's PID 1 is killed (and everything in it) and a new one
/// boots with the same binds: its enabled units start before `start` runs.
/// `volumes_missing`: while it is down its loop devices are released, so
/// it boots without its block storage.
pub fn reboot(ctx: &Ctx, unit: &str, volumes_missing: bool) -> Result<u8> {
    let u = ctx.dir.read()?.unit(unit)?.clone();
    if volumes_missing && !u.storage.iter().any(|a| a.loop_device.is_some()) {
        bail!("{unit} has no volume on a loop device to leave off its machine");
    }
    let root = u.root();
    let was = u.machine_mode == machine::SYSTEMD_MODE && machine::stop(&u.dir);
    let n = procs::stop(&Target::unit(&ctx.dir.root, &root), ctx.opts.kill_grace);
    ctx.progress
        .note(&format!("{unit} rebooted ({n} processes stopped)"));
    if volumes_missing {
        // After its processes stopped, so nothing holds a mount busy.
        let notes = ctx.dir.update(|m| {
            let u = m.unit_mut(unit)?;
            let dir = u.dir.clone();
            let mut notes = Vec::new();
            for a in u.storage.iter_mut().filter(|a| a.loop_device.is_some()) {
                notes.extend(crate::sim::storage::unplug(a, &dir)?);
            }
            Ok(notes)
        })?;
        for note in notes {
            ctx.progress
                .note(&format!("{unit}: {note} (volume missing)"));
        }
    }
    if u.machine_mode == machine::SYSTEMD_MODE {
        let binds = machine::binds_of(ctx.dir.read()?.app(&u.app)?, &u);
        let pid = match machine::boot(&u.dir, &binds) {
            Ok(pid) => pid,
            Err(machine::BootError::Unavailable(why) | machine::BootError::Failed(why)) => {
                bail!("{unit}: its systemd machine did not boot again: {why}")
            }
        };
        ctx.progress.note(&format!(
            "{unit}: systemd machine {} (pid {pid})",
            if was { "rebooted" } else { "booted" }
        ));
    }
    ctx.dir.update(|m| {
        m.unit_mut(unit)?
            .queue
            .push_back(Event::simple(HookKind::Start));
        Ok(())
    })?;
    ctx.settle()
}

/// The volumes `reboot --volumes-missing` left off come back (new loop
/// devices); no hook runs, as a late disk appearing on a VM runs none.
pub fn plug_volumes(ctx: &Ctx, unit: &str) -> Result<u8> {
    let notes = ctx.dir.update(|m| {
        let u = m.unit_mut(unit)?;
        let mut notes = Vec::new();
        for a in u.storage.iter_mut().filter(|a| a.unplugged) {
            notes.push(crate::sim::storage::plug(a)?);
        }
        if notes.is_empty() {
            bail!("{unit} has no missing volume to plug (see `reboot --volumes-missing`)");
        }
        Ok(notes)
    })?;
    for note in notes {
        ctx.progress.note(&format!("{unit}: {note}"));
    }
    Ok(0)
}

pub fn update_status(ctx: &Ctx, unit: Option<&str>) -> Result<u8> {
    ctx.dir.update(|m| {
        let units = match unit {
            Some(u) => vec![m.unit(u)?.name.clone()],
            None => m.all_units(),
        };
        for u in units {
            events::enqueue(m.unit_mut(&u)?, Event::simple(HookKind::UpdateStatus));
        }
        Ok(())
    })?;
    ctx.settle()
}

pub fn resolve(ctx: &Ctx, unit: &str, no_retry: bool) -> Result<u8> {
    ctx.dir.update(|m| {
        let u = m.unit_mut(unit)?;
        if !matches!(u.agent, Agent::Error(_)) {
            bail!("{unit} is not in an error state");
        }
        u.agent = Agent::Idle;
        if no_retry {
            u.queue.pop_front();
        }
        Ok(())
    })?;
    ctx.settle()
}

/// `APP:EP` or `APP`; the endpoint is found when only one fits.
fn split_endpoint(raw: &str) -> (&str, Option<&str>) {
    match raw.split_once(':') {
        Some((a, e)) => (a, Some(e)),
        None => (raw, None),
    }
}

/// (endpoint, interface, role) of every non-peer endpoint of an app.
fn endpoints_of(m: &Model, app: &str) -> Result<Vec<(String, String, &'static str)>> {
    let charm = &m.app(app)?.charm;
    let provides = charm
        .provides
        .iter()
        .map(|(e, i)| (e.clone(), i.clone(), "provider"));
    let requires = charm
        .requires
        .iter()
        .map(|(e, i)| (e.clone(), i.clone(), "requirer"));
    Ok(provides.chain(requires).collect())
}

pub fn integrate(ctx: &Ctx, a: &str, b: &str) -> Result<u8> {
    ctx.dir.update(|m| {
        let (app_a, ep_a) = split_endpoint(a);
        let (app_b, ep_b) = split_endpoint(b);
        if app_a == app_b {
            bail!("cannot relate {app_a} to itself (peer relations come from metadata.yaml)");
        }
        let (eas, ebs) = (endpoints_of(m, app_a)?, endpoints_of(m, app_b)?);
        let mut fits = Vec::new();
        for (na, ia, ra) in &eas {
            for (nb, ib, rb) in &ebs {
                let named = ep_a.is_none_or(|e| e == na) && ep_b.is_none_or(|e| e == nb);
                if named && ia == ib && ra != rb {
                    fits.push((Endpoint { app: app_a.into(), name: na.clone(), interface: ia.clone(), role: (*ra).into(), ..Default::default() },
                               Endpoint { app: app_b.into(), name: nb.clone(), interface: ib.clone(), role: (*rb).into(), ..Default::default() }));
                }
            }
        }
        let (mut ea, mut eb) = match fits.len() {
            1 => fits.remove(0),
            0 => bail!("no relation between {a} and {b}: endpoints need the same interface, one providing and one requiring"),
            _ => bail!("ambiguous relation between {a} and {b}: name the endpoints (APP:ENDPOINT)"),
        };
        let exists = m.relations.values().any(|r| {
            r.endpoints.iter().any(|e| e.app == ea.app && e.name == ea.name)
                && r.endpoints.iter().any(|e| e.app == eb.app && e.name == eb.name)
        });
        if exists {
            bail!("{}:{} and {}:{} are already related", ea.app, ea.name, eb.app, eb.name);
        }
        // Juju makes the whole relation container-scoped when either side is.
        let container = [&ea, &eb].iter().any(|e| {
            m.applications[&e.app].charm.endpoint_specs.get(&e.name).is_some_and(|s| s.scope == "container")
        });
        let scope = if container { "container" } else { "global" };
        (ea.scope, eb.scope) = (scope.into(), scope.into());
        let id = m.next_relation;
        m.next_relation += 1;
        ctx.progress.note(&format!("relation {id}: {}:{} ↔ {}:{}", ea.app, ea.name, eb.app, eb.name));
        m.relations.insert(id, Relation { id, endpoints: vec![ea, eb], ..Default::default() });
        events::relation_added(m, id);
        Ok(())
    })?;
    ctx.settle()
}
