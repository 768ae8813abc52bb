//! The rolling-turn gate (pure); its two steps' apply half is turn_apply.rs.
//!
//! [`gate`] takes a plan and, when its steps take this unit's STARTED
//! member down (a stop before a migration, a restart for a new config, a
//! stop and start), puts `TakeTurn` before them and `ReleaseTurn` after the
//! member is back and verified. The mechanics (the lock in etcd, its lease,
//! the health checks) are `crate::rolling`'s.
//!
//! No turn when this member is not running (a start is not a restart), is
//! not a voter (a learner or a removed member going down costs no quorum),
//! is the only voter, in the stop hook, or when the plan removes it from
//! the cluster before it goes down (a detaching volume). A member whose
//! view is unknown (nothing answered) takes the turn like a voter unless
//! the model says it is alone: unknown means wait, never an unguarded
//! restart (the turn reaches nobody, so the hook waits, bounded, and
//! leaves everything as it was; the `restart` action is the way out).

use super::observed::Observed;
use super::steps::UpgradeStep;
use super::steps::{Plan, Step};
use crate::context::Event;

fn goes_down(s: &Step) -> bool {
    matches!(s, Step::StopEtcd | Step::RestartEtcd) || is_refresh(s)
}

fn comes_up(s: &Step) -> bool {
    matches!(s, Step::StartEtcd | Step::RestartEtcd) || is_refresh(s)
}

/// `snap refresh` stops the member and starts it on the new revision.
fn is_refresh(s: &Step) -> bool {
    matches!(s, Step::SnapUpgrade(u) if u.is_refresh())
}

/// The running member's ID: as it answers, else as its WAL records.
pub(super) fn member_id(o: &Observed) -> Option<u64> {
    if let Some(v) = &o.local {
        return Some(v.status.member_id);
    }
    o.disk
        .locations
        .iter()
        .find_map(|l| l.member.as_ref().ok().copied().flatten())
        .map(|ids| ids.member_id)
}

/// Whether taking this unit's member down costs the cluster a voter.
fn needs_turn(o: &Observed) -> bool {
    if !o.active || matches!(o.event, Event::Stop | Event::Remove) {
        return false;
    }
    let Some(id) = member_id(o) else {
        return false;
    };
    match o.member_view() {
        Some(v) => v.voters() > 1 && v.by_id(id).is_some_and(|m| !m.is_learner),
        None => !known_alone(o),
    }
}

/// No peer unit, and the recorded cluster (if any) has one voter at most:
/// a member nobody else depends on.
fn known_alone(o: &Observed) -> bool {
    let recorded = o
        .leader
        .get(super::observed::CLUSTER)
        .map_or(0, |c| c.split(',').filter(|s| !s.trim().is_empty()).count());
    o.peers.is_empty() && recorded <= 1
}

/// The plan takes this unit's member out of the cluster before it goes
/// down (a detaching volume, a departing unit): a member no longer in the
/// cluster costs it no voter, and its own member list could not grant a
/// turn anyway (the hook would wait the turn out for nothing).
fn leaves_first(o: &Observed, before: &[Step]) -> bool {
    let Some(own) = member_id(o) else {
        return false;
    };
    before
        .iter()
        .any(|s| matches!(s, Step::RemoveMember { id, .. } if *id == own))
}

fn reason(steps: &[Step]) -> String {
    if let Some(to) = steps.iter().find_map(|s| match s {
        Step::SnapUpgrade(UpgradeStep::Refresh { channel }) => Some(channel),
        _ => None,
    }) {
        format!("upgrading etcd to {to}")
    } else if steps.iter().any(|s| matches!(s, Step::Migrate(_))) {
        "moving the member to the canonical data dir".into()
    } else if steps.iter().any(|s| matches!(s, Step::WriteConfig { .. })) {
        "a new etcd.conf.yml".into()
    } else {
        "restarting the member".into()
    }
}

/// Puts a rolling turn around the steps that take this unit's started
/// member down. Pure.
pub fn gate(o: &Observed, mut p: Plan) -> Plan {
    let Some(down) = p.steps.iter().position(goes_down) else {
        return p;
    };
    // A rebuild under way (rebuild.rs) has no quorum to keep: the member
    // it restarts alone is the cluster.
    if !needs_turn(o) || leaves_first(o, &p.steps[..down]) || super::desired::continues_rebuild(o) {
        return p;
    }
    // The config that makes the restart necessary is written inside the
    // turn too: a hook that runs out of waiting must leave the old config,
    // so that the next hook still sees the restart to do.
    // A migration's online snapshot too, though it takes nothing down: in
    // the turn, it is taken once, right before the stop, and as fresh as
    // it can be; before the turn, every hook that waited for the turn in
    // vain would take another (the running member's WAL changes, so none
    // is ever fresh) and fill the backup dir, and the one finally used
    // could be minutes older than the stop. The price: the turn is held
    // for the stream's length (about a second a GiB) with the member up.
    let take = p.steps[..down]
        .iter()
        .position(|s| match s {
            // A peer URL moved to https cuts the member off until it
            // restarts with https listeners (certificates.rs): in the turn.
            Step::WriteConfig { .. } | Step::UpdatePeerUrl { .. } => true,
            Step::Tls(super::steps::TlsStep::MoveLeader { .. }) => true,
            Step::Migrate(m) => m.before_stop(),
            Step::SnapUpgrade(u) => u.before_down(),
            _ => false,
        })
        .unwrap_or(down);
    // Released once the member is back and verified; if nothing brings it
    // back in this plan, at the end (its absence keeps others waiting).
    let release = match p.steps[down..].iter().position(comes_up) {
        Some(i) => {
            let mut end = down + i + 1;
            while p.steps.get(end).is_some_and(|s| {
                matches!(
                    s,
                    Step::WaitMember
                        | Step::VerifyMember(_)
                        | Step::SnapUpgrade(UpgradeStep::Verify { .. })
                )
            }) {
                end += 1;
            }
            end
        }
        None => p.steps.len(),
    };
    let reason = reason(&p.steps[take..release]);
    p.steps.insert(release, Step::ReleaseTurn);
    p.steps.insert(take, Step::TakeTurn { reason });
    p
}

/// The `restart` action's plan: the operator stands in for the rolling
/// turn, so the turn's steps go, and a member with nothing pending is
/// restarted all the same (that is what was asked). Without a quorum a
/// restarted member serves no client until enough members are back (etcd
/// publishes itself through raft first), so nothing waits for it then.
/// Pure.
pub fn operator_turn(o: &Observed, mut p: Plan, healthy: &[u64]) -> Plan {
    let lost = quorum_lost(o, healthy);
    p.steps.retain(|s| match s {
        Step::TakeTurn { .. } | Step::ReleaseTurn => false,
        Step::WaitMember | Step::VerifyMember(_) => !lost,
        _ => true,
    });
    if o.active && !p.steps.iter().any(goes_down) {
        p.steps.push(Step::RestartEtcd);
        if !lost {
            p.steps.push(Step::WaitMember);
        }
    }
    p
}

/// Fewer voters answer with a leader than a quorum (none known: lost).
pub fn quorum_lost(o: &Observed, healthy: &[u64]) -> bool {
    o.member_view()
        .is_none_or(|v| voters_up(v, healthy) < v.voters() / 2 + 1)
}

/// The voters of `v` among `healthy`.
fn voters_up(v: &crate::etcd::ClusterView, healthy: &[u64]) -> usize {
    v.members
        .iter()
        .filter(|m| !m.is_learner && healthy.contains(&m.id))
        .count()
}

/// Why the `restart` action refuses without `force=true`: the restart
/// would take the cluster below quorum (it has quorum now and would not
/// with this voter down), or nothing answered, so the cost cannot be
/// known. `healthy` is the voters that answered with a leader (by ID).
/// A cluster already without quorum loses nothing more. Pure.
pub fn operator_refusal(o: &Observed, healthy: &[u64]) -> Option<String> {
    let Some(v) = o.member_view() else {
        return Some(
            "no member answers, so what a restart costs the cluster cannot be known; \
             run with force=true once you know the other members' state"
                .into(),
        );
    };
    let id = member_id(o)?;
    let voter = v.by_id(id).is_some_and(|m| !m.is_learner);
    let voters = v.voters();
    let quorum = voters / 2 + 1;
    let up = voters_up(v, healthy);
    let without = up.saturating_sub(usize::from(healthy.contains(&id)));
    (voter && up >= quorum && without < quorum).then(|| {
        format!(
            "restarting this member leaves {without} of {voters} voters up, below the quorum of \
             {quorum}: the cluster would stop taking writes; bring the other members back, or \
             run with force=true to restart it anyway"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charm::plan;
    use crate::etcd::{ClusterView, Member, MemberStatus};
    use crate::hooktools::Databag;
    use crate::layout::{DiskLayout, Location, Role};
    use crate::migrate::MigrationStep;
    use crate::wal::WalIds;

    const IDS: WalIds = WalIds {
        member_id: 0xaa,
        cluster_id: 0xcc,
    };

    fn member(id: u64, n: u32, learner: bool) -> Member {
        Member {
            id,
            name: format!("etcd{n}"),
            peer_urls: vec![format!("http://10.0.0.{}:2380", n + 1)],
            client_urls: vec![format!("http://10.0.0.{}:2379", n + 1)],
            is_learner: learner,
        }
    }

    /// etcd/0, running member 0xaa, in a cluster of `members`.
    fn running(members: Vec<Member>) -> Observed {
        let view = ClusterView {
            endpoint: "http://10.0.0.1:2379".into(),
            status: MemberStatus {
                member_id: 0xaa,
                cluster_id: 0xcc,
                leader: 0xaa,
                version: "3.4.23".into(),
                raft_index: 1,
                is_learner: members.iter().any(|m| m.id == 0xaa && m.is_learner),
                errors: vec![],
            },
            members,
        };
        Observed {
            disk: DiskLayout {
                config: None,
                env_configs: vec![],
                locations: vec![Location {
                    path: "/r/var/snap/etcd/current".into(),
                    role: Role::Canonical,
                    exists: true,
                    member: Ok(Some(IDS)),
                    facts: Default::default(),
                }],
                migration: Default::default(),
            },
            active: true,
            local: Some(view.clone()),
            cluster: Some(view),
            ..crate::charm::plan_tests::fresh(false)
        }
    }

    fn three() -> Observed {
        running(vec![
            member(0xaa, 0, false),
            member(0xbb, 1, false),
            member(0xdd, 2, false),
        ])
    }

    fn write() -> Step {
        Step::WriteConfig {
            text: "x".into(),
            why: "w".into(),
            config: Box::new(crate::render::EtcdConfig {
                name: "etcd0".into(),
                data_dir: "/d".into(),
                listen_peer_urls: vec![],
                listen_client_urls: vec![],
                listen_metrics_urls: vec![],
                initial_advertise_peer_urls: vec![],
                advertise_client_urls: vec![],
                initial_cluster: vec![],
                initial_cluster_token: String::new(),
                initial_cluster_state: crate::render::ClusterState::Existing,
                snapshot_count: None,
                heartbeat_interval: 100,
                election_timeout: 1000,
                strict_reconfig_check: true,
                enable_v2: false,
                grpc_gateway: true,
                force_new_cluster: false,
                storage: Default::default(),
                tls: None,
            }),
        }
    }

    fn gated(o: &Observed, steps: Vec<Step>) -> Vec<Step> {
        gate(
            o,
            Plan {
                steps,
                ..Default::default()
            },
        )
        .steps
    }

    fn take(reason: &str) -> Step {
        Step::TakeTurn {
            reason: reason.into(),
        }
    }

    #[test]
    fn a_member_that_leaves_the_cluster_first_stops_without_a_turn() {
        let leave = Step::RemoveMember {
            name: "etcd0".into(),
            id: 0xaa,
        };
        let steps = vec![leave.clone(), Step::StopEtcd];
        assert_eq!(gated(&three(), steps.clone()), steps);
        // Removing another member first is no such thing.
        let other = Step::RemoveMember {
            name: "etcd1".into(),
            id: 0xbb,
        };
        let got = gated(&three(), vec![other.clone(), Step::StopEtcd]);
        assert_eq!(got[1], take("restarting the member"), "{got:?}");
    }

    /// Issue 19.5: nothing answered (a member down and the charm's own
    /// client reaching nobody, a port change not yet made): the restart is
    /// still gated. Only a member the model shows alone goes without.
    #[test]
    fn an_unknown_view_means_wait_unless_the_member_is_alone() {
        let steps = vec![write(), Step::RestartEtcd];
        let mut o = three();
        o.local = None;
        o.cluster = None;
        o.peers.insert("etcd/1".into(), Databag::new());
        let got = gated(&o, steps.clone());
        assert_eq!(got[0], take("a new etcd.conf.yml"), "{got:?}");
        // No peer unit, but the recorded cluster has three voters.
        o.peers.clear();
        o.leader.app.insert(
            crate::charm::observed::CLUSTER.into(),
            "etcd0=http://a:2380,etcd1=http://b:2380,etcd2=http://c:2380".into(),
        );
        assert_eq!(gated(&o, steps.clone())[0], take("a new etcd.conf.yml"));
        // Recorded alone, no peers: nobody to wait for.
        o.leader.app.insert(
            crate::charm::observed::CLUSTER.into(),
            "etcd0=http://a:2380".into(),
        );
        assert_eq!(gated(&o, steps.clone()), steps);
    }

    #[test]
    fn the_operator_turn_restarts_without_the_turn_and_refuses_what_costs_quorum() {
        let o = three();
        let gated_plan = gate(
            &o,
            Plan {
                steps: vec![write(), Step::RestartEtcd],
                ..Default::default()
            },
        );
        let all = [0xaa, 0xbb, 0xdd];
        assert_eq!(
            operator_turn(&o, gated_plan, &all).steps,
            vec![write(), Step::RestartEtcd]
        );
        // Nothing pending: restarted as asked; without a quorum, nothing
        // waits for a member that cannot serve until one is back.
        assert_eq!(
            operator_turn(&o, Plan::default(), &all).steps,
            vec![Step::RestartEtcd, Step::WaitMember]
        );
        let waited = Plan {
            steps: vec![Step::RestartEtcd, Step::WaitMember, Step::VerifyMember(IDS)],
            ..Default::default()
        };
        assert_eq!(
            operator_turn(&o, waited, &[0xaa]).steps,
            vec![Step::RestartEtcd]
        );
        // 3 voters all up: one may go. 2 of 3 up, this one among them: not
        // without force. 1 of 3 (quorum already lost): nothing more to lose.
        assert_eq!(operator_refusal(&o, &[0xaa, 0xbb, 0xdd]), None);
        let e = operator_refusal(&o, &[0xaa, 0xbb]).unwrap();
        assert!(e.contains("1 of 3 voters up, below the quorum of 2"), "{e}");
        assert_eq!(operator_refusal(&o, &[0xaa]), None);
        // This member down already: restarting it costs nothing.
        assert_eq!(operator_refusal(&o, &[0xbb, 0xdd]), None);
        let mut blind = three();
        blind.local = None;
        blind.cluster = None;
        assert!(operator_refusal(&blind, &[])
            .unwrap()
            .contains("force=true"));
    }

    #[test]
    fn a_restart_for_a_new_config_takes_the_turn_before_the_write() {
        let got = gated(
            &three(),
            vec![
                Step::Publish(Databag::new()),
                write(),
                Step::RestartEtcd,
                Step::WaitMember,
                Step::VerifyMember(IDS),
                Step::OpenPort(2379),
            ],
        );
        assert_eq!(
            got,
            vec![
                Step::Publish(Databag::new()),
                take("a new etcd.conf.yml"),
                write(),
                Step::RestartEtcd,
                Step::WaitMember,
                Step::VerifyMember(IDS),
                Step::ReleaseTurn,
                Step::OpenPort(2379),
            ]
        );
    }

    #[test]
    fn a_migration_holds_the_turn_from_the_stop_to_the_verified_start() {
        let mig = Step::Migrate(MigrationStep::Rename {
            from: "/a".into(),
            to: "/b".into(),
        });
        let got = gated(
            &three(),
            vec![
                Step::StopEtcd,
                mig.clone(),
                Step::SetLeaderData(Databag::new()),
                write(),
                Step::StartEtcd,
                Step::WaitMember,
                Step::VerifyMember(IDS),
                Step::RecordCluster,
            ],
        );
        assert_eq!(
            got,
            vec![
                take("moving the member to the canonical data dir"),
                Step::StopEtcd,
                mig,
                Step::SetLeaderData(Databag::new()),
                write(),
                Step::StartEtcd,
                Step::WaitMember,
                Step::VerifyMember(IDS),
                Step::ReleaseTurn,
                Step::RecordCluster,
            ]
        );
    }

    #[test]
    fn a_migrations_online_snapshot_is_inside_the_turn_before_the_stop() {
        let snap = Step::Migrate(MigrationStep::OnlineSnapshot {
            endpoint: "http://10.0.0.1:2379".into(),
            member_dir: "/a/member".into(),
            name: "etcd0".into(),
            ids: IDS,
            backup_dir: "/bk".into(),
        });
        let mig = Step::Migrate(MigrationStep::Rename {
            from: "/a".into(),
            to: "/b".into(),
        });
        let got = gated(
            &three(),
            vec![
                Step::Publish(Databag::new()),
                snap.clone(),
                Step::StopEtcd,
                mig.clone(),
                write(),
                Step::StartEtcd,
                Step::WaitMember,
            ],
        );
        assert_eq!(
            got,
            vec![
                Step::Publish(Databag::new()),
                take("moving the member to the canonical data dir"),
                snap,
                Step::StopEtcd,
                mig,
                write(),
                Step::StartEtcd,
                Step::WaitMember,
                Step::ReleaseTurn,
            ]
        );
    }

    #[test]
    fn a_stop_with_nothing_after_it_releases_at_the_end() {
        let got = gated(&three(), vec![Step::StopEtcd, Step::OpenPort(2379)]);
        assert_eq!(
            got,
            vec![
                take("restarting the member"),
                Step::StopEtcd,
                Step::OpenPort(2379),
                Step::ReleaseTurn
            ]
        );
    }

    #[test]
    fn no_turn_without_a_started_voter_going_down() {
        let restart = vec![write(), Step::RestartEtcd, Step::WaitMember];
        // Only one voter (a learner beside it does not count).
        let one = running(vec![member(0xaa, 0, false), member(0xbb, 1, true)]);
        assert_eq!(gated(&one, restart.clone()), restart);
        // Not running: a start is not a restart.
        let mut stopped = three();
        stopped.active = false;
        stopped.local = None;
        let start = vec![write(), Step::StartEtcd, Step::WaitMember];
        assert_eq!(gated(&stopped, start.clone()), start);
        // This member is a learner.
        let learner = running(vec![
            member(0xaa, 0, true),
            member(0xbb, 1, false),
            member(0xdd, 2, false),
        ]);
        assert_eq!(gated(&learner, restart.clone()), restart);
        // Removed from the cluster: stopping it costs no voter.
        let removed = running(vec![member(0xbb, 1, false), member(0xdd, 2, false)]);
        let aside = vec![Step::StopEtcd, Step::WaitMember];
        assert_eq!(gated(&removed, aside.clone()), aside);
        // The stop hook leaves the cluster before stopping.
        let mut stop = three();
        stop.event = Event::Stop;
        let leave = vec![
            Step::RemoveMember {
                name: "etcd0".into(),
                id: 0xaa,
            },
            Step::StopEtcd,
        ];
        assert_eq!(gated(&stop, leave.clone()), leave);
        // Nothing goes down.
        let calm = vec![Step::Publish(Databag::new()), Step::OpenPort(2379)];
        assert_eq!(gated(&three(), calm.clone()), calm);
    }

    #[test]
    fn a_running_member_that_does_not_answer_is_known_by_its_wal() {
        let mut o = three();
        o.local = None;
        let got = gated(&o, vec![write(), Step::RestartEtcd, Step::WaitMember]);
        assert_eq!(got.first(), Some(&take("a new etcd.conf.yml")));
        assert_eq!(got.last(), Some(&Step::ReleaseTurn));
    }

    #[test]
    fn the_whole_plan_gets_the_turn_for_a_config_change_on_a_three_member_cluster() {
        // Through plan(): heartbeat changed on a running voter of three.
        let mut o = three();
        let paths = crate::paths::Paths::new("/r");
        let before = plan::plan(&o, &paths, None);
        o.config_text = before.steps.iter().find_map(|s| match s {
            Step::WriteConfig { text, .. } => Some(text.clone()),
            _ => None,
        });
        let settled = plan::plan(&o, &paths, None);
        assert!(!settled.steps.iter().any(goes_down), "{:?}", settled.steps);
        assert!(!settled
            .steps
            .iter()
            .any(|s| matches!(s, Step::TakeTurn { .. })));
        if let Ok(c) = o.config.as_mut() {
            c.heartbeat_interval += 50;
        }
        let p = plan::plan(&o, &paths, None);
        let pos = |f: &dyn Fn(&Step) -> bool| p.steps.iter().position(f).unwrap();
        let take = pos(&|s| matches!(s, Step::TakeTurn { .. }));
        let write = pos(&|s| matches!(s, Step::WriteConfig { .. }));
        let restart = pos(&|s| *s == Step::RestartEtcd);
        let release = pos(&|s| *s == Step::ReleaseTurn);
        assert!(
            take < write && write < restart && restart < release,
            "{:?}",
            p.steps
        );
    }

    #[test]
    fn a_config_from_before_the_metrics_listener_gets_it_under_the_turn() {
        // The previous revision's etcd.conf.yml: the same, without the line.
        let mut o = three();
        let paths = crate::paths::Paths::new("/r");
        let settled = plan::plan(&o, &paths, None);
        let text = settled
            .steps
            .iter()
            .find_map(|s| match s {
                Step::WriteConfig { text, .. } => Some(text.clone()),
                _ => None,
            })
            .unwrap();
        let line = "listen-metrics-urls: \"http://127.0.0.1:2381\"\n";
        assert!(text.contains(line), "{text}");
        o.config_text = Some(text.replace(line, ""));
        let p = plan::plan(&o, &paths, None);
        let pos = |f: &dyn Fn(&Step) -> bool| p.steps.iter().position(f);
        let write = pos(&|s| matches!(s, Step::WriteConfig { text: t, .. } if t.contains(line)));
        let take = pos(&|s| matches!(s, Step::TakeTurn { .. }));
        let restart = pos(&|s| *s == Step::RestartEtcd);
        let release = pos(&|s| *s == Step::ReleaseTurn);
        assert!(
            take < write && write < restart && restart < release && take.is_some(),
            "{:?}",
            p.steps
        );
    }
}
