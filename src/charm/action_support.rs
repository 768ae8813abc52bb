//! What the actions share (their context, a file's sha256, the member a
//! snapshot comes from): below actions.rs and every actions_* file.

use crate::error::{Error, Result};
use crate::etcd::{self, ClusterView};
use crate::hooktools::HookTools;
use crate::paths::Paths;
use serde_json::{Map, Value};
use std::path::Path;

/// What every action needs: its parameters, this unit's client endpoint,
/// and the client endpoints of its peers (own first).
pub struct ActionCtx<'a> {
    pub tools: &'a HookTools,
    pub paths: &'a Paths,
    pub params: Map<String, Value>,
    pub unit: String,
    pub own: String,
    pub endpoints: Vec<String>,
}

impl ActionCtx<'_> {
    pub fn string(&self, key: &str) -> String {
        match self.params.get(key) {
            Some(Value::String(s)) => s.trim().to_string(),
            Some(Value::Null) | None => String::new(),
            Some(v) => v.to_string(),
        }
    }

    pub fn boolean(&self, key: &str) -> bool {
        match self.params.get(key) {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => s.trim() == "true",
            _ => false,
        }
    }

    pub fn log(&self, msg: &str) {
        let _ = self.tools.action_log(msg);
    }

    /// The cluster as the first member that answers sees it (a voter
    /// preferred), or an error telling the operator what to look at.
    pub fn view(&self) -> Result<ClusterView> {
        etcd::block_on(etcd::view(&self.endpoints)).map_err(|e| {
            Error::Other(format!(
                "no etcd member answers ({e}); check that etcd runs on this unit (juju status, the debug action)"
            ))
        })
    }
}

pub fn sha256_file(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut f = std::fs::File::open(path).map_err(crate::error::io("opening", path))?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h).map_err(crate::error::io("reading", path))?;
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// A member that can serve a consistent snapshot: this unit's own when it
/// is a started voter with a leader, else the first other one that is.
pub fn snapshot_source(ctx: &ActionCtx) -> Result<(String, etcd::MemberDetail)> {
    let mut why = Vec::new();
    for ep in &ctx.endpoints {
        match etcd::block_on(etcd::member_detail(ep)) {
            Ok(d) if d.leader != 0 && !d.is_learner && d.errors.is_empty() => {
                return Ok((ep.clone(), d))
            }
            Ok(d) => why.push(format!(
                "{ep}: not a healthy voter (leader {:x}, learner {}, errors {:?})",
                d.leader, d.is_learner, d.errors
            )),
            Err(e) => why.push(e.to_string()),
        }
    }
    Err(Error::Other(format!(
        "no healthy member to take a snapshot from ({}); run the health action",
        why.join("; ")
    )))
}

/// How to fetch a root-only file: `juju scp` logs in as `ubuntu`, which
/// cannot read it; `sudo cat` over a pty-less `juju ssh` copies the bytes.
pub fn copy_cmd(unit: &str, path: &std::path::Path) -> String {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    format!(
        "juju ssh --pty=false {unit} -- sudo cat {} > {name}",
        path.display()
    )
}
