//! The TLS files as the Python charm kept them, in /var/snap/etcd/common
//! (the etcd snap is confined: it reads SNAP_COMMON and /media only):
//! `ca.crt`, `server.crt`, `server.key`, `client.crt`, `client.key`.
//! Written with the one durable atomic write, keys 0600; read back into
//! plain facts for observe.

use super::cert::{self, CertInfo};
use super::{Pair, TlsError};
use crate::durable;
use crate::paths::Paths;
use std::path::PathBuf;

/// Where each file lives (under ETCD_CHARM_ROOT, through `Paths`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsPaths {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl TlsPaths {
    pub fn new(paths: &Paths) -> Self {
        let d = paths.common_dir();
        TlsPaths {
            ca: d.join("ca.crt"),
            server_cert: d.join("server.crt"),
            server_key: d.join("server.key"),
            client_cert: d.join("client.crt"),
            client_key: d.join("client.key"),
        }
    }
}

/// Everything written: the CA (one PEM or a bundle, old + new during a
/// rotation), the server pair, the client pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Material {
    pub ca: String,
    pub server: Pair,
    pub client: Pair,
}

fn io_err(p: &std::path::Path, op: &str, e: std::io::Error) -> TlsError {
    TlsError::new(&p.display().to_string(), format!("{op}: {e}"))
}

/// Writes the five files; certificates first, keys last, each atomic.
/// etcd picks up a renewed pair on the next handshake, so a pair must not
/// be seen half-renewed for long: each key follows its certificate.
pub fn write(paths: &Paths, m: &Material) -> Result<(), TlsError> {
    let p = TlsPaths::new(paths);
    let files: [(&PathBuf, &str, bool); 5] = [
        (&p.ca, &m.ca, false),
        (&p.server_cert, &m.server.cert, false),
        (&p.server_key, &m.server.key, true),
        (&p.client_cert, &m.client.cert, false),
        (&p.client_key, &m.client.key, true),
    ];
    for (path, text, private) in files {
        let r = if private {
            durable::write_atomic_private(path, text.as_bytes())
        } else {
            durable::write_atomic(path, text.as_bytes())
        };
        r.map_err(|e| io_err(path, "writing", e))?;
    }
    Ok(())
}

/// One certificate file as found: absent, unreadable, or its facts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Absent,
    Unreadable(String),
    Cert(CertInfo),
}

/// What is on disk, for observe. No key material: only whether each key
/// is there, has mode 0600 and belongs to its certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnDisk {
    pub ca: Found,
    /// How many CA certificates `ca.crt` holds (2 during a rotation).
    pub ca_count: usize,
    pub server: Found,
    pub client: Found,
    pub server_key: KeyState,
    pub client_key: KeyState,
    /// Whether a CA in `ca.crt` signed each leaf (None if either is missing).
    pub server_signed_by_ca: Option<bool>,
    pub client_signed_by_ca: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyState {
    Absent,
    /// Present but not usable, or not the pair of its certificate.
    Mismatched,
    /// Present and usable; `private` says whether the mode is 0600.
    Present {
        private: bool,
    },
}

impl OnDisk {
    /// Every file there, every key its certificate's, both leaves signed.
    pub fn complete(&self) -> bool {
        matches!(self.ca, Found::Cert(_))
            && matches!(self.server_key, KeyState::Present { .. })
            && matches!(self.client_key, KeyState::Present { .. })
            && self.server_signed_by_ca == Some(true)
            && self.client_signed_by_ca == Some(true)
    }
}

fn read_text(p: &std::path::Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(p) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

fn found(text: &Result<Option<String>, String>) -> Found {
    match text {
        Ok(None) => Found::Absent,
        Err(e) => Found::Unreadable(e.clone()),
        Ok(Some(t)) => match cert::parse(t) {
            Ok(i) => Found::Cert(i),
            Err(e) => Found::Unreadable(e.to_string()),
        },
    }
}

fn key_state(key_path: &std::path::Path, cert_text: &Result<Option<String>, String>) -> KeyState {
    use std::os::unix::fs::PermissionsExt;
    let Ok(Some(k)) = read_text(key_path) else {
        return KeyState::Absent;
    };
    let matches = match (super::key::PrivateKey::from_pem(&k), cert_text) {
        (Ok(key), Ok(Some(c))) => key.matches_cert(c).unwrap_or(false),
        (Ok(_), _) => true,
        (Err(_), _) => false,
    };
    if !matches {
        return KeyState::Mismatched;
    }
    let private = std::fs::metadata(key_path)
        .map(|m| m.permissions().mode() & 0o077 == 0)
        .unwrap_or(false);
    KeyState::Present { private }
}

/// Reads what is there. Total: a missing or broken file is a fact.
pub fn read(paths: &Paths) -> OnDisk {
    let p = TlsPaths::new(paths);
    let ca_text = read_text(&p.ca);
    let server_text = read_text(&p.server_cert);
    let client_text = read_text(&p.client_cert);
    let signed = |leaf: &Result<Option<String>, String>| match (leaf, &ca_text) {
        (Ok(Some(l)), Ok(Some(ca))) => Some(cert::signed_by(l, ca).unwrap_or(false)),
        _ => None,
    };
    OnDisk {
        ca: found(&ca_text),
        ca_count: match &ca_text {
            Ok(Some(t)) => cert::ders(t).map(|d| d.len()).unwrap_or(0),
            _ => 0,
        },
        server: found(&server_text),
        client: found(&client_text),
        server_key: key_state(&p.server_key, &server_text),
        client_key: key_state(&p.client_key, &client_text),
        server_signed_by_ca: signed(&server_text),
        client_signed_by_ca: signed(&client_text),
    }
}

/// The client pair and CA as a client shows them, when the five files are
/// all there and consistent ([`OnDisk::complete`]); None otherwise.
pub fn client_tls(paths: &Paths) -> Option<crate::etcd::ClientTls> {
    if !read(paths).complete() {
        return None;
    }
    let p = TlsPaths::new(paths);
    let text = |f: &PathBuf| std::fs::read_to_string(f).ok();
    Some(crate::etcd::ClientTls {
        ca_pem: text(&p.ca)?,
        cert_pem: text(&p.client_cert)?,
        key_pem: text(&p.client_key)?,
    })
}
