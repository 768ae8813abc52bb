//! What is mounted where, from `/proc/self/mountinfo`, and where the `data`
//! storage volume is mounted. Below the start guard (layout) and the
//! storage procedures, which both ask.

use std::path::Path;

/// Where the `data` volume is mounted (as configs and fstab name it; the
/// etcd snap's `removable-media` plug reaches `/media`).
pub const VOLUME_MOUNT_POINT: &str = "/media/etcd";

/// What is mounted at a mount point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mounted {
    pub source: String,
    pub fs_type: String,
    /// The mounted file system's device number (`major:minor`).
    pub dev: u64,
}

/// The newest mount at `mp` (absolute, as the kernel shows it), if any.
pub fn mounted_at(mp: &Path) -> Option<Mounted> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().rev().find_map(|line| {
        let fields: Vec<&str> = line.split(' ').collect();
        let sep = fields.iter().position(|f| *f == "-")?;
        if Path::new(&unescape(fields.get(4)?)) != mp {
            return None;
        }
        let (ma, mi) = fields.get(2)?.split_once(':')?;
        Some(Mounted {
            dev: nix::sys::stat::makedev(ma.parse().ok()?, mi.parse().ok()?),
            fs_type: fields.get(sep + 1)?.to_string(),
            source: unescape(fields.get(sep + 2)?),
        })
    })
}

/// mountinfo and fstab escape space, tab, newline and backslash as octal.
pub fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_mounted_and_a_plain_dir_is_not() {
        assert!(mounted_at(Path::new("/")).is_some());
        let d = tempfile::tempdir().unwrap();
        assert_eq!(mounted_at(d.path()), None);
        assert_eq!(unescape("a\\040b\\134"), "a b\\");
    }
}
