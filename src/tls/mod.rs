//! TLS from the `certificates` relation: the foundation (floor 2, beside
//! `render` and `etcd`; it knows files, PEM and the two protocols, not the
//! charm).
//!
//! Ready:
//! - `cert`: what a certificate says (CN, DNS/IP SANs, expiry, issuer, key
//!   type) and whether a CA (bundle) signed it.
//! - `key`: our RSA 2048 / ECDSA P-256 key and CSR (v4 protocol).
//! - `sans`: a unit's SAN list and common name.
//! - `ciphers`: `tls_cipher_suites` checked against the key type.
//! - `legacy`, `v4`: both protocols as data; [`protocol_of`] tells which
//!   one a provider speaks.
//! - `files`: the Python charm's files in /var/snap/etcd/common, written
//!   durably (keys 0600) and read back for observe.
//! - elsewhere: `render::EtcdTls` (https listeners, both transport
//!   sections), `etcd::Endpoints` with `ClientTls` (health, membership,
//!   actions over https with the client pair).
//!
//! The charm's use of all this is `charm::certificates`: the relation in
//! both protocols, the files, and the move of a plain cluster to TLS
//! through a bridge stage; `charm::certificates_rotation` rotates a CA
//! (trust old + new, rolling restart, new leaves, drop the old CA, rolling
//! restart).

pub mod cert;
pub mod ciphers;
pub mod files;
pub mod key;
pub mod legacy;
pub mod sans;
pub mod v4;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

/// Something about TLS material or a protocol message is wrong: what (a
/// file, a databag key) and the problem. Never carries key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    pub what: String,
    pub problem: String,
}

impl TlsError {
    pub fn new(what: &str, problem: impl std::fmt::Display) -> Self {
        TlsError {
            what: what.to_string(),
            problem: problem.to_string(),
        }
    }
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.problem)
    }
}
impl std::error::Error for TlsError {}

/// A certificate and its private key (PEM). `Debug` shows the certificate's
/// size only and never the key.
#[derive(Clone, PartialEq, Eq)]
pub struct Pair {
    pub cert: String,
    pub key: String,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Pair {{ cert: <{} bytes>, key: <redacted> }}",
            self.cert.len()
        )
    }
}

/// Which tls-certificates protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Reactive (easyrsa): answers in its unit databags.
    Legacy,
    /// The v4 library: answers in its app databag's `certificates`.
    V4,
}

/// The protocol of a provider, from what it published: its app databag
/// and its units' databags. None while it has published nothing either
/// way (then a requirer writes both requests; they do not collide).
pub fn protocol_of<'a>(
    app: &BTreeMap<String, String>,
    units: impl IntoIterator<Item = &'a BTreeMap<String, String>>,
) -> Option<Protocol> {
    if v4::looks_like_provider(app) {
        return Some(Protocol::V4);
    }
    units
        .into_iter()
        .any(legacy::looks_like_provider)
        .then_some(Protocol::Legacy)
}
