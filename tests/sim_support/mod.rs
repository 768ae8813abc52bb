//! Shared by the tests/sim_*.rs suites: a fresh model in a temp dir, the
//! built `jujusim` binary, and readers for what the simtest charm records.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

#[path = "../address_support/mod.rs"]
mod address_support;

pub struct Sim {
    _tmp: tempfile::TempDir,
    pub model: PathBuf,
    /// This model's own loopback /24, as jujusim's `--address-range`.
    range: address_support::Range,
}

pub fn charm() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/simtest")
}

impl Sim {
    pub fn new() -> Sim {
        let tmp = tempfile::tempdir().unwrap();
        let model = tmp.path().join("model");
        Sim {
            _tmp: tmp,
            model,
            range: address_support::take(),
        }
    }

    /// The model's loopback /24 (`127.X.Y.0/24`).
    pub fn range(&self) -> &str {
        &self.range.cidr
    }

    /// A temp path beside the model, for test files.
    pub fn path(&self, name: &str) -> PathBuf {
        self._tmp.path().join(name)
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_jujusim"));
        c.arg("--model")
            .arg(&self.model)
            .args(["--address-range", self.range()])
            .args(["--retry-delay-ms", "0", "--kill-timeout", "5"]);
        c.args(args).stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Runs a command that must succeed; returns its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "jujusim {args:?} failed: {}\n{}",
            out.status,
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    pub fn deploy(&self, n: u32) {
        self.ok(&["deploy", charm().to_str().unwrap(), "-n", &n.to_string()]);
    }

    pub fn status(&self) -> Value {
        serde_json::from_str(&self.ok(&["status", "--format=json"])).unwrap()
    }

    pub fn unit_dir(&self, unit: &str) -> PathBuf {
        self.model.join("units").join(unit.replace('/', "-"))
    }

    pub fn root(&self, unit: &str) -> PathBuf {
        self.unit_dir(unit).join("root")
    }

    /// The hooks the charm saw on a unit, in order (names only).
    pub fn hooks(&self, unit: &str) -> Vec<String> {
        self.hook_lines(unit)
            .iter()
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect()
    }

    /// Full lines: `<hook> remote=… app=… rel=… departing=…`.
    pub fn hook_lines(&self, unit: &str) -> Vec<String> {
        std::fs::read_to_string(self.root(unit).join("hooks.log"))
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    /// Makes the charm source `script` in `hook` on `unit`.
    pub fn on(&self, unit: &str, hook: &str, script: &str) {
        std::fs::write(self.root(unit).join(format!("on-{hook}")), script).unwrap();
    }

    pub fn clear_on(&self, unit: &str, hook: &str) {
        let _ = std::fs::remove_file(self.root(unit).join(format!("on-{hook}")));
    }

    /// `exec UNIT -- bash -c SCRIPT`.
    pub fn exec(&self, unit: &str, script: &str) -> Output {
        self.run(&["exec", unit, "--", "bash", "-c", script])
    }

    /// An exec that must succeed; returns its stdout.
    pub fn exec_ok(&self, unit: &str, script: &str) -> String {
        let out = self.exec(unit, script);
        assert!(
            out.status.success(),
            "exec on {unit} of {script:?} failed: {}\n{}",
            out.status,
            text(&out.stderr)
        );
        text(&out.stdout)
    }

    /// The hook log, in execution order.
    pub fn hook_log(&self) -> Vec<Value> {
        self.ok(&["log", "--format=json"])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// (unit, hook) of each successful hook run, in order.
    pub fn runs(&self) -> Vec<(String, String)> {
        self.hook_log()
            .iter()
            .filter(|r| r["exit"] == 0)
            .map(|r| {
                (
                    r["unit"].as_str().unwrap().to_string(),
                    r["hook"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
