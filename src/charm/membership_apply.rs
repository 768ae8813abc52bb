//! Apply's membership steps: record the cluster, add a learner, promote
//! it, remove a member. Each retries within the hook, with a bound, because
//! etcd refuses a change for a few seconds after the last; a removal that
//! would cost quorum is refused (a status), never forced.

use super::apply::{voter_endpoints, Applier, Outcome, MEMBERSHIP_RETRY};
use super::desired;
use super::observed::{CLUSTER, CLUSTER_ID, JOIN_PREFIX};
use super::steps::Step;
use crate::context::Event;
use crate::error::{Error, Result};
use crate::etcd;
use crate::hooktools::{Databag, StatusKind};
use std::time::{Duration, Instant};
use tracing::{info, warn};

impl Applier<'_> {
    pub(super) fn record_cluster(&self) -> Result<()> {
        let v = self.view()?;
        let mut d = Databag::new();
        d.insert(CLUSTER_ID.into(), format!("{:x}", v.cluster_id()));
        d.insert(CLUSTER.into(), v.cluster_string(false));
        if let Ok(c) = &self.observed.config {
            d.insert(
                "leader_address".into(),
                desired::client_url(self.observed, c),
            );
        }
        self.set_leader_data(&d)
    }

    /// Idempotent: a member already listed under this peer URL is reused,
    /// which also covers an add whose response was lost.
    pub(super) fn add_member(
        &self,
        name: &str,
        peer_url: &str,
    ) -> Result<Option<(StatusKind, String)>> {
        let start = Instant::now();
        let id = loop {
            if let Some(gone) = self.leader_gone(&add_step(name, peer_url))? {
                return Ok(Some(gone));
            }
            let v = self.view()?;
            if let Some(m) = v.by_peer_url(peer_url) {
                break m.id;
            }
            match etcd::block_on(etcd::add_learner(&voter_endpoints(&v), peer_url)) {
                Ok(id) => {
                    crate::failpoint::hit("add-member:added");
                    break id;
                }
                Err(e) if start.elapsed() < MEMBERSHIP_RETRY => {
                    info!("member add {name} refused, retrying: {e}");
                    std::thread::sleep(Duration::from_secs(1));
                }
                Err(e) => return Err(e.into()),
            }
        };
        let v = self.view()?;
        let mut initial = v.cluster_string(true);
        if !initial.is_empty() {
            initial.push(',');
        }
        initial.push_str(&format!("{name}={peer_url}"));
        let mut d = Databag::new();
        d.insert(
            format!("{}{name}", JOIN_PREFIX),
            desired::format_join(id, &initial),
        );
        self.set_leader_data(&d)?;
        Ok(None)
    }

    /// Every failed promote is a raft proposal: back off between attempts.
    pub(super) fn promote(&self, name: &str, id: u64) -> Result<Option<(StatusKind, String)>> {
        let start = Instant::now();
        let mut delay = Duration::from_millis(300);
        loop {
            if let Some(gone) = self.leader_gone(&Step::PromoteLearner {
                name: name.into(),
                id,
            })? {
                return Ok(Some(gone));
            }
            // Only voters serve membership changes: a learner answers
            // "rpc not supported for learner", an unstarted peer not at all.
            let eps = match self.view() {
                Ok(v) => voter_endpoints(&v),
                Err(_) => self.endpoints(),
            };
            match etcd::block_on(etcd::promote(&eps, id)) {
                Ok(()) => {
                    info!("promoted {name} ({id:x})");
                    return Ok(None);
                }
                Err(e) if start.elapsed() < MEMBERSHIP_RETRY => {
                    info!("promote {name} not yet possible: {e}");
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(Duration::from_secs(4));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    pub(super) fn remove_member(
        &self,
        name: &str,
        id: u64,
    ) -> Result<Option<(StatusKind, String)>> {
        let v = match self.view() {
            Ok(v) => v,
            Err(e) => {
                return Ok(Some((
                    StatusKind::Waiting,
                    format!("Waiting for a healthy cluster to remove {name}: {e}"),
                )))
            }
        };
        let Some(target) = v.by_id(id).cloned() else {
            return Ok(None);
        };
        // Quorum after removal: the remaining voters that answer must be a majority.
        let remaining: Vec<_> = v
            .members
            .iter()
            .filter(|m| m.id != id && !m.is_learner)
            .collect();
        let healthy = remaining
            .iter()
            .filter(|m| {
                m.client_urls
                    .first()
                    .is_some_and(|u| etcd::block_on(etcd::member_status(u)).is_ok())
            })
            .count();
        // The removal is itself a raft proposal: without a quorum now (a
        // dead target among too few voters) it cannot commit, and would be
        // retried for MEMBERSHIP_RETRY in vain.
        let target_up = target
            .client_urls
            .first()
            .is_some_and(|u| etcd::block_on(etcd::member_status(u)).is_ok());
        let up_now = healthy + usize::from(target_up);
        let voters_now = remaining.len() + 1;
        let no_quorum_now = !target.is_learner && up_now < voters_now / 2 + 1;
        if !target.is_learner
            && (remaining.is_empty() || healthy < remaining.len() / 2 + 1 || no_quorum_now)
        {
            let o = self.observed;
            let cost = if no_quorum_now {
                format!("the cluster has no quorum now ({up_now} of {voters_now} voters answer)")
            } else {
                format!(
                    "now it would leave {healthy} of {} remaining members healthy (no quorum)",
                    remaining.len()
                )
            };
            if self.removes_self(&Step::RemoveMember {
                name: name.into(),
                id,
            }) {
                return Ok(Some((
                    StatusKind::Blocked,
                    format!("removing this unit's member {name} ({id:x}) is refused: {cost}"),
                )));
            }
            let unit_of = |u: &str| u.replace('/', "") == name;
            let leaving = name == o.member_name
                || o.peers.keys().any(|u| unit_of(u))
                || o.departing_unit.as_deref().is_some_and(unit_of)
                || o.goal_units
                    .as_ref()
                    .is_some_and(|g| g.keys().any(|u| unit_of(u)));
            let why = if leaving { "is leaving" } else { "has no unit" };
            return Ok(Some((
                StatusKind::Blocked,
                format!(
                    "member {name} ({id:x}) {why}: removing it when quorum allows; {cost}: restore the failed members"
                ),
            )));
        }
        if v.status.leader == id {
            if let Some(to) = remaining.iter().find(|m| !m.name.is_empty()) {
                if let Some(ep) = target.client_urls.first() {
                    info!("moving raft leadership from {name} to {}", to.name);
                    etcd::block_on(etcd::move_leader(ep, to.id))?;
                }
            }
        }
        let eps: Vec<String> = remaining
            .iter()
            .filter_map(|m| m.client_urls.first().cloned())
            .collect();
        let start = Instant::now();
        loop {
            if self.observed.is_leader {
                if let Some(gone) = self.leader_gone(&Step::RemoveMember {
                    name: name.into(),
                    id,
                })? {
                    return Ok(Some(gone));
                }
            }
            match etcd::block_on(etcd::remove(&eps, id)) {
                Ok(()) => break,
                Err(e) if start.elapsed() < MEMBERSHIP_RETRY => {
                    info!("member remove {name} refused, retrying: {e}");
                    std::thread::sleep(Duration::from_secs(1));
                }
                Err(e) => return Err(e.into()),
            }
        }
        info!("removed member {name} ({id:x})");
        if self.observed.is_leader {
            let mut d = Databag::new();
            d.insert(format!("{}{name}", JOIN_PREFIX), String::new());
            self.set_leader_data(&d)?;
        }
        Ok(None)
    }

    /// A removal of this unit's own member (the one it runs, or its WAL's).
    pub(super) fn removes_self(&self, step: &Step) -> bool {
        matches!(step, Step::RemoveMember { id, .. }
            if Some(*id) == super::turn::member_id(self.observed))
    }

    /// In a hook that takes this unit or its data away (stop, the data
    /// volume detaching), the plan's removal of
    /// its own member did not happen (refused for quorum, no view, an
    /// error before it): its member is still a voter, and stopping it
    /// could cost the cluster its quorum. The status says why and what to
    /// do; the returned error fails the hook, so Juju keeps the unit (in
    /// error) and its disk, and etcd keeps running.
    pub(super) fn removal_refused(
        &self,
        steps: &[Step],
        out: &Outcome,
        result: &Result<()>,
    ) -> Option<Error> {
        let o = self.observed;
        if o.event != Event::Stop && !o.storage.detaching {
            return None;
        }
        let at = steps.iter().position(|s| self.removes_self(s))?;
        if out.done > at {
            return None;
        }
        let why = match result {
            Err(e) => e.to_string(),
            Ok(()) => out
                .status
                .last()
                .map_or_else(|| "it did not run".to_string(), |s| s.1.clone()),
        };
        let msg = refused_message(&o.unit, &why, o.storage.detaching);
        warn!("{msg}");
        if let Err(e) = self.tools.status_set(StatusKind::Blocked, &msg) {
            warn!("status-set: {e}");
        }
        Some(Error::Refused(msg))
    }
}

fn add_step(name: &str, peer_url: &str) -> Step {
    Step::AddMember {
        name: name.into(),
        peer_url: peer_url.into(),
    }
}

/// What a unit that may not leave the cluster yet says (status, hook
/// error): why, and the operator's two ways out.
pub(super) fn refused_message(unit: &str, why: &str, detaching: bool) -> String {
    let force = if detaching {
        format!(
            "`juju detach-storage --force` its data storage (or `juju remove-unit --force {unit}`)"
        )
    } else {
        format!("`juju remove-unit --force {unit}`")
    };
    format!(
        "{unit} cannot leave the etcd cluster yet ({why}); etcd keeps running and this hook fails. \
         Bring the down members back, then `juju resolve {unit}`; or {force} to go on anyway, \
         knowing the cluster may lose quorum"
    )
}
