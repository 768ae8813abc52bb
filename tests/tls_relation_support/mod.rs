//! Shared by tests/charm_tls_relation*.rs: a plain 3-unit cluster related
//! to a stand-in CA moves to TLS under a writer; what every protocol must
//! end with is asserted here.
#![allow(dead_code)]

use super::upgrade_support::*;
use super::writer_support::{self, Writer};

use etcd_charm::tls::files::TlsPaths;
use std::path::Path;
use std::time::{Duration, Instant};

pub const KEYS: usize = 20;
/// Generous bounds (2 shared cores): outcomes are asserted, not speed.
pub const TRANSITION: Duration = Duration::from_secs(400);

fn stand_in(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/charms")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

pub fn tls_paths(m: &Model, unit: &str) -> TlsPaths {
    TlsPaths::new(&etcd_charm::paths::Paths::new(m.root(unit)))
}

fn conf(m: &Model, unit: &str) -> String {
    let p = etcd_charm::paths::Paths::new(m.root(unit));
    std::fs::read_to_string(p.config_file()).unwrap_or_default()
}

fn https(m: &Model, u: &str) -> String {
    format!("https://{}:2379", m.address(u))
}

/// Member list as (id, peer URLs, client URLs), over https with the pair
/// in ETCDCTL_* (set by the test), from `eps`.
fn urls(eps: &str) -> Option<Vec<(String, String, String)>> {
    let out = etcdctl(eps, &["member", "list"]);
    if !out.status.success() {
        return None;
    }
    let mut v: Vec<(String, String, String)> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(", ").collect();
            (f[0].into(), f[3].into(), f[4].into())
        })
        .collect();
    v.sort();
    Some(v)
}

/// The charm's ERROR lines (why a hook failed), for a failure message.
fn charm_errors(m: &Model) -> String {
    let log = std::fs::read_to_string(m.dir.join("juju-log.jsonl")).unwrap_or_default();
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("\"ERROR\"")).collect();
    errors[errors.len().saturating_sub(8)..].join("\n")
}

/// A TLS handshake with `url` presenting `cert`: Err with curl's words when
/// the server refused the certificate. etcd's peer listener drops a plain
/// HTTP/1.1 request once the handshake is done (curl: "Empty reply"), so
/// that counts as accepted.
pub fn peer_handshake(url: &str, ca: &Path, cert: &Path, key: &Path) -> Result<(), String> {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--http1.1", "--max-time", "10", "-o", "/dev/null"])
        .arg("--cacert")
        .arg(ca)
        .arg("--cert")
        .arg(cert)
        .arg("--key")
        .arg(key)
        .arg(url)
        .output()
        .expect("curl installed");
    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match out.status.code() {
        Some(0) | Some(52) => Ok(()),
        _ => Err(err),
    }
}

pub fn etcd_pid(m: &Model, unit: &str) -> Option<String> {
    std::fs::read_to_string(m.root(unit).join("run/etcd-charm/etcd.etcd.pid"))
        .ok()
        .map(|s| s.trim().to_string())
}

/// A plain 3-unit cluster related to the stand-in `ca` (legacy-ca, v4-ca)
/// while a writer runs, asserted on https with IDs, keys and writes kept;
/// a client without a certificate refused. Returns the model, its sorted
/// units, etcd/0's TLS paths and the https endpoints.
pub fn move_to_tls(ca: &str) -> (Model, Vec<String>, TlsPaths, Vec<String>) {
    let m = Model::new();
    let (units, f0, eps) = move_model_to_tls(&m, ca, |m| m.deploy(3));
    (m, units, f0, eps)
}

/// As [`move_to_tls`], in a model the caller owns, deployed by `deploy`
/// (e.g. 3 units on systemd machines, whose guard must outlive the model's
/// use): returns the sorted units, etcd/0's TLS paths, the https endpoints.
pub fn move_model_to_tls(
    m: &Model,
    ca: &str,
    deploy: impl FnOnce(&Model),
) -> (Vec<String>, TlsPaths, Vec<String>) {
    // A test before this one in the same process pointed etcdctl and the
    // writer at its own (now gone) cluster's files: this cluster starts plain.
    for v in ["ETCDCTL_CACERT", "ETCDCTL_CERT", "ETCDCTL_KEY"] {
        std::env::remove_var(v);
    }
    writer_support::forget_tls();
    deploy(m);
    let mut units = m.units();
    units.sort();
    let n = units.len();
    m.assert_all_healthy(n);
    put_keys(&m.endpoints(), "before", KEYS);
    let ids_before = members(&m.endpoints());
    let cluster_before = m.cluster_id();
    let plain: Vec<String> = units.iter().map(|u| m.endpoint(u)).collect();

    writer_support::follow_https();
    let mut w = Writer::start(&plain);
    std::thread::sleep(Duration::from_secs(2));
    w.disturbance_begins();
    m.ok(&["deploy", &stand_in(ca)]);
    let related = Instant::now();
    let f0 = tls_paths(m, &units[0]);
    let all_https = std::thread::scope(|s| {
        let relate = s.spawn(|| {
            let out = m.run(&[
                "integrate",
                "etcd:certificates",
                &format!("{ca}:certificates"),
            ]);
            assert!(
                out.status.success(),
                "integrate: {}\n{}",
                String::from_utf8_lossy(&out.stderr),
                charm_errors(m)
            );
        });
        // The writer follows to https once the issued pair is on disk.
        wait_until("the issued client pair on etcd/0", TRANSITION, || {
            f0.client_key.exists() && f0.ca.exists() && f0.client_cert.exists()
        });
        let read = |p: &Path| std::fs::read_to_string(p).unwrap();
        writer_support::rotate_tls(&read(&f0.ca), &read(&f0.client_cert), &read(&f0.client_key));
        std::env::set_var("ETCDCTL_CACERT", &f0.ca);
        std::env::set_var("ETCDCTL_CERT", &f0.client_cert);
        std::env::set_var("ETCDCTL_KEY", &f0.client_key);
        relate.join().unwrap();
        let eps: Vec<String> = units.iter().map(|u| https(m, u)).collect();
        let eps = eps.join(",");
        let deadline = Instant::now() + TRANSITION;
        loop {
            let done = urls(&eps).is_some_and(|v| {
                v.len() == n
                    && v.iter()
                        .all(|(_, p, c)| p.starts_with("https://") && c.starts_with("https://"))
            });
            if done {
                break related.elapsed();
            }
            assert!(
                Instant::now() < deadline,
                "members never all on https: {:?}\n{}",
                urls(&eps),
                tail(&String::from_utf8_lossy(&m.run(&["log"]).stdout), 60)
            );
            m.ok(&["update-status"]);
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    // Each turn was given back with the member healthy on its new URL,
    // not after the bound ran out waiting on the URL it left.
    let log = String::from_utf8_lossy(&m.run(&["log", "--juju-log"]).stdout).to_string();
    let late: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("giving back the rolling turn with the cluster unhealthy"))
        .collect();
    assert!(late.is_empty(), "turns given back unhealthy: {late:#?}");
    // Let every unit settle on its final config (update-status re-runs).
    let want = format!("Healthy with {n} known peers");
    let want = want.as_str();
    wait_until("every unit active and healthy on TLS", TRANSITION, || {
        let w = m.workloads();
        let ok = w.len() == n
            && w.iter()
                .all(|(_, s, msg)| s == "active" && msg.starts_with(want));
        if !ok {
            m.ok(&["update-status"]);
        }
        ok
    });
    // Then every member demands the cluster's peer CN of its peers (one
    // more roll, under the writer): each unit's new leaf carries it.
    let peer_cn = etcd_charm::charm::certificates_peer::for_token(&m.token());
    let demands = format!("\nPeerTLSInfo:\n  AllowedCN: \"{peer_cn}\"\n");
    wait_until("every member demanding the peer CN", TRANSITION, || {
        let ok = units.iter().all(|u| conf(m, u).contains(&demands));
        if !ok {
            m.ok(&["update-status"]);
        }
        ok
    });
    wait_until(
        "every unit active after the peer CN roll",
        TRANSITION,
        || {
            let w = m.workloads();
            let ok = w
                .iter()
                .all(|(_, s, msg)| s == "active" && msg.starts_with(want));
            if !ok {
                m.ok(&["update-status"]);
            }
            ok
        },
    );
    w.disturbance_ends();
    std::thread::sleep(Duration::from_secs(2));
    let r = w.finish(Duration::from_secs(60));
    r.assert_available(
        &format!("plain → TLS ({ca}) on {n} units"),
        writer_support::ROLLING,
    );
    eprintln!(
        "relate → every member on https: {:.1} s",
        all_https.as_secs_f64()
    );

    let eps: Vec<String> = units.iter().map(|u| https(m, u)).collect();
    let joined = eps.join(",");
    assert_eq!(members(&joined), ids_before, "the same members, by ID");
    for (u, ep) in units.iter().zip(&eps) {
        assert_keys(ep, "before", KEYS);
        let c = conf(m, u);
        assert!(c.contains("client-cert-auth: true"), "{u}: {c}");
        // (initial-cluster keeps its http URLs: etcd ignores it on a WAL.)
        let plain_urls = c
            .lines()
            .filter(|l| {
                (l.starts_with("listen-") && !l.starts_with("listen-metrics-urls:"))
                    || l.starts_with("advertise-")
                    || l.starts_with("initial-advertise-")
            })
            .any(|l| l.contains("http://"));
        assert!(!plain_urls, "{u} still serves plain http: {c}");
        // The one plain listener: /health and /metrics on its own loopback
        // address, for the nrpe checks (issue 19.9).
        let metrics = format!("listen-metrics-urls: \"http://{}:2381\"", m.address(u));
        assert!(
            m.address(u).starts_with("127.") && c.lines().any(|l| l == metrics),
            "{u}: {c}"
        );
        use std::os::unix::fs::PermissionsExt;
        let f = tls_paths(m, u);
        for k in [&f.server_key, &f.client_key] {
            let mode = std::fs::metadata(k).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{} is mode {mode:o}", k.display());
        }
        assert_eq!(
            std::fs::read_to_string(&f.client_cert).unwrap(),
            std::fs::read_to_string(&f0.client_cert).unwrap(),
            "{u} has another client pair"
        );
        let leaf = etcd_charm::tls::cert::parse(&std::fs::read_to_string(&f.server_cert).unwrap())
            .unwrap();
        assert_eq!(
            leaf.subject_cn.as_deref(),
            Some(peer_cn.as_str()),
            "{u}'s leaf"
        );
        // The peer port takes this member's own certificate, and refuses
        // the client pair: signed by the same CA, another CN (issue 19.14).
        let peer = format!("https://{}:2380/version", m.address(u));
        assert_eq!(
            peer_handshake(&peer, &f0.ca, &f.server_cert, &f.server_key),
            Ok(()),
            "{u}"
        );
        let refused = peer_handshake(&peer, &f0.ca, &f0.client_cert, &f0.client_key);
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.contains("bad certificate")),
            "{u}'s peer port and a client certificate of the same CA: {refused:?}"
        );
    }
    assert_eq!(m.cluster_id(), cluster_before, "the same cluster");

    // A client without a certificate is refused, over https and http.
    let no_cert = std::process::Command::new("etcdctl")
        .env_remove("ETCDCTL_CERT")
        .env_remove("ETCDCTL_KEY")
        .env("ETCDCTL_CACERT", &f0.ca)
        .args([
            "--endpoints",
            &eps[0],
            "--dial-timeout=3s",
            "--command-timeout=5s",
        ])
        .args(["get", "before/0"])
        .output()
        .unwrap();
    assert!(
        !no_cert.status.success(),
        "a client without a certificate read a key"
    );
    let plain_get = std::process::Command::new("etcdctl")
        .env_remove("ETCDCTL_CACERT")
        .env_remove("ETCDCTL_CERT")
        .env_remove("ETCDCTL_KEY")
        .args([
            "--endpoints",
            &plain[0],
            "--dial-timeout=3s",
            "--command-timeout=5s",
        ])
        .args(["get", "before/0"])
        .output()
        .unwrap();
    assert!(!plain_get.status.success(), "plain http still answers");

    (units, f0, eps)
}
