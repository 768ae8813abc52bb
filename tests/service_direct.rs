//! The direct service backend on real etcd: the supervisor started by
//! `Service::start` (the built `etcd-charm supervise`, named through
//! `ETCD_CHARM_SUPERVISOR`, since this test's own executable is a harness),
//! its restart policy, and `stop`'s SIGTERM-then-SIGKILL.
//!
//! Addresses: 127.78.2.0/24 belongs to this file. Tests run one at a time
//! (a process-wide lock), each in its own temp root, and a guard stops
//! whatever a test started even when it panics. Every wait is bounded.

use etcd_charm::paths::Paths;
use etcd_charm::render::{render_etcd_config, ClusterState, EtcdConfig};
use etcd_charm::restart::RESTART_POLICY;
use etcd_charm::service::{etcd_pid_file, Backend, Installed, Service, SUPERVISOR_ENV};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());
static SUPERVISOR: Once = Once::new();

fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    SUPERVISOR.call_once(|| std::env::set_var(SUPERVISOR_ENV, env!("CARGO_BIN_EXE_etcd-charm")));
    guard
}

/// One unit's etcd under the direct backend, stopped on drop.
struct Unit {
    svc: Service,
    client: String,
    _root: tempfile::TempDir,
}

impl Drop for Unit {
    fn drop(&mut self) {
        if let Err(e) = self.svc.stop_with_grace(Duration::from_secs(3)) {
            eprintln!("cleanup: {e}");
        }
    }
}

#[derive(Clone, Copy)]
struct Member<'a> {
    name: &'a str,
    ip: &'a str,
}

fn peer(ip: &str) -> String {
    format!("http://{ip}:2380")
}

/// A unit whose config names `me` with `cluster` as its initial cluster.
fn unit_with(me: &Member, cluster: &[Member], state: ClusterState, etcd_bin: &Path) -> Unit {
    let root = tempfile::tempdir().unwrap();
    let paths = Paths::new(root.path());
    let client = format!("http://{}:2379", me.ip);
    let cfg = EtcdConfig {
        name: me.name.into(),
        // Not the canonical data dir: this test is about the service, and
        // keeps clear of how the start guard maps paths under a test root.
        data_dir: root.path().join("etcd-data").to_str().unwrap().into(),
        listen_peer_urls: vec![peer(me.ip)],
        listen_client_urls: vec![client.clone()],
        listen_metrics_urls: vec![],
        initial_advertise_peer_urls: vec![peer(me.ip)],
        advertise_client_urls: vec![client.clone()],
        initial_cluster: cluster
            .iter()
            .map(|m| (m.name.to_string(), peer(m.ip)))
            .collect(),
        initial_cluster_token: "svc-test".into(),
        initial_cluster_state: state,
        snapshot_count: None,
        heartbeat_interval: 50,
        election_timeout: 500,
        // Lets member add/remove go through at once after a start.
        strict_reconfig_check: false,
        enable_v2: false,
        grpc_gateway: true,
        force_new_cluster: false,
        storage: Default::default(),
        tls: None,
    };
    std::fs::create_dir_all(paths.common_dir()).unwrap();
    std::fs::write(paths.config_file(), render_etcd_config(&cfg)).unwrap();
    Unit {
        svc: Service {
            backend: Backend::Direct {
                etcd_bin: etcd_bin.to_path_buf(),
            },
            paths,
        },
        client,
        _root: root,
    }
}

fn unit(name: &str, ip: &str) -> Unit {
    let me = Member { name, ip };
    unit_with(&me, &[me], ClusterState::New, Path::new("etcd"))
}

fn pid_in(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl Unit {
    fn supervisor_pid(&self) -> Option<i32> {
        pid_in(&self.svc.paths.direct_pid_file())
    }
    fn etcd_pid(&self) -> Option<i32> {
        pid_in(&etcd_pid_file(&self.svc.paths))
    }
    fn active(&self) -> bool {
        self.svc.is_active().unwrap()
    }
    fn log(&self) -> String {
        std::fs::read_to_string(self.svc.paths.direct_log_file()).unwrap_or_default()
    }
    fn etcdctl(&self, args: &[&str]) -> std::process::Output {
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.client])
            .args(["--dial-timeout=1s", "--command-timeout=3s"])
            .args(args)
            .output()
            .expect("etcdctl is needed for this test")
    }
    fn wait_healthy(&self) {
        let ok = wait_for(Duration::from_secs(10), || {
            self.etcdctl(&["endpoint", "health"]).status.success()
        });
        assert!(ok, "etcd at {} not healthy:\n{}", self.client, self.log());
    }
}

/// Alive and not a zombie.
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let state = s[s.rfind(')')? + 1..]
                .split_whitespace()
                .next()?
                .to_string();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done()
}

/// Seconds since the epoch of the supervisor log line holding `what`
/// (lines start `2026-03-01T12:00:00Z etcd-charm supervise[..]: ...`).
fn log_time(log: &str, what: &str) -> u64 {
    let line = log
        .lines()
        .find(|l| l.contains("etcd-charm supervise[") && l.contains(what))
        .unwrap_or_else(|| panic!("no {what:?} in the log:\n{log}"));
    let ts = line.split_whitespace().next().unwrap();
    let n: Vec<i64> = ts
        .trim_end_matches('Z')
        .split(['-', 'T', ':'])
        .map(|x| x.parse().unwrap())
        .collect();
    let (y, m, d) = (n[0] - (n[1] <= 2) as i64, n[1], n[2]);
    // Days from 1970-01-01 to y-m-d (proleptic Gregorian).
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    (days * 86_400 + n[3] * 3600 + n[4] * 60 + n[5]) as u64
}

#[test]
fn start_is_active_stop() {
    let _serial = serial();
    let u = unit("solo", "127.78.2.1");
    assert!(!u.active());
    assert_eq!(
        u.svc.install().unwrap(),
        Installed::Ready {
            version: "3.4.23".into()
        }
    );
    assert_eq!(u.svc.version().as_deref(), Some("3.4.23"));

    u.svc.start().unwrap();
    assert!(u.active(), "{}", u.log());
    let (sup, etcd) = (u.supervisor_pid().unwrap(), u.etcd_pid().unwrap());
    assert!(running(sup) && running(etcd));
    u.wait_healthy();

    u.svc.stop().unwrap();
    assert!(!u.active());
    assert!(!running(sup) && !running(etcd));
    assert_eq!((u.supervisor_pid(), u.etcd_pid()), (None, None));
    u.svc.stop().unwrap();
    let tail = u.svc.log_tail(50);
    assert!(
        tail.contains(&format!("started etcd (pid {etcd})")),
        "{tail}"
    );
    assert!(tail.contains("exiting"), "{tail}");
}

#[test]
fn start_twice_is_idempotent() {
    let _serial = serial();
    let u = unit("twice", "127.78.2.2");
    u.svc.start().unwrap();
    let pids = (u.supervisor_pid(), u.etcd_pid());
    // The second start finds it running and touches nothing: the same
    // supervisor and etcd, one start in the log. (How fast, if it matters,
    // is for bench/hooks.py to measure, not for an assertion here.)
    u.svc.start().unwrap();
    assert_eq!((u.supervisor_pid(), u.etcd_pid()), pids);
    assert!(u.active());
    assert_eq!(u.log().matches("started etcd").count(), 1, "{}", u.log());
}

#[test]
fn etcd_killed_behind_our_back_is_restarted() {
    let _serial = serial();
    let u = unit("crashy", "127.78.2.3");
    u.svc.start().unwrap();
    let (sup, etcd) = (u.supervisor_pid().unwrap(), u.etcd_pid().unwrap());
    kill(Pid::from_raw(etcd), Signal::SIGKILL).unwrap();
    assert!(wait_for(Duration::from_secs(30), || !running(etcd)));
    assert!(
        wait_for(Duration::from_secs(30), || u.active()
            && u.etcd_pid().is_some_and(|p| p != etcd)),
        "not restarted:\n{}",
        u.log()
    );
    assert_eq!(u.supervisor_pid(), Some(sup), "the same supervisor");
    u.wait_healthy();
    // It waited RESTART_POLICY.delay first, as its log's clock shows (a
    // lower bound: a slow machine only makes the gap longer).
    let log = u.log();
    assert!(log.contains("restarting etcd in 2s"), "{log}");
    let exited = log_time(&log, &format!("etcd (pid {etcd}) exited"));
    let new = u.etcd_pid().unwrap();
    let restarted = log_time(&log, &format!("started etcd (pid {new})"));
    let delay = RESTART_POLICY.delay.as_secs();
    assert!(
        restarted - exited >= delay,
        "{exited} → {restarted}:\n{log}"
    );
}

#[test]
fn removed_member_exits_0_and_stays_down() {
    let _serial = serial();
    let a = Member {
        name: "a",
        ip: "127.78.2.41",
    };
    let b = Member {
        name: "b",
        ip: "127.78.2.42",
    };
    let first = unit_with(&a, &[a], ClusterState::New, Path::new("etcd"));
    first.svc.start().unwrap();
    first.wait_healthy();
    let added = first.etcdctl(&["member", "add", "b", "--peer-urls", &peer(b.ip)]);
    assert!(added.status.success(), "{added:?}");

    let second = unit_with(&b, &[a, b], ClusterState::Existing, Path::new("etcd"));
    second.svc.start().unwrap();
    second.wait_healthy();
    let list = first.etcdctl(&["member", "list"]);
    let list = String::from_utf8_lossy(&list.stdout);
    let id = list
        .lines()
        .find(|l| l.contains(", b, "))
        .and_then(|l| l.split(',').next())
        .unwrap_or_else(|| panic!("b not in\n{list}"))
        .to_string();
    let sup = second.supervisor_pid().unwrap();
    let removed = first.etcdctl(&["member", "remove", &id]);
    assert!(removed.status.success(), "{removed:?}");

    assert!(
        wait_for(Duration::from_secs(10), || !running(sup)),
        "the supervisor of a removed member kept running:\n{}",
        second.log()
    );
    assert!(!second.active());
    assert_eq!((second.supervisor_pid(), second.etcd_pid()), (None, None));
    let log = second.log();
    assert!(log.contains("permanently removed"), "{log}");
    assert!(log.contains("exited: exit status: 0"), "{log}");
    assert!(log.contains("not restarting"), "{log}");
    assert_eq!(log.matches("started etcd").count(), 1, "{log}");
}

#[test]
fn etcd_dying_at_once_fails_start_with_the_log() {
    let _serial = serial();
    let u = unit("broken", "127.78.2.5");
    let config = u.svc.paths.config_file();
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace("http://127.78.2.5:2379", "ftp://127.78.2.5:2379"),
    )
    .unwrap();
    let e = u.svc.start().unwrap_err();
    assert_eq!(e.action, "start");
    assert!(e.problem.contains("exited at once"), "{e}");
    assert!(
        e.problem.contains("ftp"),
        "the log tail should show etcd's complaint: {e}"
    );
    assert!(!u.active());
    assert_eq!((u.supervisor_pid(), u.etcd_pid()), (None, None));
}

#[test]
fn stop_kills_what_ignores_sigterm() {
    let _serial = serial();
    let u = unit("frozen", "127.78.2.6");
    u.svc.start().unwrap();
    let (sup, etcd) = (u.supervisor_pid().unwrap(), u.etcd_pid().unwrap());
    // A stopped supervisor cannot act on SIGTERM, nor pass it to etcd.
    kill(Pid::from_raw(sup), Signal::SIGSTOP).unwrap();
    let t = Instant::now();
    u.svc.stop_with_grace(Duration::from_millis(300)).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert!(!running(sup) && !running(etcd));
    assert!(!u.active());
    assert!(u.log().contains("killed after 0.3s"), "{}", u.log());
}

#[test]
fn start_clears_an_orphaned_etcd_and_stale_pid_files() {
    let _serial = serial();
    let u = unit("orphan", "127.78.2.7");
    u.svc.start().unwrap();
    let (sup, etcd) = (u.supervisor_pid().unwrap(), u.etcd_pid().unwrap());
    kill(Pid::from_raw(sup), Signal::SIGKILL).unwrap();
    assert!(wait_for(Duration::from_secs(2), || !running(sup)));
    assert!(running(etcd));
    assert!(!u.active(), "no supervisor, not active");

    u.svc.start().unwrap();
    assert!(!running(etcd), "the orphan should have been stopped");
    assert!(u.active());
    assert_ne!(u.supervisor_pid(), Some(sup));
    u.wait_healthy();

    // Pid files naming processes that are not ours are ignored.
    u.svc.stop().unwrap();
    let me = std::process::id().to_string();
    std::fs::write(u.svc.paths.direct_pid_file(), &me).unwrap();
    std::fs::write(etcd_pid_file(&u.svc.paths), &me).unwrap();
    assert!(!u.active());
    u.svc.start().unwrap();
    assert!(u.active());
}

#[test]
fn a_missing_binary_is_reported() {
    let _serial = serial();
    let me = Member {
        name: "nobin",
        ip: "127.78.2.8",
    };
    let u = unit_with(
        &me,
        &[me],
        ClusterState::New,
        &PathBuf::from("/nonexistent/etcd"),
    );
    assert!(matches!(
        u.svc.install().unwrap(),
        Installed::Missing { .. }
    ));
    assert_eq!(u.svc.version(), None);
    let e = u.svc.start().unwrap_err();
    assert!(e.problem.contains("/nonexistent/etcd"), "{e}");
}
