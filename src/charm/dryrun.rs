//! `etcd-charm upgrade-charm --dry-run`: what the upgrade would do on this
//! unit, computed by the same observe and plan the hooks run, and nothing
//! applied. Run by hand (same `ETCD_CHARM_ROOT` and environment as under
//! Juju), under `juju exec` (hook tools present: leadership data is read
//! too), or by `jujusim refresh --dry-run`.
//!
//! It prints the plan step by step, the token the unit would keep and where
//! it came from, a unified diff of etcd.conf.yml, what `juju refresh` keeps
//! and drops (dryrun_refresh.rs), and a verdict. Exit 0: the upgrade would
//! proceed; 2: it would block, or Juju would refuse the refresh (the reason
//! is printed); 1: the dry run itself could not run.

use super::observe::{self, Mode, Observed};
use super::plan::{self, Plan, Step};
use super::token::TokenSource;
use crate::context::{Event, HookContext};
use crate::hooktools::{HookTools, StatusKind};
use crate::layout::Role;
use crate::migrate::{self, Migration};
use crate::paths::Paths;
use crate::service::Service;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// Exit status when the upgrade would block.
pub const EXIT_BLOCKED: u8 = 2;

/// Which unit this is: `JUJU_UNIT_NAME`, else `--unit`, else the member
/// name in etcd.conf.yml or etcd.conf(.2x) (`etcd0` → `etcd/0`).
fn unit_name(explicit: Option<&str>, paths: &Paths) -> Result<(String, &'static str), String> {
    if let Ok(u) = std::env::var("JUJU_UNIT_NAME") {
        if !u.is_empty() {
            return Ok((u, "JUJU_UNIT_NAME"));
        }
    }
    if let Some(u) = explicit {
        return Ok((u.to_string(), "--unit"));
    }
    let from_name = |name: &str| -> Option<String> {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        (digits > 0 && digits < name.len()).then(|| {
            format!(
                "{}/{}",
                &name[..name.len() - digits],
                &name[name.len() - digits..]
            )
        })
    };
    let config_name = crate::layout::read_found_config(paths)
        .and_then(|c| c.ok())
        .and_then(|c| c.name);
    if let Some(u) = config_name.as_deref().and_then(from_name) {
        return Ok((u, "the name in etcd.conf.yml"));
    }
    for p in [paths.env_config(), paths.env_config_2x()] {
        if let Ok(text) = std::fs::read_to_string(&p) {
            if let Some(u) = crate::layout::parse_env_config(&text)
                .get("ETCD_NAME")
                .and_then(|n| from_name(n))
            {
                return Ok((u, "ETCD_NAME in the etcd 2.x config"));
            }
        }
    }
    Err("cannot tell which unit this is: no JUJU_UNIT_NAME and no member name on disk; pass --unit etcd/N".into())
}

fn context(unit: &str) -> HookContext {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let charm_dir = env("JUJU_CHARM_DIR").map(PathBuf::from).unwrap_or_else(|| {
        // <charm>/bin/etcd-charm → <charm>
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent()?.parent().map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from("."))
    });
    HookContext {
        event: Event::UpgradeCharm,
        charm_dir,
        unit_name: unit.to_string(),
        model_name: env("JUJU_MODEL_NAME").unwrap_or_default(),
        model_uuid: env("JUJU_MODEL_UUID").unwrap_or_default(),
        machine_id: env("JUJU_MACHINE_ID").unwrap_or_default(),
        juju_version: env("JUJU_VERSION").unwrap_or_else(|| "3.6.0".into()),
        context_id: env("JUJU_CONTEXT_ID").unwrap_or_default(),
        relation: None,
        action_uuid: None,
        storage_location: None,
    }
}

/// Everything the report shows, computed once, printed as text or JSON.
struct Report {
    unit: String,
    unit_from: &'static str,
    root: PathBuf,
    hook_tools: bool,
    o: Observed,
    unread: Vec<String>,
    plan: Plan,
    migration: Migration,
    config_path: PathBuf,
    new_config: Option<String>,
    diff: String,
    /// What the new config changes that peers or clients will notice.
    warnings: Vec<String>,
    blocked: Option<String>,
    /// What `juju refresh` itself keeps, drops or refuses (dryrun_refresh.rs).
    refresh: super::dryrun_refresh::RefreshView,
    refused: Vec<String>,
}

/// The name and advertised URLs are what the rest of the cluster and its
/// clients know this member by; etcd does not update the member list from
/// its config, so a change there needs an operator's attention.
fn warnings(o: &Observed, new_config: Option<&str>) -> Vec<String> {
    let (Some(old), Some(new)) = (
        o.disk.found_config(),
        new_config.and_then(|t| crate::render::parse_etcd_config(t).ok()),
    ) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut check = |what: &str, before: Option<String>, after: String| {
        if let Some(before) = before.filter(|b| !b.is_empty()) {
            if before != after {
                out.push(format!("{what} changes from {before} to {after}"));
            }
        }
    };
    check("the member name", old.name.clone(), new.name.clone());
    check(
        "the advertised peer URL",
        old.initial_advertise_peer_urls.clone(),
        new.initial_advertise_peer_urls.join(","),
    );
    check(
        "the advertised client URL",
        old.advertise_client_urls.clone(),
        new.advertise_client_urls.join(","),
    );
    if !out.is_empty() {
        out.push(
            "the cluster's member list keeps the old peer URL until `etcdctl member update`; peers and clients using the old URLs will not reach this member".into(),
        );
    }
    out
}

pub fn run(explicit_unit: Option<&str>, format: Format) -> ExitCode {
    let paths = crate::storage::paths(Paths::from_env());
    let report = match build(&paths, explicit_unit) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("etcd-charm upgrade-charm --dry-run: {e}");
            return ExitCode::FAILURE;
        }
    };
    match format {
        Format::Text => print!("{}", text(&report, &paths)),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&to_json(&report, &paths)).unwrap_or_default()
        ),
    }
    if !report.refused.is_empty() {
        eprintln!(
            "etcd-charm upgrade-charm --dry-run: juju refresh would refuse: {}",
            report.refused.join("; ")
        );
        return ExitCode::from(EXIT_BLOCKED);
    }
    match &report.blocked {
        None => ExitCode::SUCCESS,
        Some(reason) => {
            eprintln!("etcd-charm upgrade-charm --dry-run: the upgrade would block: {reason}");
            ExitCode::from(EXIT_BLOCKED)
        }
    }
}

fn build(paths: &Paths, explicit_unit: Option<&str>) -> Result<Report, String> {
    let (unit, unit_from) = unit_name(explicit_unit, paths)?;
    let ctx = context(&unit);
    let hook_tools = crate::service::find_on_path("is-leader").is_some();
    let tools = HookTools::new();
    let service = Service::from_env(
        paths.clone(),
        &super::config::CharmConfig::default().channel,
    );
    let (o, unread) = observe::observe_with(
        &ctx,
        &tools,
        paths,
        &service,
        Mode::DryRun { tools: hook_tools },
    )
    .map_err(|e| format!("observing this unit: {e}"))?;
    let dropin = service
        .desired_dropin()
        .map_err(|e| format!("rendering the systemd drop-in: {e}"))?;
    let plan = plan::plan(&o, paths, dropin);
    let migration = migrate::plan_migration(&o.disk, paths, &o.member_name);
    let new_config = plan.steps.iter().rev().find_map(|s| match s {
        Step::WriteConfig { text, .. } => Some(text.clone()),
        _ => None,
    });
    let config_path = paths.unhost(paths.config_file());
    let diff = match &new_config {
        Some(new) => crate::diff::unified(
            o.config_text.as_deref().unwrap_or(""),
            new,
            &format!(
                "{} (now{})",
                config_path.display(),
                if o.config_text.is_some() {
                    ""
                } else {
                    ": absent"
                }
            ),
            &format!("{} (after the upgrade)", config_path.display()),
        ),
        None => String::new(),
    };
    let warnings = warnings(&o, new_config.as_deref());
    let blocked = plan
        .status
        .iter()
        .find(|(k, _)| *k == StatusKind::Blocked)
        .map(|(_, m)| m.clone());
    // Under `juju exec` the charm dir is the one the unit runs now: the old.
    let old_dir = std::env::var_os("JUJU_CHARM_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    let refresh =
        super::dryrun_refresh::observe(old_dir, hook_tools.then_some(&tools), paths.root());
    let refused = refresh.refusals();
    Ok(Report {
        unit,
        unit_from,
        root: paths.root().to_path_buf(),
        hook_tools,
        o,
        unread,
        plan,
        migration,
        config_path,
        new_config,
        diff,
        warnings,
        blocked,
        refresh,
        refused,
    })
}

fn role(r: Role) -> &'static str {
    match r {
        Role::Canonical => "canonical",
        Role::Legacy => "legacy",
        Role::Configured => "configured",
    }
}

fn token_line(r: &Report) -> String {
    match &r.plan.token {
        Some((_, TokenSource::Generated)) => {
            "a new token would be generated (no record of one exists anywhere: a new cluster)"
                .into()
        }
        Some((t, src)) => format!("{t} (kept; from {src})"),
        None => "none yet: this unit would wait for the leader to share it".into(),
    }
}

fn text(r: &Report, paths: &Paths) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let o = &r.o;
    let _ = writeln!(
        s,
        "Upgrade dry run for {} (member {}; unit from {}). Nothing was changed.",
        r.unit, o.member_name, r.unit_from
    );
    let _ = writeln!(
        s,
        "Root: {}   etcd: {}, {}",
        r.root.display(),
        o.etcd_version.as_deref().unwrap_or("not installed"),
        if o.active { "running" } else { "not running" }
    );
    if r.hook_tools {
        let _ = writeln!(
            s,
            "Model: read through Juju's hook tools (this unit is {}the leader)",
            if o.is_leader { "" } else { "not " }
        );
    }
    for u in &r.unread {
        let _ = writeln!(s, "  not read: {u}");
    }
    let _ = writeln!(s, "\nOn disk:");
    match &o.disk.config {
        None => {
            let _ = writeln!(s, "  {}: absent", r.config_path.display());
        }
        Some(Err(e)) => {
            let _ = writeln!(s, "  {}: unreadable: {e}", r.config_path.display());
        }
        Some(Ok(c)) => {
            let _ = writeln!(
                s,
                "  {}: name {}, data-dir {}, {}",
                r.config_path.display(),
                c.name.as_deref().unwrap_or("(none)"),
                c.data_dir.as_deref().unwrap_or("(none)"),
                match &c.initial_cluster_token {
                    Some(_) => "has initial-cluster-token",
                    None => "no initial-cluster-token",
                }
            );
        }
    }
    for (p, _) in &o.disk.env_configs {
        let _ = writeln!(s, "  {}: the etcd 2.x config", paths.unhost(p).display());
    }
    for l in &o.disk.locations {
        let what = match &l.member {
            Ok(Some(ids)) => ids.to_string(),
            Ok(None) if l.exists => "no member".into(),
            Ok(None) => "absent".into(),
            Err(e) => format!("unreadable WAL: {e}"),
        };
        let _ = writeln!(
            s,
            "  {} ({}): {what}",
            paths.unhost(&l.path).display(),
            role(l.role)
        );
    }
    for st in [&o.disk.migration.incoming, &o.disk.migration.verified]
        .into_iter()
        .flatten()
    {
        let _ = writeln!(
            s,
            "  {} (left by an interrupted migration)",
            paths.unhost(&st.path).display()
        );
    }
    let _ = writeln!(s);
    match &r.migration {
        Migration::Nothing => {
            let _ = writeln!(s, "Migration: none needed");
        }
        Migration::Conflict { message } => {
            let _ = writeln!(s, "Migration: CONFLICT: {message}");
        }
        Migration::Migrate {
            from, ids, method, ..
        } => {
            let _ = writeln!(
                s,
                "Migration: {ids} from {} to {} by {method}",
                paths.unhost(from).display(),
                paths.unhost(paths.data_dir()).display()
            );
        }
    }
    let _ = writeln!(s, "Token: {}", token_line(r));
    let _ = writeln!(s, "\nPlan ({} steps):", r.plan.steps.len());
    if r.plan.steps.is_empty() {
        let _ = writeln!(s, "  (nothing to do)");
    }
    for (i, step) in r.plan.steps.iter().enumerate() {
        let _ = writeln!(
            s,
            "  {:>2}. {step}   [{}]",
            i + 1,
            super::apply::step_key(step)
        );
    }
    let _ = writeln!(s);
    match &r.new_config {
        None => {
            let _ = writeln!(s, "etcd.conf.yml: not rewritten");
        }
        Some(_) if r.diff.is_empty() => {
            let _ = writeln!(s, "etcd.conf.yml: unchanged");
        }
        Some(_) => {
            let _ = writeln!(s, "etcd.conf.yml:");
            s.push_str(&r.diff);
        }
    }
    for w in &r.warnings {
        let _ = writeln!(s, "Warning: {w}");
    }
    for (k, m) in &r.plan.status {
        let _ = writeln!(s, "Status after the plan: {} — {m}", k.as_str());
    }
    s.push_str(&super::dryrun_refresh::text(&r.refresh));
    let _ = writeln!(s);
    match &r.blocked {
        _ if !r.refused.is_empty() => {
            let _ = writeln!(
                s,
                "Verdict: juju refresh would REFUSE: {}",
                r.refused.join("; ")
            );
        }
        None => {
            let _ = writeln!(s, "Verdict: the upgrade would proceed.");
        }
        Some(reason) => {
            let _ = writeln!(s, "Verdict: the upgrade would BLOCK: {reason}");
        }
    }
    s
}

fn to_json(r: &Report, paths: &Paths) -> Value {
    let o = &r.o;
    let hex = |v: u64| format!("{v:x}");
    let locations: Vec<Value> = o
        .disk
        .locations
        .iter()
        .map(|l| {
            let (member, error) = match &l.member {
                Ok(Some(ids)) => (
                    json!({"member_id": hex(ids.member_id), "cluster_id": hex(ids.cluster_id)}),
                    Value::Null,
                ),
                Ok(None) => (Value::Null, Value::Null),
                Err(e) => (Value::Null, json!(e.to_string())),
            };
            json!({
                "path": paths.unhost(&l.path),
                "role": role(l.role),
                "exists": l.exists,
                "member": member,
                "error": error,
            })
        })
        .collect();
    let migration = match &r.migration {
        Migration::Nothing => json!({"kind": "nothing"}),
        Migration::Conflict { message } => json!({"kind": "conflict", "message": message}),
        Migration::Migrate {
            from, ids, method, ..
        } => json!({
            "kind": "migrate",
            "from": paths.unhost(from),
            "to": paths.unhost(paths.data_dir()),
            "member_id": hex(ids.member_id),
            "cluster_id": hex(ids.cluster_id),
            "method": method.to_string(),
        }),
    };
    let token = match &r.plan.token {
        Some((t, src)) => json!({
            "value": if *src == TokenSource::Generated { Value::Null } else { json!(t) },
            "source": src.to_string(),
            "generated": *src == TokenSource::Generated,
        }),
        None => Value::Null,
    };
    let steps: Vec<Value> = r
        .plan
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| json!({"n": i + 1, "key": super::apply::step_key(s), "text": s.to_string()}))
        .collect();
    let statuses: Vec<Value> = r
        .plan
        .status
        .iter()
        .map(|(k, m)| json!({"status": k.as_str(), "message": m}))
        .collect();
    json!({
        "unit": r.unit,
        "unit_from": r.unit_from,
        "member_name": o.member_name,
        "root": r.root,
        "changed_nothing": true,
        "model": {
            "hook_tools": r.hook_tools,
            "is_leader": o.is_leader,
            "unread": r.unread,
        },
        "etcd": {"version": o.etcd_version, "running": o.active},
        "locations": locations,
        "migration": migration,
        "token": token,
        "steps": steps,
        "config": {
            "path": r.config_path,
            "rewritten": r.new_config.is_some(),
            "changed": !r.diff.is_empty(),
            "diff": r.diff,
        },
        "statuses": statuses,
        "warnings": r.warnings,
        "verdict": if !r.refused.is_empty() {
            "refused"
        } else if r.blocked.is_some() {
            "blocked"
        } else {
            "proceed"
        },
        "reason": if r.refused.is_empty() {
            json!(r.blocked)
        } else {
            json!(format!("juju refresh would refuse: {}", r.refused.join("; ")))
        },
        "refresh": super::dryrun_refresh::to_json(&r.refresh),
    })
}
