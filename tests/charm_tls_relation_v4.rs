//! Issue 11, items 1–2 with the v4 stand-in CA (tests/charms/v4-ca): each
//! unit's own RSA key and CSR, the leader's leaf shared as the one client
//! pair; the same plain → TLS move under a writer
//! (tests/tls_relation_support). Then what a TLS cluster must still do
//! that plain http did: the maintenance actions, the quiet update-status.

mod tls_relation_support;
mod upgrade_support;
mod writer_support;
use etcd_charm::etcd::{self, ClientTls, Endpoints};
use etcd_charm::tls::{cert, key::PrivateKey};
use serde_json::Value;
use tls_relation_support::*;
use upgrade_support::*;

/// `run-action` on `unit` that must complete; its results.
fn action(m: &Model, unit: &str, name: &str, params: &[&str]) -> Value {
    let mut args = vec!["run-action", unit, name, "--format", "json"];
    args.extend_from_slice(params);
    let out = m.run(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}: {text}"));
    assert_eq!(v["status"], "completed", "{name} on a TLS cluster: {text}");
    v["results"].clone()
}

/// Hook-tool calls of `unit`'s latest update-status run (it exited 0).
fn update_status_calls(m: &Model, unit: &str) -> u64 {
    let log = m.ok(&["log", "--format=json"]);
    let run: Value = log
        .lines()
        .rev()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["hook"] == "update-status" && r["unit"] == unit)
        .unwrap_or_else(|| panic!("no update-status ran on {unit}"));
    assert_eq!(run["exit"], 0, "update-status failed: {run}");
    run["tool_calls"].as_u64().unwrap()
}

/// What every etcd unit published on db, as etcd-client/0 reads it (all
/// the same).
fn db_published(m: &Model, units: &[String]) -> Vec<Value> {
    let published: Vec<Value> = units
        .iter()
        .map(|u| m.published_to("etcd-client/0", "etcd", u))
        .collect();
    assert!(published.windows(2).all(|w| w[0] == w[1]), "{published:?}");
    published
}

#[test]
fn a_plain_cluster_related_to_a_v4_ca_moves_to_tls_one_member_at_a_time() {
    let (m, units, f0, _eps) = move_to_tls("v4-ca");
    // Each unit's server key is its own; the client pair is one.
    let key = |u: &str| std::fs::read_to_string(tls_paths(&m, u).server_key).unwrap();
    assert_ne!(
        key(&units[0]),
        key(&units[1]),
        "two units share a server key"
    );
    assert!(f0.client_cert.exists());

    // Issue 19.8: the client pair on db is a client certificate of its own
    // (its own key), never a unit's server key, and it reaches etcd.
    let client = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/etcd-client");
    m.ok(&["deploy", client.to_str().unwrap()]);
    m.ok(&["integrate", "etcd:db", "etcd-client:etcd"]);
    m.ok(&["settle"]);
    let published = db_published(&m, &units);
    let p = &published[0];
    let client_key = p["client_key"].as_str().expect("client_key on db");
    let client_cert = p["client_cert"].as_str().expect("client_cert on db");
    let leadership = m.ok(&["exec", &units[0], "--", "leader-get", "--format=json"]);
    let leadership: Value = serde_json::from_str(&leadership).unwrap();
    for u in &units {
        let server_key = key(u);
        // (assert!, not assert_ne!: a failure must not print the key)
        assert!(
            client_key.trim() != server_key.trim(),
            "the client_key published on db is {u}'s server key"
        );
        let server_cert = std::fs::read_to_string(tls_paths(&m, u).server_cert).unwrap();
        assert_ne!(
            client_cert.trim(),
            server_cert.trim(),
            "client_cert is {u}'s server certificate"
        );
        assert!(
            !PrivateKey::from_pem(&server_key)
                .unwrap()
                .matches_cert(client_cert)
                .unwrap(),
            "client_cert carries {u}'s server key"
        );
        for (k, v) in leadership.as_object().unwrap() {
            assert!(
                v.as_str().unwrap_or("").trim() != server_key.trim(),
                "leadership data {k} holds {u}'s server key"
            );
        }
    }
    assert!(
        PrivateKey::from_pem(client_key)
            .unwrap()
            .matches_cert(client_cert)
            .unwrap(),
        "client_cert and client_key are no pair"
    );
    let ca = p["client_ca"].as_str().unwrap();
    assert!(cert::signed_by(client_cert, ca).unwrap());
    let conn = p["connection_string"].as_str().unwrap();
    let urls: Vec<String> = conn.split(',').map(String::from).collect();
    let theirs = ClientTls {
        ca_pem: ca.into(),
        cert_pem: client_cert.into(),
        key_pem: client_key.into(),
    };
    let v = etcd::block_on(etcd::view(Endpoints::new(urls, Some(theirs))))
        .expect("the db client pair authenticates against etcd");
    assert_eq!(v.members.len(), 3);

    // Issue 19.6: compact and defrag reach the members over TLS.
    let r = action(&m, &units[1], "compact", &["physical=true"]);
    assert!(
        r["output"]
            .as_str()
            .unwrap_or("")
            .starts_with("compacted revision"),
        "{r}"
    );
    let r = action(&m, &units[0], "defrag", &[]);
    for u in &units {
        let k = u.replace('/', "");
        assert!(
            r["members"][&k]["db-size-after"].is_string(),
            "{u} not defragmented: {r}"
        );
    }

    // Issue 19.14: a settled TLS unit takes the quiet update-status (at
    // most 4 hook-tool calls, as on plain http), not the full reconcile.
    m.ok(&["update-status"]);
    m.ok(&["settle"]);
    for u in &units {
        m.ok(&["update-status", u]);
        let calls = update_status_calls(&m, u);
        assert!(
            calls <= 4,
            "{u}'s update-status on TLS made {calls} hook-tool calls (the quiet path takes ≤ 4)"
        );
    }
}
