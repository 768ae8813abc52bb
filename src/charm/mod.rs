//! The reconcile loop every hook runs: observe → plan → apply, repeated
//! while a pass made progress (bounded), then one status by priority.
//!
//! Files import downward only (the map is in lib.rs): the vocabulary
//! (`observed`, `steps`, `desired`, `config`, …) below the concerns, the
//! concerns below the orchestrators (`observe`, `plan`, `apply`), and
//! those below the actions, the dry run and this loop.

mod action_support;
pub mod actions;
pub mod actions_backup;
pub mod actions_creds;
pub mod actions_debug;
pub mod actions_ops;
pub mod actions_restore;
pub mod agent;
pub mod alarms;
pub mod apply;
pub mod backups;
pub mod bases;
pub mod bootstrap;
pub mod certificates;
mod certificates_apply;
mod certificates_client;
mod certificates_names;
pub mod certificates_peer;
pub mod certificates_renewal;
pub mod certificates_rotation;
mod certificates_stage;
pub mod checks;
pub mod checks_metrics;
mod clients;
pub mod compat;
pub mod config;
pub mod desired;
pub mod dryrun;
pub mod dryrun_refresh;
pub mod endpoints;
pub mod expiry;
pub mod insecure;
mod join;
pub mod leader;
pub mod lease;
pub mod logging;
pub mod loopback_metrics;
pub mod majority;
mod membership_apply;
pub mod monitoring;
pub mod nagios;
pub mod observe;
pub mod observed;
pub mod options;
pub mod plan;
pub mod quiet;
pub mod rebuild;
mod rebuild_apply;
pub mod restore;
mod restore_apply;
mod running;
pub mod s3_handoff;
pub mod s3_params;
pub mod scrape_jobs;
pub mod snap_upgrade;
mod snap_upgrade_apply;
pub mod steps;
pub mod token;
pub mod turn;
mod turn_apply;
mod verdict;
mod volume;
mod with_wal;

use crate::context::{Event, HookContext};
use crate::error::Result;
use crate::hooktools::{HookTools, StatusKind};
use crate::paths::Paths;
use crate::service::Service;
use std::process::ExitCode;
use tracing::{debug, error};

/// A pass that changed something is followed by another, so a leader can
/// add itself, start, and promote in one hook; bounded.
const MAX_PASSES: usize = 4;

/// Picks the status a hook ends on: blocked > maintenance > waiting > active.
pub fn final_status(
    found: &[(StatusKind, String)],
    healthy: Option<usize>,
) -> (StatusKind, String) {
    if let Some(s) = found.iter().max_by_key(|(k, _)| *k) {
        return s.clone();
    }
    match healthy {
        Some(n) => (
            StatusKind::Active,
            format!(
                "Healthy with {n} known peer{}",
                if n == 1 { "" } else { "s" }
            ),
        ),
        None => (
            StatusKind::Waiting,
            "Waiting for etcd to become healthy".into(),
        ),
    }
}

/// Runs one hook. Errors are logged and make the hook fail (Juju retries);
/// operator-fixable problems end as a blocked status with exit 0.
pub fn run_hook(ctx: &HookContext) -> ExitCode {
    let tools = HookTools::new();
    logging::init(&tools);
    debug!("hook {} on {}", ctx.event.name(), ctx.unit_name);
    let other_storage =
        matches!(&ctx.event, Event::Storage { name, .. } if name != crate::storage::NAME);
    if matches!(ctx.event, Event::Other(_)) || other_storage {
        return ExitCode::SUCCESS;
    }
    if let Event::Action(name) = &ctx.event {
        let result = match name.as_str() {
            "snap-upgrade" => snap_upgrade_apply::action(ctx, &tools),
            "restart" => restart_action(ctx, &tools),
            "rebuild-cluster" => rebuild::action(ctx, &tools),
            _ => actions::run(name, &tools, &Paths::from_env()),
        }
        .and_then(|out| tools.action_set(&out).map_err(Into::into));
        if let Err(e) = result {
            error!("action {name} failed: {e}");
            if tools.action_fail(&e.to_string()).is_err() {
                return ExitCode::FAILURE;
            }
        }
        return ExitCode::SUCCESS;
    }
    // A settled unit's update-status needs no full observe (see quiet.rs).
    if ctx.event == Event::UpdateStatus && quiet::update_status(&tools, &Paths::from_env()) {
        return ExitCode::SUCCESS;
    }
    match reconcile(ctx, &tools) {
        Ok((kind, msg)) => {
            if let Err(e) = tools.status_set(kind, &msg) {
                error!("{e}");
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("hook {} failed: {e}", ctx.event.name());
            eprintln!("etcd-charm: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The `restart` action: this unit's reconcile (as config-changed runs
/// it) with the operator standing in for the rolling turn in its first
/// pass (turn::operator_turn): the way out when no turn can be had (no
/// quorum, a flapping leader, expired certificates). Refused, changing
/// nothing, when it would cost quorum or nothing answers, unless
/// `force=true` (turn::operator_refusal).
fn restart_action(ctx: &HookContext, tools: &HookTools) -> Result<crate::hooktools::Databag> {
    let force = tools
        .action_get()?
        .get("force")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    let as_hook = HookContext {
        event: Event::ConfigChanged,
        ..ctx.clone()
    };
    let mut operator = Operator {
        force,
        steps: Vec::new(),
    };
    let (kind, msg) = reconcile_with(&as_hook, tools, Some(&mut operator))?;
    tools.status_set(kind, &msg)?;
    let mut out = crate::hooktools::Databag::new();
    out.insert("steps".into(), operator.steps.join("; "));
    out.insert("status".into(), format!("{}: {msg}", kind.as_str()));
    out.insert("forced".into(), force.to_string());
    Ok(out)
}

/// The operator's say-so for one pass, and what that pass did.
struct Operator {
    force: bool,
    steps: Vec<String>,
}

fn reconcile(ctx: &HookContext, tools: &HookTools) -> Result<(StatusKind, String)> {
    reconcile_with(ctx, tools, None)
}

fn reconcile_with(
    ctx: &HookContext,
    tools: &HookTools,
    mut operator: Option<&mut Operator>,
) -> Result<(StatusKind, String)> {
    let mut found = Vec::new();
    for pass in 1..=MAX_PASSES {
        // The canonical data dir follows the storage volume (fstab, mount,
        // config), so it is decided again once a pass prepared the volume.
        let paths = crate::storage::paths(Paths::from_env());
        // Reading the service's state does not depend on the snap channel;
        // installing does, so apply gets a service built from the config.
        let probe = Service::from_env(paths.clone(), "auto");
        let o = observe::observe(ctx, tools, &paths, &probe)?;
        let channel = o.config.as_ref().map_or("auto", |c| c.channel.as_str());
        let service = Service::from_env(paths.clone(), channel);
        let dropin = service.desired_dropin()?;
        let mut p = plan::plan(&o, &paths, dropin);
        if let Some(op) = operator.take() {
            let healthy = o
                .member_view()
                .map(crate::rolling::healthy_voters)
                .unwrap_or_default();
            if let Some(why) = turn::operator_refusal(&o, &healthy).filter(|_| !op.force) {
                return Err(crate::error::Error::Refused(format!(
                    "restart refused, nothing was changed: {why}"
                )));
            }
            p = turn::operator_turn(&o, p, &healthy);
            op.steps = p.steps.iter().map(|s| s.to_string()).collect();
            tracing::warn!(
                "restart action{}: {} without the rolling turn",
                if op.force { " (force)" } else { "" },
                op.steps.join("; ")
            );
        }
        if pass > 1 {
            // Set once per hook: a later pass would only repeat the snap calls.
            p.steps
                .retain(|s| !matches!(s, plan::Step::SnapdRefresh(_)));
        }
        let done = p.steps.is_empty()
            || p.steps.iter().all(|s| {
                matches!(
                    s,
                    plan::Step::OpenPort(_)
                        | plan::Step::ClosePort(_)
                        | plan::Step::Volume(crate::storage::VolumeStep::ConnectMedia)
                        | plan::Step::SetVersion(_)
                        | plan::Step::Publish(_)
                        | plan::Step::PublishClient { .. }
                        | plan::Step::SnapdRefresh(_)
                        | plan::Step::Monitoring(_)
                        | plan::Step::Agent(_)
                )
            });
        debug!("pass {pass}: {} step(s)", p.steps.len());
        let applier = apply::Applier {
            tools,
            paths: &paths,
            service: &service,
            observed: &o,
            lease: lease::Lease::new(o.leader_seen),
        };
        let out = applier.apply(&p.steps)?;
        found = p.status;
        found.extend(out.status);
        let blocked = found.iter().any(|(k, _)| *k == StatusKind::Blocked);
        if done || blocked || p.commit_first || pass == MAX_PASSES {
            // Nothing touched etcd this pass: what observe saw still holds.
            let healthy = if done {
                o.local.as_ref().and_then(voter_peers)
            } else {
                healthy_peers(&o, &service)
            };
            found.extend(alarms::statuses(&o));
            let notes = [p.notes.clone(), agent::notes(&o)].concat();
            return Ok(with_notes(final_status(&found, healthy), &notes));
        }
    }
    Ok(final_status(&found, None))
}

/// An active status carries what the plan noted (an endpoint waiting for
/// TLS support); any other status says its own reason alone.
fn with_notes((kind, msg): (StatusKind, String), notes: &[String]) -> (StatusKind, String) {
    if kind != StatusKind::Active || notes.is_empty() {
        return (kind, msg);
    }
    (kind, format!("{msg}; {}", notes.join("; ")))
}

/// N from the live member list, when this unit's member is a started voter.
fn healthy_peers(o: &observe::Observed, service: &Service) -> Option<usize> {
    if !service.is_active().unwrap_or(false) {
        return None;
    }
    let c = o.config.as_ref().ok()?;
    let v = crate::etcd::block_on(crate::etcd::view_from(&plan::client_url(o, c))).ok()?;
    voter_peers(&v)
}

/// Started voters that answer, if the member that answered is a voter
/// with a leader (learners, unstarted and unreachable members do not count).
fn voter_peers(v: &crate::etcd::ClusterView) -> Option<usize> {
    alarms::healthy_peers(v)
}

#[cfg(test)]
pub(crate) mod plan_tests;
#[cfg(test)]
mod volume_tests;
