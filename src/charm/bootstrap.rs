//! Who bootstraps a new cluster, decided once and committed before etcd
//! starts (two phases), so a hook that dies after the start can never lead
//! a later leader to bootstrap a second cluster.
//!
//! # Expected flow
//! 1. Phase 1 — the leader sees no cluster anywhere and no decision: it
//!    writes `bootstrap-member=<its member name>` and the token in ONE
//!    leadership-data write. Under Juju < 4 that is `leader-set`, durable at
//!    once, and phase 2 follows in the same hook (the next pass reads the
//!    decision back). Under Juju 4 it is the peer app databag, which commits
//!    only when the hook exits 0: the plan ends the hook there.
//! 2. Phase 2 — the unit the committed decision names (leader or not by
//!    then) writes a `new` config and starts etcd; the leader records the
//!    cluster once it answers.
//!
//! # Guarantees
//! - No unit ever starts a `new` cluster without a committed decision
//!   naming it; every other unit (a later leader too) waits and joins.
//! - The token and the decision commit together; the token is read back by
//!   every later leader (rule 1).
//!
//! # Caveats
//! - In the deploy order (relation-created → leader-elected →
//!   config-changed → start) a hook always follows phase 1. If phase 1 ran
//!   in the last hook of a burst, phase 2 runs on the next update-status
//!   (≤ 5 minutes), which also starts etcd for a decided bootstrap.
//! - The named unit gone for good (removed before it started etcd): the
//!   leader never re-decides by itself — the unit may merely not have
//!   joined the relation yet, or be on its way back. It waits, saying so;
//!   an operator who knows the unit is gone clears `bootstrap-member` from
//!   leadership data (both homes: `leader-set bootstrap-member=` and the
//!   peer app databag) and the leader decides again, with the same token.

use super::config::CharmConfig;
use super::desired::{desired_config, peer_url};
use super::observed::Observed;
use super::steps::{Plan, Step};
use crate::hooktools::{Databag, StatusKind};
use crate::paths::Paths;
use crate::render::{self, ClusterState};

/// Leadership-data key naming the member that bootstraps the cluster.
pub const BOOTSTRAP: &str = "bootstrap-member";

/// The committed decision, as this unit sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nobody has been chosen yet.
    Undecided,
    /// This unit was chosen.
    Mine,
    /// Another member was chosen; `present` when its unit is in the peer
    /// relation.
    Other { name: String, present: bool },
}

pub fn decision(o: &Observed) -> Decision {
    match o.leader.get(BOOTSTRAP) {
        None => Decision::Undecided,
        Some(n) if n == o.member_name => Decision::Mine,
        Some(n) => Decision::Other {
            name: n.to_string(),
            present: o.peers.iter().any(|(u, b)| {
                u.replace('/', "") == n || b.get("member-name").map(|s| s.as_str()) == Some(n)
            }),
        },
    }
}

/// No WAL here and no cluster anywhere: decide (phase 1), bootstrap
/// (phase 2), or wait for the unit that was chosen.
pub(super) fn plan_bootstrap(
    o: &Observed,
    c: &CharmConfig,
    paths: &Paths,
    token: &str,
    p: &mut Plan,
) {
    match decision(o) {
        Decision::Mine => {
            let want = desired_config(
                o,
                c,
                paths,
                token,
                ClusterState::New,
                vec![(o.member_name.clone(), peer_url(o, c))],
            );
            p.steps.push(Step::WriteConfig {
                text: render::render_etcd_config(&want),
                why: "bootstrapping a new one-member cluster".into(),
                config: Box::new(want),
            });
            if o.active {
                p.steps.push(Step::StopEtcd);
            }
            p.steps.push(Step::StartEtcd);
            p.steps.push(Step::WaitMember);
            if o.is_leader {
                p.steps.push(Step::RecordCluster);
            }
        }
        Decision::Other { name, present } => {
            let gone = if present {
                String::new()
            } else {
                format!(
                    "; it is not in the peer relation: if it is gone for good, clear {BOOTSTRAP} from leadership data"
                )
            };
            p.wait(format!("Waiting for {name} to bootstrap the cluster{gone}"));
        }
        Decision::Undecided if !o.is_leader => p.wait("Waiting to join the cluster"),
        Decision::Undecided if o.peer_relation.is_none() && !o.has_leader_tools => {
            // Juju 4 keeps leadership data only in the peer app databag.
            p.wait("Waiting for the peer relation to record the bootstrap decision")
        }
        Decision::Undecided => {
            // One write with the token (if the plan writes it now too).
            match p.steps.iter_mut().find_map(|s| match s {
                Step::SetLeaderData(d) => Some(d),
                _ => None,
            }) {
                Some(d) => {
                    d.insert(BOOTSTRAP.into(), o.member_name.clone());
                }
                None => {
                    let mut d = Databag::new();
                    d.insert(BOOTSTRAP.into(), o.member_name.clone());
                    p.steps.push(Step::SetLeaderData(d));
                }
            }
            if !o.has_leader_tools {
                p.commit_first = true;
                p.status.push((
                    StatusKind::Maintenance,
                    "Bootstrap decided: etcd starts in the next hook, once the decision is committed"
                        .into(),
                ));
            }
        }
    }
}
