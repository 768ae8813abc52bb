//! The direct service's log: etcd's output with the supervisor's own lines.

use super::LOG_ROTATE_BYTES;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::time::SystemTime;

pub(super) fn open_log(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(path)
}

pub(super) fn rotate_log(path: &Path) {
    if std::fs::metadata(path).is_ok_and(|m| m.len() > LOG_ROTATE_BYTES) {
        let mut old = path.as_os_str().to_owned();
        old.push(".1");
        let _ = std::fs::rename(path, old);
    }
}

/// One line, written with a single `write` so it does not interleave with
/// etcd's output.
pub(super) fn append_log(mut log: &File, who: &str, msg: &str) {
    let line = format!(
        "{} etcd-charm {who}[{}]: {msg}\n",
        crate::stamp::utc_timestamp(SystemTime::now()),
        std::process::id()
    );
    let _ = log.write_all(line.as_bytes());
}
