//! A real etcd member run by hand on a loopback address, for integration
//! tests that need etcd itself rather than a charm-managed unit.
//!
//! - [`Spec`]: what to start (name, ip, data dir, optional WAL dir, peers,
//!   token, extra flags, log file); [`Spec::start`] spawns it.
//! - [`Etcd`]: the running process. [`Etcd::stop`] is the graceful stop
//!   (SIGTERM, bounded wait, SIGKILL); dropping it without a stop, a panic
//!   included, kills it, so a failing test leaves nothing behind.
//! - [`Etcd::wait_healthy`] / [`Etcd::wait_status`]: bounded waits that fail
//!   with the member's name, the last error and the tail of its log.
//! - [`endpoint_status`], [`live_ids`], [`stop_leader_last`]: IDs and the
//!   leader through etcdctl.
//!
//! Each test file keeps its own 127.x.y range, so suites run side by side.
//! Include with `mod etcd_support;` (or `#[path]` from another support module).
#![allow(dead_code)]

use etcd_charm::wal::WalIds;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a member may take to answer after its start.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a member may take to exit after SIGTERM before it is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// `name=http://ip:2380,…` for `--initial-cluster` (and etcd.conf.2x).
pub fn initial_cluster<N: AsRef<str>, A: AsRef<str>>(peers: &[(N, A)]) -> String {
    peers
        .iter()
        .map(|(n, a)| format!("{}=http://{}:2380", n.as_ref(), a.as_ref()))
        .collect::<Vec<_>>()
        .join(",")
}

/// What to start: one member of a new cluster, client port 2379 and peer
/// port 2380 on `ip`.
#[derive(Clone, Debug)]
pub struct Spec {
    pub name: String,
    pub ip: String,
    pub data_dir: PathBuf,
    pub wal_dir: Option<PathBuf>,
    /// `--initial-cluster`; the member alone unless [`Spec::peers`] says.
    pub initial_cluster: String,
    /// `--initial-cluster-token`; etcd's default when `None`.
    pub token: Option<String>,
    /// Appended after the flags above.
    pub args: Vec<String>,
    /// etcd's stdout and stderr (created, truncated).
    pub log: PathBuf,
}

impl Spec {
    /// A single-member cluster of `name` on `ip`, logging to `log`.
    pub fn new(name: &str, ip: &str, data_dir: &Path, log: &Path) -> Spec {
        Spec {
            name: name.into(),
            ip: ip.into(),
            data_dir: data_dir.into(),
            wal_dir: None,
            initial_cluster: initial_cluster(&[(name, ip)]),
            token: None,
            args: Vec::new(),
            log: log.into(),
        }
    }

    /// (name, ip) of every member of the new cluster, this one included.
    pub fn peers<N: AsRef<str>, A: AsRef<str>>(mut self, peers: &[(N, A)]) -> Spec {
        self.initial_cluster = initial_cluster(peers);
        self
    }

    pub fn token(mut self, token: &str) -> Spec {
        self.token = Some(token.into());
        self
    }

    pub fn wal_dir(mut self, dir: &Path) -> Spec {
        self.wal_dir = Some(dir.into());
        self
    }

    pub fn args(mut self, args: &[&str]) -> Spec {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// Spawns etcd (no wait: see [`Etcd::wait_healthy`]).
    pub fn start(self) -> Etcd {
        let out = std::fs::File::create(&self.log)
            .unwrap_or_else(|e| panic!("create etcd log {}: {e}", self.log.display()));
        let ip = &self.ip;
        let mut cmd = Command::new("etcd");
        // With a stray ETCD_* variable, etcd would run a different member.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("ETCD") {
                cmd.env_remove(k);
            }
        }
        cmd.args(["--name", &self.name])
            .arg("--data-dir")
            .arg(&self.data_dir);
        if let Some(wal) = &self.wal_dir {
            cmd.arg("--wal-dir").arg(wal);
        }
        cmd.args(["--listen-client-urls", &format!("http://{ip}:2379")])
            .args(["--advertise-client-urls", &format!("http://{ip}:2379")])
            .args(["--listen-peer-urls", &format!("http://{ip}:2380")])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://{ip}:2380"),
            ])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", "new"]);
        if let Some(token) = &self.token {
            cmd.args(["--initial-cluster-token", token]);
        }
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("clone log handle"))
            .stderr(out);
        let child = cmd
            .spawn()
            .expect("spawn etcd (is /usr/bin/etcd installed? apt install etcd-server)");
        Etcd {
            name: self.name,
            ip: self.ip,
            data_dir: self.data_dir,
            log: self.log,
            child: Some(child),
        }
    }
}

/// A running etcd started from a [`Spec`]; killed on drop unless stopped.
pub struct Etcd {
    pub name: String,
    pub ip: String,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    child: Option<Child>,
}

impl Etcd {
    pub fn endpoint(&self) -> String {
        format!("http://{}:2379", self.ip)
    }

    /// The last 15 lines of the member's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Polls `probe(endpoint)` until it succeeds, for at most
    /// [`START_TIMEOUT`]; panics if etcd exits first or time runs out.
    pub fn wait_for<T>(
        &mut self,
        what: &str,
        mut probe: impl FnMut(&str) -> Result<T, String>,
    ) -> T {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(st) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "etcd {} exited with {st} before answering {what}; log tail:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            let last = match probe(&self.endpoint()) {
                Ok(v) => return v,
                Err(e) => e,
            };
            if Instant::now() > deadline {
                panic!(
                    "etcd {} at {} gave no {what} within {START_TIMEOUT:?} (last: {last}); \
                     log tail:\n{}",
                    self.name,
                    self.endpoint(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until `endpoint health` succeeds.
    pub fn wait_healthy(&mut self) {
        self.wait_for("endpoint health", |ep| {
            ctl(ep, &["endpoint", "health"]).map(drop)
        })
    }

    /// Waits until `endpoint status` answers, and returns it.
    pub fn wait_status(&mut self) -> Status {
        self.wait_for("endpoint status", endpoint_status)
    }

    /// SIGTERM and a bounded wait, then SIGKILL. Idempotent.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!(
            "etcd {} ignored SIGTERM for {STOP_TIMEOUT:?}; killing",
            self.name
        );
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Stops every member, the raft leader last: stopping it first costs an
/// election, and a lone leader stepping down is what makes stops slow.
pub fn stop_leader_last(members: &mut [Etcd]) {
    let leader = members
        .first()
        .and_then(|m| endpoint_status(&m.endpoint()).ok())
        .map_or(0, |s| s.leader);
    members.sort_by_cached_key(|m| {
        endpoint_status(&m.endpoint()).is_ok_and(|s| s.ids.member_id == leader)
    });
    for m in members {
        m.stop();
    }
}

/// etcdctl (API v3) against `endpoints` with short timeouts: its stdout, or
/// its stderr as the error.
pub fn ctl(endpoints: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            endpoints,
            "--dial-timeout=1s",
            "--command-timeout=5s",
        ])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run etcdctl (apt install etcd-client): {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// What `etcdctl endpoint status -w json` says about one member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub ids: WalIds,
    pub leader: u64,
}

impl Status {
    pub fn parse(json: &str) -> Status {
        let v: serde_json::Value = serde_json::from_str(json).expect("endpoint status JSON");
        let st = &v[0]["Status"];
        let num = |x: &serde_json::Value, what: &str| {
            x.as_u64()
                .unwrap_or_else(|| panic!("endpoint status lacks {what}: {json}"))
        };
        Status {
            ids: WalIds {
                member_id: num(&st["header"]["member_id"], "header.member_id"),
                cluster_id: num(&st["header"]["cluster_id"], "header.cluster_id"),
            },
            leader: num(&st["leader"], "leader"),
        }
    }
}

/// The member at `endpoint`'s status, or etcdctl's error.
pub fn endpoint_status(endpoint: &str) -> Result<Status, String> {
    ctl(endpoint, &["endpoint", "status", "-w", "json"]).map(|json| Status::parse(&json))
}

/// (member, cluster) IDs as the member at `endpoint` reports them.
pub fn live_ids(endpoint: &str) -> WalIds {
    endpoint_status(endpoint)
        .unwrap_or_else(|e| panic!("endpoint status of {endpoint}: {e}"))
        .ids
}
