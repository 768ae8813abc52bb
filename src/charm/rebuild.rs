//! `rebuild-cluster`: a cluster that lost its majority (majority.rs) comes
//! back from one surviving member. Run on that member's unit; its plan is
//! pure (this file), its apply half rebuild_apply.rs.
//!
//! # Steps
//! 1. A snapshot of the member, streamed into the backups dir (rule 4).
//! 2. etcd stopped; `member/` copied beside itself
//!    (`member.pre-rebuild-<stamp>`): `force-new-cluster` rewrites the
//!    membership its WAL records, and the old one is kept.
//! 3. etcd.conf.yml with `force-new-cluster: true`; etcd started; it
//!    answers as the only voter, leading, on its own data: the same member
//!    and cluster ID, every key, the token in leadership data unchanged.
//! 4. etcd.conf.yml without the flag, etcd restarted, answering.
//! 5. `rebuilt=<stamp>` in the unit's peer databag: the other remaining
//!    units' hooks run, find their members gone from the rebuilt cluster,
//!    set their data aside and rejoin one at a time as learners (leader.rs);
//!    units added later join as ever.
//!
//! # Crash safety (no state file: etcd.conf.yml and the member say it all)
//! A kill before step 3 leaves the old member as it was: the action is run
//! again. After it, etcd.conf.yml says `force-new-cluster`: every hook keeps
//! the flag while the member does not answer alone (desired.rs
//! `continues_rebuild`), so the next hook starts it so, and the hook after
//! drops the flag with one restart (the only voter needs no turn).
//!
//! # Refusals (nothing changed)
//! While a quorum of the voters answers; while this unit's member does not
//! answer; when another answering member has more recent data (a higher
//! raft index), unless `force=true`.

use super::majority;
use super::observed::Observed;
use super::steps::{Plan, RebuildStep, Step};
use crate::error::{Error, Result};
use crate::hooktools::{Databag, HookTools, StatusKind};
use crate::paths::Paths;
use crate::render;

/// This unit's peer databag key, set once the rebuild is done.
pub const REBUILT: &str = "rebuilt";

impl std::fmt::Display for RebuildStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RebuildStep::Snapshot { file, .. } => {
                write!(f, "snapshot this member into {} (rule 4)", file.display())
            }
            RebuildStep::CopyAside { data_dir, stamp } => write!(
                f,
                "copy {0}/member to {0}/member.pre-rebuild-{stamp} (the old membership kept)",
                data_dir.display()
            ),
            RebuildStep::WaitAlone { member_id } => write!(
                f,
                "wait until member {member_id:x} answers as the only voter, leading"
            ),
        }
    }
}

impl RebuildStep {
    pub fn key(&self) -> &'static str {
        match self {
            RebuildStep::Snapshot { .. } => "rebuild-snapshot",
            RebuildStep::CopyAside { .. } => "rebuild-copy-aside",
            RebuildStep::WaitAlone { .. } => "rebuild-wait-alone",
        }
    }
}

/// The steps, or why the rebuild is refused (nothing changed then).
pub fn plan(
    o: &Observed,
    paths: &Paths,
    force: bool,
    stamp: &str,
) -> std::result::Result<Plan, String> {
    if super::desired::continues_rebuild(o) {
        return Ok(Plan {
            steps: continuation(o, paths, stamp)?,
            status: vec![(
                StatusKind::Active,
                "resumed the rebuild this unit's etcd.conf.yml records (force-new-cluster)".into(),
            )],
            ..Default::default()
        });
    }
    let Some(local) = o.local.as_ref() else {
        if !force {
            return Err("this unit's member does not answer (etcd serves no client before a quorum elects a leader, so a member restarted since the loss never does): its data cannot be compared with the others'; rebuild from a member that answers, or force=true to rebuild from this one as it is on disk".into());
        }
        return Ok(Plan {
            steps: steps(o, paths, None, stamp)?,
            status: vec![(
                StatusKind::Active,
                "rebuilt from this member as it was on disk (force=true; it did not answer)".into(),
            )],
            ..Default::default()
        });
    };
    if local.leads_alone() {
        return Err("this member already answers as the only voter: nothing to rebuild".into());
    }
    let Some(loss) = majority::assess(o) else {
        return Err(if local.status.leader != 0 {
            "the cluster has a raft leader: nothing to rebuild".into()
        } else {
            "a quorum of the voters answers: an election is under way, wait for it".into()
        });
    };
    let me = local.status.member_id;
    let (best, best_id, best_index) = loss.best();
    let mine = loss
        .answering
        .iter()
        .find(|(_, id, _)| *id == me)
        .map_or(0, |a| a.2);
    if *best_id != me && !force {
        return Err(format!(
            "{best} has more recent data (raft index {best_index}; this member {mine}): run rebuild-cluster on {}, or force=true here to lose what only {best} has",
            majority::unit_of(o, best)
        ));
    }
    Ok(Plan {
        steps: steps(o, paths, Some(&local.endpoint), stamp)?,
        status: vec![(
            StatusKind::Active,
            format!("rebuilt from {best}: {}", loss.summary()),
        )],
        ..Default::default()
    })
}

/// This unit's etcd.conf.yml as written, with and without the flag.
fn configs(o: &Observed) -> std::result::Result<(render::EtcdConfig, render::EtcdConfig), String> {
    let Some(text) = o.config_text.as_deref() else {
        return Err("no etcd.conf.yml: let a hook write it first".into());
    };
    let on_disk = render::parse_etcd_config(text).map_err(|e| {
        format!("etcd.conf.yml is not one this charm wrote ({e}); let a hook write it first")
    })?;
    let forced = render::EtcdConfig {
        force_new_cluster: true,
        ..on_disk.clone()
    };
    let normal = render::EtcdConfig {
        force_new_cluster: false,
        ..on_disk
    };
    Ok((forced, normal))
}

fn write(c: &render::EtcdConfig, why: &str) -> Step {
    Step::WriteConfig {
        text: render::render_etcd_config(c),
        why: why.into(),
        config: Box::new(c.clone()),
    }
}

/// The rebuild from the start: a snapshot when the member answers, the
/// flag written before etcd stops (from then on a killed rebuild is
/// [`continuation`]'s), then the continuation itself.
fn steps(
    o: &Observed,
    paths: &Paths,
    endpoint: Option<&str>,
    stamp: &str,
) -> std::result::Result<Vec<Step>, String> {
    let (forced, _) = configs(o)?;
    let mut v = Vec::new();
    if let Some(endpoint) = endpoint {
        v.push(Step::Rebuild(RebuildStep::Snapshot {
            endpoint: endpoint.to_string(),
            file: paths
                .backup_dir()
                .join(format!("etcd-snapshot-pre-rebuild-{stamp}.db")),
        }));
    }
    v.push(write(
        &forced,
        "rebuild-cluster: start alone (force-new-cluster)",
    ));
    let mut rest = continuation_from(o, paths, stamp, o.active, false)?;
    v.append(&mut rest);
    Ok(v)
}

/// What is left of a rebuild once etcd.conf.yml says `force-new-cluster`:
/// etcd stopped, `member/` copied aside unless a copy newer than that
/// config exists, started alone, the flag dropped with one restart. The
/// next hook applies it too.
pub fn continuation(
    o: &Observed,
    paths: &Paths,
    stamp: &str,
) -> std::result::Result<Vec<Step>, String> {
    continuation_from(o, paths, stamp, o.active, o.rebuild_copied)
}

fn continuation_from(
    o: &Observed,
    paths: &Paths,
    stamp: &str,
    running: bool,
    copied: bool,
) -> std::result::Result<Vec<Step>, String> {
    let (_, normal) = configs(o)?;
    let Some(ids) = o.local_ids() else {
        return Err("this unit's data dir holds no member to rebuild from".into());
    };
    let mut v = Vec::new();
    if running {
        v.push(Step::StopEtcd);
    }
    if !copied {
        v.push(Step::Rebuild(RebuildStep::CopyAside {
            data_dir: paths.host(std::path::Path::new(&normal.data_dir)),
            stamp: stamp.into(),
        }));
    }
    v.extend([
        Step::StartEtcd,
        Step::Rebuild(RebuildStep::WaitAlone {
            member_id: ids.member_id,
        }),
        write(&normal, "rebuild-cluster: done, the flag goes"),
        Step::RestartEtcd,
        Step::WaitMember,
        Step::Publish([(REBUILT.to_string(), stamp.to_string())].into()),
    ]);
    Ok(v)
}

/// The action: observe as config-changed does, plan, apply; the results
/// say what was done and where the copies are.
pub fn action(ctx: &crate::context::HookContext, tools: &HookTools) -> Result<Databag> {
    use crate::context::{Event, HookContext};
    use crate::service::Service;
    let force = tools
        .action_get()?
        .get("force")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let paths = crate::storage::paths(Paths::from_env());
    let probe = Service::from_env(paths.clone(), "auto");
    let as_hook = HookContext {
        event: Event::ConfigChanged,
        ..ctx.clone()
    };
    let o = super::observe::observe(&as_hook, tools, &paths, &probe)?;
    let channel = o.config.as_ref().map_or("auto", |c| c.channel.as_str());
    let service = Service::from_env(paths.clone(), channel);
    let stamp = crate::stamp::utc_stamp(std::time::SystemTime::now());
    let p = plan(&o, &paths, force, &stamp).map_err(|why| {
        Error::Refused(format!(
            "rebuild-cluster refused, nothing was changed: {why}"
        ))
    })?;
    let summary = p.status[0].1.clone();
    tracing::warn!(
        "rebuild-cluster{}: {summary}",
        if force { " (force)" } else { "" }
    );
    tools.status_set(
        StatusKind::Maintenance,
        "Rebuilding the cluster from this member",
    )?;
    let applier = super::apply::Applier {
        tools,
        paths: &paths,
        service: &service,
        observed: &o,
        lease: super::lease::Lease::new(o.leader_seen),
    };
    let out = applier.apply(&p.steps)?;
    if let Some((_, why)) = out.status.first() {
        return Err(Error::Other(format!(
            "rebuild-cluster stopped at step {}: {why}; run it again (or let the next hook continue: etcd.conf.yml says how far it got)",
            out.done + 1
        )));
    }
    tools.status_set(
        StatusKind::Active,
        "Rebuilt as a one-member cluster; the other units rejoin one at a time",
    )?;
    let mut r = Databag::new();
    r.insert("result".into(), summary);
    r.insert(
        "steps".into(),
        p.steps
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .join("; "),
    );
    if let Some(Step::Rebuild(RebuildStep::Snapshot { file, .. })) = p.steps.first() {
        r.insert("snapshot".into(), paths.unhost(file).display().to_string());
    }
    r.insert("forced".into(), force.to_string());
    r.insert(
        "next".into(),
        "the other remaining units set their old data aside and rejoin as new members, one at a time; add units with juju add-unit".into(),
    );
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charm::majority::QuorumSeen;
    use crate::charm::plan_tests::{canonical, fresh, member, sees, IDS};

    fn stuck(indexes: &[Option<u64>], gone: bool) -> Observed {
        let mut o = fresh(false);
        o.disk.locations = vec![canonical(Some(IDS))];
        o.active = true;
        let members: Vec<_> = indexes
            .iter()
            .enumerate()
            .map(|(i, _)| {
                member(
                    0xa0 + i as u64,
                    &format!("etcd{i}"),
                    &format!("10.0.0.{}", i + 1),
                    false,
                )
            })
            .collect();
        sees(&mut o, members.clone());
        for v in [o.local.as_mut().unwrap(), o.cluster.as_mut().unwrap()] {
            v.status.leader = 0;
            v.status.member_id = 0xa0;
        }
        o.quorum = Some(QuorumSeen {
            voters: members.into_iter().zip(indexes.iter().copied()).collect(),
            now: 1000,
            wait_secs: 300,
        });
        o.goal_units = Some(if gone {
            [("etcd/0".to_string(), "active".to_string())].into()
        } else {
            (0..indexes.len())
                .map(|i| (format!("etcd/{i}"), "active".to_string()))
                .collect()
        });
        let mut c = crate::render::tests::three_members();
        c.name = "etcd0".into();
        let text = crate::render::render_etcd_config(&c);
        o.disk.config = Some(crate::layout::parse_found_config(&text));
        o.config_text = Some(text);
        o
    }

    fn paths() -> Paths {
        Paths::new("/r")
    }

    #[test]
    fn the_survivor_snapshots_copies_starts_alone_then_drops_the_flag() {
        let o = stuck(&[Some(40), None, None], true);
        let p = plan(&o, &paths(), false, "20261207T120000Z").unwrap();
        let keys: Vec<&str> = p.steps.iter().map(crate::charm::apply::step_key).collect();
        assert_eq!(
            keys,
            [
                "rebuild-snapshot",
                "write-config",
                "stop",
                "rebuild-copy-aside",
                "start",
                "rebuild-wait-alone",
                "write-config",
                "restart",
                "wait-member",
                "publish"
            ]
        );
        let texts: Vec<&str> = p
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::WriteConfig { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert!(
            texts[0].contains("\nforce-new-cluster: true\n"),
            "{}",
            texts[0]
        );
        assert!(!texts[1].contains("\nforce-new-cluster:"), "{}", texts[1]);
        // Nothing else differs: the same member, token and files.
        assert_eq!(texts[0].replace("force-new-cluster: true\n", ""), texts[1]);
    }

    #[test]
    fn refused_with_a_quorum_without_an_answer_or_when_another_member_knows_more() {
        let two_of_three = stuck(&[Some(40), Some(41), None], false);
        assert!(plan(&two_of_three, &paths(), true, "s")
            .unwrap_err()
            .contains("quorum"));
        let mut silent = stuck(&[Some(40), None, None], true);
        silent.local = None;
        assert!(plan(&silent, &paths(), false, "s")
            .unwrap_err()
            .contains("does not answer"));
        let behind = stuck(&[Some(40), Some(55), None, None, None], true);
        let why = plan(&behind, &paths(), false, "s").unwrap_err();
        assert_eq!(
            why,
            "etcd1 has more recent data (raft index 55; this member 40): run rebuild-cluster on etcd/1, or force=true here to lose what only etcd1 has"
        );
        assert!(
            plan(&behind, &paths(), true, "s").is_ok(),
            "force=true goes ahead"
        );
    }

    fn keys(steps: &[Step]) -> Vec<&'static str> {
        steps.iter().map(crate::charm::apply::step_key).collect()
    }

    #[test]
    fn a_killed_rebuild_is_finished_by_the_next_hook_without_a_turn() {
        let mut o = stuck(&[Some(40), None, None], true);
        let mut c = crate::render::parse_etcd_config(o.config_text.as_deref().unwrap()).unwrap();
        c.force_new_cluster = true;
        let text = crate::render::render_etcd_config(&c);
        o.config_text = Some(text.clone());
        o.disk.config = Some(crate::layout::parse_found_config(&text));
        // Killed after the flag was written: etcd runs the old membership.
        let p = crate::charm::plan::plan(&o, &paths(), None);
        let got = keys(&p.steps);
        let from = got
            .iter()
            .position(|k| *k == "stop")
            .unwrap_or_else(|| panic!("no stop: {:?} {:?}", p.steps, p.status));
        assert_eq!(
            got[from..],
            [
                "stop",
                "rebuild-copy-aside",
                "start",
                "rebuild-wait-alone",
                "write-config",
                "restart",
                "wait-member",
                "publish"
            ],
            "{:?}",
            p.steps
        );
        assert!(!got.contains(&"take-turn"), "no quorum to keep: {got:?}");
        // Killed after the copy, etcd stopped: start alone, no second copy.
        o.active = false;
        o.local = None;
        o.rebuild_copied = true;
        let p = crate::charm::plan::plan(&o, &paths(), None);
        let got = keys(&p.steps);
        assert!(
            !got.contains(&"stop") && !got.contains(&"rebuild-copy-aside"),
            "{got:?}"
        );
        assert!(
            got.contains(&"start") && got.contains(&"rebuild-wait-alone"),
            "{got:?}"
        );
        // The action run again resumes the same way.
        let p = plan(&o, &paths(), false, "s").unwrap();
        assert_eq!(keys(&p.steps)[0], "start");
    }

    #[test]
    fn a_member_that_does_not_answer_is_rebuilt_from_only_with_force() {
        let mut o = stuck(&[Some(40), None, None], true);
        o.local = None;
        o.active = false;
        assert!(plan(&o, &paths(), false, "s")
            .unwrap_err()
            .contains("force=true"));
        let p = plan(&o, &paths(), true, "s").unwrap();
        assert_eq!(
            keys(&p.steps)[..4],
            [
                "write-config",
                "rebuild-copy-aside",
                "start",
                "rebuild-wait-alone"
            ],
            "no snapshot from a member that does not answer: the copy aside is the backup"
        );
    }

    #[test]
    fn a_hook_after_a_kill_keeps_the_flag_until_the_member_answers_alone() {
        let mut o = stuck(&[Some(40), None, None], true);
        let mut c = crate::render::tests::three_members_tls();
        c.force_new_cluster = true;
        let text = crate::render::render_etcd_config(&c);
        o.disk.config = Some(crate::layout::parse_found_config(&text));
        o.local = None;
        assert!(
            crate::charm::desired::continues_rebuild(&o),
            "etcd down: start it forced"
        );
        let mut alone = o.cluster.clone().unwrap();
        alone.status.leader = 0xa0;
        alone.members.truncate(1);
        o.local = Some(alone);
        assert!(
            !crate::charm::desired::continues_rebuild(&o),
            "alone and leading: the flag goes"
        );
    }
}
