//! update-status on a settled unit, in as few hook-tool calls as the
//! decision needs. On a real controller each call is a round trip to the
//! unit agent (~16 ms), and update-status runs on every unit every five
//! minutes, so this is what a large model pays most often.
//!
//! Settled means: no keyspace copy of ours is readable by others,
//! etcd.conf.yml is there, etcd runs, its own member is a
//! voter with a raft leader, and the status the last hook set is already
//! the one this hook would set, and no certificate on disk is due for
//! renewal. Then nothing the full observe reads can
//! lead anywhere: a config or address change comes with config-changed,
//! relation data with relation-changed/-departed, a new leader with
//! leader-elected; each runs the full reconcile. The one thing update-status
//! itself must still do is the leader's retry of a membership cleanup
//! (leader.rs): the leader reads goal-state and goes the full way unless
//! every member is a started voter of a unit the model expects and every
//! expected unit has one. Anything else (or any tool failing) falls back to
//! the full reconcile, which decides, reports and fails as it always has.

use super::final_status;
use crate::etcd::{self, ClusterView};
use crate::hooktools::{HookTools, StatusKind};
use crate::layout;
use crate::paths::Paths;
use crate::service::Service;
use std::collections::BTreeMap;
use tracing::debug;

/// True when update-status had nothing to do here and is complete (2 calls
/// on a non-leader, 3 on the leader, none of them a write).
pub fn update_status(tools: &HookTools, paths: &Paths) -> bool {
    // Keyspace copies left readable (an older revision's): the full
    // reconcile tightens them (backups.rs). A few stats, no hook tool.
    if !super::backups::observe(paths).is_empty() {
        return false;
    }
    // A certificate due for renewal: the full reconcile asks for a new
    // one (certificates_renewal.rs). Two file reads, no hook tool.
    if renewal_due(paths) {
        return false;
    }
    let Some(view) = settled_view(paths) else {
        return false;
    };
    // The count the full reconcile would report, by the same function.
    // With what the maintenance agent reports (one loopback GET, no hook tool).
    let (want_kind, want_msg) = super::with_notes(
        final_status(&[], super::voter_peers(&view)),
        &super::agent::quiet_notes(paths),
    );
    match tools.status_get() {
        Ok((kind, msg))
            if want_kind == StatusKind::Active
                && kind == want_kind.as_str()
                && msg.trim() == want_msg => {}
        _ => return false,
    }
    match tools.is_leader() {
        Ok(false) => true,
        Ok(true) => match tools.goal_state_units() {
            Ok(goal) => nothing_to_clean(&view, &goal),
            Err(_) => false,
        },
        Err(_) => false,
    }
}

/// The server or client certificate on disk is due for renewal.
fn renewal_due(paths: &Paths) -> bool {
    use crate::tls::files::Found;
    let f = crate::tls::files::read(paths);
    let now = super::expiry::now_unix();
    [f.server, f.client].iter().any(|c| {
        matches!(c, Found::Cert(i)
            if super::certificates_renewal::due(i.not_before, i.not_after, now))
    })
}

/// The own member's view, if it is a started voter with a raft leader and
/// was reached at the client URL etcd.conf.yml advertises. No hook tool.
fn settled_view(paths: &Paths) -> Option<ClusterView> {
    let found = layout::read_found_config(paths)?.ok()?;
    let url = found.advertise_client_urls?;
    let endpoint = url.split(',').next()?.trim().to_string();
    let service = Service::from_env(paths.clone(), "auto");
    if !service.is_active().unwrap_or(false) {
        return None;
    }
    // On a TLS unit the view needs the client pair before it is asked
    // (without it this path was never taken on TLS).
    super::observe::local_tls(paths);
    let v = etcd::block_on(etcd::view_from(&endpoint)).ok()?;
    // Whatever the full reconcile would block on must keep this path shut:
    // an error the member reports, or a raised alarm (one etcd call, no
    // hook tool).
    let settled = !v.status.is_learner
        && v.status.leader != 0
        && v.status.errors.is_empty()
        && super::alarms::observe(&endpoint, Some(&v)).is_empty()
        && found.name.is_some_and(|n| {
            v.members
                .iter()
                .any(|m| m.id == v.status.member_id && m.name == n)
        });
    debug!("quiet update-status: settled={settled}");
    settled.then_some(v)
}

/// The leader's cleanup has nothing to do: every member is a started voter
/// named after a unit goal-state expects (not dying), and every such unit
/// has its member (no joiner pending).
fn nothing_to_clean(view: &ClusterView, goal: &BTreeMap<String, String>) -> bool {
    let alive: Vec<String> = goal
        .iter()
        .filter(|(_, s)| s.as_str() != "dying")
        .map(|(u, _)| u.replace('/', ""))
        .collect();
    view.members.len() == alive.len()
        && view
            .members
            .iter()
            .all(|m| !m.is_learner && !m.name.is_empty() && alive.contains(&m.name))
}

#[cfg(test)]
mod tests {
    use super::nothing_to_clean;
    use crate::etcd::{ClusterView, Member, MemberStatus};
    use std::collections::BTreeMap;

    fn view(members: &[(&str, bool)]) -> ClusterView {
        ClusterView {
            endpoint: String::new(),
            status: MemberStatus {
                member_id: 1,
                cluster_id: 9,
                leader: 1,
                version: "3.4.23".into(),
                raft_index: 1,
                is_learner: false,
                errors: vec![],
            },
            members: members
                .iter()
                .enumerate()
                .map(|(i, (n, learner))| Member {
                    id: i as u64 + 1,
                    name: n.to_string(),
                    peer_urls: vec![],
                    client_urls: vec![],
                    is_learner: *learner,
                })
                .collect(),
        }
    }

    fn goal(units: &[(&str, &str)]) -> BTreeMap<String, String> {
        units
            .iter()
            .map(|(u, s)| (u.to_string(), s.to_string()))
            .collect()
    }

    #[test]
    fn only_a_one_to_one_match_of_voters_and_live_units_is_quiet() {
        let three = goal(&[
            ("etcd/0", "active"),
            ("etcd/1", "active"),
            ("etcd/2", "active"),
        ]);
        let voters = view(&[("etcd0", false), ("etcd1", false), ("etcd2", false)]);
        assert!(nothing_to_clean(&voters, &three));
        // A member whose unit is gone (a refused removal to retry).
        let gone = goal(&[("etcd/0", "active"), ("etcd/1", "active")]);
        assert!(!nothing_to_clean(&voters, &gone));
        // A unit that is dying still has its member.
        let dying = goal(&[
            ("etcd/0", "active"),
            ("etcd/1", "active"),
            ("etcd/2", "dying"),
        ]);
        assert!(!nothing_to_clean(&voters, &dying));
        // A joiner without a member yet, a learner, an unstarted member.
        let four = goal(&[
            ("etcd/0", "active"),
            ("etcd/1", "active"),
            ("etcd/2", "active"),
            ("etcd/3", "waiting"),
        ]);
        assert!(!nothing_to_clean(&voters, &four));
        let learner = view(&[("etcd0", false), ("etcd1", false), ("etcd2", true)]);
        assert!(!nothing_to_clean(&learner, &three));
        let unstarted = view(&[("etcd0", false), ("etcd1", false), ("", false)]);
        assert!(!nothing_to_clean(&unstarted, &three));
        // A member under a name no unit has (an imported cluster's).
        let other = view(&[("etcd0", false), ("etcd1", false), ("node-c", false)]);
        assert!(!nothing_to_clean(&other, &three));
    }
}
