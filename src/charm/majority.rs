//! A cluster that lost its majority, named (issue 21): fewer than a quorum
//! of the voters answer, so no raft leader can be elected and nothing the
//! hooks do can help. Every remaining unit says how many of how many
//! answer, which answering member has the most recent data, and the action
//! to run on that member's unit (`rebuild-cluster`, rebuild.rs).
//!
//! Blocked at once when every silent voter's unit is gone (force-removed:
//! goal-state no longer lists it, or lists it dying); while a silent
//! voter's unit still exists (a machine rebooting, a network cut) the units
//! wait, and are blocked only once the loss has lasted [`WAIT_ENV`] seconds
//! (300 by default) since the Juju leader first saw it (leadership data
//! [`SINCE`]: the model's memory, not a file of ours).

use super::observed::Observed;
pub use super::observed::QuorumSeen;
use super::steps::{Plan, Step};
use crate::hooktools::StatusKind;

/// Leadership-data key: when the Juju leader first saw the majority lost
/// (unix seconds); emptied once a leader is back.
pub const SINCE: &str = "majority-lost-since";
/// How long a loss with silent voters whose units still exist is waited
/// out before it is called a loss.
pub const WAIT_ENV: &str = "ETCD_CHARM_MAJORITY_WAIT";
pub const DEFAULT_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// A majority loss, as the status and the action name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    pub voters: usize,
    /// Answering voters: (name, id, raft index), the most recent first.
    pub answering: Vec<(String, u64, u64)>,
    /// Silent voters: (name, whether their unit is gone).
    pub silent: Vec<(String, bool)>,
}

impl Loss {
    /// The answering member with the most recent data.
    pub fn best(&self) -> &(String, u64, u64) {
        &self.answering[0]
    }

    pub fn all_gone(&self) -> bool {
        self.silent.iter().all(|(_, gone)| *gone)
    }

    /// "1 of 3 voters answer; etcd1, etcd2 do not (their units are gone)".
    pub fn summary(&self) -> String {
        let gone: Vec<&str> = self
            .silent
            .iter()
            .filter(|(_, g)| *g)
            .map(|(n, _)| n.as_str())
            .collect();
        let here: Vec<&str> = self
            .silent
            .iter()
            .filter(|(_, g)| !*g)
            .map(|(n, _)| n.as_str())
            .collect();
        let mut s = format!("{} of {} voters answer", self.answering.len(), self.voters);
        if !gone.is_empty() {
            s += &format!(
                "; {} {} gone (unit removed)",
                gone.join(", "),
                if gone.len() == 1 { "is" } else { "are" }
            );
        }
        if !here.is_empty() {
            s += &format!(
                "; {} {} not answer (unit still there)",
                here.join(", "),
                if here.len() == 1 { "does" } else { "do" }
            );
        }
        s
    }
}

/// The unit of a member name (`etcd0` → `etcd/0`) in this application.
pub fn unit_of(o: &Observed, member_name: &str) -> String {
    let app = o.unit.split('/').next().unwrap_or_default();
    let n = member_name
        .strip_prefix(app)
        .filter(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    match n {
        Some(n) => format!("{app}/{n}"),
        None => member_name.to_string(),
    }
}

/// The loss, when this unit's member answers without a leader and fewer
/// than a quorum of the voters answer.
pub fn assess(o: &Observed) -> Option<Loss> {
    let q = o.quorum.as_ref()?;
    // A peer's member leads a cluster (one rebuilt alone): no loss to name;
    // with_wal.rs finds whether this member still belongs to it.
    if o.cluster.as_ref().is_some_and(|v| v.status.leader != 0) {
        return None;
    }
    let voters = q.voters.len();
    let mut answering: Vec<(String, u64, u64)> = q
        .voters
        .iter()
        .filter_map(|(m, idx)| idx.map(|i| (m.name.clone(), m.id, i)))
        .collect();
    if answering.is_empty() || answering.len() > voters / 2 {
        return None;
    }
    // Most recent first; a tie goes to the lowest member ID (stable).
    answering.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
    let gone = |name: &str| {
        o.goal_units.as_ref().is_some_and(|g| {
            g.get(&unit_of(o, name))
                .is_none_or(|status| status == "dying")
        })
    };
    let mut silent: Vec<(String, bool)> = q
        .voters
        .iter()
        .filter(|(_, idx)| idx.is_none())
        .map(|(m, _)| {
            let name = if m.name.is_empty() {
                format!("member {:x}", m.id)
            } else {
                m.name.clone()
            };
            let g = !m.name.is_empty() && gone(&m.name);
            (name, g)
        })
        .collect();
    silent.sort();
    Some(Loss {
        voters,
        answering,
        silent,
    })
}

/// The status and the leader's note of when the loss began; clears the
/// note once a leader is back.
pub fn plan(o: &Observed, p: &mut Plan) {
    let since = o.leader.get(SINCE).and_then(|s| s.parse::<i64>().ok());
    let Some(loss) = assess(o) else {
        let has_leader = o.local.as_ref().is_some_and(|v| v.status.leader != 0);
        if o.is_leader && has_leader && since.is_some() {
            p.steps.push(Step::SetLeaderData(
                [(SINCE.to_string(), String::new())].into(),
            ));
        }
        return;
    };
    let q = o.quorum.as_ref().expect("assessed from it");
    if o.is_leader && since.is_none() {
        p.steps.push(Step::SetLeaderData(
            [(SINCE.to_string(), q.now.to_string())].into(),
        ));
    }
    let (name, _, index) = loss.best();
    let unit = unit_of(o, name);
    let here = if unit == o.unit { " (this unit)" } else { "" };
    let lasted = since.map(|s| q.now - s).unwrap_or(0);
    if loss.all_gone() || lasted >= q.wait_secs {
        p.status.push((
            StatusKind::Blocked,
            format!(
                "majority lost: {}; {name}{here} has the most recent data (raft index {index}): run `juju run {unit} rebuild-cluster` to rebuild the cluster from it",
                loss.summary()
            ),
        ));
    } else {
        p.status.push((
            StatusKind::Waiting,
            format!(
                "Waiting for the cluster to elect a raft leader: {} for {lasted} s (called a majority loss after {} s)",
                loss.summary(),
                q.wait_secs
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charm::plan_tests::{fresh, member, sees};
    use crate::etcd::Member;

    fn lost(answers: &[(u64, &str, Option<u64>)], goal: &[(&str, &str)]) -> Observed {
        let mut o = fresh(false);
        let members: Vec<Member> = answers
            .iter()
            .enumerate()
            .map(|(i, (id, name, _))| member(*id, name, &format!("10.0.0.{}", i + 1), false))
            .collect();
        sees(&mut o, members.clone());
        o.local.as_mut().unwrap().status.leader = 0;
        o.cluster.as_mut().unwrap().status.leader = 0;
        o.quorum = Some(QuorumSeen {
            voters: members
                .into_iter()
                .zip(answers.iter().map(|a| a.2))
                .collect(),
            now: 1_000,
            wait_secs: 300,
        });
        o.goal_units = Some(
            goal.iter()
                .map(|(u, s)| (u.to_string(), s.to_string()))
                .collect(),
        );
        o
    }

    fn status(p: &Plan) -> (StatusKind, String) {
        p.status.iter().max_by_key(|(k, _)| *k).cloned().unwrap()
    }

    #[test]
    fn a_survivor_whose_peers_are_gone_is_blocked_naming_itself_and_the_action() {
        let o = lost(
            &[
                (0xa0, "etcd0", Some(40)),
                (0xa1, "etcd1", None),
                (0xa2, "etcd2", None),
            ],
            &[("etcd/0", "active")],
        );
        let mut p = Plan::default();
        plan(&o, &mut p);
        let (k, msg) = status(&p);
        assert_eq!(k, StatusKind::Blocked);
        assert_eq!(
            msg,
            "majority lost: 1 of 3 voters answer; etcd1, etcd2 are gone (unit removed); etcd0 (this unit) has the most recent data (raft index 40): run `juju run etcd/0 rebuild-cluster` to rebuild the cluster from it"
        );
    }

    #[test]
    fn the_most_recent_answering_member_is_named_on_every_unit() {
        let mut o = lost(
            &[
                (0xa0, "etcd0", Some(40)),
                (0xa1, "etcd1", Some(55)),
                (0xa2, "etcd2", None),
                (0xa3, "etcd3", None),
                (0xa4, "etcd4", None),
            ],
            &[("etcd/0", "active"), ("etcd/1", "active")],
        );
        let mut p = Plan::default();
        plan(&o, &mut p);
        let (k, msg) = status(&p);
        assert_eq!(k, StatusKind::Blocked);
        assert!(
            msg.starts_with("majority lost: 2 of 5 voters answer; etcd2, etcd3, etcd4 are gone"),
            "{msg}"
        );
        assert!(msg.ends_with("etcd1 has the most recent data (raft index 55): run `juju run etcd/1 rebuild-cluster` to rebuild the cluster from it"), "{msg}");
        // Two of three is a quorum: an election, not a loss.
        o.quorum.as_mut().unwrap().voters.truncate(3);
        assert_eq!(assess(&o), None);
    }

    #[test]
    fn silent_voters_whose_units_remain_are_waited_for_then_called_a_loss() {
        let mut o = lost(
            &[
                (0xa0, "etcd0", Some(40)),
                (0xa1, "etcd1", None),
                (0xa2, "etcd2", None),
            ],
            &[
                ("etcd/0", "active"),
                ("etcd/1", "active"),
                ("etcd/2", "dying"),
            ],
        );
        o.is_leader = true;
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert_eq!(status(&p).0, StatusKind::Waiting, "{:?}", p.status);
        assert!(
            status(&p)
                .1
                .contains("etcd2 is gone (unit removed); etcd1 does not answer (unit still there)"),
            "{:?}",
            p.status
        );
        assert_eq!(
            p.steps,
            vec![Step::SetLeaderData(
                [(SINCE.to_string(), "1000".to_string())].into()
            )],
            "the leader notes when it began"
        );
        o.leader.app.insert(SINCE.into(), "600".into());
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert_eq!(status(&p).0, StatusKind::Blocked, "400 s later");
        assert!(p.steps.is_empty());
        // A leader again: the note goes.
        o.quorum = None;
        o.local.as_mut().unwrap().status.leader = 0xa0;
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert_eq!(
            p.steps,
            vec![Step::SetLeaderData(
                [(SINCE.to_string(), String::new())].into()
            )]
        );
    }
}
