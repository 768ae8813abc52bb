//! The tls-certificates v4 library's protocol (self-signed-certificates,
//! vault, manual-tls-certificates): the requirer keeps its key and writes
//! CSRs; the provider's leader answers in its app databag. Pure data.

use super::TlsError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One entry of the requirer's `certificate_signing_requests`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CsrEntry {
    pub certificate_signing_request: String,
    #[serde(default)]
    pub ca: bool,
}

/// The value of `certificate_signing_requests` for our CSRs (PEM text),
/// in the requirer's unit databag (per-unit certificates).
pub fn requests_value(csrs: &[String]) -> String {
    let v: Vec<CsrEntry> = csrs
        .iter()
        .map(|c| CsrEntry {
            certificate_signing_request: c.trim().to_string(),
            ca: false,
        })
        .collect();
    serde_json::to_string(&v).expect("strings serialise")
}

/// Reads a requirer databag's `certificate_signing_requests` (what a
/// provider does; the stand-in CA and tests use it).
pub fn parse_requests(d: &BTreeMap<String, String>) -> Result<Vec<CsrEntry>, TlsError> {
    match d.get("certificate_signing_requests") {
        None => Ok(Vec::new()),
        Some(t) if t.trim().is_empty() => Ok(Vec::new()),
        Some(t) => {
            serde_json::from_str(t).map_err(|e| TlsError::new("certificate_signing_requests", e))
        }
    }
}

/// One entry of the provider's `certificates`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ProviderCertificate {
    pub ca: String,
    pub certificate_signing_request: String,
    pub certificate: String,
    #[serde(default)]
    pub chain: Vec<String>,
    #[serde(default)]
    pub revoked: Option<bool>,
}

impl ProviderCertificate {
    pub fn is_revoked(&self) -> bool {
        self.revoked == Some(true)
    }
}

/// The provider app databag's `certificates` list (empty when absent).
pub fn parse_certificates(
    app: &BTreeMap<String, String>,
) -> Result<Vec<ProviderCertificate>, TlsError> {
    match app.get("certificates") {
        None => Ok(Vec::new()),
        Some(t) if t.trim().is_empty() => Ok(Vec::new()),
        Some(t) => serde_json::from_str(t).map_err(|e| TlsError::new("certificates", e)),
    }
}

/// The provider's answer to `csr`, matched by the CSR's exact text
/// (surrounding whitespace aside, as the library strips it).
pub fn answer_for<'a>(
    certs: &'a [ProviderCertificate],
    csr: &str,
) -> Option<&'a ProviderCertificate> {
    certs
        .iter()
        .find(|c| c.certificate_signing_request.trim() == csr.trim())
}

/// Whether an app databag looks like a v4 provider's.
pub fn looks_like_provider(app: &BTreeMap<String, String>) -> bool {
    app.contains_key("certificates")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_answers_match_by_csr_text() {
        let csr = "-----BEGIN CERTIFICATE REQUEST-----\nAAA\n-----END CERTIFICATE REQUEST-----\n";
        let v = requests_value(&[csr.to_string()]);
        let d: BTreeMap<String, String> = [("certificate_signing_requests".to_string(), v)].into();
        let back = parse_requests(&d).unwrap();
        assert_eq!(back.len(), 1);
        assert!(!back[0].ca);
        assert_eq!(back[0].certificate_signing_request, csr.trim());

        let certs = serde_json::json!([
            {"ca": "CA1", "certificate_signing_request": "other", "certificate": "X", "chain": []},
            {"ca": "CA1", "certificate_signing_request": csr.trim(), "certificate": "C",
             "chain": ["C", "CA1"], "revoked": true}
        ]);
        let app: BTreeMap<String, String> =
            [("certificates".to_string(), certs.to_string())].into();
        assert!(looks_like_provider(&app));
        let all = parse_certificates(&app).unwrap();
        let mine = answer_for(&all, csr).unwrap();
        assert_eq!(mine.certificate, "C");
        assert!(mine.is_revoked());
        assert!(answer_for(&all, "nope").is_none());
        let bad: BTreeMap<String, String> = [("certificates".to_string(), "{".to_string())].into();
        assert!(parse_certificates(&bad).is_err());
    }
}
