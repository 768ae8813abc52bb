//! etcd's `cipher-suites` (Go's TLS 1.2 suite names) against the server
//! key. With only ECDHE_RSA suites on an ECDSA certificate (or only
//! ECDHE_ECDSA ones on RSA) every TLS 1.2 handshake fails with "no cipher
//! suite supported", so the list must be kept in step with the key type.
//! TLS 1.3 suites are not configurable in Go and are not listed here.

use super::cert::KeyType;
use super::TlsError;

/// The suites etcd 3.4 (Go's crypto/tls) accepts by name, with the key
/// type each needs.
const SUITES: &[(&str, Needs)] = &[
    ("TLS_RSA_WITH_RC4_128_SHA", Needs::Rsa),
    ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", Needs::Rsa),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", Needs::Rsa),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", Needs::Rsa),
    ("TLS_RSA_WITH_AES_128_CBC_SHA256", Needs::Rsa),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", Needs::Rsa),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", Needs::Rsa),
    ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", Needs::Rsa),
    ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", Needs::Rsa),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", Needs::Rsa),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", Needs::Rsa),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", Needs::Rsa),
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", Needs::Rsa),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", Needs::Rsa),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", Needs::Rsa),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", Needs::Rsa),
    ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", Needs::Ecdsa),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", Needs::Ecdsa),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", Needs::Ecdsa),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", Needs::Ecdsa),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", Needs::Ecdsa),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", Needs::Ecdsa),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", Needs::Ecdsa),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        Needs::Ecdsa,
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    Rsa,
    Ecdsa,
}

/// The `tls_cipher_suites` option: names separated by commas or spaces;
/// empty means etcd's (Go's) defaults.
pub fn parse_option(value: &str) -> Vec<String> {
    value
        .split([',', ' ', '\n', '\t'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Checks `suites` for a server whose key is `key`: every name must be
/// one etcd knows (etcd refuses to start otherwise), and at least one must
/// work with the key. Returns the suites that do, in the given order, for
/// etcd.conf.yml; an empty list stays empty (Go's defaults fit any key).
pub fn usable_for(suites: &[String], key: &KeyType) -> Result<Vec<String>, TlsError> {
    if suites.is_empty() {
        return Ok(Vec::new());
    }
    let needs = match key {
        KeyType::Rsa { .. } => Needs::Rsa,
        KeyType::Ecdsa => Needs::Ecdsa,
        other => {
            return Err(TlsError::new(
                "tls_cipher_suites",
                format!("TLS 1.2 suites cannot be chosen for a {other:?} key; unset the option"),
            ))
        }
    };
    let mut usable = Vec::new();
    for s in suites {
        let Some((_, n)) = SUITES.iter().find(|(name, _)| name == s) else {
            return Err(TlsError::new(
                "tls_cipher_suites",
                format!("{s:?} is not a cipher suite etcd knows"),
            ));
        };
        if *n == needs {
            usable.push(s.clone());
        }
    }
    if usable.is_empty() {
        let kind = if needs == Needs::Rsa { "RSA" } else { "ECDSA" };
        let want = if needs == Needs::Rsa {
            "ECDHE_RSA"
        } else {
            "ECDHE_ECDSA"
        };
        return Err(TlsError::new(
            "tls_cipher_suites",
            format!(
                "none of the listed suites works with the certificate's {kind} key \
                 (every handshake would fail); add {want} suites"
            ),
        ));
    }
    Ok(usable)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        parse_option(s)
    }

    #[test]
    fn ecdhe_rsa_only_on_an_ecdsa_key_is_refused() {
        let rsa_only =
            v("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384");
        let e = usable_for(&rsa_only, &KeyType::Ecdsa).unwrap_err();
        assert!(e.to_string().contains("ECDSA key"), "{e}");
        assert_eq!(
            usable_for(&rsa_only, &KeyType::Rsa { bits: 2048 }).unwrap(),
            rsa_only
        );
    }

    #[test]
    fn mixed_lists_keep_the_suites_of_the_key_type() {
        let mixed =
            v("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256");
        assert_eq!(
            usable_for(&mixed, &KeyType::Ecdsa).unwrap(),
            ["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]
        );
        assert_eq!(
            usable_for(&mixed, &KeyType::Rsa { bits: 2048 }).unwrap(),
            ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
        );
    }

    #[test]
    fn unknown_names_and_empty_lists() {
        assert!(usable_for(&v("TLS_BOGUS"), &KeyType::Ecdsa).is_err());
        assert!(usable_for(&[], &KeyType::Ecdsa).unwrap().is_empty());
        assert!(usable_for(&v("TLS_AES_128_GCM_SHA256"), &KeyType::Ecdsa).is_err());
    }
}
