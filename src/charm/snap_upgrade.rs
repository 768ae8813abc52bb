//! Issue 12 part 4, its pure half: may this member move to another etcd
//! snap channel now? Not yet wired into the plan (a `Step` run inside the
//! rolling turn, charm/turn.rs, is the next piece); these are the checks it
//! will make and the rollback advice its failure will give.

/// What the pre-checks read (observed elsewhere; plain data here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeFacts<'a> {
    /// The channel the snap tracks now and the one `channel` asks for.
    pub tracking: &'a str,
    pub wanted: &'a str,
    /// Every voter healthy (as the turn's health check sees it).
    pub healthy: bool,
    /// The etcd version each member reports.
    pub versions: &'a [String],
    /// Bytes of SNAP_DATA (a refresh copies it) and bytes free beside it.
    pub snap_data_bytes: u64,
    pub free_bytes: u64,
}

/// `3.5/stable` → (3, 5); `latest/…` or unparsable → None.
pub fn channel_minor(channel: &str) -> Option<(u32, u32)> {
    minor(channel.split('/').next()?)
}

/// `3.4.23` → (3, 4).
pub fn version_minor(version: &str) -> Option<(u32, u32)> {
    minor(version)
}

fn minor(s: &str) -> Option<(u32, u32)> {
    let mut it = s.split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// None when this member may be refreshed now; else why not, for a status.
pub fn precheck(f: &UpgradeFacts) -> Option<String> {
    let from = channel_minor(f.tracking);
    let to = channel_minor(f.wanted);
    if let (Some(from), Some(to)) = (from, to) {
        if to < from {
            return Some(format!(
                "channel {} would downgrade etcd from {}.{} to {}.{}: etcd cannot go back a minor version; set channel back to {}",
                f.wanted, from.0, from.1, to.0, to.1, f.tracking
            ));
        }
    }
    if !f.healthy {
        return Some("not upgrading etcd: the cluster is not healthy".into());
    }
    // Mid-roll some members already run the target: only the two minors
    // of this upgrade may be seen (one roll at a time, no stragglers).
    let allowed = |m: Option<(u32, u32)>| m.is_some() && (m == from || m == to);
    if !f.versions.iter().all(|v| allowed(version_minor(v))) {
        return Some(format!(
            "not upgrading etcd: members run versions ({}) outside {} → {}",
            f.versions.join(", "),
            f.tracking,
            f.wanted
        ));
    }
    if f.snap_data_bytes >= f.free_bytes {
        return Some(format!(
            "not upgrading etcd: the refresh copies SNAP_DATA ({} MiB) and only {} MiB are free in /var/snap/etcd",
            f.snap_data_bytes >> 20,
            f.free_bytes >> 20
        ));
    }
    None
}

/// The status after a refresh that did not come back healthy.
pub fn rollback_advice(unit: &str, wanted: &str, why: &str) -> String {
    format!(
        "etcd upgrade to {wanted} failed ({why}); to roll back run `snap revert etcd` on {unit} \
         (it also restores the data copy taken before the refresh: writes since are lost on that member)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(versions: &'a [String]) -> UpgradeFacts<'a> {
        UpgradeFacts {
            tracking: "3.4/stable",
            wanted: "3.5/stable",
            healthy: true,
            versions,
            snap_data_bytes: 10 << 20,
            free_bytes: 1 << 30,
        }
    }

    #[test]
    fn reads_channels_and_versions() {
        assert_eq!(channel_minor("3.5/stable"), Some((3, 5)));
        assert_eq!(channel_minor("3.4"), Some((3, 4)));
        assert_eq!(channel_minor("latest/edge"), None);
        assert_eq!(version_minor("3.4.23"), Some((3, 4)));
    }

    #[test]
    fn an_upgrade_passes_only_when_everything_holds() {
        let same = vec!["3.4.23".to_string(), "3.4.23".to_string()];
        assert_eq!(precheck(&facts(&same)), None);
        let down = UpgradeFacts {
            tracking: "3.5/stable",
            wanted: "3.4/stable",
            ..facts(&same)
        };
        assert!(precheck(&down).unwrap().contains("downgrade"));
        let sick = UpgradeFacts {
            healthy: false,
            ..facts(&same)
        };
        assert!(precheck(&sick).unwrap().contains("not healthy"));
        let mid_roll = vec!["3.4.23".to_string(), "3.5.17".to_string()];
        assert_eq!(precheck(&facts(&mid_roll)), None);
        let straggler = vec!["3.3.27".to_string(), "3.4.23".to_string()];
        assert!(precheck(&facts(&straggler)).unwrap().contains("outside"));
        let full = UpgradeFacts {
            free_bytes: 5 << 20,
            ..facts(&same)
        };
        assert!(precheck(&full).unwrap().contains("free"));
        assert!(rollback_advice("etcd/1", "3.5/stable", "unhealthy").contains("snap revert etcd"));
    }
}
