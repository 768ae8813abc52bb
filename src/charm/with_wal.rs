//! Plan, for a unit whose data dir holds a member (a WAL): start on it
//! (state `existing`), or set it aside when the live cluster no longer
//! lists it; learn a changed peer URL first. Pure, like the rest of plan.

use super::config::CharmConfig;
use super::desired::{desired_config, parse_cluster, peer_url, recorded_cluster, runtime_part};
use super::observed::Observed;
use super::observed::CLUSTER_ID;
use super::steps::{Plan, Step};
use crate::context::Event;
use crate::hooktools::StatusKind;
use crate::paths::Paths;
use crate::render::{self, ClusterState};

pub(super) fn plan_with_wal(
    o: &Observed,
    c: &CharmConfig,
    paths: &Paths,
    token: Option<&str>,
    ids: crate::wal::WalIds,
    p: &mut Plan,
) {
    // Is this member still part of the cluster it was born in?
    if let Some(view) = o.cluster.as_ref().filter(|v| v.status.leader != 0) {
        let recorded = o
            .leader
            .get(CLUSTER_ID)
            .and_then(|s| u64::from_str_radix(s, 16).ok());
        let same_cluster = view.cluster_id() == ids.cluster_id;
        let view_is_the_cluster = recorded.is_none_or(|r| r == view.cluster_id());
        if view_is_the_cluster && (!same_cluster || view.by_id(ids.member_id).is_none()) {
            let reason = if same_cluster {
                format!("member {:x} was removed from the cluster", ids.member_id)
            } else {
                format!(
                    "member {:x} belongs to cluster {:x}, not {:x}",
                    ids.member_id,
                    ids.cluster_id,
                    view.cluster_id()
                )
            };
            if o.active {
                p.steps.push(Step::StopEtcd);
            }
            p.steps.push(Step::MoveDataAside {
                data_dir: paths.data_dir(),
                reason,
            });
            p.wait("Waiting for the leader to add this member");
            return;
        }
        // The unit's address changed (Juju runs config-changed for that):
        // the cluster must learn the new peer URL before we advertise it.
        let want = peer_url(o, c);
        if let Some(m) = view.by_id(ids.member_id) {
            if same_cluster && !m.peer_urls.contains(&want) {
                p.steps.push(Step::UpdatePeerUrl {
                    id: ids.member_id,
                    peer_url: want,
                });
            }
        }
    }
    if let Some(r) = recorded_cluster(o).filter(|r| *r != ids.cluster_id) {
        p.status.push((
            StatusKind::Blocked,
            format!(
                "member {:x} on disk belongs to cluster {:x}, not the recorded cluster {r:x}, and the recorded cluster is not reachable to rejoin; not starting it",
                ids.member_id, ids.cluster_id
            ),
        ));
        return;
    }
    let existing = o.disk.config.as_ref().and_then(|r| r.as_ref().ok());
    let token = token
        .map(str::to_string)
        .or_else(|| existing.and_then(|e| e.initial_cluster_token.clone()))
        .unwrap_or_default();
    let initial = existing
        .and_then(|e| e.initial_cluster.as_deref())
        .map(parse_cluster)
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec![(o.member_name.clone(), peer_url(o, c))]);
    let want = desired_config(o, c, paths, &token, ClusterState::Existing, initial);
    let text = render::render_etcd_config(&want);
    let mut restart = false;
    if o.config_text.as_deref() != Some(text.as_str()) {
        restart = match o.config_text.as_deref().map(render::parse_etcd_config) {
            Some(Ok(have)) => runtime_part(&have) != runtime_part(&want),
            _ => true,
        };
        p.steps.push(Step::WriteConfig {
            text,
            why: "member on disk; state existing".into(),
            config: Box::new(want),
        });
    }
    if !o.active {
        // update-status only reports: an operator may have stopped etcd on
        // purpose (but what a migration just stopped is started again).
        if o.event == Event::UpdateStatus && !p.steps.contains(&Step::StopEtcd) {
            p.status.push((
                StatusKind::Blocked,
                "etcd is not running; the next start or config-changed hook starts it".into(),
            ));
            return;
        }
        p.steps.push(Step::StartEtcd);
        p.steps.push(Step::WaitMember);
        p.steps.push(Step::VerifyMember(ids));
    } else if restart {
        p.steps.push(Step::RestartEtcd);
        p.steps.push(Step::WaitMember);
        p.steps.push(Step::VerifyMember(ids));
    }
}
