//! A test CA (rcgen) and leaves it signs for our own keys and CSRs
//! (tls::key), as a v4 provider would issue them (no EKU). Shared by the
//! TLS tests.
#![allow(dead_code)]

use etcd_charm::tls::key::{self, KeyAlg};
use etcd_charm::tls::Pair;
use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType, IsCa, Issuer,
    KeyPair,
};

pub struct Ca {
    pub pem: String,
    pub issuer: Issuer<'static, KeyPair>,
}

pub fn new_ca(name: &str) -> Ca {
    let k = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    let pem = p.self_signed(&k).unwrap().pem();
    Ca {
        pem,
        issuer: Issuer::new(p, k),
    }
}

/// A leaf for our own key of `alg`, signed by `ca`.
pub fn leaf(ca: &Ca, alg: KeyAlg, cn: &str, names: &[String]) -> Pair {
    let k = key::generate(alg).unwrap();
    let csr = key::csr(&k, cn, names).unwrap();
    let cert = CertificateSigningRequestParams::from_pem(&csr)
        .unwrap()
        .signed_by(&ca.issuer)
        .unwrap()
        .pem();
    Pair {
        cert,
        key: k.pem().to_string(),
    }
}
