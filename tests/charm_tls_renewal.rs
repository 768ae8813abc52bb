//! Issue 19.2: v4 certificates are renewed before they run out. A v4 TLS
//! cluster (tests/charms/v4-ca) gets short-lived leaves (`validity-minutes`,
//! then `reissue`: same CA); with update-status running as Juju runs it,
//! before the leaves' end every unit serves a renewed server certificate
//! (read off the TLS handshake), `db` carries a renewed client certificate,
//! and writes keep succeeding throughout.

mod tls_relation_support;
mod upgrade_support;
mod writer_support;
use etcd_charm::tls::cert;
use std::time::{Duration, Instant};
use tls_relation_support::*;
use upgrade_support::*;

const MINUTES: i64 = 4;

fn now() -> i64 {
    etcd_charm::charm::expiry::now_unix()
}

/// The notAfter of the certificate `unit` serves on `port`.
fn served_end(m: &Model, unit: &str, port: u16) -> Option<i64> {
    let out = std::process::Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("{}:{port}", m.address(unit)),
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let start = text.find("-----BEGIN CERTIFICATE-----")?;
    let end = text.find("-----END CERTIFICATE-----")? + "-----END CERTIFICATE-----".len();
    cert::parse(&text[start..end]).ok().map(|i| i.not_after)
}

/// The client_cert etcd/0 published on db, as etcd-client/0 reads it.
fn db_client_end(m: &Model, unit: &str) -> i64 {
    let bag = m.published_to("etcd-client/0", "etcd", unit);
    let pem = bag["client_cert"].as_str().expect("client_cert on db");
    cert::parse(pem).unwrap().not_after
}

#[test]
fn short_lived_v4_certificates_are_renewed_before_their_end() {
    let (m, units, _f0, eps) = move_to_tls("v4-ca");
    let client = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/etcd-client");
    m.ok(&["deploy", client.to_str().unwrap()]);
    m.ok(&["integrate", "etcd:db", "etcd-client:etcd"]);
    m.ok(&["settle"]);

    // Leaves of MINUTES minutes from the same CA: files only, no restart.
    m.ok(&["config", "v4-ca", &format!("validity-minutes={MINUTES}")]);
    m.ok(&["run-action", "v4-ca/0", "reissue"]);
    m.ok(&["settle"]);
    let short = now() + (MINUTES + 1) * 60;
    wait_until(
        "every unit serving its short-lived leaf",
        TRANSITION,
        || {
            let ok = units.iter().all(|u| {
                served_end(&m, u, 2379).is_some_and(|e| e < short)
                    && served_end(&m, u, 2380).is_some_and(|e| e < short)
            }) && db_client_end(&m, &units[0]) < short;
            if !ok {
                m.ok(&["update-status"]);
            }
            ok
        },
    );
    let ends: Vec<i64> = units
        .iter()
        .map(|u| served_end(&m, u, 2379).unwrap())
        .collect();
    let client_end = db_client_end(&m, &units[0]);
    let first_end = *ends.iter().chain([&client_end]).min().unwrap();
    eprintln!(
        "short leaves end in {} s (server) / {} s (client)",
        first_end - now(),
        client_end - now()
    );

    // Juju's update-status, sped up; a write each round.
    let started = Instant::now();
    let joined = eps.join(",");
    let mut n = 0;
    while now() < first_end - 40 {
        m.ok(&["update-status"]);
        let out = etcdctl(&joined, &["put", &format!("renew-{n}"), "v"]);
        assert!(
            out.status.success(),
            "write {n} failed {} s before the leaves' end: {}",
            first_end - now(),
            String::from_utf8_lossy(&out.stderr)
        );
        n += 1;
        std::thread::sleep(Duration::from_secs(8));
    }
    for (u, old) in units.iter().zip(&ends) {
        for port in [2379, 2380] {
            let e = served_end(&m, u, port);
            assert!(
                e.is_some_and(|e| e > *old),
                "{u}:{port} still serves the leaf ending in {} s (no renewal); served end {e:?}",
                old - now()
            );
        }
    }
    let renewed = db_client_end(&m, &units[0]);
    assert!(
        renewed > client_end,
        "db still carries the client certificate ending in {} s",
        client_end - now()
    );
    for u in &units {
        assert_eq!(
            db_client_end(&m, u),
            renewed,
            "{u} publishes another client_cert"
        );
    }
    // The renewed client pair on disk is the one etcd accepts.
    let out = etcdctl(&joined, &["endpoint", "health"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = etcdctl(&joined, &["put", "renewed", "v"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "{n} writes over {:.0} s, every leaf renewed before its end",
        started.elapsed().as_secs_f64()
    );
}
