//! Our own private key and certificate signing request (the v4 protocol:
//! the requirer keeps its key). The key never leaves this module as
//! anything that prints: [`PrivateKey`]'s `Debug` is redacted and it has
//! no `Display`; [`PrivateKey::pem`] is for writing the key file.
//!
//! RSA keys come from the `rsa` crate: rcgen's ring backend signs with an
//! RSA key but cannot generate one (only its aws-lc-rs backend can, which
//! needs a C toolchain and cmake), and the v4 tls-certificates library
//! accepts RSA keys only. ECDSA P-256 keys come from rcgen (ring).

use super::TlsError;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair, PublicKeyData};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAlg {
    /// RSA 2048: what every provider accepts (the v4 library requires it).
    Rsa2048,
    EcdsaP256,
}

/// A private key in PKCS#8 PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct PrivateKey {
    pem: String,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrivateKey(<redacted>)")
    }
}

impl PrivateKey {
    /// A key read back from its file. Checked: rcgen must be able to sign
    /// with it.
    pub fn from_pem(pem: &str) -> Result<Self, TlsError> {
        KeyPair::from_pem(pem).map_err(|_| TlsError::new("private key", "not a usable key"))?;
        Ok(PrivateKey {
            pem: pem.to_string(),
        })
    }

    /// The PEM text, for writing the key file (0600) and nothing else.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    fn key_pair(&self) -> Result<KeyPair, TlsError> {
        KeyPair::from_pem(&self.pem).map_err(|_| TlsError::new("private key", "not a usable key"))
    }

    /// Whether `cert_pem`'s first certificate carries this key's public half.
    pub fn matches_cert(&self, cert_pem: &str) -> Result<bool, TlsError> {
        use x509_parser::prelude::{FromDer, X509Certificate};
        let kp = self.key_pair()?;
        let ders = super::cert::ders(cert_pem)?;
        let der = ders
            .first()
            .ok_or_else(|| TlsError::new("certificate", "no CERTIFICATE block"))?;
        let (_, c) = X509Certificate::from_der(der).map_err(|e| TlsError::new("certificate", e))?;
        Ok(c.public_key().subject_public_key.data.as_ref() == kp.der_bytes())
    }
}

/// A fresh private key.
pub fn generate(alg: KeyAlg) -> Result<PrivateKey, TlsError> {
    let pem = match alg {
        KeyAlg::Rsa2048 => {
            use rsa::pkcs8::{EncodePrivateKey, LineEnding};
            let k = rsa::RsaPrivateKey::new(&mut rand_core::OsRng, 2048)
                .map_err(|e| TlsError::new("RSA key generation", e))?;
            k.to_pkcs8_pem(LineEnding::LF)
                .map_err(|e| TlsError::new("RSA key encoding", e))?
                .to_string()
        }
        KeyAlg::EcdsaP256 => KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| TlsError::new("ECDSA key generation", e))?
            .serialize_pem(),
    };
    PrivateKey::from_pem(&pem)
}

/// A PEM certificate signing request for `key`: subject CN `common_name`,
/// SANs `sans` (IP addresses become IP SANs, the rest DNS names). Each
/// call's subject carries a fresh unique identifier (as the v4 library's
/// CSRs do), so a renewal for the same key and names is a new request the
/// provider answers anew (it matches answers by the CSR's text).
pub fn csr(key: &PrivateKey, common_name: &str, sans: &[String]) -> Result<String, TlsError> {
    let params = CertificateParams::new(sans.to_vec()).map_err(|e| TlsError::new("CSR SANs", e))?;
    request(key, common_name, params)
}

/// A CSR for a client certificate (clientAuth only, no SANs): the one
/// client pair the units share with etcd's clients, for a key of its own.
pub fn client_csr(key: &PrivateKey, common_name: &str) -> Result<String, TlsError> {
    let mut params = CertificateParams::default();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    request(key, common_name, params)
}

/// x500UniqueIdentifier (2.5.4.45).
const UNIQUE_ID: [u64; 4] = [2, 5, 4, 45];

fn request(
    key: &PrivateKey,
    common_name: &str,
    mut params: CertificateParams,
) -> Result<String, TlsError> {
    use rand_core::RngCore;
    let mut id = [0u8; 16];
    rand_core::OsRng.fill_bytes(&mut id);
    let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn.push(DnType::CustomDnType(UNIQUE_ID.to_vec()), id);
    params.distinguished_name = dn;
    let kp = key.key_pair()?;
    params
        .serialize_request(&kp)
        .and_then(|r| r.pem())
        .map_err(|e| TlsError::new("CSR", e))
}

/// Whether `csr_pem` is a request for `key` (its public key is the key's).
pub fn csr_is_for(csr_pem: &str, key: &PrivateKey) -> bool {
    use x509_parser::prelude::{FromDer, X509CertificationRequest};
    let Ok(kp) = key.key_pair() else {
        return false;
    };
    let Some(Ok(block)) = x509_parser::pem::Pem::iter_from_buffer(csr_pem.as_bytes()).next() else {
        return false;
    };
    X509CertificationRequest::from_der(&block.contents).is_ok_and(|(_, r)| {
        r.certification_request_info
            .subject_pki
            .subject_public_key
            .data
            .as_ref()
            == kp.der_bytes()
    })
}

/// What a CSR asks for: (subject CN, SANs as text).
pub fn csr_names(csr_pem: &str) -> Result<(Option<String>, Vec<String>), TlsError> {
    use x509_parser::extensions::{GeneralName, ParsedExtension};
    use x509_parser::prelude::{FromDer, X509CertificationRequest};
    let block = x509_parser::pem::Pem::iter_from_buffer(csr_pem.as_bytes())
        .next()
        .ok_or_else(|| TlsError::new("CSR", "no PEM block"))?
        .map_err(|e| TlsError::new("CSR", e))?;
    let (_, req) =
        X509CertificationRequest::from_der(&block.contents).map_err(|e| TlsError::new("CSR", e))?;
    let info = &req.certification_request_info;
    let cn = info
        .subject
        .iter_common_name()
        .next()
        .and_then(|c| c.as_str().ok())
        .map(str::to_string);
    let mut sans = Vec::new();
    for ext in req.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext {
            for n in &san.general_names {
                match n {
                    GeneralName::DNSName(d) => sans.push(d.to_string()),
                    GeneralName::IPAddress(b) if b.len() == 4 => sans
                        .push(std::net::IpAddr::from(<[u8; 4]>::try_from(*b).unwrap()).to_string()),
                    GeneralName::IPAddress(b) if b.len() == 16 => sans.push(
                        std::net::IpAddr::from(<[u8; 16]>::try_from(*b).unwrap()).to_string(),
                    ),
                    _ => {}
                }
            }
        }
    }
    Ok((cn, sans))
}
