//! One unit end to end on real etcd, driven through jujusim's hooks.

mod charm_support;
use charm_support::*;

#[test]
fn one_unit_reaches_active_and_update_status_sees_etcd_stopped() {
    let m = Model::new();
    m.deploy(1);
    m.assert_all_healthy(1);
    let u = m.unit("etcd/0");
    assert_eq!(u["open-ports"], serde_json::json!(["2379/tcp"]));
    let version = u["workload-version"].as_str().unwrap().to_string();
    assert!(version.starts_with("3."), "workload version {version:?}");

    // The hook order Juju uses for a deploy, each hook once, all succeeded.
    let log = m.ok(&["log", "--unit", "etcd/0"]);
    let hooks: Vec<&str> = [
        "install",
        "cluster-relation-created",
        "leader-elected",
        "config-changed",
        "start",
    ]
    .into_iter()
    .filter(|h| log.contains(h))
    .collect();
    assert_eq!(hooks.len(), 5, "hook log:\n{log}");

    let ep = m.endpoint("etcd/0");
    put_keys(&ep, "single", 10);
    assert_eq!(members(&ep).len(), 1);

    // Actions: a snapshot of the keyspace into a dated file, and health.
    let out = m.ok(&["run-action", "etcd/0", "snapshot", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let path = v["results"]["snapshot"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"));
    let size: u64 = v["results"]["snapshot"]["size"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().len(), size);
    assert!(size > 4096, "a bbolt file of real size: {size}");
    let st = etcdctl(&ep, &["snapshot", "status", path, "-w", "json"]);
    assert!(
        st.status.success(),
        "etcdctl reads the snapshot: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let out = m.ok(&["run-action", "etcd/0", "health", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["results"]["healthy"], "true", "{out}");
    assert_eq!(v["results"]["members"]["etcd0"]["healthy"], "true", "{out}");

    // A client application related to `db` gets the connection string.
    let client = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/etcd-client");
    m.ok(&["deploy", client.to_str().unwrap()]);
    m.ok(&["integrate", "etcd:db", "etcd-client:etcd"]);
    let client_addr =
        m.status()["applications"]["etcd-client"]["units"]["etcd-client/0"]["address"].clone();
    assert_ne!(
        client_addr.as_str(),
        Some(m.address("etcd/0").as_str()),
        "every machine has its own address"
    );
    let cs = m.dir.join("units/etcd-client-0/root/connection_string");
    let cs = std::fs::read_to_string(&cs).unwrap_or_else(|e| panic!("{}: {e}", cs.display()));
    assert_eq!(cs.trim(), ep);

    // Healthy: update-status keeps it active.
    m.ok(&["update-status", "etcd/0"]);
    m.assert_all_healthy(1);

    // Stopped behind the charm's back: update-status says so.
    m.kill_etcd("etcd/0");
    wait_until("etcd to die", std::time::Duration::from_secs(10), || {
        etcdctl(&ep, &["endpoint", "health"]).status.code() != Some(0)
    });
    m.ok(&["update-status", "etcd/0"]);
    let (_, s, msg) = m.workloads().remove(0);
    assert_eq!(s, "blocked", "{msg}");
    assert!(msg.contains("not running"), "{msg}");

    // A reboot runs start, which brings it back on its data.
    let ids = m.wal_ids("etcd/0");
    m.ok(&["reboot", "etcd/0"]);
    m.assert_all_healthy(1);
    assert_eq!(m.wal_ids("etcd/0"), ids);
    assert_keys(&ep, "single", 10);
}
