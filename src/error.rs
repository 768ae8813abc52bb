//! The charm's error type: every failure says which file, member or hook
//! tool it concerns, so a status message or log line is actionable.

use crate::context::ContextError;
use crate::etcd::EtcdError;
use crate::hooktools::HookToolError;
use crate::render::RenderError;
use crate::service::ServiceError;
use crate::wal::WalError;
use std::path::PathBuf;

#[derive(Debug)]
pub enum Error {
    Context(ContextError),
    HookTool(HookToolError),
    Render(RenderError),
    Service(ServiceError),
    Wal(WalError),
    Io {
        path: PathBuf,
        op: &'static str,
        source: std::io::Error,
    },
    /// A call to the live cluster failed; its `endpoint` is who we asked.
    Etcd(EtcdError),
    /// The charm's config is unusable. This fails the hook or action with
    /// the message; the blocked status for bad config comes from plan, which
    /// sees the same problem first.
    Config(String),
    /// A step the cluster's safety refuses (a unit leaving while its
    /// member's removal would cost quorum): the hook fails on purpose, the
    /// unit goes to error, and the message says why and what to do.
    Refused(String),
    Other(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Context(e) => write!(f, "Juju context: {e}"),
            Error::HookTool(e) => write!(f, "hook tool {e}"),
            Error::Render(e) => write!(f, "rendering {e}"),
            Error::Service(e) => write!(f, "etcd service {e}"),
            Error::Wal(e) => write!(f, "reading WAL {e}"),
            Error::Io { path, op, source } => write!(f, "{op} {}: {source}", path.display()),
            Error::Etcd(e) => write!(f, "{e}"),
            Error::Config(m) => write!(f, "{m}"),
            Error::Refused(m) => write!(f, "{m}"),
            Error::Other(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ContextError> for Error {
    fn from(e: ContextError) -> Self {
        Error::Context(e)
    }
}
impl From<EtcdError> for Error {
    fn from(e: EtcdError) -> Self {
        Error::Etcd(e)
    }
}
impl From<HookToolError> for Error {
    fn from(e: HookToolError) -> Self {
        Error::HookTool(e)
    }
}
impl From<RenderError> for Error {
    fn from(e: RenderError) -> Self {
        Error::Render(e)
    }
}
impl From<ServiceError> for Error {
    fn from(e: ServiceError) -> Self {
        Error::Service(e)
    }
}
impl From<WalError> for Error {
    fn from(e: WalError) -> Self {
        Error::Wal(e)
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// `std::fs` errors with the path and what we were doing.
pub fn io(op: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { path, op, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_etcd_error_reads_as_before_it_had_its_own_type() {
        let e = EtcdError {
            endpoint: "http://10.0.0.1:2379".into(),
            op: "member list".into(),
            message: "connection refused".into(),
        };
        assert_eq!(
            Error::from(e).to_string(),
            "etcd member list at http://10.0.0.1:2379: connection refused"
        );
    }
}
