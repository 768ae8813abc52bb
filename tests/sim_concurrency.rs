//! jujusim runs the hooks of different units at the same time, one hook at
//! a time per unit, as Juju does; `--serial` runs one hook at a time across
//! the model. The simconc charm records when each hook starts and ends
//! (`date +%s%N`, one clock for all units); the tests check ordering facts
//! between those instants, never durations.

mod sim_support;
use sim_support::{text, Sim};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn charm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/simconc")
}

/// One hook run as the charm saw it: unit, hook, start and end (ns).
#[derive(Debug, Clone)]
struct Run {
    unit: String,
    hook: String,
    start: u128,
    end: u128,
}

impl Run {
    fn overlaps(&self, other: &Run) -> bool {
        self.start < other.end && other.start < self.end
    }
}

struct Model {
    sim: Sim,
    shared: PathBuf,
}

impl Model {
    fn new() -> Model {
        let sim = Sim::new();
        let shared = sim.path("shared");
        std::fs::create_dir_all(&shared).unwrap();
        Model { sim, shared }
    }

    /// `jujusim ARGS` with our own options (Sim::command fixes some).
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_jujusim"))
            .arg("--model")
            .arg(&self.sim.model)
            .args(["--address-range", self.sim.range()])
            .args(["--kill-timeout", "5"])
            .args(args)
            .stdin(Stdio::null())
            .env_remove("JUJUSIM_SERIAL")
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "jujusim {args:?} failed: {}\n{}",
            out.status,
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// Deploys `n` units; `global` go before the command (--serial, --seed).
    fn deploy(&self, global: &[&str], n: u32, overlap_wait: u32) {
        let env = format!("SIMCONC_SHARED={}", self.shared.display());
        let wait = format!("overlap-wait={overlap_wait}");
        let (n, charm) = (n.to_string(), charm());
        let mut args = global.to_vec();
        args.extend([
            "deploy",
            charm.to_str().unwrap(),
            "-n",
            &n,
            "--env",
            &env,
            "--config",
            &wait,
        ]);
        self.ok(&args);
    }

    fn units(&self) -> Vec<String> {
        let st = self.sim.status();
        st["applications"]["simconc"]["units"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    /// A unit's runs in the order it recorded them; panics unless every
    /// start is followed by its own end before the next start.
    fn runs_of(&self, unit: &str) -> Vec<Run> {
        let path = self.sim.root(unit).join("intervals");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
        assert!(
            lines.len().is_multiple_of(2),
            "{unit}: unfinished hook in\n{text}"
        );
        lines
            .chunks(2)
            .map(|pair| {
                let (s, e) = (&pair[0], &pair[1]);
                assert!(
                    s[0] == "start" && e[0] == "end" && s[1] == e[1],
                    "{unit}: two hooks at once:\n{text}"
                );
                Run {
                    unit: unit.into(),
                    hook: s[1].into(),
                    start: s[2].parse().unwrap(),
                    end: e[2].parse().unwrap(),
                }
            })
            .collect()
    }

    fn all_runs(&self) -> Vec<Run> {
        self.units().iter().flat_map(|u| self.runs_of(u)).collect()
    }

    fn file(&self, unit: &str, name: &str, content: &str) {
        std::fs::write(self.sim.root(unit).join(name), content).unwrap();
    }
}

/// Pairs of runs of different units that overlap in time.
fn overlapping(runs: &[Run]) -> Vec<(Run, Run)> {
    let mut out = Vec::new();
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if a.unit != b.unit && a.overlaps(b) {
                out.push((a.clone(), b.clone()));
            }
        }
    }
    out
}

#[test]
fn hooks_of_different_units_overlap() {
    let m = Model::new();
    // The first hook of each unit waits for another unit's first hook to
    // start: only a concurrent controller lets both go on.
    m.deploy(&[], 3, 30);
    let runs = m.all_runs();
    assert!(runs.len() >= 3 * 6, "{runs:?}");
    let pairs = overlapping(&runs);
    assert!(!pairs.is_empty(), "no two units ran at once: {runs:?}");
    // And a command returns only once the model is quiescent.
    let st = m.sim.status();
    for (name, u) in st["applications"]["simconc"]["units"].as_object().unwrap() {
        assert_eq!(u["juju-status"]["current"], "idle", "{name}: {u}");
    }
}

#[test]
fn a_unit_never_runs_two_hooks_at_once() {
    let m = Model::new();
    m.deploy(&[], 3, 0);
    // More work on every unit, queued while the others run: a config
    // change, the leader's leader-set, a new peer joining everyone.
    m.ok(&["config", "simconc", "overlap-wait=1"]);
    m.ok(&["add-unit", "simconc", "-n", "2"]);
    m.ok(&["update-status"]);
    for unit in m.units() {
        // runs_of checks the start/end pairs alternate in the unit's own file.
        let runs = m.runs_of(&unit);
        assert!(runs.len() >= 8, "{unit}: {runs:?}");
        for w in runs.windows(2) {
            assert!(
                w[0].end <= w[1].start,
                "{unit}: {:?} and {:?} overlap",
                w[0],
                w[1]
            );
        }
    }
    let hooks: Vec<String> = m.runs_of("simconc/0").into_iter().map(|r| r.hook).collect();
    assert!(
        hooks.contains(&"cluster-relation-joined".to_string()),
        "{hooks:?}"
    );
}

#[test]
fn serial_never_overlaps_anything() {
    let m = Model::new();
    // The same waiting charm: under --serial the first hook waits in vain.
    m.deploy(&["--serial"], 3, 2);
    m.ok(&["--serial", "update-status"]);
    let runs = m.all_runs();
    assert!(runs.len() >= 3 * 7, "{runs:?}");
    let pairs = overlapping(&runs);
    assert!(pairs.is_empty(), "overlapping under --serial: {pairs:?}");
    // JUJUSIM_SERIAL=1 is the same switch.
    let out = Command::new(env!("CARGO_BIN_EXE_jujusim"))
        .arg("--model")
        .arg(&m.sim.model)
        .args(["update-status"])
        .env("JUJUSIM_SERIAL", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pairs = overlapping(&m.all_runs());
    assert!(
        pairs.is_empty(),
        "overlapping with JUJUSIM_SERIAL=1: {pairs:?}"
    );
}

#[test]
fn a_unit_retrying_a_failed_hook_does_not_stop_the_others() {
    let m = Model::new();
    m.deploy(&[], 3, 0);
    // simconc/0 fails update-status once and retries it 10 s later; the
    // others start theirs only after that failure, so they can only run
    // in the gap if the retrying unit does not hold up the model.
    m.file("simconc/0", "fail-update-status", "");
    let failed = m.sim.root("simconc/0").join("failed-update-status");
    for u in ["simconc/1", "simconc/2"] {
        m.file(u, "await-update-status", failed.to_str().unwrap());
    }
    let before: Vec<usize> = m.units().iter().map(|u| m.runs_of(u).len()).collect();
    m.ok(&[
        "--retry-delay-ms",
        "10000",
        "--attempts",
        "2",
        "update-status",
    ]);
    let new = |i: usize| m.runs_of(&format!("simconc/{i}"))[before[i]..].to_vec();
    let leader = new(0);
    assert_eq!(leader.len(), 2, "{leader:?}");
    let (first, retry) = (&leader[0], &leader[1]);
    for i in [1, 2] {
        let runs = new(i);
        assert_eq!(runs.len(), 1, "{runs:?}");
        let r = &runs[0];
        assert!(first.end < r.start, "{r:?} started before {first:?} failed");
        assert!(
            r.end < retry.start,
            "{r:?} waited for simconc/0's retry {retry:?}"
        );
    }
    let st = m.sim.status();
    let u0 = &st["applications"]["simconc"]["units"]["simconc/0"];
    assert_eq!(u0["juju-status"]["current"], "idle", "{u0}");
}

/// The order in which `update-status`, queued on every unit of a quiescent
/// model, started: the context ids count up as contexts open.
fn start_order(seed: &str) -> Vec<String> {
    let m = Model::new();
    m.deploy(&[], 5, 0);
    m.ok(&["--seed", seed, "update-status"]);
    let mut started: Vec<(u64, String)> = m
        .sim
        .hook_log()
        .iter()
        .filter(|r| r["hook"] == "update-status")
        .map(|r| {
            let ctx = r["context"].as_str().unwrap();
            let n = ctx.rsplit('-').next().unwrap().parse().unwrap();
            (n, r["unit"].as_str().unwrap().to_string())
        })
        .collect();
    started.sort();
    started.into_iter().map(|(_, u)| u).collect()
}

#[test]
fn the_seed_fixes_the_order_in_which_ready_units_start() {
    let a = start_order("7");
    assert_eq!(a.len(), 5, "{a:?}");
    assert_eq!(a, start_order("7"));
    assert_ne!(a, start_order("8"), "two seeds gave the same start order");
}
