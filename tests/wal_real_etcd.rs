//! The WAL reader against data dirs written by the real etcd (Debian 3.4.23):
//! start etcd, ask it for its IDs, stop it, and read the same IDs from disk.
//!
//! Addresses: 127.77.0.0/16 belongs to this file alone (every 127/8 address
//! is local), so these tests can run beside everyone else's etcd.

mod etcd_support;
use etcd_support::{ctl, stop_leader_last, Etcd, Spec, Status};

use etcd_charm::layout::{self, Role};
use etcd_charm::paths::Paths;
use etcd_charm::wal;
use std::path::Path;

/// A member of a new cluster; `peers` are (name, ip) of all members.
fn start(name: &str, ip: &str, data_dir: &Path, log_dir: &Path, peers: &[(&str, &str)]) -> Etcd {
    Spec::new(name, ip, data_dir, &log_dir.join(format!("{name}.log")))
        .peers(peers)
        .token("walTST")
        .args(&["--logger", "zap", "--log-outputs", "stderr"])
        .start()
}

/// Member IDs by name, from `member list -w json`, and the cluster ID.
fn member_list(endpoint: &str) -> (Vec<(String, u64)>, u64) {
    let json = ctl(endpoint, &["member", "list", "-w", "json"]).expect("member list");
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
    let mut etcd = start(
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
        ctl(&etcd.endpoint(), &["put", &format!("k{i}"), "v"]).expect("put");
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
    let mut members: Vec<Etcd> = peers
        .iter()
        .map(|(name, ip)| start(name, ip, &tmp.path().join(name), tmp.path(), &peers))
        .collect();
    let statuses: Vec<Status> = members.iter_mut().map(Etcd::wait_status).collect();
    let cluster = statuses[0].ids.cluster_id;
    let (listed, listed_cluster) = member_list(&members[0].endpoint());
    assert_eq!(listed_cluster, cluster);
    assert_eq!(listed.len(), 3);
    for (st, etcd) in statuses.iter().zip(&members) {
        assert_eq!(
            st.ids.cluster_id, cluster,
            "{} is in another cluster",
            etcd.name
        );
        assert!(listed.contains(&(etcd.name.clone(), st.ids.member_id)));
    }

    stop_leader_last(&mut members);

    for etcd in &members {
        let i = peers.iter().position(|(n, _)| *n == etcd.name).unwrap();
        assert_eq!(
            wal::read_ids(&etcd.data_dir),
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
    let mut etcd = start(
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
