//! The tls module against certificates made here with rcgen: a test CA
//! signs our own CSRs, as a v4 provider would.

use super::cert::{self, KeyType};
use super::files::{self, Found, KeyState, Material};
use super::key::{self, KeyAlg};
use super::*;
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType, IsCa, Issuer,
    KeyPair,
};

struct TestCa {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn test_ca(name: &str) -> TestCa {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    let pem = p.self_signed(&key).unwrap().pem();
    TestCa {
        pem,
        issuer: Issuer::new(p, key),
    }
}

fn sign(ca: &TestCa, csr: &str) -> String {
    CertificateSigningRequestParams::from_pem(csr)
        .unwrap()
        .signed_by(&ca.issuer)
        .unwrap()
        .pem()
}

fn sans() -> Vec<String> {
    sans::unit_sans(["10.0.0.5", "fd00::5", "10.0.0.5"], "etcd-0.lxd")
}

#[test]
fn our_rsa_key_and_csr_become_a_certificate_that_reads_back() {
    let ca = test_ca("Test CA");
    let k = key::generate(KeyAlg::Rsa2048).unwrap();
    assert!(k.pem().starts_with("-----BEGIN PRIVATE KEY-----"));
    assert_eq!(
        cert::key_type_of_key(k.pem()).unwrap(),
        KeyType::Rsa { bits: 2048 }
    );
    let csr = key::csr(&k, "10.0.0.5", &sans()).unwrap();
    let (cn, asked) = key::csr_names(&csr).unwrap();
    assert_eq!(cn.as_deref(), Some("10.0.0.5"));
    assert_eq!(asked.len(), 5, "{asked:?}");

    let leaf = sign(&ca, &csr);
    let info = cert::parse(&leaf).unwrap();
    assert_eq!(info.subject_cn.as_deref(), Some("10.0.0.5"));
    assert_eq!(info.dns_sans, ["etcd-0.lxd"]);
    let ips: Vec<String> = info.ip_sans.iter().map(|i| i.to_string()).collect();
    assert_eq!(ips, ["10.0.0.5", "127.0.0.1", "::1", "fd00::5"]);
    assert_eq!(info.key_type, KeyType::Rsa { bits: 2048 });
    assert!(info.issuer.contains("Test CA"), "{}", info.issuer);
    assert!(!info.is_ca);
    assert!(info.not_after > info.not_before);
    assert!(k.matches_cert(&leaf).unwrap());
    assert!(cert::parse(&ca.pem).unwrap().is_ca);
}

#[test]
fn a_client_csr_asks_client_auth_for_its_own_key_and_each_csr_is_new() {
    let k = key::generate(KeyAlg::EcdsaP256).unwrap();
    let other = key::generate(KeyAlg::EcdsaP256).unwrap();
    let csr = key::client_csr(&k, "etcd-client").unwrap();
    assert!(key::csr_is_for(&csr, &k));
    assert!(!key::csr_is_for(&csr, &other));
    assert!(!key::csr_is_for("junk", &k));
    let (cn, asked) = key::csr_names(&csr).unwrap();
    assert_eq!(cn.as_deref(), Some("etcd-client"));
    assert!(asked.is_empty(), "{asked:?}");
    let params = CertificateSigningRequestParams::from_pem(&csr).unwrap();
    assert_eq!(
        params.params.extended_key_usages,
        [rcgen::ExtendedKeyUsagePurpose::ClientAuth]
    );
    // A renewal (same key, same names) is a request of its own text.
    assert_ne!(key::client_csr(&k, "etcd-client").unwrap(), csr);
    let s1 = key::csr(&k, "10.0.0.5", &sans()).unwrap();
    assert_ne!(key::csr(&k, "10.0.0.5", &sans()).unwrap(), s1);
    let ca = test_ca("Test CA");
    let leaf = sign(&ca, &csr);
    assert!(k.matches_cert(&leaf).unwrap());
}

#[test]
fn signed_by_knows_the_issuing_ca_also_inside_a_bundle() {
    let old = test_ca("Old CA");
    let new = test_ca("New CA");
    let k = key::generate(KeyAlg::EcdsaP256).unwrap();
    assert_eq!(cert::key_type_of_key(k.pem()).unwrap(), KeyType::Ecdsa);
    let leaf = sign(&new, &key::csr(&k, "etcd", &sans()).unwrap());
    assert_eq!(cert::parse(&leaf).unwrap().key_type, KeyType::Ecdsa);
    assert!(cert::signed_by(&leaf, &new.pem).unwrap());
    assert!(!cert::signed_by(&leaf, &old.pem).unwrap());
    let bundle = format!("{}{}", old.pem, new.pem);
    assert_eq!(cert::ders(&bundle).unwrap().len(), 2);
    assert!(cert::signed_by(&leaf, &bundle).unwrap());
    // Same name, other key: a name match alone is not enough.
    let impostor = test_ca("New CA");
    assert!(!cert::signed_by(&leaf, &impostor.pem).unwrap());
    let other = key::generate(KeyAlg::EcdsaP256).unwrap();
    assert!(!other.matches_cert(&leaf).unwrap());
    assert!(cert::parse("not a pem").is_err());
}

#[test]
fn key_material_never_shows_in_debug() {
    let k = key::generate(KeyAlg::EcdsaP256).unwrap();
    let body: String = k.pem().lines().nth(1).unwrap().to_string();
    let p = Pair {
        cert: "CERT".into(),
        key: k.pem().to_string(),
    };
    let m = Material {
        ca: "CA".into(),
        server: p.clone(),
        client: p.clone(),
    };
    for dbg in [format!("{k:?}"), format!("{p:?}"), format!("{m:?}")] {
        assert!(!dbg.contains(&body), "{dbg}");
    }
    let t = crate::etcd::ClientTls {
        ca_pem: "CA".into(),
        cert_pem: "C".into(),
        key_pem: k.pem().to_string(),
    };
    assert!(!format!("{t:?}").contains(&body));
}

#[test]
fn files_are_written_durably_with_private_keys_and_read_back() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let paths = crate::paths::Paths::new(d.path());
    let empty = files::read(&paths);
    assert_eq!(empty.ca, Found::Absent);
    assert_eq!(empty.server_key, KeyState::Absent);
    assert!(!empty.complete());

    let ca = test_ca("Test CA");
    let sk = key::generate(KeyAlg::EcdsaP256).unwrap();
    let ck = key::generate(KeyAlg::EcdsaP256).unwrap();
    let m = Material {
        ca: ca.pem.clone(),
        server: Pair {
            cert: sign(&ca, &key::csr(&sk, "10.0.0.5", &sans()).unwrap()),
            key: sk.pem().into(),
        },
        client: Pair {
            cert: sign(&ca, &key::csr(&ck, "etcd-client", &[]).unwrap()),
            key: ck.pem().into(),
        },
    };
    files::write(&paths, &m).unwrap();
    let p = files::TlsPaths::new(&paths);
    assert!(p.ca.starts_with(d.path().join("var/snap/etcd/common")));
    for (f, mode) in [(&p.server_key, 0o600), (&p.client_key, 0o600)] {
        assert_eq!(
            std::fs::metadata(f).unwrap().permissions().mode() & 0o777,
            mode
        );
    }
    let on = files::read(&paths);
    assert!(on.complete(), "{on:?}");
    assert_eq!(on.ca_count, 1);
    assert_eq!(on.server_key, KeyState::Present { private: true });
    let Found::Cert(s) = &on.server else {
        panic!("{on:?}")
    };
    assert_eq!(s.subject_cn.as_deref(), Some("10.0.0.5"));

    // A server key that is not its certificate's, and a foreign CA.
    std::fs::write(&p.server_key, ck.pem()).unwrap();
    std::fs::write(&p.ca, test_ca("Other").pem).unwrap();
    let on = files::read(&paths);
    assert_eq!(on.server_key, KeyState::Mismatched);
    assert_eq!(on.server_signed_by_ca, Some(false));
    assert!(!on.complete());
    std::fs::write(&p.server_cert, "garbage").unwrap();
    assert!(matches!(files::read(&paths).server, Found::Unreadable(_)));
}

#[test]
fn the_protocol_is_told_by_what_the_provider_published() {
    use std::collections::BTreeMap;
    let m = |kv: &[(&str, &str)]| -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let none = m(&[]);
    assert_eq!(protocol_of(&none, [&none]), None);
    assert_eq!(
        protocol_of(&m(&[("certificates", "[]")]), [&none]),
        Some(Protocol::V4)
    );
    let easyrsa = m(&[("ca", "CA"), ("etcd_0.server.cert", "C")]);
    assert_eq!(
        protocol_of(&none, [&none, &easyrsa]),
        Some(Protocol::Legacy)
    );
    // Requests of a requirer are not a provider's answers.
    let requirer = m(&[("common_name", "x"), ("certificate_signing_requests", "[]")]);
    assert_eq!(protocol_of(&none, [&requirer]), None);
}
