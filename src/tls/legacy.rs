//! The legacy (reactive) tls-certificates protocol, as easyrsa and the
//! Charmed Kubernetes vault speak it: all in unit databags, and the
//! provider generates the private keys too. Pure data: what our unit
//! writes, and what we read from a provider unit's databag.

use super::{Pair, TlsError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the requirer unit writes in its own unit databag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub unit_name: String,
    pub common_name: String,
    pub sans: Vec<String>,
    pub certificate_name: String,
    /// Extra server certificates: common name → SANs.
    pub cert_requests: BTreeMap<String, Vec<String>>,
    /// Client certificates: common name → SANs.
    pub client_cert_requests: BTreeMap<String, Vec<String>>,
}

#[derive(Serialize, Deserialize)]
struct SansOnly {
    sans: Vec<String>,
}

fn requests_json(m: &BTreeMap<String, Vec<String>>) -> String {
    let m: BTreeMap<&String, SansOnly> = m
        .iter()
        .map(|(cn, sans)| (cn, SansOnly { sans: sans.clone() }))
        .collect();
    serde_json::to_string(&m).expect("a map of strings serialises")
}

impl Request {
    /// The unit databag keys and values (the maps only when non-empty).
    pub fn to_databag(&self) -> BTreeMap<String, String> {
        let mut d = BTreeMap::new();
        d.insert("unit_name".into(), self.unit_name.clone());
        d.insert("common_name".into(), self.common_name.clone());
        d.insert(
            "sans".into(),
            serde_json::to_string(&self.sans).expect("strings serialise"),
        );
        d.insert("certificate_name".into(), self.certificate_name.clone());
        if !self.cert_requests.is_empty() {
            d.insert("cert_requests".into(), requests_json(&self.cert_requests));
        }
        if !self.client_cert_requests.is_empty() {
            d.insert(
                "client_cert_requests".into(),
                requests_json(&self.client_cert_requests),
            );
        }
        d
    }
}

/// `etcd/0` → `etcd_0`, the prefix of the provider's keys for that unit.
pub fn key_prefix(unit_name: &str) -> String {
    unit_name.replace('/', "_")
}

/// What a legacy provider unit has published for us. Every field is
/// optional: a provider publishes the CA first and the certificates later.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Issued {
    pub ca: Option<String>,
    pub chain: Option<String>,
    /// The one client pair the provider shares among its requirers.
    pub client: Option<Pair>,
    /// Our unit's server certificate (`<unit>.server.cert/.key`).
    pub server: Option<Pair>,
    /// Answers to `cert_requests`: common name → pair.
    pub processed: BTreeMap<String, Pair>,
    /// Answers to `client_cert_requests`.
    pub processed_client: BTreeMap<String, Pair>,
}

#[derive(Deserialize)]
struct RawPair {
    cert: String,
    key: String,
}

fn nonempty(d: &BTreeMap<String, String>, k: &str) -> Option<String> {
    d.get(k).filter(|v| !v.trim().is_empty()).cloned()
}

fn pair(d: &BTreeMap<String, String>, cert: &str, key: &str) -> Option<Pair> {
    Some(Pair {
        cert: nonempty(d, cert)?,
        key: nonempty(d, key)?,
    })
}

fn processed(d: &BTreeMap<String, String>, k: &str) -> Result<BTreeMap<String, Pair>, TlsError> {
    let Some(text) = nonempty(d, k) else {
        return Ok(BTreeMap::new());
    };
    let m: BTreeMap<String, RawPair> = serde_json::from_str(&text)
        .map_err(|e| TlsError::new(k, format!("not a map of cert/key: {e}")))?;
    Ok(m.into_iter()
        .map(|(cn, p)| {
            (
                cn,
                Pair {
                    cert: p.cert,
                    key: p.key,
                },
            )
        })
        .collect())
}

/// Reads a provider unit's databag for our unit `unit_name`.
pub fn parse_provider(unit_name: &str, d: &BTreeMap<String, String>) -> Result<Issued, TlsError> {
    let p = key_prefix(unit_name);
    Ok(Issued {
        ca: nonempty(d, "ca"),
        chain: nonempty(d, "chain"),
        client: pair(d, "client.cert", "client.key"),
        server: pair(d, &format!("{p}.server.cert"), &format!("{p}.server.key")),
        processed: processed(d, &format!("{p}.processed_requests"))?,
        processed_client: processed(d, &format!("{p}.processed_client_requests"))?,
    })
}

/// Whether a unit databag looks like a legacy provider's.
pub fn looks_like_provider(d: &BTreeMap<String, String>) -> bool {
    d.keys().any(|k| {
        k == "ca"
            || k == "client.cert"
            || k.ends_with(".server.cert")
            || k.ends_with(".processed_requests")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn request_writes_the_reactive_keys() {
        let r = Request {
            unit_name: "etcd/0".into(),
            common_name: "10.0.0.5".into(),
            sans: vec!["10.0.0.5".into(), "127.0.0.1".into()],
            certificate_name: "etcd".into(),
            cert_requests: BTreeMap::new(),
            client_cert_requests: [("etcd-client".to_string(), vec![])].into(),
        };
        let d = r.to_databag();
        assert_eq!(d["unit_name"], "etcd/0");
        assert_eq!(d["sans"], r#"["10.0.0.5","127.0.0.1"]"#);
        assert_eq!(d["client_cert_requests"], r#"{"etcd-client":{"sans":[]}}"#);
        assert!(!d.contains_key("cert_requests"));
    }

    #[test]
    fn provider_keys_for_our_unit_only() {
        let d = m(&[
            ("ca", "CA"),
            ("chain", ""),
            ("client.cert", "CC"),
            ("client.key", "CK"),
            ("etcd_0.server.cert", "SC"),
            ("etcd_0.server.key", "SK"),
            ("etcd_1.server.cert", "other"),
            (
                "etcd_0.processed_client_requests",
                r#"{"x": {"cert": "XC", "key": "XK"}}"#,
            ),
        ]);
        let got = parse_provider("etcd/0", &d).unwrap();
        assert_eq!(got.ca.as_deref(), Some("CA"));
        assert_eq!(got.chain, None);
        assert_eq!(got.server.as_ref().unwrap().cert, "SC");
        assert_eq!(got.client.as_ref().unwrap().key, "CK");
        assert_eq!(got.processed_client["x"].cert, "XC");
        assert!(looks_like_provider(&d));
        let later = parse_provider("etcd/2", &d).unwrap();
        assert_eq!(later.server, None);
        let dbg = format!("{got:?}");
        assert!(
            !dbg.contains("SK") && !dbg.contains("XK") && !dbg.contains("CK"),
            "{dbg}"
        );
        let bad = m(&[("etcd_0.processed_requests", "nope")]);
        assert!(parse_provider("etcd/0", &bad).is_err());
    }
}
