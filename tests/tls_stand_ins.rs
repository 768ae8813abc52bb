//! The stand-in CA applications (tests/charms/legacy-ca, v4-ca) against a
//! shell requirer (tests/charms/tls-requirer) in jujusim: each requirer
//! unit gets a certificate that `openssl verify` accepts against the CA,
//! with the SANs it asked for; rotate-ca reissues under a new CA; revoke
//! withdraws (legacy) or marks revoked (v4). What the providers publish is
//! read with the charm's own parsers (tls::legacy, tls::v4).

mod sim_support;
use etcd_charm::tls::{cert, key::PrivateKey, legacy, v4};
use sim_support::Sim;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn stand_in(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/charms")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

const REQUIRERS: [&str; 2] = ["tls-requirer/0", "tls-requirer/1"];

fn setup(ca: &str) -> Sim {
    let sim = Sim::new();
    sim.ok(&["deploy", &stand_in(ca)]);
    sim.ok(&["deploy", &stand_in("tls-requirer"), "-n", "2"]);
    sim.ok(&[
        "integrate",
        "tls-requirer:certificates",
        &format!("{ca}:certificates"),
    ]);
    sim.ok(&["settle"]);
    sim
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn bag(sim: &Sim, unit: &str, args: &str) -> BTreeMap<String, String> {
    let rid = sim.exec_ok(
        unit,
        "relation-ids certificates --format=json | jq -r '.[0]'",
    );
    let json = sim.exec_ok(
        unit,
        &format!("relation-get --format=json -r {} {args}", rid.trim()),
    );
    serde_json::from_str(&json).unwrap()
}

/// The requirer's saved server certificate verifies (openssl) against the
/// CA it got, carries the SANs asked for, and is `generation`'s.
fn check_issued(sim: &Sim, unit: &str, dir: &str, generation: u32) -> String {
    let d = sim.root(unit).join(dir);
    assert_eq!(
        read(d.join("verify")).trim(),
        "ok",
        "{}",
        read(d.join("verify.out"))
    );
    let (ca, crt) = (read(d.join("ca.crt")), read(d.join("server.crt")));
    assert!(cert::signed_by(&crt, &ca).unwrap());
    let info = cert::parse(&crt).unwrap();
    let host = format!("{}.test", unit.replace('/', "-"));
    assert_eq!(info.dns_sans, [host]);
    let ips: Vec<String> = info.ip_sans.iter().map(|i| i.to_string()).collect();
    assert_eq!(ips, ["127.0.0.1", "::1"]);
    let ca_info = cert::parse(&ca).unwrap();
    assert!(ca_info.is_ca);
    assert!(
        ca_info.subject.ends_with(&format!("gen {generation}")),
        "{}",
        ca_info.subject
    );
    crt
}

#[test]
fn legacy_ca_issues_rotates_and_withdraws() {
    let sim = setup("legacy-ca");
    for u in REQUIRERS {
        let crt = check_issued(&sim, u, "legacy", 1);
        // The provider generated the key; it is the certificate's.
        let key = PrivateKey::from_pem(&read(sim.root(u).join("legacy/server.key"))).unwrap();
        assert!(key.matches_cert(&crt).unwrap());
        let d = sim.root(u).join("legacy");
        assert!(cert::signed_by(&read(d.join("client.crt")), &read(d.join("ca.crt"))).unwrap());
        // The charm's parser reads the same from the provider's databag.
        let provider = bag(&sim, u, "- legacy-ca/0");
        assert_eq!(
            etcd_charm::tls::protocol_of(&BTreeMap::new(), [&provider]),
            Some(etcd_charm::tls::Protocol::Legacy)
        );
        let issued = legacy::parse_provider(u, &provider).unwrap();
        assert_eq!(issued.server.unwrap().cert.trim(), crt.trim());
        assert!(issued.client.is_some() && issued.ca.is_some());
        // The client_cert_requests answer: a pair for `etcd-client`.
        let asked = &issued.processed_client["etcd-client"];
        let info = cert::parse(&asked.cert).unwrap();
        assert_eq!(info.subject_cn.as_deref(), Some("etcd-client"));
        assert!(cert::signed_by(&asked.cert, issued.ca.as_deref().unwrap()).unwrap());
        assert!(PrivateKey::from_pem(&asked.key)
            .unwrap()
            .matches_cert(&asked.cert)
            .unwrap());
        // And the request it wrote is the legacy one.
        let own = bag(&sim, u, &format!("- {u}"));
        assert_eq!(own["unit_name"], u);
        assert_eq!(own["common_name"], "127.0.0.1");
    }

    let old_ca = read(sim.root("legacy-ca/0").join("ca/ca.crt"));
    sim.ok(&["run-action", "legacy-ca/0", "rotate-ca"]);
    sim.ok(&["settle"]);
    for u in REQUIRERS {
        let crt = check_issued(&sim, u, "legacy", 2);
        assert!(
            !cert::signed_by(&crt, &old_ca).unwrap(),
            "reissued under the new CA"
        );
    }

    sim.ok(&["run-action", "legacy-ca/0", "revoke", "unit=tls-requirer/1"]);
    sim.ok(&["settle"]);
    assert_eq!(
        read(sim.root("tls-requirer/1").join("legacy/verify")).trim(),
        "withdrawn"
    );
    let issued = legacy::parse_provider(
        "tls-requirer/1",
        &bag(&sim, "tls-requirer/1", "- legacy-ca/0"),
    )
    .unwrap();
    assert!(issued.server.is_none());
    check_issued(&sim, "tls-requirer/0", "legacy", 2);
}

#[test]
fn v4_ca_signs_csrs_rotates_and_revokes() {
    let sim = setup("v4-ca");
    for u in REQUIRERS {
        let crt = check_issued(&sim, u, "v4", 1);
        // Signed from our CSR: the requirer's own key is the certificate's.
        let key = PrivateKey::from_pem(&read(sim.root(u).join("key/server.key"))).unwrap();
        assert!(key.matches_cert(&crt).unwrap());
        assert_eq!(read(sim.root(u).join("v4/revoked")).trim(), "false");
        let app = bag(&sim, u, "--app - v4-ca");
        assert_eq!(
            etcd_charm::tls::protocol_of(&app, []),
            Some(etcd_charm::tls::Protocol::V4)
        );
        let certs = v4::parse_certificates(&app).unwrap();
        assert_eq!(certs.len(), 2, "one per requirer unit");
        let csr = read(sim.root(u).join("key/server.csr"));
        let mine = v4::answer_for(&certs, &csr).expect("matched by CSR text");
        assert_eq!(mine.certificate.trim(), crt.trim());
        assert_eq!(mine.chain.len(), 2);
        assert!(!mine.is_revoked());
        let own = bag(&sim, u, &format!("- {u}"));
        assert_eq!(v4::parse_requests(&own).unwrap().len(), 1);
    }
    // A later hook does not re-sign: the same certificate.
    let before = read(sim.root("tls-requirer/0").join("v4/server.crt"));
    sim.ok(&["run-action", "v4-ca/0", "revoke", "unit=nobody/9"]);
    sim.ok(&["settle"]);
    assert_eq!(
        read(sim.root("tls-requirer/0").join("v4/server.crt")),
        before
    );

    sim.ok(&["run-action", "v4-ca/0", "rotate-ca"]);
    sim.ok(&["settle"]);
    for u in REQUIRERS {
        check_issued(&sim, u, "v4", 2);
    }

    sim.ok(&["run-action", "v4-ca/0", "revoke", "unit=tls-requirer/1"]);
    sim.ok(&["settle"]);
    assert_eq!(
        read(sim.root("tls-requirer/1").join("v4/revoked")).trim(),
        "true"
    );
    assert_eq!(
        read(sim.root("tls-requirer/0").join("v4/revoked")).trim(),
        "false"
    );
    let certs = v4::parse_certificates(&bag(&sim, "tls-requirer/1", "--app - v4-ca")).unwrap();
    let csr = read(sim.root("tls-requirer/1").join("key/server.csr"));
    assert!(v4::answer_for(&certs, &csr).unwrap().is_revoked());
}
