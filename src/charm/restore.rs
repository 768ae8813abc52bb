//! The restore, as hooks carry it out: the `restore` action
//! (actions_restore.rs) checks the snapshot, backs the current data up and
//! records a request in leadership data; this plan then moves every unit
//! from the old cluster to the restored one. Pure plan; the apply half is
//! restore_apply.rs.
//!
//! # Expected flow (decided from leadership data and each unit's WAL only)
//! 1. The request `restore=<id> <unit> <sha256> <old cluster> <file>` names
//!    the unit that restores (the leader that ran the action), like
//!    `bootstrap-member` names the bootstrapper.
//! 2. That unit, while its WAL is the old cluster's: stops etcd (no rolling
//!    turn: the old cluster is being replaced; its other members keep
//!    quorum until the restored cluster answers), sets `member/` aside
//!    (dated), restores the snapshot into a scratch dir beside it and
//!    renames the result into place, writes its config, starts, checks it
//!    answers alone, and records the new cluster ID (`cluster-id`,
//!    `cluster`) with `restored=<id>` in one write.
//! 3. Every other unit, once `restored=<id>` is recorded and its WAL is the
//!    old cluster's: stops, sets `member/` aside, and joins the restored
//!    cluster on the ordinary join path, one at a time (leader.rs).
//!
//! # Guarantees
//! - Each step is re-planned from what it left: a hook killed anywhere
//!   continues where it stopped (no state file: the WAL's cluster ID says
//!   old member / restored member, no `member/` says restore next).
//! - The restored cluster is restored with a token derived from the
//!   cluster token and the restore id ([`restore_token`]: a digest, since
//!   it stands on the restore tool's command line, which every local
//!   account can read in /proc): etcd derives member and cluster IDs from the token and
//!   peer URLs, so the restored cluster's ID is new even when the restoring
//!   unit bootstrapped the old one, and etcd refuses raft traffic between
//!   the two clusters (cluster ID mismatch). The token in leadership data
//!   is unchanged (rule 1); joiners never use the token.
//! - On etcd 3.5 (`etcdutl`) revisions are bumped by [`BUMP`] and marked
//!   compacted, so watchers and caches see revisions move forward and
//!   re-list; etcd 3.4 (`etcdctl`) has no bump: revisions go back to the
//!   snapshot's (README).

use super::desired::{desired_config, peer_url};
use super::observed::Observed;
use super::observed::{CLUSTER, CLUSTER_ID};
use super::steps::{Plan, Step};
use crate::error::{io, Error, Result};
use crate::hooktools::{Databag, StatusKind};
use crate::layout::Role;
use crate::paths::Paths;
use crate::render::{self, ClusterState};
use std::path::{Path, PathBuf};

pub use super::steps::RestoreStep;

/// Leadership-data key of the request (written by the action).
pub const REQUEST: &str = "restore";
/// Leadership-data key: the id of the restore whose cluster is recorded.
pub const DONE: &str = "restored";
/// How far etcd 3.5 moves revisions forward: more than any cluster writes
/// between a snapshot and its restore, so no revision is handed out twice.
pub const BUMP: u64 = 1_000_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub id: String,
    /// The unit that restores (the leader when the action ran).
    pub unit: String,
    pub sha256: String,
    /// The cluster being replaced.
    pub old_cluster: u64,
    /// The checked snapshot, on `unit`.
    pub file: PathBuf,
}

impl Request {
    pub fn format(&self) -> String {
        format!(
            "{} {} {} {:x} {}",
            self.id,
            self.unit,
            self.sha256,
            self.old_cluster,
            self.file.display()
        )
    }

    pub fn parse(s: &str) -> Option<Request> {
        let mut it = s.splitn(5, ' ');
        Some(Request {
            id: it.next()?.to_string(),
            unit: it.next()?.to_string(),
            sha256: it.next()?.to_string(),
            old_cluster: u64::from_str_radix(it.next()?, 16).ok()?,
            file: PathBuf::from(it.next().filter(|f| !f.is_empty())?),
        })
    }
}

impl std::fmt::Display for RestoreStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RestoreStep::Snapshot {
                id,
                file,
                data_dir,
                bump,
                ..
            } => {
                write!(
                    f,
                    "restore {} into {}/member (restore {id}, ",
                    file.display(),
                    data_dir.display()
                )?;
                match bump {
                    Some(n) => write!(f, "etcdutl, revisions bumped by {n}, marked compacted)"),
                    None => write!(f, "etcdctl, revisions as in the snapshot)"),
                }
            }
            RestoreStep::Record { id, .. } => write!(
                f,
                "check the restored member answers alone; record its cluster (restore {id})"
            ),
        }
    }
}

impl RestoreStep {
    pub fn key(&self) -> &'static str {
        match self {
            RestoreStep::Snapshot { .. } => "restore-snapshot",
            RestoreStep::Record { .. } => "restore-record",
        }
    }
}

pub fn request(o: &Observed) -> Option<Request> {
    get(o, REQUEST).and_then(Request::parse)
}

/// The restore's keys are read from leader-get first where Juju has it: it
/// lands at once, so a killed action or hook leaves it ahead of the app
/// databag, which only commits on exit 0 (healed below).
fn get<'a>(o: &'a Observed, key: &str) -> Option<&'a str> {
    let legacy = o
        .leader
        .legacy
        .get(key)
        .map(String::as_str)
        .filter(|v| o.has_leader_tools && !v.is_empty());
    legacy.or_else(|| o.leader.get(key))
}

/// etcd 3.5 and later restore with etcdutl and a revision bump (where that
/// etcdutl has it: apply checks, [`can_bump`]).
pub fn bump_for(version: Option<&str>) -> Option<u64> {
    let v = version?;
    let mut it = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let (major, minor) = (it.next()?, it.next().unwrap_or(0));
    (major > 3 || (major == 3 && minor >= 5)).then_some(BUMP)
}

/// The restore's plan when a request concerns this unit now; None leaves
/// the hook to the ordinary plan. A member outside the canonical data dir
/// is migrated first (rule 2): the ordinary plan does that.
pub fn plan(o: &Observed, paths: &Paths) -> Option<Plan> {
    let req = request(o)?;
    if matches!(
        o.event,
        crate::context::Event::Stop | crate::context::Event::Remove
    ) || o.is_leaving()
    {
        return None;
    }
    if o.disk
        .locations
        .iter()
        .any(|l| l.role != Role::Canonical && matches!(l.member, Ok(Some(_))))
    {
        return None;
    }
    let done = get(o, DONE) == Some(req.id.as_str());
    let ids = o.local_ids();
    let mut p = Plan::default();
    if o.unit != req.unit {
        // A member of the replaced cluster: only once the restored one is up.
        let ids = ids.filter(|i| done && i.cluster_id == req.old_cluster)?;
        if o.active {
            p.steps.push(Step::StopEtcd);
        }
        p.steps.push(Step::MoveDataAside {
            data_dir: paths.data_dir(),
            reason: format!(
                "restore {}: member {:x} of cluster {:x}, replaced by the restored cluster",
                req.id, ids.member_id, ids.cluster_id
            ),
        });
        p.status.push((
            StatusKind::Maintenance,
            "Restore: the old member is set aside; joining the restored cluster".into(),
        ));
        return Some(p);
    }
    if done {
        return heal_app_databag(o, &req.id);
    }
    let c = match &o.config {
        Ok(c) => c,
        Err(e) => {
            p.status.push((StatusKind::Blocked, e.clone()));
            return Some(p);
        }
    };
    let Some(token) = super::token::choose_token(o, paths, false)
        .ok()
        .flatten()
        .map(|t| t.0)
    else {
        p.status.push((
            StatusKind::Blocked,
            format!(
                "restore {}: leadership data holds no cluster token to restore with",
                req.id
            ),
        ));
        return Some(p);
    };
    let member_dir = o
        .disk
        .locations
        .iter()
        .any(|l| l.role == Role::Canonical && l.facts.member_dir);
    let restore = RestoreStep::Snapshot {
        id: req.id.clone(),
        file: req.file.clone(),
        sha256: req.sha256.clone(),
        name: o.member_name.clone(),
        peer_url: peer_url(o, c),
        token: restore_token(&token, &req.id),
        data_dir: paths.data_dir(),
        bump: bump_for(o.etcd_version.as_deref()),
    };
    let mut running = o.active;
    match ids {
        Some(i) if i.cluster_id == req.old_cluster => {
            if o.active {
                p.steps.push(Step::StopEtcd);
                running = false;
            }
            p.steps.push(aside(paths, &req, "the old cluster's member"));
            p.steps.push(Step::Restore(restore));
        }
        None => {
            if member_dir {
                if o.active {
                    p.steps.push(Step::StopEtcd);
                    running = false;
                }
                p.steps
                    .push(aside(paths, &req, "member/ without a readable WAL"));
            }
            p.steps.push(Step::Restore(restore));
        }
        // The restored member (its WAL names a new cluster): bring it up.
        Some(_) => {}
    }
    let want = desired_config(
        o,
        c,
        paths,
        &token,
        ClusterState::Existing,
        vec![(o.member_name.clone(), peer_url(o, c))],
    );
    let text = render::render_etcd_config(&want);
    let rewrite = o.config_text.as_deref() != Some(text.as_str());
    if rewrite {
        p.steps.push(Step::WriteConfig {
            text,
            why: format!("restore {}: the restored member, alone", req.id),
            config: Box::new(want),
        });
    }
    if !running {
        p.steps.push(Step::StartEtcd);
    } else if rewrite {
        p.steps.push(Step::RestartEtcd);
    }
    p.steps.push(Step::WaitMember);
    p.steps.push(Step::Restore(RestoreStep::Record {
        id: req.id.clone(),
        old_cluster: req.old_cluster,
    }));
    p.status.push((
        StatusKind::Maintenance,
        format!("Restoring snapshot {}", short_sha(&req.sha256)),
    ));
    Some(p)
}

/// A hook killed after the record (leader-set lands at once, the app
/// databag only on exit 0) leaves the app databag naming the old cluster,
/// and the app databag is read first: copy the record across, so no unit
/// takes the old cluster for the recorded one.
fn heal_app_databag(o: &Observed, id: &str) -> Option<Plan> {
    let (app, legacy) = (&o.leader.app, &o.leader.legacy);
    if !o.is_leader || o.peer_relation.is_none() || legacy.get(DONE).map(String::as_str) != Some(id)
    {
        return None;
    }
    let keys = [REQUEST, DONE, CLUSTER_ID, CLUSTER, "leader_address"];
    let d: Databag = keys
        .iter()
        .filter_map(|k| Some((k.to_string(), legacy.get(*k)?.clone())))
        .filter(|(k, v)| app.get(k) != Some(v))
        .collect();
    if d.is_empty() {
        return None;
    }
    let mut p = Plan::default();
    p.steps.push(Step::SetLeaderData(d));
    Some(p)
}

fn aside(paths: &Paths, req: &Request, what: &str) -> Step {
    Step::MoveDataAside {
        data_dir: paths.data_dir(),
        reason: format!(
            "restore {}: {what}, replaced by snapshot {}",
            req.id,
            short_sha(&req.sha256)
        ),
    }
}

/// The token the snapshot is restored with: new for each restore (so the
/// restored cluster's ID is new), never the cluster token itself (the
/// restore tool takes it as an argument, readable by any local account in
/// /proc/PID/cmdline; etcdctl 3.4 reads no environment variable for it).
pub fn restore_token(token: &str, id: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(format!("etcd-charm restore\n{token}\n{id}").as_bytes());
    let hex: String = d.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("restore-{hex}")
}

pub(super) fn short_sha(s: &str) -> &str {
    s.get(..12).unwrap_or(s)
}

/// The tool that reads and restores snapshots: etcdutl beside the etcd we
/// run when it exists (3.5+), else etcdctl beside it, else on PATH.
pub fn snapshot_tool(service: &crate::service::Service, want_etcdutl: bool) -> Option<PathBuf> {
    let dir = match &service.backend {
        crate::service::Backend::Direct { etcd_bin } => {
            let bin = if etcd_bin.is_absolute() {
                Some(etcd_bin.clone())
            } else {
                crate::service::find_on_path(&etcd_bin.to_string_lossy())
            };
            bin.and_then(|b| b.parent().map(Path::to_path_buf))
        }
        crate::service::Backend::Snap { .. } => Some(service.paths.host("/snap/etcd/current/bin")),
    };
    let names: &[&str] = if want_etcdutl {
        &["etcdutl"]
    } else {
        &["etcdutl", "etcdctl"]
    };
    for n in names {
        if let Some(p) = dir.as_ref().map(|d| d.join(n)).filter(|p| p.is_file()) {
            return Some(p);
        }
    }
    if want_etcdutl {
        return crate::service::find_on_path("etcdutl");
    }
    crate::service::find_on_path("etcdctl")
}

/// Whether this etcdutl offers `--bump-revision` (etcd 3.5's first
/// releases do not; it came with later 3.5 patch releases and 3.6).
pub fn can_bump(tool: &Path) -> bool {
    std::process::Command::new(tool)
        .args(["snapshot", "restore", "--help"])
        .output()
        .is_ok_and(|o| {
            let text = [o.stdout, o.stderr].concat();
            String::from_utf8_lossy(&text).contains("--bump-revision")
        })
}

/// `snapshot status -w json`: (hash, revision, total keys, total size).
pub fn snapshot_status(tool: &Path, file: &Path) -> Result<serde_json::Value> {
    let out = std::process::Command::new(tool)
        .env("ETCDCTL_API", "3")
        .args(["snapshot", "status", "-w", "json"])
        .arg(file)
        .output()
        .map_err(io("running", tool))?;
    if !out.status.success() {
        return Err(Error::Other(format!(
            "{} is not a readable etcd snapshot ({} snapshot status: {})",
            file.display(),
            tool.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).map_err(|e| {
        Error::Other(format!(
            "{} snapshot status printed no JSON ({e}): {text}",
            tool.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Location;
    use crate::wal::WalIds;

    const OLD: u64 = 0xc1;
    const NEW: u64 = 0xc2;

    fn req(unit: &str) -> Request {
        Request {
            id: "2026-01-01T00-00-00Z".into(),
            unit: unit.into(),
            sha256: "ab".repeat(32),
            old_cluster: OLD,
            file: PathBuf::from("/r/var/snap/etcd/common/backups/restore-x.db"),
        }
    }

    /// etcd/0 (leader unless told) with a WAL of `cluster`, running or not.
    fn unit(leader: bool, cluster: Option<u64>, active: bool, done: bool) -> Observed {
        let mut o = super::super::plan_tests::fresh(leader);
        o.leader.legacy.insert(TOKEN_KEY.into(), "TOKEN1".into());
        o.leader
            .legacy
            .insert(REQUEST.into(), req("etcd/0").format());
        o.leader.legacy.insert(
            CLUSTER_ID.into(),
            format!("{:x}", if done { NEW } else { OLD }),
        );
        if done {
            o.leader.legacy.insert(DONE.into(), req("etcd/0").id);
        }
        let ids = cluster.map(|c| WalIds {
            member_id: 0x11,
            cluster_id: c,
        });
        let mut l = Location {
            path: Paths::new("/r").data_dir(),
            role: Role::Canonical,
            exists: true,
            member: Ok(ids),
            facts: Default::default(),
        };
        l.facts.member_dir = ids.is_some();
        o.disk.locations = vec![l];
        o.active = active;
        o
    }

    const TOKEN_KEY: &str = super::super::plan::TOKEN;

    fn keys(p: &Plan) -> Vec<&'static str> {
        p.steps.iter().map(super::super::apply::step_key).collect()
    }

    #[test]
    fn a_request_reads_back_as_written() {
        let r = req("etcd/2");
        assert_eq!(Request::parse(&r.format()), Some(r));
        assert_eq!(Request::parse("id etcd/0 ab c1"), None);
        assert_eq!(Request::parse("id etcd/0 ab zz /f"), None);
    }

    #[test]
    fn revisions_are_bumped_from_etcd_3_5() {
        assert_eq!(bump_for(Some("3.4.23")), None);
        assert_eq!(bump_for(Some("3.5.1")), Some(BUMP));
        assert_eq!(bump_for(Some("3.6.0")), Some(BUMP));
        assert_eq!(bump_for(None), None);
    }

    #[test]
    fn the_restoring_unit_stops_sets_aside_restores_starts_and_records() {
        let p = plan(&unit(true, Some(OLD), true, false), &Paths::new("/r")).unwrap();
        assert_eq!(
            keys(&p),
            [
                "stop",
                "move-aside",
                "restore-snapshot",
                "write-config",
                "start",
                "wait-member",
                "restore-record"
            ]
        );
        // No rolling turn: the old cluster is being replaced.
        let Step::Restore(RestoreStep::Snapshot { token, bump, .. }) = &p.steps[2] else {
            panic!("{:?}", p.steps);
        };
        assert_eq!(token, &restore_token("TOKEN1", "2026-01-01T00-00-00Z"));
        // Issue 19.14: the restore tool's argument never holds the token.
        assert!(!token.contains("TOKEN1"), "{token}");
        assert_ne!(token, &restore_token("TOKEN1", "2026-01-02T00-00-00Z"));
        assert_eq!(*bump, None);
        let mut o = unit(true, Some(OLD), false, false);
        o.etcd_version = Some("3.5.1".into());
        let p = plan(&o, &Paths::new("/r")).unwrap();
        assert!(p.steps.iter().any(|s| matches!(
            s,
            Step::Restore(RestoreStep::Snapshot {
                bump: Some(BUMP),
                ..
            })
        )));
    }

    #[test]
    fn a_killed_restore_continues_from_what_is_on_disk() {
        let paths = Paths::new("/r");
        // Set aside already: restore next.
        let p = plan(&unit(true, None, false, false), &paths).unwrap();
        assert_eq!(keys(&p)[0], "restore-snapshot");
        // Restored, not recorded: only bring it up and record.
        let p = plan(&unit(true, Some(NEW), false, false), &paths).unwrap();
        assert!(!keys(&p).contains(&"restore-snapshot"), "{:?}", keys(&p));
        assert_eq!(keys(&p).last(), Some(&"restore-record"));
        // Recorded in both homes: the ordinary plan again.
        let mut o = unit(true, Some(NEW), true, true);
        o.leader.app = o.leader.legacy.clone();
        assert_eq!(plan(&o, &paths), None);
    }

    #[test]
    fn other_units_leave_the_old_cluster_only_once_the_restored_one_is_recorded() {
        let paths = Paths::new("/r");
        let other = |cluster, done| {
            let mut o = unit(false, Some(cluster), true, done);
            o.unit = "etcd/1".into();
            o.member_name = "etcd1".into();
            o
        };
        assert_eq!(plan(&other(OLD, false), &paths), None);
        let p = plan(&other(OLD, true), &paths).unwrap();
        assert_eq!(keys(&p), ["stop", "move-aside"]);
        // A member of the restored cluster (rejoined) is left alone.
        assert_eq!(plan(&other(NEW, true), &paths), None);
    }

    #[test]
    fn a_record_lost_from_the_app_databag_is_copied_back() {
        let mut o = unit(true, Some(NEW), true, true);
        o.leader.app.insert(CLUSTER_ID.into(), format!("{OLD:x}"));
        let p = plan(&o, &Paths::new("/r")).unwrap();
        let Step::SetLeaderData(d) = &p.steps[0] else {
            panic!("{:?}", p.steps)
        };
        assert_eq!(d[CLUSTER_ID], format!("{NEW:x}"));
        assert_eq!(d[DONE], req("etcd/0").id);
    }
}
