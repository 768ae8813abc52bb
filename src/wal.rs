//! Reads the member ID and cluster ID a data dir belongs to from its WAL's
//! metadata record, without starting etcd (rule 3: the data dir itself is the
//! record of membership, not a file of ours).
//!
//! HELPER TASK (wal/layout helper): implement; keep signatures.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WalIds {
    pub member_id: u64,
    pub cluster_id: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalError {
    pub file: PathBuf,
    pub problem: String,
}

impl std::fmt::Display for WalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file.display(), self.problem)
    }
}
impl std::error::Error for WalError {}

/// `Ok(None)`: `data_dir/member/wal` holds no `*.wal` (no member lives here).
/// `Err`: there is a WAL but it cannot be read or makes no sense.
pub fn read_ids(data_dir: &Path) -> Result<Option<WalIds>, WalError> {
    let _ = data_dir;
    todo!()
}

/// `read_ids` for a WAL kept apart from its data dir (`wal-dir`).
pub fn read_ids_in_wal_dir(wal_dir: &Path) -> Result<Option<WalIds>, WalError> {
    let _ = wal_dir;
    todo!()
}
