//! Running the model until it is quiescent, as Juju does: every unit with
//! queued work runs its next hook while other units run theirs, one hook at
//! a time per unit; commit or retry; bounded by `max_hooks`.
//!
//! Each running hook has its own thread, which runs it (retries included)
//! and changes the state through the model lock only before and after the
//! process runs. The controller thread starts ready units in an order drawn
//! from the seeded generator, then waits for any hook to end.
//!
//! Reproducible: which units start together, and in what order, from a
//! given state and seed (there is no start jitter: ready units start at
//! once). Not reproducible: which hook ends first, and so which units are
//! ready at the next start (the generator's later draws follow). `serial`
//! runs one hook at a time across the model, as before, and then the whole
//! run follows from the seed.
//!
//! A failed hook is run again up to `attempts` times; then the unit is in
//! error on that hook and runs nothing more until `resolve`.

use crate::sim::error::{Result, SimError};
use crate::sim::events;
use crate::sim::hookenv::Work;
use crate::sim::invoke::{self, Opened};
use crate::sim::model::{Agent, Event, HookKind, Life, Model, Status, Unit, INSTALLING};
use crate::sim::prng::Prng;
use crate::sim::procs::{self, Target};
use crate::sim::runner::{self, Capture, Outcome};
use crate::sim::store::{self, ModelDir};
use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct Options {
    pub max_hooks: usize,
    pub hook_timeout: Duration,
    pub attempts: u32,
    pub retry_delay: Duration,
    pub kill_grace: Duration,
    /// One hook at a time across the whole model (for debugging).
    pub serial: bool,
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
    let mut failure: Option<SimError> = None;
    // Units whose thread is running a hook or waiting to retry one.
    let mut busy: BTreeSet<String> = BTreeSet::new();
    let (done_tx, done_rx) = mpsc::channel::<(String, Result<usize>)>();
    std::thread::scope(|scope| {
        loop {
            let room = if failure.is_some() {
                0
            } else {
                room(opts, report.hooks, busy.len())
            };
            if room > 0 {
                match dir.update(|m| Ok(pick(m, dir, &busy, room))) {
                    Ok(started) => {
                        for (opened, ev) in started {
                            let unit = opened.unit.clone();
                            busy.insert(unit.clone());
                            let tx = done_tx.clone();
                            scope.spawn(move || {
                                // A panic must still report, or we would wait forever.
                                let runs = std::panic::catch_unwind(AssertUnwindSafe(|| {
                                    run_with_retries(dir, opts, progress, opened, ev)
                                }))
                                .unwrap_or_else(|_| {
                                    Err(SimError::new(format!("running {unit}'s hook panicked")))
                                });
                                let _ = tx.send((unit, runs));
                            });
                        }
                    }
                    Err(e) => failure = Some(e),
                }
            }
            if busy.is_empty() {
                break;
            }
            // We hold a sender ourselves, so this waits for a worker.
            let (unit, runs) = done_rx.recv().expect("a sender is alive");
            busy.remove(&unit);
            match runs {
                Ok(n) => report.hooks += n,
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    let m = dir.read()?;
    report.bound_hit = report.hooks >= opts.max_hooks && m.units.values().any(runnable);
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

/// How many hooks may start now: one at a time when serial, and never more
/// than `max_hooks` runs in all (running ones count as one each).
fn room(opts: &Options, runs: usize, running: usize) -> usize {
    let limit = if opts.serial { 1 } else { usize::MAX };
    let bound = opts.max_hooks.saturating_sub(runs + running);
    limit.saturating_sub(running).min(bound)
}

fn runnable(u: &Unit) -> bool {
    !u.queue.is_empty() && !matches!(u.agent, Agent::Error(_))
}

/// Units that may start their next hook now: work queued, not in error,
/// and not busy with a hook (running, or waiting to retry).
fn ready(m: &Model, busy: &BTreeSet<String>) -> Vec<String> {
    m.all_units()
        .into_iter()
        .filter(|name| {
            let u = &m.units[name];
            runnable(u) && !matches!(u.agent, Agent::Executing(_)) && !busy.contains(name)
        })
        .collect()
}

/// Starts up to `room` ready units, drawn one after another from the seeded
/// generator; drops hooks that no longer apply, and opens a context for
/// each unit's next one.
fn pick(
    m: &mut Model,
    dir: &ModelDir,
    busy: &BTreeSet<String>,
    room: usize,
) -> Vec<(Opened, Event)> {
    let mut started = Vec::new();
    while started.len() < room {
        // Units just started are executing, so they are not ready again.
        let candidates = ready(m, busy);
        if candidates.is_empty() {
            break;
        }
        let mut prng = Prng(m.prng);
        let unit = candidates[prng.below(candidates.len())].clone();
        m.prng = prng.0;
        let ev = m.units[&unit]
            .queue
            .front()
            .cloned()
            .expect("ready has a hook");
        if before(m, &unit, &ev) {
            started.push((start(m, dir, &unit, &ev), ev));
        } else {
            m.units.get_mut(&unit).expect("picked").queue.pop_front();
        }
    }
    started
}

fn start(m: &mut Model, dir: &ModelDir, unit: &str, ev: &Event) -> Opened {
    let u = m.units.get_mut(unit).expect("unit");
    u.agent = Agent::Executing(ev.name.clone());
    if ev.kind == HookKind::Install {
        set_status(u, "maintenance", INSTALLING);
    }
    invoke::open(m, dir, unit, &Work::Hook(ev.clone()), false)
}

fn set_status(u: &mut Unit, current: &str, message: &str) {
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

/// One unit's hook, in the unit's own thread: runs it, commits or retries
/// (the wait between runs stalls only this unit), up to `attempts` runs.
/// Returns how many runs it made.
fn run_with_retries(
    dir: &ModelDir,
    opts: &Options,
    progress: &Progress,
    mut opened: Opened,
    ev: Event,
) -> Result<usize> {
    let unit = opened.unit.clone();
    let mut runs = 0;
    for attempt in 1..=opts.attempts.max(1) {
        runs += 1;
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
            if let Some(unit_dir) = root.parent() {
                if crate::sim::machine::stop(unit_dir) {
                    progress.note(&format!("{unit}: systemd machine stopped"));
                }
            }
            let n = procs::stop(&Target::unit(&dir.root, &root), opts.kill_grace);
            progress.note(&format!("{unit} removed ({n} processes stopped)"));
        }
        if outcome.ok() || last {
            return Ok(runs);
        }
        std::thread::sleep(opts.retry_delay);
        let reopened = dir.update(|m| {
            let still_next = m.units.get(&unit).and_then(|u| u.queue.front()) == Some(&ev);
            Ok((still_next && before(m, &unit, &ev)).then(|| start(m, dir, &unit, &ev)))
        })?;
        match reopened {
            Some(o) => opened = o,
            None => return Ok(runs),
        }
    }
    Ok(runs)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::Application;

    fn opts(serial: bool, max_hooks: usize) -> Options {
        Options {
            max_hooks,
            hook_timeout: Duration::from_secs(1),
            attempts: 1,
            retry_delay: Duration::ZERO,
            kill_grace: Duration::ZERO,
            serial,
        }
    }

    /// Application `a` with `n` units, each with update-status queued.
    fn model(n: u32, prng: u64) -> Model {
        let mut m = Model {
            prng,
            ..Default::default()
        };
        m.applications.insert(
            "a".into(),
            Application {
                name: "a".into(),
                ..Default::default()
            },
        );
        for i in 0..n {
            let name = format!("a/{i}");
            let mut u = Unit {
                name: name.clone(),
                app: "a".into(),
                number: i,
                dir: format!("/nowhere/{i}").into(),
                ..Default::default()
            };
            u.queue.push_back(Event::simple(HookKind::UpdateStatus));
            m.units.insert(name, u);
        }
        m
    }

    fn picked(m: &mut Model, busy: &BTreeSet<String>, room: usize) -> Vec<String> {
        let dir = ModelDir {
            root: "/nowhere".into(),
        };
        pick(m, &dir, busy, room)
            .into_iter()
            .map(|(o, _)| o.unit)
            .collect()
    }

    #[test]
    fn room_is_one_when_serial_and_never_past_the_bound() {
        assert_eq!(room(&opts(true, 100), 0, 0), 1);
        assert_eq!(room(&opts(true, 100), 5, 1), 0);
        assert_eq!(room(&opts(false, 100), 5, 3), 92);
        assert_eq!(room(&opts(false, 10), 8, 2), 0);
        assert_eq!(room(&opts(false, 10), 12, 0), 0);
    }

    #[test]
    fn every_ready_unit_starts_and_is_executing() {
        let mut m = model(4, 9);
        let started = picked(&mut m, &BTreeSet::new(), usize::MAX);
        let mut sorted = started.clone();
        sorted.sort();
        assert_eq!(sorted, ["a/0", "a/1", "a/2", "a/3"]);
        for u in m.units.values() {
            assert_eq!(u.agent, Agent::Executing("update-status".into()));
        }
        assert_eq!(m.contexts.len(), 4);
        // Running units are not ready again, though their hook is queued.
        assert!(picked(&mut m, &BTreeSet::new(), usize::MAX).is_empty());
    }

    #[test]
    fn busy_in_error_and_idle_units_are_not_ready() {
        let mut m = model(4, 1);
        m.units.get_mut("a/1").unwrap().agent = Agent::Error("install".into());
        m.units.get_mut("a/2").unwrap().queue.clear();
        let busy = BTreeSet::from(["a/3".to_string()]);
        assert_eq!(ready(&m, &busy), ["a/0"]);
        assert_eq!(picked(&mut m, &busy, usize::MAX), ["a/0"]);
    }

    #[test]
    fn a_hook_that_no_longer_applies_is_dropped_and_the_next_starts() {
        let mut m = model(1, 3);
        let gone = Event::relation(HookKind::RelationChanged, "peer", 99, "a");
        m.units.get_mut("a/0").unwrap().queue.push_front(gone);
        let dir = ModelDir {
            root: "/nowhere".into(),
        };
        let started = pick(&mut m, &dir, &BTreeSet::new(), usize::MAX);
        assert_eq!(started.len(), 1);
        assert_eq!(started[0].1.name, "update-status");
        assert_eq!(m.units["a/0"].queue.len(), 1);
    }

    #[test]
    fn the_generator_fixes_the_start_order() {
        let order = |prng| picked(&mut model(6, prng), &BTreeSet::new(), usize::MAX);
        assert_eq!(order(42), order(42));
        let orders: BTreeSet<Vec<String>> = (0..8).map(order).collect();
        assert!(orders.len() > 1, "{orders:?}");
        // Serial: one at a time, the first of the same sequence.
        let first = picked(&mut model(6, 42), &BTreeSet::new(), 1);
        assert_eq!(first, order(42)[..1]);
    }
}
