//! etcd version upgrades through the snap channel, the I/O half: the
//! steps' apply arms, and the `snap-upgrade` action (the same steps for
//! this one unit, or only the pre-checks).

use super::apply::Applier;
use super::config::CharmConfig;
use super::snap_upgrade::{self as up, sizes, UpgradeFacts, UpgradeStep};
use crate::error::{io, Error, Result};
use crate::etcd;
use crate::hooktools::{Databag, HookTools, StatusKind};
use crate::paths::Paths;
use crate::service::Service;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};
use tracing::info;

/// How long the refreshed member may take to answer as a healthy voter at
/// the new version (the copy of SNAP_DATA is done by then; this is etcd's
/// start and its catching up).
/// [`VERIFY_ENV`] (seconds) sets it.
const VERIFY_WITHIN: Duration = Duration::from_secs(120);
pub const VERIFY_ENV: &str = "ETCD_CHARM_UPGRADE_VERIFY_WAIT";

/// What the live cluster says: every voter healthy, and the versions.
struct Live {
    healthy: bool,
    versions: Vec<String>,
    problems: Vec<String>,
}

fn live(endpoint: &str) -> Result<Live> {
    let view = etcd::block_on(etcd::view_from(endpoint))?;
    let mut l = Live {
        healthy: true,
        versions: Vec::new(),
        problems: Vec::new(),
    };
    for m in view.members.iter().filter(|m| !m.is_learner) {
        let name = if m.name.is_empty() {
            format!("{:x}", m.id)
        } else {
            m.name.clone()
        };
        let Some(url) = m.client_urls.first() else {
            l.healthy = false;
            l.problems.push(format!("{name} has not started"));
            continue;
        };
        match etcd::block_on(etcd::member_status(url.as_str())) {
            Ok(s) if s.leader != 0 && s.errors.is_empty() => l.versions.push(s.version),
            Ok(s) => {
                l.healthy = false;
                l.problems
                    .push(format!("{name} has no leader or reports errors"));
                l.versions.push(s.version);
            }
            Err(_) => {
                l.healthy = false;
                l.problems.push(format!("{name} does not answer"));
            }
        }
    }
    Ok(l)
}

/// The full pre-check, live: None when the refresh may go ahead.
fn precheck(endpoint: &str, tracking: &str, wanted: &str, paths: &Paths) -> Result<Option<String>> {
    let l = live(endpoint)?;
    let (data, free) = sizes(paths);
    let facts = UpgradeFacts {
        tracking,
        wanted,
        healthy: l.healthy,
        versions: &l.versions,
        snap_data_bytes: data,
        free_bytes: free,
    };
    Ok(up::precheck(&facts).map(|m| {
        if l.problems.is_empty() {
            m
        } else {
            format!("{m} ({})", l.problems.join(", "))
        }
    }))
}

impl Applier<'_> {
    pub(super) fn snap_upgrade(&self, u: &UpgradeStep) -> Result<Option<(StatusKind, String)>> {
        match u {
            UpgradeStep::Check { tracking, wanted } => {
                let ep = self.own_url()?;
                Ok(precheck(&ep, tracking, wanted, self.paths)?.map(|msg| {
                    // Health comes back by itself; anything else is the operator's.
                    let kind = if msg.contains("not healthy") {
                        StatusKind::Waiting
                    } else {
                        StatusKind::Blocked
                    };
                    (kind, msg)
                }))
            }
            UpgradeStep::Snapshot {
                endpoint,
                name,
                member_id,
                backup_dir,
            } => {
                self.tools.status_set(
                    StatusKind::Maintenance,
                    "Upgrading etcd: taking a snapshot first",
                )?;
                snapshot(endpoint, name, *member_id, backup_dir, self.paths)
                    .map(|r| r.map(|msg| (StatusKind::Blocked, msg)))
            }
            UpgradeStep::Refresh { channel } => {
                self.tools.status_set(
                    StatusKind::Maintenance,
                    &format!("Upgrading etcd to {channel} (snap refresh)"),
                )?;
                let t = Instant::now();
                if let Err(e) = self.service.snap_refresh(channel) {
                    // snapd undoes a refresh that failed; whatever it left,
                    // the member is started again on what it had.
                    let _ = self.service.start();
                    return Ok(Some((
                        StatusKind::Blocked,
                        format!(
                            "snap refresh etcd --channel={channel} failed, etcd stays where it was: {}",
                            e.problem.lines().next().unwrap_or("")
                        ),
                    )));
                }
                info!("snap refresh etcd --channel={channel}: {:?}", t.elapsed());
                Ok(None)
            }
            UpgradeStep::Verify { wanted, ids } => self.verify_upgrade(wanted, *ids),
        }
    }

    fn own_url(&self) -> Result<String> {
        let o = self.observed;
        o.config
            .as_ref()
            .map(|c| super::desired::client_url(o, c))
            .map_err(|e| Error::Config(e.clone()))
    }

    /// The same member, a voter with a leader, at the channel's minor; else
    /// blocked with the rollback advice (the turn is given back, but this
    /// member's absence or this unit's blocked status stops the roll).
    fn verify_upgrade(
        &self,
        wanted: &str,
        ids: crate::wal::WalIds,
    ) -> Result<Option<(StatusKind, String)>> {
        let ep = self.own_url()?;
        let want = up::channel_minor(wanted);
        let start = Instant::now();
        let within = crate::settable::seconds(VERIFY_ENV, VERIFY_WITHIN);
        let mut why = String::from("the member did not answer");
        while start.elapsed() < within {
            match etcd::block_on(etcd::member_status(ep.as_str())) {
                Ok(s) if s.member_id != ids.member_id || s.cluster_id != ids.cluster_id => {
                    why = format!(
                        "{ep} answers as member {:x} of cluster {:x}, not {ids}",
                        s.member_id, s.cluster_id
                    );
                }
                Ok(s) if up::version_minor(&s.version) != want => {
                    why = format!("the member runs etcd {}", s.version);
                }
                Ok(s) if s.leader == 0 => why = "the member has no raft leader".into(),
                Ok(s) => {
                    info!("etcd {} at {ep} is {ids}, healthy", s.version);
                    return Ok(None);
                }
                Err(e) => {
                    tracing::debug!("{e}");
                    why = "the member does not answer".into();
                }
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let why = format!("{why}, after {}s", within.as_secs());
        Ok(Some((
            StatusKind::Blocked,
            up::rollback_advice(&self.observed.unit, wanted, &why),
        )))
    }
}

/// An online snapshot of the member, beside the data (rule 4), named
/// `<stamp>-pre-upgrade-<name>-<id>.db`. Some(message) when it cannot be
/// taken (no room): blocked, nothing refreshed.
fn snapshot(
    endpoint: &str,
    name: &str,
    member_id: u64,
    backup_dir: &Path,
    paths: &Paths,
) -> Result<Option<String>> {
    let size = crate::layout::tree_bytes(&paths.data_dir().join("member").join("snap"));
    if let Some(msg) = crate::space::check("the pre-upgrade snapshot", size, backup_dir) {
        return Ok(Some(msg));
    }
    crate::private::dir(backup_dir).map_err(io("creating", backup_dir))?;
    let stamp = crate::stamp::utc_stamp(SystemTime::now());
    let dest = backup_dir.join(format!("{stamp}-pre-upgrade-{name}-{member_id:x}.db"));
    let bytes = etcd::block_on(etcd::snapshot_to(endpoint, &dest))?;
    info!(
        "pre-upgrade snapshot {} ({bytes} bytes) from {endpoint}",
        dest.display()
    );
    Ok(None)
}

/// The `snap-upgrade` action: this unit's upgrade to the configured
/// channel, inside the rolling turn; with `check-only`, the pre-checks'
/// results alone. `use-resource` (the Python charm's) is refused.
pub fn action(ctx: &crate::context::HookContext, tools: &HookTools) -> Result<Databag> {
    let params = tools.action_get()?;
    let flag = |k: &str| params.get(k).and_then(|v| v.as_bool()).unwrap_or(false);
    if flag("use-resource") {
        return Err(Error::Other(
            "snap-upgrade: use-resource is not supported (the etcd resource is deprecated); \
             set the channel option to the etcd track to upgrade to, e.g. 3.5/stable"
                .into(),
        ));
    }
    let paths = crate::storage::paths(Paths::from_env());
    let probe = Service::from_env(paths.clone(), "auto");
    let o = super::observe::observe(ctx, tools, &paths, &probe)?;
    let c = o.config.clone().map_err(Error::Config)?;
    let mut out = Databag::new();
    let Some(tracking) = o.snap.as_ref().and_then(|s| s.tracking.clone()) else {
        return Err(Error::Other(
            "snap-upgrade: etcd on this unit is not run from the etcd snap tracking a channel \
             (ETCD_CHARM_SERVICE=direct, or a snap installed from a file): there is no channel \
             to upgrade; nothing was changed"
                .into(),
        ));
    };
    let Some((tracking, wanted)) = up::pending(&o, &c) else {
        out.insert(
            "output".into(),
            format!("etcd already tracks {tracking}, the configured channel: nothing to upgrade"),
        );
        return Ok(out);
    };
    out.insert("from".into(), tracking.clone());
    out.insert("to".into(), wanted.clone());
    let ep = super::desired::client_url(&o, &c);
    let check = precheck(&ep, &tracking, &wanted, &paths)?;
    out.insert(
        "precheck".into(),
        check.clone().unwrap_or_else(|| "pass".into()),
    );
    if flag("check-only") || check.is_some() {
        let plan = upgrade_plan(&o, &c, &paths);
        let steps: Vec<String> = plan.steps.iter().map(|s| s.to_string()).collect();
        out.insert("steps".into(), steps.join("\n"));
        if let Some(msg) = check {
            return Err(Error::Other(format!(
                "snap-upgrade: {msg}; nothing was changed"
            )));
        }
        return Ok(out);
    }
    let plan = upgrade_plan(&o, &c, &paths);
    if let Some((_, msg)) = plan
        .status
        .iter()
        .find(|(k, _)| *k == StatusKind::Blocked || *k == StatusKind::Waiting)
    {
        return Err(Error::Other(format!(
            "snap-upgrade: {msg}; nothing was changed"
        )));
    }
    let service = Service::from_env(paths.clone(), &c.channel);
    let applier = Applier {
        tools,
        paths: &paths,
        service: &service,
        observed: &o,
        lease: super::lease::Lease::new(o.leader_seen),
    };
    let t = Instant::now();
    let done = applier.apply(&plan.steps)?;
    if let Some((_, msg)) = done.status.first() {
        return Err(Error::Other(format!("snap-upgrade: {msg}")));
    }
    out.insert(
        "output".into(),
        format!(
            "etcd on {} upgraded {tracking} → {wanted} in {:.1}s",
            o.unit,
            t.elapsed().as_secs_f64()
        ),
    );
    Ok(out)
}

/// Only the upgrade's steps, in the turn (the rest of the unit's plan is
/// the hooks' business).
fn upgrade_plan(
    o: &super::observed::Observed,
    c: &CharmConfig,
    paths: &Paths,
) -> super::steps::Plan {
    let mut p = super::steps::Plan::default();
    up::plan(o, c, paths, &mut p);
    super::turn::gate(o, p)
}
