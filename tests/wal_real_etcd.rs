//! The WAL reader against data dirs written by the real etcd (Debian 3.4.23):
//! start etcd, ask it for its IDs, stop it, and read the same IDs from disk.
//!
//! Addresses: 127.77.0.0/16 belongs to this file alone (every 127/8 address
//! is local), so these tests can run beside everyone else's etcd.

use etcd_charm::layout::{self, Role};
use etcd_charm::paths::Paths;
use etcd_charm::wal::{self, WalIds};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const START_TIMEOUT: Duration = Duration::from_secs(20);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// One etcd process; killed on drop, so a failing test leaves nothing behind.
struct Etcd {
    name: String,
    ip: String,
    child: Option<Child>,
    log: PathBuf,
}

impl Etcd {
    /// Starts a member of a new cluster; `peers` are (name, ip) of all members.
    fn start(
        name: &str,
        ip: &str,
        data_dir: &Path,
        log_dir: &Path,
        peers: &[(&str, &str)],
    ) -> Etcd {
        let log = log_dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("create etcd log");
        let initial_cluster = peers
            .iter()
            .map(|(n, a)| format!("{n}=http://{a}:2380"))
            .collect::<Vec<_>>()
            .join(",");
        let mut cmd = Command::new("etcd");
        // With a stray ETCD_* variable, etcd would run a different member.
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("ETCD") {
                cmd.env_remove(k);
            }
        }
        cmd.args(["--name", name])
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--listen-client-urls", &format!("http://{ip}:2379")])
            .args(["--advertise-client-urls", &format!("http://{ip}:2379")])
            .args(["--listen-peer-urls", &format!("http://{ip}:2380")])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://{ip}:2380"),
            ])
            .args(["--initial-cluster", &initial_cluster])
            .args(["--initial-cluster-token", "walTST"])
            .args(["--initial-cluster-state", "new"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("clone log handle"))
            .stderr(out);
        let child = cmd
            .spawn()
            .expect("spawn etcd (is /usr/bin/etcd installed?)");
        Etcd {
            name: name.into(),
            ip: ip.into(),
            child: Some(child),
            log,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://{}:2379", self.ip)
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// `endpoint status` of this member, waiting until it answers.
    fn wait_status(&mut self) -> Status {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(st) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "etcd {} exited with {st} before answering; log tail:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            let out = etcdctl(&self.endpoint(), &["endpoint", "status", "-w", "json"]);
            if let Ok(json) = out {
                return Status::parse(&json);
            }
            if Instant::now() > deadline {
                panic!(
                    "etcd {} gave no endpoint status within {START_TIMEOUT:?} (last: {out:?}); \
                     log tail:\n{}",
                    self.name,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM and a bounded wait, then SIGKILL.
    fn stop(&mut self) {
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

fn etcdctl(endpoint: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            endpoint,
            "--dial-timeout",
            "1s",
            "--command-timeout",
            "2s",
        ])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run etcdctl: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// What `etcdctl endpoint status -w json` says about one member.
struct Status {
    ids: WalIds,
    leader: u64,
}

impl Status {
    fn parse(json: &str) -> Status {
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

/// Member IDs by name, from `member list -w json`, and the cluster ID.
fn member_list(endpoint: &str) -> (Vec<(String, u64)>, u64) {
    let json = etcdctl(endpoint, &["member", "list", "-w", "json"]).expect("member list");
    let v: serde_json::Value = serde_json::from_str(&json).expect("member list JSON");
    let cluster = v["header"]["cluster_id"].as_u64().expect("cluster_id");
    let members = v["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap_or_default().to_string(),
                m["ID"].as_u64().expect("member ID"),
            )
        })
        .collect();
    (members, cluster)
}

#[test]
fn single_member_ids_match_the_wal() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut etcd = Etcd::start(
        "solo",
        "127.77.0.1",
        &data,
        tmp.path(),
        &[("solo", "127.77.0.1")],
    );
    let status = etcd.wait_status();
    let (members, cluster) = member_list(&etcd.endpoint());
    assert_eq!(members, vec![("solo".to_string(), status.ids.member_id)]);
    assert_eq!(cluster, status.ids.cluster_id);
    // Some entries after the metadata record, as on any live member.
    for i in 0..5 {
        etcdctl(&etcd.endpoint(), &["put", &format!("k{i}"), "v"]).expect("put");
    }
    etcd.stop();

    assert_eq!(wal::read_ids(&data), Ok(Some(status.ids)));
    assert_eq!(
        wal::read_ids_in_wal_dir(&data.join("member/wal")),
        Ok(Some(status.ids))
    );
}

#[test]
fn three_member_cluster_ids_match_each_wal() {
    let tmp = tempfile::tempdir().unwrap();
    let peers = [
        ("m1", "127.77.1.1"),
        ("m2", "127.77.1.2"),
        ("m3", "127.77.1.3"),
    ];
    let mut members: Vec<(Etcd, PathBuf)> = peers
        .iter()
        .map(|(name, ip)| {
            let data = tmp.path().join(name);
            (Etcd::start(name, ip, &data, tmp.path(), &peers), data)
        })
        .collect();
    let statuses: Vec<Status> = members.iter_mut().map(|(e, _)| e.wait_status()).collect();
    let cluster = statuses[0].ids.cluster_id;
    let (listed, listed_cluster) = member_list(&members[0].0.endpoint());
    assert_eq!(listed_cluster, cluster);
    assert_eq!(listed.len(), 3);
    for (st, (etcd, _)) in statuses.iter().zip(&members) {
        assert_eq!(
            st.ids.cluster_id, cluster,
            "{} is in another cluster",
            etcd.name
        );
        assert!(listed.contains(&(etcd.name.clone(), st.ids.member_id)));
    }

    // Followers first: a lone leader stepping down is what makes stops slow.
    let leader = statuses[0].leader;
    members.sort_by_key(|(e, _)| {
        let st = &statuses[peers.iter().position(|(n, _)| *n == e.name).unwrap()];
        st.ids.member_id == leader
    });
    for (etcd, _) in members.iter_mut() {
        etcd.stop();
    }

    for (etcd, data) in &members {
        let i = peers.iter().position(|(n, _)| *n == etcd.name).unwrap();
        assert_eq!(
            wal::read_ids(data),
            Ok(Some(statuses[i].ids)),
            "WAL of {}",
            etcd.name
        );
    }
}

#[test]
fn legacy_member_dir_is_found_by_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = Paths::new(tmp.path());
    let legacy = paths.legacy_data_dir("etcd0");
    assert!(legacy.ends_with("var/snap/etcd/current/etcd0.etcd"));
    let mut etcd = Etcd::start(
        "etcd0",
        "127.77.0.2",
        &legacy,
        tmp.path(),
        &[("etcd0", "127.77.0.2")],
    );
    let status = etcd.wait_status();
    etcd.stop();

    assert_eq!(wal::read_ids(&legacy), Ok(Some(status.ids)));
    // The canonical dir holds the legacy one but no member of its own.
    assert_eq!(wal::read_ids(&paths.data_dir()), Ok(None));

    let common = paths.common_dir();
    std::fs::create_dir_all(&common).unwrap();
    // What a config naming the canonical dir would make etcd do: start empty.
    std::fs::write(
        paths.config_file(),
        "name: etcd0\ndata-dir: /var/snap/etcd/current\n",
    )
    .unwrap();
    let seen = layout::observe(&paths, "etcd0");
    let roles: Vec<(Role, bool)> = seen.locations.iter().map(|l| (l.role, l.exists)).collect();
    assert_eq!(roles, vec![(Role::Canonical, true), (Role::Legacy, true)]);
    assert_eq!(seen.locations[0].member, Ok(None));
    assert_eq!(seen.locations[1].member, Ok(Some(status.ids)));
    let refusal = layout::start_guard(&paths).expect_err("must refuse an empty canonical dir");
    assert!(refusal.contains("etcd0.etcd"), "{refusal}");
    assert!(
        refusal.contains(&format!("{:x}", status.ids.member_id)),
        "{refusal}"
    );

    // The snap's 2.x → 3.x rewrite points at the legacy dir: fine to start.
    std::fs::write(
        paths.config_file(),
        "name: 'etcd0'\ndata-dir: '/var/snap/etcd/current/etcd0.etcd'\nwal-dir: ''\nsnapshot-count:\n",
    )
    .unwrap();
    assert_eq!(layout::start_guard(&paths), Ok(()));
}
