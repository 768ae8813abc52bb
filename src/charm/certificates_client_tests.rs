//! The shared v4 client pair: asked for with a key of its own, shared once
//! answered, never a unit's server key.

use super::*;
use crate::charm::certificates::{plan as certs_plan, Offer};
use crate::charm::config::CharmConfig;
use crate::charm::plan_tests::healthy_leader;
use crate::tls::key::{self, KeyAlg};
use rcgen::{BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType};
use rcgen::{IsCa, Issuer, KeyPair};

struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca() -> Ca {
    let k = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, "v4 test ca");
    let pem = p.self_signed(&k).unwrap().pem();
    Ca {
        pem,
        issuer: Issuer::new(p, k),
    }
}

fn sign(ca: &Ca, csr: &str) -> String {
    CertificateSigningRequestParams::from_pem(csr)
        .unwrap()
        .signed_by(&ca.issuer)
        .unwrap()
        .pem()
}

fn answer(ca: &Ca, csr: &str, cert: &str) -> v4::ProviderCertificate {
    serde_json::from_value(serde_json::json!({
        "ca": ca.pem, "certificate_signing_request": csr, "certificate": cert,
        "chain": [cert, ca.pem]
    }))
    .unwrap()
}

/// The leader of a v4-related cluster whose own server certificate is
/// issued (ECDSA keys: fast).
fn related(ca: &Ca) -> (Observed, Pair) {
    let mut o = healthy_leader();
    let k = key::generate(KeyAlg::EcdsaP256).unwrap();
    let csr = key::csr(&k, "10.0.0.1", &["10.0.0.1".to_string()]).unwrap();
    let server = Pair {
        cert: sign(ca, &csr),
        key: k.pem().to_string(),
    };
    o.certs.relation = Some("certificates:5".into());
    o.certs.provider = Some("self-signed-certificates".into());
    o.certs.protocol = Some(Protocol::V4);
    o.certs.offer = Offer {
        ca: Some(ca.pem.clone()),
        server: Some(server.clone()),
        client: None,
    };
    o.certs.v4_answers = vec![answer(ca, &csr, &server.cert)];
    (o, server)
}

fn steps(o: &Observed) -> Vec<Step> {
    let mut p = Plan::default();
    certs_plan(o, &CharmConfig::default(), &mut p);
    p.steps
}

fn leader_data(steps: &[Step]) -> Databag {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::SetLeaderData(d) => Some(d.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn the_leader_asks_for_a_client_certificate_of_its_own_and_shares_it() {
    let ca = ca();
    let (mut o, server) = related(&ca);
    // Nothing asked yet: a request with a new key; the server pair is not
    // shared, and no unit writes files without the client pair.
    let s = steps(&o);
    assert!(
        s.contains(&Step::Tls(TlsStep::NewClientCsr {
            relation: "certificates:5".into(),
            key: None
        })),
        "{s:?}"
    );
    let d = leader_data(&s);
    assert!(!d.values().any(|v| v.trim() == server.key.trim()), "{d:?}");
    assert!(!s
        .iter()
        .any(|x| matches!(x, Step::Tls(TlsStep::WriteFiles(_)))));
    let shown: Vec<String> = s.iter().map(|x| x.to_string()).collect();
    assert!(!shown.join(" ").contains("PRIVATE KEY"), "{shown:?}");

    // Asked (what apply keeps in leadership data): the CSR is published in
    // the app databag until it is there.
    let ck = key::generate(KeyAlg::EcdsaP256).unwrap();
    let csr = key::client_csr(&ck, CLIENT_CN).unwrap();
    o.leader.app.insert(CLIENT_CSR_KEY.into(), csr.clone());
    o.leader
        .app
        .insert(CLIENT_CSR_KEY_KEY.into(), ck.pem().to_string());
    let s = steps(&o);
    let want = v4::requests_value(std::slice::from_ref(&csr));
    assert!(
        s.iter().any(
            |x| matches!(x, Step::Tls(TlsStep::PublishApp { relation, data })
            if relation == "certificates:5" && data[REQUESTS] == want)
        ),
        "{s:?}"
    );
    assert!(!s
        .iter()
        .any(|x| matches!(x, Step::Tls(TlsStep::NewClientCsr { .. }))));
    o.certs.own_app.insert(REQUESTS.into(), want);
    assert!(!steps(&o).iter().any(|x| matches!(
        x,
        Step::Tls(TlsStep::NewClientCsr { .. } | TlsStep::PublishApp { .. })
    )));

    // Answered: the answer and the request's key become the shared pair.
    let client_cert = sign(&ca, &csr);
    o.certs.v4_answers.push(answer(&ca, &csr, &client_cert));
    let d = leader_data(&steps(&o));
    assert_eq!(d[CLIENT_CERT_KEY], client_cert);
    assert_eq!(d[CLIENT_KEY_KEY], ck.pem());
    assert_ne!(d[CLIENT_KEY_KEY].trim(), server.key.trim());

    // Shared: every unit writes that pair as its client pair; nothing more
    // to set.
    o.leader.app.extend(d);
    let s = steps(&o);
    assert!(leader_data(&s).is_empty(), "{s:?}");
    let m = s.iter().find_map(|x| match x {
        Step::Tls(TlsStep::WriteFiles(m)) => Some(m.clone()),
        _ => None,
    });
    let m = m.expect("files written");
    assert_eq!(m.client.cert, client_cert);
    assert_eq!(m.server, server);
    o.is_leader = false;
    assert!(steps(&o)
        .iter()
        .any(|x| matches!(x, Step::Tls(TlsStep::WriteFiles(_)))));
}

#[test]
fn a_shared_pair_that_was_a_server_key_is_replaced_and_legacy_asks_nothing() {
    let ca = ca();
    let (mut o, server) = related(&ca);
    // A refresh from a revision that shared the leader's server pair.
    o.leader
        .app
        .insert(CLIENT_CERT_KEY.into(), server.cert.clone());
    o.leader
        .app
        .insert(CLIENT_KEY_KEY.into(), server.key.clone());
    let s = steps(&o);
    assert!(
        s.iter()
            .any(|x| matches!(x, Step::Tls(TlsStep::NewClientCsr { key: None, .. }))),
        "{s:?}"
    );
    // A request whose CSR is not for its key is asked again.
    let ck = key::generate(KeyAlg::EcdsaP256).unwrap();
    let other = key::generate(KeyAlg::EcdsaP256).unwrap();
    o.leader.app.insert(
        CLIENT_CSR_KEY.into(),
        key::client_csr(&other, CLIENT_CN).unwrap(),
    );
    o.leader
        .app
        .insert(CLIENT_CSR_KEY_KEY.into(), ck.pem().to_string());
    assert!(steps(&o)
        .iter()
        .any(|x| matches!(x, Step::Tls(TlsStep::NewClientCsr { key: None, .. }))));
    // A revoked answer is not shared.
    let csr = key::client_csr(&ck, CLIENT_CN).unwrap();
    o.leader.app.insert(CLIENT_CSR_KEY.into(), csr.clone());
    let mut a = answer(&ca, &csr, &sign(&ca, &csr));
    a.revoked = Some(true);
    o.certs.v4_answers.push(a);
    assert!(leader_data(&steps(&o)).is_empty());
    // Legacy: the provider's own client pair; no request of ours.
    o.certs.protocol = Some(Protocol::Legacy);
    assert!(!steps(&o).iter().any(|x| matches!(
        x,
        Step::Tls(TlsStep::NewClientCsr { .. } | TlsStep::PublishApp { .. })
    )));
}

#[test]
fn a_due_client_certificate_is_asked_for_again_with_the_same_key() {
    let ca = ca();
    let (mut o, server) = related(&ca);
    let ck = key::generate(KeyAlg::EcdsaP256).unwrap();
    let csr = key::client_csr(&ck, CLIENT_CN).unwrap();
    let cert = sign(&ca, &csr);
    o.leader.app.insert(CLIENT_CSR_KEY.into(), csr.clone());
    o.leader
        .app
        .insert(CLIENT_CSR_KEY_KEY.into(), ck.pem().to_string());
    o.leader.app.insert(CLIENT_CERT_KEY.into(), cert.clone());
    o.leader
        .app
        .insert(CLIENT_KEY_KEY.into(), ck.pem().to_string());
    o.certs.own_app.insert(
        REQUESTS.into(),
        v4::requests_value(std::slice::from_ref(&csr)),
    );
    o.certs.v4_answers.push(answer(&ca, &csr, &cert));
    let info = tls::cert::parse(&cert).unwrap();
    let renew = |s: &[Step]| {
        s.iter()
            .any(|x| matches!(x, Step::Tls(TlsStep::NewClientCsr { key: Some(k), .. }) if k.pem() == ck.pem()))
    };
    // Fresh: nothing asked.
    o.certs.now = info.not_before + 1;
    assert!(!renew(&steps(&o)));
    // Past 2/3 of its lifetime: a new CSR for the same key; the pair in
    // use stays (no leadership write) and is still written as files.
    o.certs.now = crate::charm::certificates_renewal::renew_at(info.not_before, info.not_after);
    let s = steps(&o);
    assert!(renew(&s), "{s:?}");
    assert!(leader_data(&s).is_empty(), "{s:?}");
    let _ = server;
}
