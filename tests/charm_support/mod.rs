//! Shared by the tests/charm_*.rs suites: the etcd charm laid out around the
//! built binary, deployed into a jujusim model of its own on real etcd
//! (direct service backend, one loopback address per unit). Dropping the
//! model destroys it, which stops every etcd it started, also on panic.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "../address_support/mod.rs"]
mod address_support;

pub struct Model {
    tmp: tempfile::TempDir,
    pub dir: PathBuf,
    pub charm: PathBuf,
    /// This model's own loopback /24; released after Drop destroys the model.
    range: address_support::Range,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Lays out a charm dir with `packaging/pack --link` around the debug binary.
pub fn pack_charm(dest: &Path) {
    pack_charm_as(dest, true)
}

/// As [`pack_charm`]; `link: false` copies the binary, so a refresh to
/// this dir brings a binary file of its own, as a real refresh does.
pub fn pack_charm_as(dest: &Path, link: bool) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new(repo.join("packaging/pack"));
    cmd.args(["--binary", env!("CARGO_BIN_EXE_etcd-charm")]);
    if link {
        cmd.arg("--link");
    }
    let out = cmd
        .arg("--out")
        .arg(dest)
        .stdin(Stdio::null())
        .output()
        .expect("running packaging/pack");
    assert!(out.status.success(), "pack failed: {}", text(&out.stderr));
}

impl Model {
    pub fn new() -> Model {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("model");
        let charm = tmp.path().join("charm");
        pack_charm(&charm);
        Model {
            tmp,
            dir,
            charm,
            range: address_support::take(),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_jujusim"));
        c.arg("--model").arg(&self.dir).arg("--quiet");
        c.args(["--address-range", &self.range.cidr]);
        c.args(args).stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("running jujusim")
    }

    /// A command that must succeed; returns stdout. On failure the message
    /// carries the hook log tail, which names the failing hook.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        if !out.status.success() {
            let log = self.run(&["log"]);
            let charm = text(&self.run(&["log", "--juju-log"]).stdout);
            let errors: Vec<&str> = charm.lines().filter(|l| l.contains("ERROR")).collect();
            panic!(
                "jujusim {args:?} failed ({}):\n{}\n--- hook log ---\n{}\n--- the charm's last errors ---\n{}",
                out.status,
                text(&out.stderr),
                tail(&text(&log.stdout), 40),
                errors[errors.len().saturating_sub(6)..].join("\n")
            );
        }
        text(&out.stdout)
    }

    /// `run-action` as JSON: (completed, the whole answer).
    pub fn run_action(&self, unit: &str, name: &str, params: &[&str]) -> (bool, serde_json::Value) {
        let mut args = vec!["run-action", unit, name, "--format", "json"];
        args.extend_from_slice(params);
        let out = self.run(&args);
        let t = text(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(&t)
            .unwrap_or_else(|e| panic!("run-action {name}: {e}: {t} {out:?}"));
        (v["status"] == "completed", v)
    }

    pub fn deploy(&self, n: u32) {
        self.deploy_with(n, &[]);
    }

    /// Deploys with extra `jujusim deploy` arguments (more --env, --juju-version).
    pub fn deploy_with(&self, n: u32, extra: &[&str]) {
        let n = n.to_string();
        let mut args = vec![
            "deploy",
            self.charm.to_str().unwrap(),
            "-n",
            &n,
            "--config",
            "bind_to_all_interfaces=false",
            "--env",
            "ETCD_CHARM_SERVICE=direct",
            "--env",
            "ETCD_CHARM_ROOT={unit_root}",
        ];
        args.extend_from_slice(extra);
        self.ok(&args);
    }

    pub fn status(&self) -> Value {
        serde_json::from_str(&self.ok(&["status", "--format=json"])).unwrap()
    }

    pub fn units(&self) -> Vec<String> {
        let s = self.status();
        s["applications"]["etcd"]["units"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub fn unit(&self, unit: &str) -> Value {
        self.status()["applications"]["etcd"]["units"][unit].clone()
    }

    pub fn leader(&self) -> String {
        let s = self.status();
        let units = s["applications"]["etcd"]["units"].as_object().unwrap();
        units
            .iter()
            .find(|(_, u)| u["leader"] == Value::Bool(true))
            .map(|(n, _)| n.clone())
            .expect("a leader")
    }

    /// (workload status, message) of every unit.
    pub fn workloads(&self) -> Vec<(String, String, String)> {
        let s = self.status();
        let units = s["applications"]["etcd"]["units"].as_object().unwrap();
        units
            .iter()
            .map(|(n, u)| {
                (
                    n.clone(),
                    u["workload-status"]["current"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                    u["workload-status"]["message"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                )
            })
            .collect()
    }

    /// Every unit active with "Healthy with N known peers".
    /// Settles and runs update-status until `n` units all say they are
    /// healthy ("peer" for one unit, "peers" for more), bounded by `limit`.
    pub fn settle_healthy(&self, n: usize, limit: Duration) {
        let want = format!("Healthy with {n} known peer");
        wait_until("every unit active and healthy", limit, || {
            self.ok(&["settle"]);
            let w = self.workloads();
            let ok = w.len() == n
                && w.iter()
                    .all(|(_, s, msg)| s == "active" && msg.starts_with(&want));
            if !ok {
                self.ok(&["update-status"]);
            }
            ok
        });
    }

    pub fn assert_all_healthy(&self, n: usize) {
        let want = format!(
            "Healthy with {n} known peer{}",
            if n == 1 { "" } else { "s" }
        );
        let w = self.workloads();
        assert_eq!(w.len(), n, "units: {w:?}");
        for (u, s, m) in &w {
            assert_eq!(
                (s.as_str(), m.as_str()),
                ("active", want.as_str()),
                "{u}: {w:?}"
            );
        }
    }

    pub fn address(&self, unit: &str) -> String {
        self.unit(unit)["address"].as_str().unwrap().to_string()
    }

    pub fn endpoint(&self, unit: &str) -> String {
        format!("http://{}:2379", self.address(unit))
    }

    pub fn endpoints(&self) -> String {
        self.units()
            .iter()
            .map(|u| self.endpoint(u))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn root(&self, unit: &str) -> PathBuf {
        self.dir
            .join("units")
            .join(unit.replace('/', "-"))
            .join("root")
    }

    pub fn data_dir(&self, unit: &str) -> PathBuf {
        self.root(unit).join("var/snap/etcd/current")
    }

    /// Leadership data as the leader reads it: the peer app databag (which
    /// is where it lives under Juju 4 too).
    pub fn leader_data(&self) -> Value {
        let l = self.leader();
        let rel = "cluster:0";
        serde_json::from_str(&self.ok(&[
            "exec",
            &l,
            "--",
            "relation-get",
            "--format=json",
            "-r",
            rel,
            "--app",
            "-",
            "etcd",
        ]))
        .unwrap()
    }

    /// What `unit` published in the relation on `client`'s `endpoint`, as
    /// `client` (e.g. `etcd-client/0` on `etcd`) reads it.
    pub fn published_to(&self, client: &str, endpoint: &str, unit: &str) -> Value {
        let rel = self.ok(&[
            "exec",
            client,
            "--",
            "relation-ids",
            endpoint,
            "--format=json",
        ]);
        let rel: Vec<String> = serde_json::from_str(&rel).unwrap();
        let bag = self.ok(&[
            "exec",
            client,
            "--",
            "relation-get",
            "-r",
            &rel[0],
            "-",
            unit,
            "--format=json",
        ]);
        serde_json::from_str(&bag).unwrap()
    }

    /// `leader-get` as the leader reads it (Juju < 4).
    pub fn leader_get(&self) -> Value {
        let l = self.leader();
        serde_json::from_str(&self.ok(&["exec", &l, "--", "leader-get", "--format=json"])).unwrap()
    }

    pub fn token(&self) -> String {
        self.leader_data()["token"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    pub fn cluster_id(&self) -> String {
        self.leader_data()["cluster-id"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// The member and cluster IDs this unit's WAL records.
    pub fn wal_ids(&self, unit: &str) -> etcd_charm::wal::WalIds {
        etcd_charm::wal::read_ids(&self.data_dir(unit))
            .unwrap()
            .unwrap_or_else(|| panic!("{unit} has no WAL"))
    }

    /// Every unit's WAL IDs, by unit.
    pub fn wal_ids_all(&self) -> std::collections::BTreeMap<String, etcd_charm::wal::WalIds> {
        self.units()
            .into_iter()
            .map(|u| (u.clone(), self.wal_ids(&u)))
            .collect()
    }

    /// Kills a unit's etcd and its supervisor behind the charm's back.
    pub fn kill_etcd(&self, unit: &str) {
        let run = self.root(unit).join("run/etcd-charm");
        for f in ["etcd.pid", "etcd.etcd.pid"] {
            if let Ok(pid) = std::fs::read_to_string(run.join(f)) {
                if let Ok(pid) = pid.trim().parse::<i32>() {
                    unsafe_kill(pid);
                }
            }
        }
    }
}

/// A unit's etcd, killed and held down: it cannot start again while the
/// returned listener holds its peer port (its hooks fail meanwhile).
pub struct HeldDown {
    unit: String,
    listener: std::net::TcpListener,
}

impl Model {
    /// Kills `unit`'s etcd and holds its peer port (bounded wait for it).
    pub fn hold_down(&self, unit: &str) -> HeldDown {
        self.kill_etcd(unit);
        let addr = self.address(unit);
        let mut listener = None;
        wait_until(
            &format!("{unit}'s peer port to be free"),
            Duration::from_secs(10),
            || {
                listener = std::net::TcpListener::bind((addr.as_str(), 2380)).ok();
                listener.is_some()
            },
        );
        HeldDown {
            unit: unit.to_string(),
            listener: listener.unwrap(),
        }
    }

    /// Frees the held unit's port, resolves it if in error, reboots it and
    /// waits (bounded) for its etcd to answer. Other units may stay in
    /// error: jujusim's exit 2 is accepted, nothing worse.
    pub fn bring_back(&self, held: HeldDown) {
        self.bring_back_on(held, 2379)
    }

    /// [`Model::bring_back`], waiting for etcd on client `port`.
    pub fn bring_back_on(&self, held: HeldDown, port: u16) {
        let HeldDown { unit, listener } = held;
        drop(listener);
        if self.unit(&unit)["juju-status"]["current"] == "error" {
            self.ok_or_in_error(&["resolve", &unit]);
        }
        self.ok_or_in_error(&["reboot", &unit]);
        let ep = format!("http://{}:{port}", self.address(&unit));
        wait_until(
            &format!("{unit}'s etcd to answer"),
            Duration::from_secs(30),
            || etcdctl(&ep, &["endpoint", "health"]).status.success(),
        );
    }

    /// A command that must succeed but may leave some unit in error (exit
    /// 2); returns stderr.
    pub fn ok_or_in_error(&self, args: &[&str]) -> String {
        let out = self.run(args);
        let err = text(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(0 | 2)),
            "jujusim {args:?} failed ({}): {err}",
            out.status
        );
        err
    }

    /// The output the last run of `hook` on `unit` left in the hook log.
    pub fn last_output(&self, unit: &str, hook: &str) -> String {
        let log = self.ok(&["log", "--unit", unit, "--format", "json"]);
        log.lines()
            .rev()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|r| r["hook"] == hook)
            .map(|r| r["output"].as_str().unwrap_or("").to_string())
            .unwrap_or_default()
    }
}

/// How many of `n` puts of `<prefix>/<i>` succeed, one etcdctl each.
pub fn puts_ok(endpoints: &str, prefix: &str, n: usize) -> usize {
    (0..n)
        .filter(|i| {
            etcdctl(endpoints, &["put", &format!("{prefix}/{i}"), "v"])
                .status
                .success()
        })
        .count()
}

fn unsafe_kill(pid: i32) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = self.run(&["destroy"]);
        // For a failure's post-mortem: ETCD_CHARM_KEEP_MODEL=<dir> keeps a
        // copy of the model's dir (logs, configs) there.
        if let Some(keep) = std::env::var_os("ETCD_CHARM_KEEP_MODEL") {
            let to = Path::new(&keep).join(self.range.cidr.replace('/', "_"));
            let _ = Command::new("cp")
                .arg("-a")
                .arg(&self.dir)
                .arg(&to)
                .status();
            eprintln!("the model's dir is kept at {}", to.display());
        }
        let _ = &self.tmp;
    }
}

/// A file's or dir's permission bits (what `ls -l` shows).
pub fn file_mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

/// Sets a file's or dir's permission bits.
pub fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// etcdctl against `endpoints`, bounded by its own timeouts.
pub fn etcdctl(endpoints: &str, args: &[&str]) -> Output {
    Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            endpoints,
            "--dial-timeout=3s",
            "--command-timeout=5s",
        ])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("running etcdctl (apt install etcd-client)")
}

/// Writes `n` keys `<prefix>/<i>` = `v<i>`. A put etcd dropped during a
/// leader change (not applied, so safe to repeat) is tried again, as any
/// etcd client does; every other failure fails the test.
pub fn put_keys(endpoints: &str, prefix: &str, n: usize) {
    for i in 0..n {
        let put = || {
            etcdctl(
                endpoints,
                &["put", &format!("{prefix}/{i}"), &format!("v{i}")],
            )
        };
        let mut out = put();
        for _ in 0..5 {
            let err = text(&out.stderr);
            if out.status.success()
                || !(err.contains("proposal dropped") || err.contains("leader changed"))
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(300));
            out = put();
        }
        assert!(
            out.status.success(),
            "put {prefix}/{i}: {}",
            text(&out.stderr)
        );
    }
}

/// Every key written by put_keys is there, read from `endpoint` alone.
pub fn assert_keys(endpoint: &str, prefix: &str, n: usize) {
    let out = etcdctl(
        endpoint,
        &[
            "get",
            "--prefix",
            &format!("{prefix}/"),
            "--print-value-only",
        ],
    );
    assert!(
        out.status.success(),
        "get from {endpoint}: {}",
        text(&out.stderr)
    );
    let mut got: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    got.sort();
    let mut want: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
    want.sort();
    assert_eq!(got, want, "keys under {prefix}/ at {endpoint}");
}

/// Member list as (hex id, name, is_learner).
pub fn members(endpoints: &str) -> Vec<(String, String, bool)> {
    let out = etcdctl(endpoints, &["member", "list", "-w", "json"]);
    assert!(out.status.success(), "member list: {}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut m: Vec<_> = v["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                format!("{:x}", m["ID"].as_u64().unwrap()),
                m["name"].as_str().unwrap_or("").to_string(),
                m["isLearner"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    m.sort_by(|a, b| a.1.cmp(&b.1));
    m
}

/// Polls `f` until it returns true or `limit` passes; panics naming `what`.
pub fn wait_until(what: &str, limit: Duration, f: impl FnMut() -> bool) {
    assert!(
        wait_for(limit, f),
        "timed out after {limit:?} waiting for {what}"
    );
}

/// Polls `f` every 200 ms until it returns true (true) or `limit` passes
/// (false), for a caller that says more than [`wait_until`] on a timeout.
pub fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !f() {
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    true
}
