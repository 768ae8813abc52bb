//! Apply's half of the `certificates` relation (certificates.rs plans):
//! the v4 request, the issued files, the leadership move before a TLS
//! restart.

use super::certificates::{read, TlsStep, V4_CSR, V4_KEY};
use super::certificates_client::{CLIENT_CN, CLIENT_CSR_KEY, CLIENT_CSR_KEY_KEY, REQUESTS};
use crate::error::Result;
use crate::hooktools::{Databag, HookTools};
use crate::paths::Paths;
use crate::tls;
use tracing::info;

/// Apply's half: the only code here that writes or talks to etcd. What it
/// returns goes to leadership data (the caller writes it).
pub fn apply(step: &TlsStep, paths: &Paths, tools: &HookTools) -> Result<Option<Databag>> {
    let io = |what: &std::path::Path, e: std::io::Error| {
        crate::error::Error::Other(format!("{}: {e}", what.display()))
    };
    let tls_err = |e: tls::TlsError| crate::error::Error::Other(e.to_string());
    match step {
        TlsStep::NewCsr { common_name, sans } => {
            let common = paths.common_dir();
            std::fs::create_dir_all(&common).map_err(|e| io(&common, e))?;
            let key_path = common.join(V4_KEY);
            let key = match read(key_path.clone()).map(|k| tls::key::PrivateKey::from_pem(&k)) {
                Some(Ok(k)) => k,
                _ => {
                    let k = tls::key::generate(tls::key::KeyAlg::Rsa2048).map_err(tls_err)?;
                    crate::durable::write_atomic_private(&key_path, k.pem().as_bytes())
                        .map_err(|e| io(&key_path, e))?;
                    k
                }
            };
            let csr = tls::key::csr(&key, common_name, sans).map_err(tls_err)?;
            let csr_path = common.join(V4_CSR);
            crate::durable::write_atomic(&csr_path, csr.as_bytes())
                .map_err(|e| io(&csr_path, e))?;
            info!(
                "made this unit's v4 certificate request ({} SANs)",
                sans.len()
            );
        }
        TlsStep::WriteFiles(m) => {
            tls::files::write(paths, m).map_err(tls_err)?;
            info!(
                "wrote the issued certificates to {}",
                paths.common_dir().display()
            );
        }
        TlsStep::WriteCa { pem, why } => {
            let ca = tls::files::TlsPaths::new(paths).ca;
            crate::durable::write_atomic(&ca, pem.as_bytes()).map_err(|e| io(&ca, e))?;
            info!("wrote {}: {why}", ca.display());
        }
        TlsStep::MoveLeader { from_endpoint, to } => {
            // Leadership may have moved since observe (another unit's turn).
            let s = crate::etcd::block_on(crate::etcd::member_status(from_endpoint.as_str()))?;
            if s.leader != s.member_id {
                info!("raft leadership is already on {:x}", s.leader);
                return Ok(None);
            }
            info!("moving raft leadership to {to:x} before the TLS restart");
            if let Err(e) = crate::etcd::block_on::<(), crate::etcd::EtcdError>(
                crate::etcd::move_leader(from_endpoint.as_str(), *to),
            ) {
                info!("raft leadership not moved ({e}); restarting anyway (etcd hands it over on stop)");
            }
        }
        TlsStep::NewClientCsr { relation, key } => {
            let key = match key {
                Some(k) => k.clone(),
                // RSA 2048: the v4 library accepts nothing else.
                None => tls::key::generate(tls::key::KeyAlg::Rsa2048).map_err(tls_err)?,
            };
            let csr = tls::key::client_csr(&key, CLIENT_CN).map_err(tls_err)?;
            let ask: Databag = [(
                REQUESTS.to_string(),
                tls::v4::requests_value(std::slice::from_ref(&csr)),
            )]
            .into();
            tools.relation_set_app(relation, &ask)?;
            info!("asked {relation} for the shared client certificate (a new CSR)");
            return Ok(Some(
                [
                    (CLIENT_CSR_KEY.to_string(), csr),
                    (CLIENT_CSR_KEY_KEY.to_string(), key.pem().to_string()),
                ]
                .into(),
            ));
        }
        TlsStep::PublishApp { relation, data } => tools.relation_set_app(relation, data)?,
    }
    Ok(None)
}
