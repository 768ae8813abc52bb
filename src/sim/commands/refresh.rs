//! `refresh`: replace an application's charm on every unit and run
//! upgrade-charm → config-changed → leader-settings-changed → start; and its
//! dry run, which changes nothing and asks the new charm itself.

use super::deploy::{add_peer_relation, store_charm};
use super::refusal;
use super::Ctx;
use crate::sim::charmdir;
use crate::sim::config;
use crate::sim::error::{bail, Context as _, Result};
use crate::sim::events;
use crate::sim::hookenv::Work;
use crate::sim::invoke;
use crate::sim::model::{Agent, Event, HookKind, Life};
use crate::sim::resources;
use crate::sim::runner::{Capture, Spawn};
use std::path::Path;

pub fn refresh(
    ctx: &Ctx,
    app: Option<&str>,
    path: &Path,
    force_units: bool,
    resource_args: &[String],
) -> Result<u8> {
    let source = std::fs::canonicalize(path).ctx(path.display())?;
    let meta = charmdir::read_charm(&source)?;
    let uploads = resources::parse_args(resource_args)?;
    let dir = &ctx.dir;
    let app = dir.update(|m| {
        let app = m.default_app(app)?;
        let units = m.units_of(&app);
        let in_error: Vec<&String> = units
            .iter()
            .filter(|u| matches!(m.units[*u].agent, Agent::Error(_)))
            .collect();
        if !in_error.is_empty() && !force_units {
            bail!("units in error: {in_error:?}; resolve them, or pass --force-units");
        }
        // Refused as Juju refuses, before anything changes.
        let provided = uploads.keys().cloned().collect();
        if let Err(reason) = refusal::check(m, &app, &meta, &provided) {
            let url = format!("local:{}-{}", meta.name, m.next_charm_rev + 1);
            bail!("cannot upgrade application {app:?} to charm {url:?}: {reason}");
        }
        let old_peers = m.app(&app)?.charm.peers.clone();
        let mut a = m.app(&app)?.clone();
        a.charm = meta.clone();
        config::retain_valid(&mut a);
        resources::store(dir, &mut a, &uploads)?;
        let stored = store_charm(m, dir, &mut a, &source)?;
        m.applications.insert(app.clone(), a);
        for unit in &units {
            charmdir::replace_tree(&stored, &m.units[unit].charm_dir())?;
        }
        // A peer endpoint the new charm no longer has goes with its data;
        // a new one gets a fresh relation (created, then joined).
        for id in refusal::stale_peers(m, &app, &meta) {
            events::forget_relation(m, id);
        }
        let new_peers: Vec<u32> = meta
            .peers
            .keys()
            .filter(|ep| !old_peers.contains_key(*ep))
            .map(|ep| add_peer_relation(m, &app, &meta, ep))
            .collect();
        let (errored, healthy): (Vec<String>, Vec<String>) = units
            .into_iter()
            .partition(|u| matches!(m.units[u].agent, Agent::Error(_)));
        events::refreshed(m, &healthy);
        for unit in errored {
            // A forced refresh out of an error state skips upgrade-charm and
            // config-changed: the failed hook runs again, on the new charm.
            let leader = m.is_leader(&unit);
            let u = m.unit_mut(&unit)?;
            u.agent = Agent::Idle;
            if !leader {
                u.queue
                    .push_back(Event::simple(HookKind::LeaderSettingsChanged));
            }
            u.queue.push_back(Event::simple(HookKind::Start));
        }
        for id in new_peers {
            events::relation_added(m, id);
        }
        Ok(app)
    })?;
    ctx.progress
        .note(&format!("refreshed {app} to {}", source.display()));
    ctx.settle()
}

/// Runs `<new charm>/dispatch upgrade-charm --dry-run [extra…]` on each unit
/// in an exec-like context whose changes are all discarded, and prints each
/// unit's output under a header. Fails if any unit's run did.
pub fn dry_run(ctx: &Ctx, app: Option<&str>, path: &Path, extra: &[String]) -> Result<u8> {
    let source = std::fs::canonicalize(path).ctx(path.display())?;
    let dispatch = source.join("dispatch");
    if !dispatch.is_file() {
        bail!("{}: no dispatch to run the dry run with", source.display());
    }
    let dir = &ctx.dir;
    let units = dir.read().and_then(|m| {
        let app = m.default_app(app)?;
        Ok(m.units_of(&app)
            .into_iter()
            .filter(|u| m.units[u].life == Life::Alive)
            .collect::<Vec<_>>())
    })?;
    let mut failed = Vec::new();
    for unit in &units {
        let opened = dir.update(|m| Ok(invoke::open(m, dir, unit, &Work::Exec, true)))?;
        let out = opened.unit_dir.join("dry-run-output.log");
        let mut args = vec!["upgrade-charm".to_string(), "--dry-run".to_string()];
        args.extend(extra.iter().cloned());
        let outcome = invoke::run_in(
            &opened,
            Spawn {
                program: dispatch.clone(),
                args,
                cwd: opened.charm_dir.clone(),
                env: opened.env.clone(),
                timeout: ctx.opts.hook_timeout,
                capture: Capture::Combined(out.clone()),
                still_running: None,
            },
        );
        dir.update(|m| Ok(invoke::close(m, &opened.context, false)))?;
        let outcome = outcome?;
        println!("=== {unit} (exit {}) ===", outcome.code);
        print!("{}", std::fs::read_to_string(&out).unwrap_or_default());
        if !outcome.ok() {
            failed.push(unit.clone());
        }
    }
    if failed.is_empty() {
        Ok(0)
    } else {
        eprintln!("jujusim: dry run failed on {}", failed.join(", "));
        Ok(1)
    }
}
