//! Running the model until it is quiescent: pick a unit with queued hooks
//! (seeded, reproducible), run its next hook, commit or retry, repeat — one
//! hook at a time, bounded by `max_hooks`.
//!
//! A failed hook is run again up to `attempts` times; then the unit is in
//! error on that hook and runs nothing more until `resolve`.

use crate::sim::error::Result;
use crate::sim::events;
use crate::sim::hookenv::Work;
use crate::sim::invoke::{self, Opened};
use crate::sim::model::{Agent, Event, HookKind, Life, Model, Status, INSTALLING};
use crate::sim::prng::Prng;
use crate::sim::procs::{self, Target};
use crate::sim::runner::{self, Capture, Outcome};
use crate::sim::store::{self, ModelDir};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Options {
    pub max_hooks: usize,
    pub hook_timeout: Duration,
    pub attempts: u32,
    pub retry_delay: Duration,
    pub kill_grace: Duration,
}

#[derive(Debug, Default)]
pub struct Report {
    pub hooks: usize,
    /// Hooks were still queued when `max_hooks` was reached.
    pub bound_hit: bool,
    /// (unit, hook) of every unit left in error.
    pub errors: Vec<(String, String)>,
    pub pending: Vec<(String, Vec<String>)>,
}

/// Writes one progress line per hook to stderr.
#[derive(Clone, Copy)]
pub struct Progress {
    start: Instant,
    enabled: bool,
}

impl Progress {
    pub fn new(enabled: bool) -> Progress {
        Progress {
            start: Instant::now(),
            enabled,
        }
    }

    pub fn line(&self, unit: &str, what: &str, result: &str, took: Duration) {
        if self.enabled {
            eprintln!(
                "[{:8.2}s] {unit:<14} {what:<36} {result} ({} ms)",
                self.start.elapsed().as_secs_f64(),
                took.as_millis()
            );
        }
    }

    /// A note every few seconds while a long hook runs.
    pub fn still_running(&self, unit: &str, what: &str) -> Option<Box<dyn Fn(Duration)>> {
        let (me, label) = (*self, format!("{unit:<14} {what:<36}"));
        self.enabled.then(|| -> Box<dyn Fn(Duration)> {
            Box::new(move |took| me.note(&format!("{label} still running ({} s)", took.as_secs())))
        })
    }

    pub fn note(&self, text: &str) {
        if self.enabled {
            eprintln!("[{:8.2}s] {text}", self.start.elapsed().as_secs_f64());
        }
    }
}

pub fn run(dir: &ModelDir, opts: &Options, progress: &Progress) -> Result<Report> {
    dir.update(|m| {
        // A controller that died mid-hook leaves a unit "executing".
        for u in m.units.values_mut() {
            if matches!(u.agent, Agent::Executing(_)) {
                u.agent = Agent::Idle;
            }
        }
        m.contexts.clear();
        Ok(())
    })?;
    let mut report = Report::default();
    loop {
        if report.hooks >= opts.max_hooks {
            report.bound_hit = dir.read()?.units.values().any(runnable);
            break;
        }
        let Some((opened, ev)) = dir.update(|m| Ok(pick(m, dir)))? else {
            break;
        };
        run_with_retries(dir, opts, progress, opened, ev, &mut report)?;
    }
    let m = dir.read()?;
    for name in m.all_units() {
        let u = &m.units[&name];
        if let Agent::Error(hook) = &u.agent {
            report.errors.push((name.clone(), hook.clone()));
        }
        if !u.queue.is_empty() {
            report.pending.push((
                name.clone(),
                u.queue.iter().map(|e| e.name.clone()).collect(),
            ));
        }
    }
    Ok(report)
}

fn runnable(u: &crate::sim::model::Unit) -> bool {
    !u.queue.is_empty() && !matches!(u.agent, Agent::Error(_))
}

/// Chooses the next unit at random among those with work, drops hooks that
/// no longer apply, and opens a context for the next one.
fn pick(m: &mut Model, dir: &ModelDir) -> Option<(Opened, Event)> {
    loop {
        let candidates: Vec<String> = m
            .all_units()
            .into_iter()
            .filter(|u| runnable(&m.units[u]))
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let mut prng = Prng(m.prng);
        let unit = candidates[prng.below(candidates.len())].clone();
        m.prng = prng.0;
        let ev = m.units[&unit]
            .queue
            .front()
            .cloned()
            .expect("runnable has a hook");
        if before(m, &unit, &ev) {
            return Some((start(m, dir, &unit, &ev), ev));
        }
        m.units.get_mut(&unit).expect("picked").queue.pop_front();
    }
}

fn start(m: &mut Model, dir: &ModelDir, unit: &str, ev: &Event) -> Opened {
    let u = m.units.get_mut(unit).expect("unit");
    u.agent = Agent::Executing(ev.name.clone());
    if ev.kind == HookKind::Install {
        set_status(u, "maintenance", INSTALLING);
    }
    invoke::open(m, dir, unit, &Work::Hook(ev.clone()), false)
}

fn set_status(u: &mut crate::sim::model::Unit, current: &str, message: &str) {
    let s = Status {
        current: current.into(),
        message: message.into(),
        since: store::now_rfc3339(),
    };
    u.set_workload(s);
}

/// What changes just before a hook runs; false when the hook no longer
/// applies (its relation or remote unit is gone) and is dropped.
fn before(m: &mut Model, unit: &str, ev: &Event) -> bool {
    let Some(rel_id) = ev.relation else {
        return true;
    };
    let Some(rel) = m.relations.get_mut(&rel_id) else {
        return false;
    };
    match ev.kind {
        HookKind::RelationCreated => {
            rel.members.entry(unit.to_string()).or_default();
            true
        }
        HookKind::RelationJoined => {
            let remote = ev.remote_unit.clone().unwrap_or_default();
            let remote_ok = rel.members.get(&remote).is_some_and(|r| r.in_scope)
                && m.units.get(&remote).is_some_and(|u| u.life == Life::Alive);
            match rel.members.get_mut(unit) {
                Some(me) if remote_ok => {
                    me.joined.insert(remote);
                    true
                }
                _ => false,
            }
        }
        HookKind::RelationChanged => match (rel.members.get(unit), &ev.remote_unit) {
            (Some(me), Some(remote)) => me.joined.contains(remote),
            (Some(_), None) => true,
            (None, _) => false,
        },
        HookKind::RelationDeparted => match rel.members.get_mut(unit) {
            Some(me) => {
                if let Some(remote) = &ev.remote_unit {
                    me.joined.remove(remote);
                }
                true
            }
            None => false,
        },
        _ => rel.members.contains_key(unit),
    }
}

/// What changes after a hook succeeded. Returns a unit root whose processes
/// must be stopped (the unit was removed).
fn after(m: &mut Model, unit: &str, ev: &Event) -> Option<PathBuf> {
    match ev.kind {
        HookKind::RelationCreated => {
            events::enter_scope(m, ev.relation.expect("relation hook"), unit);
        }
        HookKind::RelationBroken => {
            if let Some(r) = ev.relation.and_then(|id| m.relations.get_mut(&id)) {
                r.members.remove(unit);
            }
        }
        HookKind::Start => {
            let u = m.units.get_mut(unit).expect("unit");
            if u.workload.message == INSTALLING {
                set_status(u, "unknown", "");
            }
        }
        HookKind::StorageDetaching => {
            if let (Some(u), Some(name)) = (m.units.get_mut(unit), &ev.storage) {
                crate::sim::storage::release_named(u, name);
            }
        }
        HookKind::Remove => {
            let root = m.units[unit].root();
            if let Some(u) = m.units.get_mut(unit) {
                crate::sim::storage::release_all(u);
            }
            events::finish_removal(m, unit);
            return Some(root);
        }
        _ => {}
    }
    None
}

fn run_with_retries(
    dir: &ModelDir,
    opts: &Options,
    progress: &Progress,
    mut opened: Opened,
    ev: Event,
    report: &mut Report,
) -> Result<()> {
    let unit = opened.unit.clone();
    for attempt in 1..=opts.attempts.max(1) {
        report.hooks += 1;
        let out_file = invoke::output_file(&opened);
        let outcome = invoke::run_charm(
            &opened,
            &Work::Hook(ev.clone()),
            opts.hook_timeout,
            Capture::Combined(out_file.clone()),
            progress.still_running(&unit, &ev.name),
        )?;
        let last = attempt >= opts.attempts.max(1);
        let (calls, removed) = dir.update(|m| Ok(finish(m, &opened, &ev, &outcome, last)))?;
        log_hook(
            dir,
            &opened,
            &ev,
            attempt,
            &outcome,
            calls,
            &runner::tail(&out_file, 2000),
        )?;
        let result = match (outcome.ok(), outcome.timed_out, last) {
            (true, _, _) => "ok".to_string(),
            (false, true, false) => format!("timed out, retrying ({attempt}/{})", opts.attempts),
            (false, false, false) => format!(
                "exit {}, retrying ({attempt}/{})",
                outcome.code, opts.attempts
            ),
            (false, _, true) => format!("exit {}: unit in error", outcome.code),
        };
        progress.line(&unit, &ev.name, &result, outcome.duration);
        if let Some(root) = removed {
            let n = procs::stop(&Target::unit(&dir.root, &root), opts.kill_grace);
            progress.note(&format!("{unit} removed ({n} processes stopped)"));
        }
        if outcome.ok() || last {
            return Ok(());
        }
        std::thread::sleep(opts.retry_delay);
        let reopened = dir.update(|m| {
            let still_next = m.units.get(&unit).and_then(|u| u.queue.front()) == Some(&ev);
            Ok((still_next && before(m, &unit, &ev)).then(|| start(m, dir, &unit, &ev)))
        })?;
        match reopened {
            Some(o) => opened = o,
            None => return Ok(()),
        }
    }
    Ok(())
}

/// Closes the hook's context: on success commit, run the after-effects and
/// pop the hook; on the last failed attempt put the unit in error.
fn finish(
    m: &mut Model,
    opened: &Opened,
    ev: &Event,
    outcome: &Outcome,
    last: bool,
) -> (u32, Option<PathBuf>) {
    let ok = outcome.ok();
    let calls = invoke::close(m, &opened.context, ok)
        .map(|c| c.tool_calls)
        .unwrap_or(0);
    let unit = &opened.unit;
    if !ok {
        if let Some(u) = m.units.get_mut(unit) {
            u.agent = if last {
                Agent::Error(ev.name.clone())
            } else {
                Agent::Idle
            };
        }
        return (calls, None);
    }
    let removed = after(m, unit, ev);
    if let Some(u) = m.units.get_mut(unit) {
        if u.queue.front() == Some(ev) {
            u.queue.pop_front();
        }
        u.agent = Agent::Idle;
    }
    (calls, removed)
}

fn log_hook(
    dir: &ModelDir,
    opened: &Opened,
    ev: &Event,
    attempt: u32,
    outcome: &Outcome,
    calls: u32,
    tail: &str,
) -> Result<()> {
    let record = serde_json::json!({
        "time": store::now_rfc3339(),
        "unit": opened.unit,
        "hook": ev.name,
        "context": opened.context,
        "relation": ev.relation,
        "remote_unit": ev.remote_unit,
        "departing_unit": ev.departing_unit,
        "attempt": attempt,
        "exit": outcome.code,
        "timed_out": outcome.timed_out,
        "duration_ms": outcome.duration.as_millis() as u64,
        "tool_calls": calls,
        "output": tail,
    });
    store::append_jsonl(&dir.hook_log(), &record)
}
