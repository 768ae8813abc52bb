//! etcd version upgrades through the snap channel, the pure half: may this
//! member move to the channel `channel` names, and the steps that move it.
//!
//! A `channel` change on a running member becomes, inside the rolling turn
//! (charm/turn.rs sees `Refresh` as taking the member down and bringing it
//! back): `Check` (live: every voter healthy, only the two minors of this
//! roll among members), `Snapshot` (online, into the backup dir: rule 4),
//! `Refresh` (`snap refresh etcd --channel`, which copies SNAP_DATA and
//! restarts etcd), `Verify` (the same member back, healthy, at the new
//! minor). A failed verify blocks with the `snap revert` advice and keeps
//! the cluster unhealthy or the unit blocked, so no other member follows.
//! Plus the one read observe makes of the snap ([`observe`]: below
//! observe.rs, like every concern's). The I/O half is snap_upgrade_apply.rs.

use super::config::CharmConfig;
use super::observed::Observed;
use super::steps::{Plan, Step};
use crate::hooktools::StatusKind;
use crate::paths::Paths;

pub use super::observed::SnapSeen;
pub use super::steps::UpgradeStep;

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
    if let Some(msg) = static_check(f.tracking, f.wanted, f.snap_data_bytes, f.free_bytes) {
        return Some(msg);
    }
    if !f.healthy {
        return Some("not upgrading etcd: the cluster is not healthy".into());
    }
    let (from, to) = (channel_minor(f.tracking), channel_minor(f.wanted));
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
    None
}

/// The checks that need no live cluster: the channels (no downgrade, no
/// skipped minor, a channel that names a minor) and the disk room.
pub fn static_check(
    tracking: &str,
    wanted: &str,
    snap_data_bytes: u64,
    free_bytes: u64,
) -> Option<String> {
    let (Some(from), Some(to)) = (channel_minor(tracking), channel_minor(wanted)) else {
        return Some(format!(
            "channel {wanted} names no etcd minor version (the snap tracks {tracking}): set channel to a track such as 3.5/stable"
        ));
    };
    if to < from {
        return Some(format!(
            "channel {wanted} would downgrade etcd from {}.{} to {}.{}: etcd cannot go back a minor version; set channel back to {tracking}",
            from.0, from.1, to.0, to.1
        ));
    }
    if to.0 != from.0 || to.1 > from.1 + 1 {
        return Some(format!(
            "channel {wanted} skips etcd minor versions ({}.{} to {}.{}): etcd upgrades one minor at a time; set channel to {}.{}/stable first",
            from.0,
            from.1,
            to.0,
            to.1,
            from.0,
            from.1 + 1
        ));
    }
    disk_room(snap_data_bytes, free_bytes)
}

fn disk_room(snap_data_bytes: u64, free_bytes: u64) -> Option<String> {
    crate::space::shortfall(
        "the copy of SNAP_DATA that `snap refresh` makes",
        snap_data_bytes,
        std::path::Path::new("/var/snap/etcd"),
        free_bytes,
    )
    .map(|m| format!("not upgrading etcd: {m}"))
}

/// The status after a refresh that did not come back healthy.
pub fn rollback_advice(unit: &str, wanted: &str, why: &str) -> String {
    format!(
        "etcd upgrade to {wanted} failed ({why}); the roll stopped. To roll back run `snap revert etcd` on {unit}, \
         then set channel back (revert also restores SNAP_DATA as it was before the refresh; see the README)"
    )
}

impl UpgradeStep {
    pub fn key(&self) -> &'static str {
        match self {
            UpgradeStep::Check { .. } => "upgrade-check",
            UpgradeStep::Snapshot { .. } => "upgrade-snapshot",
            UpgradeStep::Refresh { .. } => "snap-refresh",
            UpgradeStep::Verify { .. } => "upgrade-verify",
        }
    }
    /// Runs inside the turn, before the member goes down.
    pub fn before_down(&self) -> bool {
        matches!(
            self,
            UpgradeStep::Check { .. } | UpgradeStep::Snapshot { .. }
        )
    }
    pub fn is_refresh(&self) -> bool {
        matches!(self, UpgradeStep::Refresh { .. })
    }
}

impl std::fmt::Display for UpgradeStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpgradeStep::Check { tracking, wanted } => write!(
                f,
                "check the cluster before upgrading etcd {tracking} → {wanted} (every voter healthy, versions within the roll)"
            ),
            UpgradeStep::Snapshot {
                endpoint,
                backup_dir,
                ..
            } => write!(
                f,
                "take an online snapshot of {endpoint} into {} before the upgrade",
                backup_dir.display()
            ),
            UpgradeStep::Refresh { channel } => {
                write!(f, "snap refresh etcd --channel={channel} (restarts etcd)")
            }
            UpgradeStep::Verify { wanted, ids } => write!(
                f,
                "verify that {ids} is back, healthy, at etcd {}",
                channel_minor(wanted).map_or(wanted.clone(), |(a, b)| format!("{a}.{b}"))
            ),
        }
    }
}

/// Where the upgrade starts and the channel `channel` asks for, when the
/// snap tracks another channel (snap backend, a snap from a channel). The
/// start is the installed version's track (`3.4/stable` for 3.4.23), so a
/// member reverted by hand moves back to the channel it runs without being
/// taken for a downgrade; the tracked channel when the version is unknown.
pub fn pending(o: &Observed, c: &CharmConfig) -> Option<(String, String)> {
    if c.channel_auto {
        return None;
    }
    let seen = o.snap.as_ref()?;
    let tracking = seen.tracking.clone()?;
    let wanted = crate::service::normalize_channel(&c.channel);
    let from = match seen.installed.as_deref().and_then(version_minor) {
        Some((a, b)) if channel_minor(&tracking) != Some((a, b)) => format!("{a}.{b}/stable"),
        _ => tracking.clone(),
    };
    (tracking != wanted).then_some((from, wanted))
}

/// A member whose snap runs a newer minor than the cluster, and which does
/// not answer: a refresh that did not come back (its verify failed in an
/// earlier hook). Every later hook keeps the rollback advice in the status,
/// rather than only the failed start's.
fn stuck_after_refresh(o: &Observed) -> Option<String> {
    if o.local.is_some() || o.local_ids().is_none() {
        return None;
    }
    let installed = o.snap.as_ref()?.installed.as_deref()?;
    let tracking = o.snap.as_ref()?.tracking.as_deref()?;
    let cluster = &o.cluster.as_ref()?.status.version;
    let newer = version_minor(installed)? > version_minor(cluster)?;
    newer.then(|| {
        rollback_advice(
            &o.unit,
            tracking,
            &format!(
                "this member's etcd {installed} does not answer while the cluster runs {cluster}"
            ),
        )
    })
}

/// Adds the upgrade of this unit's running member, or says why not yet.
/// Pure. Called after the member's own plan (with_wal.rs).
pub fn plan(o: &Observed, c: &CharmConfig, paths: &Paths, p: &mut Plan) {
    if let Some(msg) = stuck_after_refresh(o) {
        // Starting it again would only fail again: the operator decides.
        p.steps.retain(|s| {
            !matches!(
                s,
                Step::StartEtcd | Step::WaitMember | Step::VerifyMember(_)
            )
        });
        p.status.push((StatusKind::Blocked, msg));
        return;
    }
    let Some((tracking, wanted)) = pending(o, c) else {
        return;
    };
    let Some(ids) = o.local_ids() else {
        return;
    };
    let seen = o.snap.clone().unwrap_or_default();
    if let Some(msg) = static_check(&tracking, &wanted, seen.snap_data_bytes, seen.free_bytes) {
        p.status.push((StatusKind::Blocked, msg));
        return;
    }
    // One change at a time: a restart or a move planned for this pass goes
    // first; the next pass (or hook) sees the upgrade still pending.
    let busy = p.steps.iter().any(|s| {
        matches!(
            s,
            Step::StartEtcd
                | Step::StopEtcd
                | Step::RestartEtcd
                | Step::WriteConfig { .. }
                | Step::Migrate(_)
                | Step::MoveDataAside { .. }
        )
    });
    let serving = o.active && o.local.as_ref().is_some_and(|v| v.status.leader != 0);
    if busy || !serving {
        p.wait(format!(
            "etcd upgrade {tracking} → {wanted} waits for this member to run settled"
        ));
        return;
    }
    p.steps.push(Step::SnapUpgrade(UpgradeStep::Check {
        tracking: tracking.clone(),
        wanted: wanted.clone(),
    }));
    p.steps.push(Step::SnapUpgrade(UpgradeStep::Snapshot {
        endpoint: super::desired::client_url(o, c),
        name: o.member_name.clone(),
        member_id: ids.member_id,
        backup_dir: paths.backup_dir(),
    }));
    p.steps.push(Step::SnapUpgrade(UpgradeStep::Refresh {
        channel: wanted.clone(),
    }));
    p.steps
        .push(Step::SnapUpgrade(UpgradeStep::Verify { wanted, ids }));
}

// ---- what observe reads ----

/// The snap as `snap list` shows it; the sizes only when `channel` asks for
/// another channel (a `du` of SNAP_DATA is not for every hook).
pub(super) fn observe(
    service: &crate::service::Service,
    paths: &Paths,
    config: Option<&CharmConfig>,
) -> Option<SnapSeen> {
    let info = service.snap_info()?;
    let mut seen = SnapSeen {
        tracking: info.tracking,
        installed: Some(info.version),
        ..Default::default()
    };
    let wanted = config.map(|c| crate::service::normalize_channel(&c.channel));
    if seen.tracking.is_some() && wanted != seen.tracking {
        (seen.snap_data_bytes, seen.free_bytes) = sizes(paths);
    }
    Some(seen)
}

/// Bytes in SNAP_DATA (through the `current` link) and free beside it.
pub(super) fn sizes(paths: &Paths) -> (u64, u64) {
    let dir = paths.snap_data_dir();
    let real = std::fs::canonicalize(&dir).unwrap_or(dir);
    let used = crate::layout::tree_bytes(&real);
    (used, crate::space::free_bytes(&real).unwrap_or(0))
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

    /// A settled leader of three, its snap on `tracking`, `channel` asking `wanted`.
    fn settled(tracking: &str, wanted: &str) -> Observed {
        use crate::charm::plan_tests::{healthy_leader, member, sees};
        let mut o = healthy_leader();
        o.event = crate::context::Event::ConfigChanged;
        sees(
            &mut o,
            vec![
                member(0xaa, "etcd0", "10.0.0.1", false),
                member(0xbb, "etcd1", "10.0.0.2", false),
                member(0xdd, "etcd2", "10.0.0.3", false),
            ],
        );
        let paths = Paths::new("/r");
        let first = super::super::plan::plan(&o, &paths, None);
        o.config_text = first.steps.iter().find_map(|s| match s {
            Step::WriteConfig { text, .. } => Some(text.clone()),
            _ => None,
        });
        if let Ok(c) = o.config.as_mut() {
            c.channel = wanted.into();
            c.channel_auto = false;
        }
        o.snap = Some(SnapSeen {
            tracking: Some(tracking.into()),
            installed: None,
            snap_data_bytes: 10 << 20,
            free_bytes: 10 << 30,
        });
        o
    }

    fn keys(p: &Plan) -> Vec<&'static str> {
        p.steps
            .iter()
            .map(crate::charm::apply::step_key)
            .filter(|k| {
                !matches!(
                    *k,
                    "open-port" | "set-version" | "publish" | "record-cluster"
                )
            })
            .collect()
    }

    #[test]
    fn a_newer_channel_is_refreshed_inside_the_turn_after_a_snapshot() {
        let o = settled("3.4/stable", "3.5/stable");
        let p = super::super::plan::plan(&o, &Paths::new("/r"), None);
        assert_eq!(
            keys(&p),
            [
                "take-turn",
                "upgrade-check",
                "upgrade-snapshot",
                "snap-refresh",
                "upgrade-verify",
                "release-turn"
            ],
            "{:?}",
            p.steps
        );
        assert!(p.steps.contains(&Step::TakeTurn {
            reason: "upgrading etcd to 3.5/stable".into()
        }));
        assert!(p.status.is_empty(), "{:?}", p.status);
        // Once the snap tracks it, nothing more.
        let done = settled("3.5/stable", "3.5");
        let p = super::super::plan::plan(&done, &Paths::new("/r"), None);
        assert!(!keys(&p).contains(&"snap-refresh"), "{:?}", p.steps);
    }

    #[test]
    fn a_downgrade_a_skipped_minor_or_no_room_is_blocked_and_nothing_refreshed() {
        for (tracking, wanted, says) in [
            ("3.5/stable", "3.4/stable", "downgrade"),
            ("3.4/stable", "3.6/stable", "skips"),
            ("3.4/stable", "latest/stable", "names no etcd minor"),
        ] {
            let o = settled(tracking, wanted);
            let p = super::super::plan::plan(&o, &Paths::new("/r"), None);
            assert!(!keys(&p).contains(&"snap-refresh"), "{:?}", p.steps);
            assert!(!keys(&p).contains(&"take-turn"), "{:?}", p.steps);
            let blocked: Vec<&String> = p
                .status
                .iter()
                .filter(|(k, _)| *k == StatusKind::Blocked)
                .map(|(_, m)| m)
                .collect();
            assert!(
                blocked.len() == 1 && blocked[0].contains(says),
                "{wanted}: {:?}",
                p.status
            );
        }
        let mut full = settled("3.4/stable", "3.5/stable");
        full.snap.as_mut().unwrap().free_bytes = 20 << 20;
        let p = super::super::plan::plan(&full, &Paths::new("/r"), None);
        assert!(!keys(&p).contains(&"snap-refresh"));
        assert!(p.status.iter().any(|(_, m)| m.contains("SNAP_DATA")));
    }

    #[test]
    fn a_restart_planned_first_defers_the_upgrade() {
        let mut o = settled("3.4/stable", "3.5/stable");
        if let Ok(c) = o.config.as_mut() {
            c.heartbeat_interval += 50;
        }
        let p = super::super::plan::plan(&o, &Paths::new("/r"), None);
        assert!(keys(&p).contains(&"restart"));
        assert!(!keys(&p).contains(&"snap-refresh"));
        assert!(p
            .status
            .iter()
            .any(|(k, m)| *k == StatusKind::Waiting && m.contains("3.5")));
    }

    #[test]
    fn a_member_reverted_by_hand_goes_back_to_the_channel_it_runs() {
        // Reverted: tracks 3.5/stable, runs 3.4.23; channel set back to 3.4.
        let mut o = settled("3.5/stable", "3.4/stable");
        o.snap.as_mut().unwrap().installed = Some("3.4.23".into());
        let p = super::super::plan::plan(&o, &Paths::new("/r"), None);
        assert!(keys(&p).contains(&"snap-refresh"), "{:?}", p.steps);
        assert!(p.status.is_empty(), "{:?}", p.status);
        // Running 3.5 while tracking 3.5: going to 3.4 is a downgrade.
        o.snap.as_mut().unwrap().installed = Some("3.5.1".into());
        let p = super::super::plan::plan(&o, &Paths::new("/r"), None);
        assert!(!keys(&p).contains(&"snap-refresh"), "{:?}", p.steps);
    }

    #[test]
    fn channel_auto_leaves_an_installed_snap_alone() {
        let mut o = settled("3.3/stable", "3.4/stable");
        if let Ok(c) = o.config.as_mut() {
            c.channel_auto = true;
        }
        let p = super::super::plan::plan(&o, &Paths::new("/r"), None);
        assert!(!keys(&p).contains(&"snap-refresh"), "{:?}", p.steps);
        assert!(p.status.is_empty(), "{:?}", p.status);
        let c = CharmConfig::parse(serde_json::json!({"channel": "auto"}).as_object().unwrap())
            .unwrap();
        assert!(c.channel_auto);
        let c =
            CharmConfig::parse(serde_json::json!({"channel": "3.5"}).as_object().unwrap()).unwrap();
        assert!(!c.channel_auto);
    }

    #[test]
    fn a_refreshed_member_that_does_not_answer_keeps_the_rollback_advice() {
        let mut o = settled("3.5/stable", "3.5/stable");
        o.snap.as_mut().unwrap().installed = Some("3.5.1".into());
        // Its own member is down; the peers answer at 3.4.
        o.local = None;
        o.active = false;
        let p = super::super::plan::plan(&o, &Paths::new("/r"), None);
        let blocked: Vec<&String> = p
            .status
            .iter()
            .filter(|(k, _)| *k == StatusKind::Blocked)
            .map(|(_, m)| m)
            .collect();
        assert!(
            blocked.iter().any(|m| m.contains("snap revert etcd")),
            "{:?}",
            p.status
        );
        assert!(!p.steps.contains(&Step::StartEtcd), "{:?}", p.steps);
        // Running, or at the cluster's own minor: no such status.
        let mut up = settled("3.5/stable", "3.5/stable");
        up.snap.as_mut().unwrap().installed = Some("3.4.23".into());
        up.local = None;
        up.active = false;
        let p = super::super::plan::plan(&up, &Paths::new("/r"), None);
        assert!(!p.status.iter().any(|(_, m)| m.contains("snap revert")));
    }
}
