//! The one client pair under a v4 provider: a client certificate of its
//! own, never a unit's server key. Pure, like the rest of plan.
//!
//! The leader makes a key and a client-auth CSR for it (apply), keeps both
//! in leadership data (the place every unit reads; never logged) and asks
//! for the certificate in the `certificates` relation's app databag, as the
//! v4 library does for an application's certificate. The provider's answer
//! (matched by the CSR's text) becomes, with that key, the shared pair in
//! leadership data; every unit writes it as client.crt/.key and hands it
//! to `db`, `proxy` and `prometheus` clients. Each unit's server key stays
//! in its own SNAP_COMMON.
//!
//! Leadership data keys: the pair in use ([`CLIENT_CERT_KEY`],
//! [`CLIENT_KEY_KEY`]) and the request ([`CLIENT_CSR_KEY`],
//! [`CLIENT_CSR_KEY_KEY`]). They are apart so that the pair in use stays
//! whole while a new request waits for its answer (the first request
//! after a refresh from a revision that shared the leader's server pair,
//! or a renewal).

use super::observed::Observed;
use super::steps::{Plan, Step, TlsStep};
use crate::hooktools::Databag;
use crate::tls::{self, key::PrivateKey, v4, Pair, Protocol};

/// Leadership data keys of the shared client pair.
pub const CLIENT_CERT_KEY: &str = "tls-client-cert";
pub const CLIENT_KEY_KEY: &str = "tls-client-key";
/// Leadership data keys of the request for it (CSR and its key).
pub const CLIENT_CSR_KEY: &str = "tls-client-csr";
pub const CLIENT_CSR_KEY_KEY: &str = "tls-client-csr-key";
/// The client certificate's common name.
pub const CLIENT_CN: &str = "etcd-client";
/// The v4 requirer's databag key for its CSRs.
pub const REQUESTS: &str = "certificate_signing_requests";

/// The shared pair in leadership data, if the current CA signed it.
pub(super) fn shared(o: &Observed, ca: &str) -> Option<Pair> {
    let cert = o.leader.get(CLIENT_CERT_KEY)?;
    let key = o.leader.get(CLIENT_KEY_KEY)?;
    tls::cert::signed_by(cert, ca).ok()?.then(|| Pair {
        cert: cert.to_string(),
        key: key.to_string(),
    })
}

/// The request in leadership data, when its CSR is for its key.
fn request(o: &Observed) -> Option<(String, PrivateKey)> {
    let csr = o.leader.get(CLIENT_CSR_KEY)?;
    let key = PrivateKey::from_pem(o.leader.get(CLIENT_CSR_KEY_KEY)?).ok()?;
    tls::key::csr_is_for(csr, &key).then(|| (csr.to_string(), key))
}

/// The provider's answer to `csr` (not revoked), if it is for `key`.
fn answer<'a>(o: &'a Observed, csr: &str, key: &PrivateKey) -> Option<&'a v4::ProviderCertificate> {
    v4::answer_for(&o.certs.v4_answers, csr)
        .filter(|a| !a.is_revoked())
        .filter(|a| key.matches_cert(&a.certificate).unwrap_or(false))
}

/// Leader only, while the provider may speak v4: the request, its place in
/// the app databag, and the answer shared as the pair.
pub(super) fn plan(o: &Observed, p: &mut Plan) {
    let certs = &o.certs;
    let Some(rel) = &certs.relation else {
        return;
    };
    if !o.is_leader || certs.protocol == Some(Protocol::Legacy) {
        return;
    }
    let Some((csr, key)) = request(o) else {
        p.steps.push(Step::Tls(TlsStep::NewClientCsr {
            relation: rel.clone(),
            key: None,
        }));
        return;
    };
    let want = v4::requests_value(std::slice::from_ref(&csr));
    if certs.own_app.get(REQUESTS) != Some(&want) {
        p.steps.push(Step::Tls(TlsStep::PublishApp {
            relation: rel.clone(),
            data: [(REQUESTS.to_string(), want)].into(),
        }));
    }
    let Some(a) = answer(o, &csr, &key) else {
        return;
    };
    let same = |k: &str, v: &str| o.leader.get(k).map(str::trim) == Some(v.trim());
    if !same(CLIENT_CERT_KEY, &a.certificate) || !same(CLIENT_KEY_KEY, key.pem()) {
        let d: Databag = [
            (CLIENT_CERT_KEY.to_string(), a.certificate.clone()),
            (CLIENT_KEY_KEY.to_string(), key.pem().to_string()),
        ]
        .into();
        p.steps.push(Step::SetLeaderData(d));
    }
    // Renewal: a new CSR for the same key; the pair in use stays until
    // the provider answers it.
    if super::certificates_renewal::pem_due(&a.certificate, certs.now) {
        p.steps.push(Step::Tls(TlsStep::NewClientCsr {
            relation: rel.clone(),
            key: Some(key),
        }));
    }
}

#[cfg(test)]
#[path = "certificates_client_tests.rs"]
mod tests;
