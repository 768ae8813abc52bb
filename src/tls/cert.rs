//! Reading certificates: what a PEM says about itself (names, expiry,
//! issuer, key type) and whether a CA signed it. Parsing only; nothing
//! here trusts a certificate for a connection.

use super::TlsError;
use std::net::IpAddr;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::public_key::PublicKey;

/// The kind of key a certificate (or a private key) holds. The TLS
/// cipher suites an etcd may offer depend on it (see `ciphers`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyType {
    Rsa { bits: usize },
    Ecdsa,
    Ed25519,
    Other(String),
}

/// What one certificate says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    pub subject_cn: Option<String>,
    /// The issuer's distinguished name, as OpenSSL would print it.
    pub issuer: String,
    pub subject: String,
    pub dns_sans: Vec<String>,
    pub ip_sans: Vec<IpAddr>,
    /// Seconds since the epoch.
    pub not_before: i64,
    pub not_after: i64,
    pub key_type: KeyType,
    pub is_ca: bool,
}

impl CertInfo {
    /// Every SAN as text (IPs in their canonical form), DNS names first.
    pub fn sans(&self) -> Vec<String> {
        let mut v = self.dns_sans.clone();
        v.extend(self.ip_sans.iter().map(|ip| ip.to_string()));
        v
    }

    pub fn expired_at(&self, now_unix: i64) -> bool {
        now_unix > self.not_after
    }
}

fn err(what: &str, e: impl std::fmt::Display) -> TlsError {
    TlsError::new(what, e)
}

/// The DER of every `CERTIFICATE` block in `pem`, in order (a bundle, or
/// a leaf followed by its chain). Other blocks (keys) are skipped.
pub fn ders(pem: &str) -> Result<Vec<Vec<u8>>, TlsError> {
    let mut out = Vec::new();
    for block in Pem::iter_from_buffer(pem.as_bytes()) {
        let block = block.map_err(|e| err("PEM", e))?;
        if block.label == "CERTIFICATE" {
            out.push(block.contents);
        }
    }
    Ok(out)
}

fn parse_der(der: &[u8]) -> Result<X509Certificate<'_>, TlsError> {
    X509Certificate::from_der(der)
        .map(|(_, c)| c)
        .map_err(|e| err("certificate", e))
}

fn key_type_of(c: &X509Certificate<'_>) -> KeyType {
    match c.public_key().parsed() {
        Ok(PublicKey::RSA(k)) => KeyType::Rsa { bits: k.key_size() },
        Ok(PublicKey::EC(_)) => KeyType::Ecdsa,
        _ => {
            let oid = c.public_key().algorithm.algorithm.to_id_string();
            if oid == "1.3.101.112" {
                KeyType::Ed25519
            } else {
                KeyType::Other(oid)
            }
        }
    }
}

fn info_of(c: &X509Certificate<'_>) -> CertInfo {
    let mut dns_sans = Vec::new();
    let mut ip_sans = Vec::new();
    if let Ok(Some(san)) = c.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(d) => dns_sans.push(d.to_string()),
                GeneralName::IPAddress(b) => match b.len() {
                    4 => ip_sans.push(IpAddr::from(<[u8; 4]>::try_from(*b).unwrap())),
                    16 => ip_sans.push(IpAddr::from(<[u8; 16]>::try_from(*b).unwrap())),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    CertInfo {
        subject_cn: c
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(str::to_string),
        issuer: c.issuer().to_string(),
        subject: c.subject().to_string(),
        dns_sans,
        ip_sans,
        not_before: c.validity().not_before.timestamp(),
        not_after: c.validity().not_after.timestamp(),
        key_type: key_type_of(c),
        is_ca: c.is_ca(),
    }
}

/// The first certificate in `pem`.
pub fn parse(pem: &str) -> Result<CertInfo, TlsError> {
    let ders = ders(pem)?;
    let der = ders
        .first()
        .ok_or_else(|| err("certificate", "no CERTIFICATE block in the PEM text"))?;
    Ok(info_of(&parse_der(der)?))
}

/// Whether one of the CA certificates in `ca_pem` (a bundle: during a CA
/// rotation it holds the old and the new CA) issued the first certificate
/// of `cert_pem`: the issuer name matches that CA's subject and the
/// signature verifies with its key.
pub fn signed_by(cert_pem: &str, ca_pem: &str) -> Result<bool, TlsError> {
    let leaf_ders = ders(cert_pem)?;
    let leaf_der = leaf_ders
        .first()
        .ok_or_else(|| err("certificate", "no CERTIFICATE block in the PEM text"))?;
    let leaf = parse_der(leaf_der)?;
    for ca_der in ders(ca_pem)? {
        let ca = parse_der(&ca_der)?;
        if ca.subject() == leaf.issuer() && leaf.verify_signature(Some(ca.public_key())).is_ok() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The key type of a private key (PKCS#8 `PRIVATE KEY`, PKCS#1 `RSA
/// PRIVATE KEY` or SEC1 `EC PRIVATE KEY`), from its PEM label and, for
/// PKCS#8, its algorithm.
pub fn key_type_of_key(key_pem: &str) -> Result<KeyType, TlsError> {
    use rsa::pkcs8::der::Decode;
    use rsa::{pkcs1, pkcs8};
    for block in Pem::iter_from_buffer(key_pem.as_bytes()) {
        let block = block.map_err(|_| err("private key", "unreadable PEM"))?;
        match block.label.as_str() {
            "RSA PRIVATE KEY" => {
                let k = pkcs1::RsaPrivateKey::from_der(&block.contents)
                    .map_err(|_| err("private key", "unreadable RSA key"))?;
                return Ok(KeyType::Rsa {
                    bits: k.modulus.as_bytes().len() * 8,
                });
            }
            "EC PRIVATE KEY" => return Ok(KeyType::Ecdsa),
            "PRIVATE KEY" => {
                let info = pkcs8::PrivateKeyInfo::from_der(&block.contents)
                    .map_err(|_| err("private key", "unreadable PKCS#8 key"))?;
                let oid = info.algorithm.oid.to_string();
                return Ok(match oid.as_str() {
                    "1.2.840.113549.1.1.1" => {
                        let k = pkcs1::RsaPrivateKey::from_der(info.private_key)
                            .map_err(|_| err("private key", "unreadable RSA key"))?;
                        KeyType::Rsa {
                            bits: k.modulus.as_bytes().len() * 8,
                        }
                    }
                    "1.2.840.10045.2.1" => KeyType::Ecdsa,
                    "1.3.101.112" => KeyType::Ed25519,
                    _ => KeyType::Other(oid),
                });
            }
            _ => {}
        }
    }
    Err(err("private key", "no private key block in the PEM text"))
}
