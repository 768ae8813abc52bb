//! The file-system helpers the executor and its copy engine share (below
//! both, so neither imports the other's internals).

use crate::error::{io, Result};
use std::path::Path;

/// Where a step reports progress (the charm turns it into `status-set
/// maintenance`). Called at most about once a second.
pub type Report<'a> = &'a mut dyn FnMut(&str);

pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io("syncing directory", dir))
}

pub(super) fn parent(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new("/"))
}

/// Creates `dir` (0700, as etcd wants its dirs) and missing parents.
pub(super) fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(io("creating", dir))
}
