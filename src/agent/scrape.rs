//! The agent's second listener, for the related Prometheus (another
//! machine): GET `/metrics` only, never the JSON state. Over TLS it asks a
//! client certificate signed by the unit's CA (the pair the charm sends
//! with the scrape job); plain http only when the charm passed no TLS dir
//! (the operator set `allow_insecure_listeners`).

use super::http::{exchange, Response};
use super::state::AgentState;
use crate::tls::cert;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_rustls::rustls::pki_types::{
    CertificateDer, PrivateKeyDer, PrivatePkcs1KeyDer, PrivatePkcs8KeyDer, PrivateSec1KeyDer,
};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};
use tracing::warn;

/// A TLS handshake on a busy machine; a client that stalls is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// `/metrics`, and nothing else.
pub fn respond(path: &str, state: &AgentState) -> Response {
    match path {
        "/metrics" => super::http::respond(path, state),
        _ => ("404 Not Found", "text/plain", "try /metrics\n".into()),
    }
}

fn read(p: &Path) -> Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))
}

fn private_key(p: &Path) -> Result<PrivateKeyDer<'static>, String> {
    let text = read(p)?;
    for block in x509_parser::pem::Pem::iter_from_buffer(text.as_bytes()) {
        let b = block.map_err(|e| format!("{}: {e}", p.display()))?;
        return Ok(match b.label.as_str() {
            "PRIVATE KEY" => PrivatePkcs8KeyDer::from(b.contents).into(),
            "RSA PRIVATE KEY" => PrivatePkcs1KeyDer::from(b.contents).into(),
            "EC PRIVATE KEY" => PrivateSec1KeyDer::from(b.contents).into(),
            _ => continue,
        });
    }
    Err(format!("{}: no private key", p.display()))
}

/// The server config from `dir`'s `server.crt`, `server.key` and `ca.crt`
/// (tls::files): our certificate, and client certificates must chain to
/// that CA (a bundle during a rotation: either).
pub fn server_config(dir: &Path) -> Result<Arc<ServerConfig>, String> {
    let ders = |name: &str| -> Result<Vec<CertificateDer<'static>>, String> {
        let p = dir.join(name);
        let found = cert::ders(&read(&p)?).map_err(|e| format!("{}: {e}", p.display()))?;
        if found.is_empty() {
            return Err(format!("{}: no certificate", p.display()));
        }
        Ok(found.into_iter().map(CertificateDer::from).collect())
    };
    let mut roots = RootCertStore::empty();
    for ca in ders("ca.crt")? {
        roots.add(ca).map_err(|e| format!("ca.crt: {e}"))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("ca.crt: {e}"))?;
    let cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(ders("server.crt")?, private_key(&dir.join("server.key"))?)
        .map_err(|e| format!("server.crt/server.key: {e}"))?;
    Ok(Arc::new(cfg))
}

/// Serves until the runtime ends. With `tls`, the files are read again for
/// every connection (a scrape every few seconds at most): a renewed pair or
/// CA counts from the next scrape, without restarting the agent.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<Mutex<AgentState>>,
    tls: Option<PathBuf>,
) {
    loop {
        let Ok((sock, peer)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let state = state.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let Some(dir) = tls else {
                return exchange(sock, state, respond).await;
            };
            let cfg = match server_config(&dir) {
                Ok(c) => c,
                Err(e) => return warn!("metrics listener: {e}"),
            };
            let accept = tokio_rustls::TlsAcceptor::from(cfg).accept(sock);
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, accept).await {
                Ok(Ok(s)) => exchange(s, state, respond).await,
                Ok(Err(e)) => tracing::debug!("metrics listener: {peer}: {e}"),
                Err(_) => tracing::debug!("metrics listener: {peer}: handshake timed out"),
            }
        });
    }
}
