//! Shared by the tests/upgrade_*.rs suites: units that look as the Python
//! etcd charm and the etcd snap left them after an etcd 2.3 → 3.x move, in a
//! jujusim model, on real etcd.
//!
//! - [`old_charm`]: a stand-in for the Python charm. It does nothing but
//!   what systemd would for the snap: its start hook runs etcd (through the
//!   direct backend's supervisor, so the new charm can stop it) on whatever
//!   etcd.conf.yml the test laid out.
//! - [`bootstrap_legacy`]: a real cluster born under `<name>.etcd`, keys
//!   written, stopped; then etcd.conf.yml as the snap rewrote it (quoted
//!   strings, `wal-dir: ''`, empty `snapshot-count:`, no initial-cluster,
//!   token or state) and etcd.conf.2x.
//!
//! Addresses are jujusim's (one per unit, from `status`); the template
//! members made outside a model use 127.79.0.0/16. Every etcd a test starts
//! by hand ([`hand_etcd`], from tests/etcd_support) is killed on drop; the
//! model's are stopped by [`Upgrade`]'s drop.
#![allow(dead_code)]

#[path = "../charm_support/mod.rs"]
pub mod charm_support;
pub use charm_support::*;
#[path = "../etcd_support/mod.rs"]
mod etcd_support;
pub use etcd_support::*;

use etcd_charm::paths::Paths;
use etcd_charm::wal::WalIds;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

pub const TOKEN: &str = "Q7XK2P";
pub const HEARTBEAT_MS: u32 = 50;
pub const ELECTION_MS: u32 = 500;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A dir holding the stand-in old charm: the new charm's metadata and
/// config (names must match for `refresh` to keep settings and relations).
pub fn old_charm(dest: &Path) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = dest.join("old-etcd-charm");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["metadata.yaml", "config.yaml"] {
        std::fs::copy(repo.join("packaging").join(f), dir.join(f)).unwrap();
    }
    let dispatch = format!(
        r#"#!/bin/sh
# Stand-in for the Python etcd charm: on start it (re)starts etcd on the
# etcd.conf.yml the test laid out, as snap.etcd.etcd would under systemd.
name="${{JUJU_DISPATCH_PATH##*/}}"
conf="$ETCD_CHARM_ROOT/var/snap/etcd/common/etcd.conf.yml"
if [ "$name" = start ] && [ -f "$conf" ]; then
    mkdir -p "$ETCD_CHARM_ROOT/var/log"
    setsid "{bin}" supervise >>"$ETCD_CHARM_ROOT/var/log/old-charm.log" 2>&1 </dev/null &
fi
exit 0
"#,
        bin = env!("CARGO_BIN_EXE_etcd-charm")
    );
    let path = dir.join("dispatch");
    std::fs::write(&path, dispatch).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A model holding the old charm, and the new charm to refresh to. On drop
/// every unit's etcd is stopped (whoever started it), then the model goes.
pub struct Upgrade {
    pub m: Model,
    pub old: PathBuf,
    _old_dir: tempfile::TempDir,
    pub units: Vec<String>,
}

impl Drop for Upgrade {
    fn drop(&mut self) {
        for u in &self.units {
            stop_service(&self.m.root(u));
        }
    }
}

/// Stops a unit's etcd started through the direct backend (by a hook, the
/// old charm or a test), from its pid files.
pub fn stop_service(root: &Path) {
    let svc = etcd_charm::service::Service {
        backend: etcd_charm::service::Backend::Direct {
            etcd_bin: "etcd".into(),
        },
        paths: Paths::new(root),
    };
    if let Err(e) = svc.stop_with_grace(STOP_TIMEOUT) {
        eprintln!("cleanup of {}: {e}", root.display());
    }
}

impl Upgrade {
    /// Deploys `n` units of the old charm (etcd not running: no config yet).
    pub fn deploy(n: u32, extra_env: &[&str]) -> Upgrade {
        let m = Model::new();
        let old_dir = tempfile::tempdir().unwrap();
        let old = old_charm(old_dir.path());
        let mut args = vec![
            "deploy".to_string(),
            old.display().to_string(),
            "-n".into(),
            n.to_string(),
            "--config".into(),
            "bind_to_all_interfaces=false".into(),
            // Short raft timings keep restarts quick (the legacy configs
            // and hand-run etcd use the same).
            "--config".into(),
            format!("heartbeat_interval={HEARTBEAT_MS}"),
            "--config".into(),
            format!("election_timeout={ELECTION_MS}"),
            "--env".into(),
            "ETCD_CHARM_SERVICE=direct".into(),
            "--env".into(),
            "ETCD_CHARM_ROOT={unit_root}".into(),
        ];
        for e in extra_env {
            args.push("--env".into());
            args.push(e.to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        m.ok(&args);
        let mut units = m.units();
        units.sort();
        Upgrade {
            m,
            old,
            _old_dir: old_dir,
            units,
        }
    }

    pub fn member_name(unit: &str) -> String {
        unit.replace('/', "")
    }

    pub fn legacy_dir(&self, unit: &str) -> PathBuf {
        self.m
            .data_dir(unit)
            .join(format!("{}.etcd", Self::member_name(unit)))
    }

    pub fn paths(&self, unit: &str) -> Paths {
        Paths::new(self.m.root(unit))
    }

    /// Runs the old charm's start on every unit (a reboot would), bringing
    /// etcd up on the legacy layout; waits until every member answers.
    pub fn start_old_etcd(&self) {
        for u in &self.units {
            self.m.ok(&[
                "exec",
                u,
                "--",
                "env",
                "JUJU_DISPATCH_PATH=hooks/start",
                "./dispatch",
            ]);
        }
        for u in &self.units {
            let ep = self.m.endpoint(u);
            wait_until(&format!("old etcd on {u}"), START_TIMEOUT, || {
                etcdctl(&ep, &["endpoint", "health"]).status.success()
            });
        }
    }

    pub fn refresh(&self, extra: &[&str]) -> Output {
        let mut args = vec!["refresh", "--path", self.m.charm.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.m.run(&args)
    }

    /// `jujusim refresh --dry-run -- --format=json`: (unit, exit, report).
    pub fn dry_run(&self) -> Vec<(String, i32, Value)> {
        let out = self.m.run(&[
            "refresh",
            "--path",
            self.m.charm.to_str().unwrap(),
            "--dry-run",
            "--",
            "--format=json",
        ]);
        parse_dry_runs(&text(&out.stdout))
    }

    /// Forgets what the new charm wrote to the model (leadership data, this
    /// unit's peer databag), so its next hook plans those writes again.
    pub fn forget_model_writes(&self, unit: &str) {
        let ids: Vec<String> = serde_json::from_str(&self.m.ok(&[
            "exec",
            unit,
            "--",
            "relation-ids",
            "cluster",
            "--format=json",
        ]))
        .unwrap();
        let rel = ids[0].clone();
        let keys = ["token", "cluster-id", "cluster", "leader_address"];
        let unset: Vec<String> = keys.iter().map(|k| format!("{k}=")).collect();
        let mut args = vec!["exec", unit, "--", "leader-set"];
        args.extend(unset.iter().map(String::as_str));
        self.m.ok(&args);
        let mut args = vec!["exec", unit, "--", "relation-set", "-r", &rel, "--app"];
        args.extend(unset.iter().map(String::as_str));
        self.m.ok(&args);
        let mine = ["member-id=", "peer-url=", "client-url=", "member-name="];
        let mut args = vec!["exec", unit, "--", "relation-set", "-r", &rel];
        args.extend(mine);
        self.m.ok(&args);
    }

    /// Runs the new charm's dispatch as hook `hook` in `unit`'s context,
    /// with extra environment (a failpoint), like Juju would run the hook.
    pub fn run_hook(&self, unit: &str, hook: &str, env: &[&str]) -> Output {
        let dispatch = self.m.charm.join("dispatch");
        let dp = format!("JUJU_DISPATCH_PATH=hooks/{hook}");
        let mut args = vec!["exec", unit, "--", "env", dp.as_str()];
        args.extend_from_slice(env);
        args.push(dispatch.to_str().unwrap());
        self.m.run(&args)
    }
}

/// Splits jujusim's `=== etcd/0 (exit N) ===` sections and parses each JSON.
pub fn parse_dry_runs(out: &str) -> Vec<(String, i32, Value)> {
    let mut res = Vec::new();
    let mut cur: Option<(String, i32, String)> = None;
    for line in out.lines() {
        if let Some(h) = line
            .strip_prefix("=== ")
            .and_then(|l| l.strip_suffix(" ==="))
        {
            if let Some((u, c, body)) = cur.take() {
                res.push((u, c, json_of(&body)));
            }
            let (unit, rest) = h.split_once(" (exit ").expect("dry-run header");
            let code = rest.trim_end_matches(')').parse().unwrap();
            cur = Some((unit.to_string(), code, String::new()));
        } else if let Some((_, _, body)) = cur.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    if let Some((u, c, body)) = cur.take() {
        res.push((u, c, json_of(&body)));
    }
    res
}

/// The JSON object in a dry run's output (stderr lines may surround it).
fn json_of(body: &str) -> Value {
    let start = body
        .find('{')
        .unwrap_or_else(|| panic!("no JSON in:\n{body}"));
    let end = body.rfind('}').unwrap();
    serde_json::from_str(&body[start..=end]).unwrap_or_else(|e| panic!("{e}:\n{body}"))
}

// ------------------------------------------------------------- real etcd

/// An etcd member started by hand with this suite's raft timings, logging
/// to `<log_dir>/<name>-<ip>.log`: one of a new cluster of `peers` (name, ip).
pub fn hand_etcd(
    name: &str,
    ip: &str,
    data_dir: &Path,
    log_dir: &Path,
    peers: &[(String, String)],
    token: &str,
) -> Etcd {
    Spec::new(
        name,
        ip,
        data_dir,
        &log_dir.join(format!("{name}-{ip}.log")),
    )
    .peers(peers)
    .token(token)
    .args(&[
        "--heartbeat-interval",
        &HEARTBEAT_MS.to_string(),
        "--election-timeout",
        &ELECTION_MS.to_string(),
    ])
    .start()
}

/// What the snap left: etcd.conf.yml rewritten from the 2.x env file, with
/// every string quoted, unset keys empty and no initial-* keys. Numbers are
/// left plain: etcd refuses quoted numbers, so the snap cannot have quoted
/// them. Paths are the real ones under the unit's root (etcd reads them).
pub fn snap_migrated_config(name: &str, data_dir: &Path, ip: &str) -> String {
    format!(
        "# Written by the etcd snap when it moved this unit from etcd 2.3 to 3.x.\n\
         name: '{name}'\n\
         data-dir: '{}'\n\
         wal-dir: ''\n\
         snapshot-count: \n\
         heartbeat-interval: {HEARTBEAT_MS}\n\
         election-timeout: {ELECTION_MS}\n\
         listen-peer-urls: 'http://{ip}:2380'\n\
         listen-client-urls: 'http://{ip}:2379'\n\
         max-snapshots: 5\n\
         max-wals: 5\n\
         cors: ''\n\
         initial-advertise-peer-urls: 'http://{ip}:2380'\n\
         advertise-client-urls: 'http://{ip}:2379'\n\
         discovery: ''\n\
         discovery-fallback: 'proxy'\n\
         discovery-proxy: ''\n\
         discovery-srv: ''\n\
         strict-reconfig-check: \n\
         proxy: 'off'\n\
         debug: \n",
        data_dir.display()
    )
}

/// The etcd 2.x environment file the snap renamed to etcd.conf.2x.
pub fn env_config_2x(
    name: &str,
    data_dir: &Path,
    ip: &str,
    cluster: &str,
    token: Option<&str>,
) -> String {
    let token = match token {
        Some(t) => format!("ETCD_INITIAL_CLUSTER_TOKEN={t}\n"),
        None => String::new(),
    };
    format!(
        "# [member]\n\
         ETCD_NAME={name}\n\
         ETCD_DATA_DIR=\"{}\"\n\
         #ETCD_WAL_DIR=\"\"\n\
         ETCD_LISTEN_PEER_URLS=\"http://{ip}:2380\"\n\
         ETCD_LISTEN_CLIENT_URLS=\"http://{ip}:2379\"\n\
         #[cluster]\n\
         ETCD_INITIAL_ADVERTISE_PEER_URLS=\"http://{ip}:2380\"\n\
         ETCD_INITIAL_CLUSTER=\"{cluster}\"\n\
         ETCD_INITIAL_CLUSTER_STATE=new\n\
         {token}\
         ETCD_ADVERTISE_CLIENT_URLS='http://{ip}:2379'\n",
        data_dir.display()
    )
}

/// What a legacy bootstrap produced.
pub struct Legacy {
    /// unit → the IDs its member had.
    pub ids: Vec<(String, WalIds)>,
    pub cluster_id: u64,
    pub keys: usize,
}

/// A real cluster of `units`, born under `<name>.etcd` with `TOKEN`, `keys`
/// keys written, then stopped; configs as the snap left them. `token_in_2x`:
/// whether etcd.conf.2x still names the token.
pub fn bootstrap_legacy(up: &Upgrade, keys: usize, token_in_2x: bool) -> Legacy {
    let peers: Vec<(String, String)> = up
        .units
        .iter()
        .map(|u| (Upgrade::member_name(u), up.m.address(u)))
        .collect();
    let logs = tempfile::tempdir().unwrap();
    let mut procs: Vec<Etcd> = up
        .units
        .iter()
        .zip(&peers)
        .map(|(u, (name, ip))| {
            let dir = up.legacy_dir(u);
            std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
            hand_etcd(name, ip, &dir, logs.path(), &peers, TOKEN)
        })
        .collect();
    for p in &mut procs {
        p.wait_healthy();
    }
    let eps: Vec<String> = procs.iter().map(Etcd::endpoint).collect();
    put_keys(&eps.join(","), "legacy", keys);
    let ids: Vec<(String, WalIds)> = up
        .units
        .iter()
        .zip(&procs)
        .map(|(u, p)| (u.clone(), live_ids(&p.endpoint())))
        .collect();
    let cluster_id = ids[0].1.cluster_id;
    stop_leader_last(&mut procs);
    let cluster = initial_cluster(&peers);
    for (u, (name, ip)) in up.units.iter().zip(&peers) {
        let paths = up.paths(u);
        std::fs::create_dir_all(paths.common_dir()).unwrap();
        let dir = up.legacy_dir(u);
        std::fs::write(paths.config_file(), snap_migrated_config(name, &dir, ip)).unwrap();
        std::fs::write(
            paths.env_config_2x(),
            env_config_2x(name, &dir, ip, &cluster, token_in_2x.then_some(TOKEN)),
        )
        .unwrap();
    }
    Legacy {
        ids,
        cluster_id,
        keys,
    }
}

/// A digest of every path, size, mode, mtime and file content under `root`
/// (logs and pid files of a stopped service included).
pub fn hash_tree(root: &Path) -> u64 {
    use std::hash::{Hash, Hasher};
    use std::os::unix::fs::MetadataExt;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut stack = vec![root.to_path_buf()];
    let mut entries = Vec::new();
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p.clone());
            }
            entries.push((p, meta));
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (p, meta) in entries {
        p.hash(&mut h);
        meta.len().hash(&mut h);
        meta.mode().hash(&mut h);
        meta.mtime().hash(&mut h);
        meta.mtime_nsec().hash(&mut h);
        if meta.is_file() {
            std::fs::read(&p).unwrap().hash(&mut h);
        }
    }
    h.finish()
}

/// Every entry name in `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The status of one unit: (workload status, message).
pub fn workload(m: &Model, unit: &str) -> (String, String) {
    let u = m.unit(unit);
    (
        u["workload-status"]["current"]
            .as_str()
            .unwrap_or("")
            .into(),
        u["workload-status"]["message"]
            .as_str()
            .unwrap_or("")
            .into(),
    )
}

/// Asserts what a finished migration leaves on a unit: the member (same
/// IDs) under the canonical dir, nothing under `<name>.etcd`, a snapshot,
/// and etcd.conf.yml at the canonical dir with the token kept.
pub fn assert_migrated(up: &Upgrade, unit: &str, ids: WalIds) {
    let paths = up.paths(unit);
    assert_eq!(
        etcd_charm::wal::read_ids(&paths.data_dir()),
        Ok(Some(ids)),
        "{unit}: the canonical data dir holds the member"
    );
    let legacy = up.legacy_dir(unit);
    assert_eq!(
        etcd_charm::wal::read_ids(&legacy),
        Ok(None),
        "{unit}: nothing left to start in {}",
        legacy.display()
    );
    let snaps = names(&paths.backup_dir());
    assert!(
        snaps.iter().any(|n| n.ends_with(&format!(
            "-migrate-{}-{:x}",
            Upgrade::member_name(unit),
            ids.member_id
        ))),
        "{unit}: snapshot in {snaps:?}"
    );
    let conf = std::fs::read_to_string(paths.config_file()).unwrap();
    assert!(
        conf.contains(&format!("data-dir: \"{}\"", paths.data_dir().display())),
        "{conf}"
    );
    assert!(
        conf.contains(&format!("initial-cluster-token: \"{TOKEN}\"")),
        "{conf}"
    );
    assert!(
        conf.contains("initial-cluster-state: \"existing\""),
        "{conf}"
    );
}
