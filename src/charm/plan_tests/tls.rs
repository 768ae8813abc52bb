use super::*;
use crate::etcd::ClientTls;

fn pair() -> ClientTls {
    ClientTls {
        ca_pem: "CA PEM".into(),
        cert_pem: "CLIENT CERT PEM".into(),
        key_pem: "CLIENT KEY PEM".into(),
    }
}

/// healthy_leader served over https, its config as the Python charm left
/// it; `tls`: whether observe found the certificate files.
fn tls_leader(tls: bool) -> Observed {
    let mut o = healthy_leader();
    let mut found = FoundConfig::default();
    for (k, port) in [
        ("initial-advertise-peer-urls", 2380),
        ("listen-peer-urls", 2380),
        ("advertise-client-urls", 2379),
        ("listen-client-urls", 2379),
    ] {
        found
            .raw
            .insert(k.into(), format!("https://10.0.0.1:{port}"));
    }
    o.disk.config = Some(Ok(found));
    let mut m = member(0xaa, "etcd0", "10.0.0.1", false);
    m.peer_urls = vec!["https://10.0.0.1:2380".into()];
    m.client_urls = vec!["https://10.0.0.1:2379".into()];
    sees(&mut o, vec![m]);
    o.tls = tls.then(pair);
    o
}

#[test]
fn a_tls_member_with_its_files_is_rewritten_with_tls_kept() {
    let o = tls_leader(true);
    let p = plan(&o, &paths(), None);
    assert!(
        !matches!(status(&p), Some((StatusKind::Blocked, _))),
        "{:?}",
        p.status
    );
    let config = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::WriteConfig { config, .. } => Some(config.clone()),
            _ => None,
        })
        .expect("the config is rewritten");
    assert_eq!(config.advertise_client_urls, vec!["https://10.0.0.1:2379"]);
    assert_eq!(
        config.initial_advertise_peer_urls,
        vec!["https://10.0.0.1:2380"]
    );
    assert!(config.listen_peer_urls[0].starts_with("https://"));
    let tls = config.tls.as_ref().expect("TLS kept");
    assert!(tls.cert_file.ends_with("var/snap/etcd/common/server.crt"));
    assert!(tls.key_file.ends_with("var/snap/etcd/common/server.key"));
    assert!(tls.trusted_ca_file.ends_with("var/snap/etcd/common/ca.crt"));
    // The peer URL already is https: no member update.
    assert!(!has(&p, |s| matches!(s, Step::UpdatePeerUrl { .. })));
    // Nothing printed names key material.
    for s in &p.steps {
        assert!(!s.to_string().contains("KEY PEM"), "{s}");
    }
}

#[test]
fn db_gets_the_client_pair_and_ca_beside_the_https_urls() {
    let mut o = tls_leader(true);
    o.clients = vec![("db:5".into(), Databag::new())];
    let p = plan(&o, &paths(), None);
    let data = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::PublishClient { data, .. } => Some(data.clone()),
            _ => None,
        })
        .expect("db is published");
    assert_eq!(data["connection_string"], "https://10.0.0.1:2379");
    assert_eq!(data["client_cert"], "CLIENT CERT PEM");
    assert_eq!(data["client_key"], "CLIENT KEY PEM");
    assert_eq!(data["client_ca"], "CA PEM");
}

#[test]
fn a_tls_member_without_its_files_is_blocked_untouched() {
    let o = tls_leader(false);
    let p = plan(&o, &paths(), None);
    let (k, m) = status(&p).unwrap();
    assert_eq!(k, StatusKind::Blocked);
    assert!(m.contains("missing or do not match"), "{m}");
    assert_eq!(p.steps, vec![]);
}

#[test]
fn cipher_suites_are_rendered_when_they_fit_the_key_and_block_when_none_does() {
    use crate::tls::cert::KeyType;
    let mut o = tls_leader(true);
    o.server_key = Some(KeyType::Rsa { bits: 2048 });
    let rsa = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_string();
    let ecdsa = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256".to_string();
    o.config = Ok(CharmConfig {
        tls_cipher_suites: vec![rsa.clone(), ecdsa.clone()],
        ..CharmConfig::default()
    });
    let p = plan(&o, &paths(), None);
    let config = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::WriteConfig { config, .. } => Some(config.clone()),
            _ => None,
        })
        .expect("the config is rewritten");
    assert_eq!(config.tls.unwrap().cipher_suites, vec![rsa]);
    // Only ECDSA suites for an RSA key: no handshake could succeed.
    o.config = Ok(CharmConfig {
        tls_cipher_suites: vec![ecdsa],
        ..CharmConfig::default()
    });
    let p = plan(&o, &paths(), None);
    assert!(p.steps.is_empty(), "{:?}", p.steps);
    match status(&p) {
        Some((StatusKind::Blocked, m)) => assert!(m.contains("tls_cipher_suites"), "{m}"),
        other => panic!("{other:?}"),
    }
}
