//! Plan, for a unit whose data dir holds no WAL: set a WAL-less `member/`
//! aside, then join the existing cluster on the leader's join record, or
//! hand over to the two-phase bootstrap (bootstrap.rs) when there is none.
//! Pure, like the rest of plan.

use super::config::CharmConfig;
use super::desired::{
    cluster_exists, desired_config, parse_cluster, parse_join, peer_url, stale_own_member,
};
use super::observed::Observed;
use super::observed::JOIN_PREFIX;
use super::steps::{Plan, Step};
use crate::hooktools::StatusKind;
use crate::layout::Role;
use crate::paths::Paths;
use crate::render::{self, ClusterState};

pub(super) fn plan_without_wal(
    o: &Observed,
    c: &CharmConfig,
    paths: &Paths,
    token: Option<&str>,
    p: &mut Plan,
) {
    // A `member/` without a readable WAL (a wiped disk, a failed join) is
    // never started: set aside, and if the cluster still lists this unit's
    // old voter, wait for the leader to replace it.
    let canonical_member_dir = o
        .disk
        .locations
        .iter()
        .any(|l| l.role == Role::Canonical && l.facts.member_dir);
    if canonical_member_dir && !o.active {
        p.steps.push(Step::MoveDataAside {
            data_dir: paths.data_dir(),
            reason: "member/ holds no readable WAL; never restarted as its old voter".into(),
        });
    }
    if let Some(id) = stale_own_member(o, c) {
        p.wait(format!(
            "Waiting for the leader to replace this unit's old member {id:x}, whose log is gone"
        ));
        return;
    }
    let Some(token) = token else {
        if super::bootstrap::decision(o) == super::bootstrap::Decision::Mine {
            p.status.push((
                StatusKind::Blocked,
                "leadership data names this unit to bootstrap the cluster but holds no token"
                    .into(),
            ));
            return;
        }
        p.wait("Waiting for the leader to create the cluster token");
        return;
    };
    let record = o
        .leader
        .get(&format!("{JOIN_PREFIX}{}", o.member_name))
        .and_then(parse_join);
    if cluster_exists(o) {
        // Start only on a join record whose member the cluster still lists
        // under our peer URL, and never as a new cluster.
        let live_ok = |id: u64| match &o.cluster {
            Some(v) => v
                .by_id(id)
                .is_some_and(|m| m.peer_urls.contains(&peer_url(o, c))),
            None => false,
        };
        match record {
            Some((id, initial)) if live_ok(id) => {
                let want = desired_config(
                    o,
                    c,
                    paths,
                    token,
                    ClusterState::Existing,
                    parse_cluster(&initial),
                );
                let text = render::render_etcd_config(&want);
                if o.config_text.as_deref() != Some(text.as_str()) {
                    p.steps.push(Step::WriteConfig {
                        text,
                        why: format!("joining as member {id:x}"),
                        config: Box::new(want),
                    });
                }
                if o.active {
                    p.steps.push(Step::StopEtcd);
                }
                p.steps.push(Step::StartEtcd);
                p.steps.push(Step::WaitMember);
            }
            _ if o.cluster.is_none() => {
                p.wait("Waiting to join the cluster: no member of it is reachable")
            }
            _ => p.wait("Waiting for the leader to add this member"),
        }
        return;
    }
    super::bootstrap::plan_bootstrap(o, c, paths, token, p);
}
