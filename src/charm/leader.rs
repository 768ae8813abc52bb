//! The leader's part of the plan: record the cluster, remove the departed,
//! add one joiner at a time, promote learners that have started. One
//! membership change in flight at a time, decided from the live member list.

use super::config::CharmConfig;
use super::desired::{parse_join, peer_url};
use super::observed::Observed;
use super::observed::{CLUSTER, CLUSTER_ID, JOIN_PREFIX};
use super::steps::{Plan, Step};
use crate::etcd::{ClusterView, Member};
use crate::hooktools::StatusKind;

/// Leader only: record, remove the departed, add one joiner, promote.
pub(super) fn plan_leader(o: &Observed, c: &CharmConfig, view: &ClusterView, p: &mut Plan) {
    if view.status.leader == 0 {
        p.wait("Waiting for the cluster to elect a raft leader");
        return;
    }
    let recorded = o.leader.get(CLUSTER_ID);
    let live = format!("{:x}", view.cluster_id());
    match recorded {
        Some(r) if r != live => {
            p.status.push((
                StatusKind::Blocked,
                format!("the reachable cluster {live} is not the recorded cluster {r}; check which members belong"),
            ));
            return;
        }
        None => p.steps.push(Step::RecordCluster),
        Some(_) => {
            if o.leader.get(CLUSTER) != Some(view.cluster_string(false).as_str()) {
                p.steps.push(Step::RecordCluster);
            }
        }
    }
    // Scale-down: the departing unit's member goes, one at a time.
    if let Some(dep) = o
        .departing_unit
        .as_ref()
        .filter(|d| **d != o.unit && o.is_departed_hook())
    {
        let name = dep.replace('/', "");
        let by_record = o
            .leader
            .get(&format!("{JOIN_PREFIX}{name}"))
            .and_then(parse_join)
            .map(|(id, _)| id);
        if let Some(m) = view
            .members
            .iter()
            .find(|m| m.name == name || Some(m.id) == by_record)
        {
            p.steps.push(Step::RemoveMember { name, id: m.id });
            return;
        }
    }
    // A unit whose member lost its log (stale-member): remove the old voter,
    // quorum permitting; the joiner logic then adds the unit as a learner.
    let own_stale = super::desired::stale_own_member(o, c).map(|id| (o.member_name.clone(), id));
    let peer_stale = o.peers.values().find_map(|b| {
        let id = u64::from_str_radix(b.get("stale-member")?, 16).ok()?;
        let m = view.by_id(id)?;
        let url = b.get("peer-url")?;
        m.peer_urls.contains(url).then(|| (m.name.clone(), id))
    });
    if let Some((name, id)) = own_stale.or(peer_stale) {
        p.steps.push(Step::RemoveMember { name, id });
        return;
    }
    // A started member no unit accounts for (its unit removed while the
    // removal was refused, or its stop hook could not remove it): retried
    // by every later hook of the leader; apply refuses it without quorum
    // and the status says what is pending.
    if let Some(m) = view.members.iter().find(|m| is_unitless(o, m)) {
        p.steps.push(Step::RemoveMember {
            name: m.name.clone(),
            id: m.id,
        });
        return;
    }
    // Joiners: every unit (this one too) whose peer URL the cluster lacks.
    let mut joiners: Vec<(String, String)> = o
        .peers
        .iter()
        .filter(|(u, _)| Some(*u) != o.departing_unit.as_ref())
        // A started member's unit whose peer URL is about to change (http
        // to https, certificates.rs) is no joiner.
        .filter(|(u, _)| !view.members.iter().any(|m| m.name == u.replace('/', "")))
        .filter_map(|(u, b)| {
            b.get("peer-url")
                .map(|url| (u.replace('/', ""), url.clone()))
        })
        .collect();
    if o.local_ids().is_none() {
        joiners.push((o.member_name.clone(), peer_url(o, c)));
    }
    joiners.sort_by_key(|(n, _)| unit_number(n));
    // One membership change in flight at a time.
    let in_flight = view
        .members
        .iter()
        .find(|m| m.is_learner || m.name.is_empty());
    if let Some(m) = in_flight {
        if !m.name.is_empty() {
            p.steps.push(Step::PromoteLearner {
                name: m.name.clone(),
                id: m.id,
            });
            return;
        }
        // Added, not yet started. If the add's answer was lost, its unit has
        // no join record: publish it again (AddMember finds the member by
        // peer URL instead of adding twice). A member no unit claims any
        // more would block every later join: remove it.
        match joiners.iter().find(|(_, url)| m.peer_urls.contains(url)) {
            Some((name, url)) => {
                let record = o
                    .leader
                    .get(&format!("{JOIN_PREFIX}{name}"))
                    .and_then(parse_join);
                if record.map(|r| r.0) != Some(m.id) {
                    p.steps.push(Step::AddMember {
                        name: name.clone(),
                        peer_url: url.clone(),
                    });
                }
            }
            None => p.steps.push(Step::RemoveMember {
                name: format!("unstarted member at {}", m.peer_urls.join(",")),
                id: m.id,
            }),
        }
        return;
    }
    if let Some((name, peer_url)) = joiners
        .into_iter()
        .find(|(_, url)| view.by_peer_url(url).is_none())
    {
        p.steps.push(Step::AddMember { name, peer_url });
    }
}

/// True for a started member that is not this unit, not a peer unit and not
/// a pending joiner, and whose unit goal-state does not expect (absent or
/// dying). Without goal-state's answer nothing is unitless: a unit whose
/// relation-joined has not run yet looks the same as one gone for good.
pub(super) fn is_unitless(o: &Observed, m: &Member) -> bool {
    let Some(goal) = &o.goal_units else {
        return false;
    };
    let alive = |unit: &str| goal.get(unit).is_some_and(|s| s != "dying");
    !m.name.is_empty()
        && m.name != o.member_name
        && !goal
            .keys()
            .any(|u| u.replace('/', "") == m.name && alive(u))
        && !o.peers.iter().any(|(u, b)| {
            alive(u)
                && b.get("peer-url")
                    .is_some_and(|url| m.peer_urls.contains(url))
        })
}

fn unit_number(member_name: &str) -> u64 {
    let digits: String = member_name
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().unwrap_or(u64::MAX)
}

/// The unit is going away: leave the cluster while it still can, then stop.
pub(super) fn plan_stop(o: &Observed, p: &mut Plan) {
    if let (Some(ids), Some(view)) = (o.local_ids(), o.cluster.as_ref()) {
        // The only voter (learners aside) has no cluster to keep.
        let voter = view.by_id(ids.member_id).is_some_and(|m| !m.is_learner);
        let member = view.by_id(ids.member_id).is_some();
        if member && (!voter || view.voters() > 1) {
            p.steps.push(Step::RemoveMember {
                name: o.member_name.clone(),
                id: ids.member_id,
            });
        }
    }
    if o.active {
        p.steps.push(Step::StopEtcd);
    }
}
