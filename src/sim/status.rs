//! `status`: the model as `juju status` shows it — a table, or JSON in the
//! shape of `juju status --format=json` (plus the queued hooks).

use crate::sim::error::{bail, Result};
use crate::sim::model::{Agent, Application, Model, Status, Unit};
use crate::sim::store::ModelDir;
use serde_json::{json, Map, Value};

/// The workload status shown: `error` while the agent is in error.
fn shown_workload(u: &Unit) -> Status {
    match &u.agent {
        Agent::Error(hook) => Status {
            current: "error".into(),
            message: format!("hook failed: {hook:?}"),
            since: u.workload.since.clone(),
        },
        _ => u.workload.clone(),
    }
}

fn agent_text(u: &Unit) -> (&str, String) {
    match &u.agent {
        Agent::Idle => ("idle", String::new()),
        Agent::Executing(h) => ("executing", format!("running {h} hook")),
        Agent::Error(h) => ("error", format!("hook failed: {h:?}")),
    }
}

/// The application status: what the leader set, else the most severe unit
/// status (error, blocked, maintenance, waiting, active, unknown).
fn app_status(m: &Model, app: &Application) -> Status {
    if let Some(s) = &app.status {
        return s.clone();
    }
    let rank = |s: &str| {
        [
            "error",
            "blocked",
            "maintenance",
            "waiting",
            "active",
            "unknown",
        ]
        .iter()
        .position(|x| *x == s)
        .unwrap_or(6)
    };
    m.units_of(&app.name)
        .iter()
        .map(|u| shown_workload(&m.units[u]))
        .min_by_key(|s| rank(&s.current))
        .unwrap_or(Status {
            current: "unknown".into(),
            ..Default::default()
        })
}

fn app_version(m: &Model, app: &str) -> String {
    let units = m.units_of(app);
    let leader_first = units
        .iter()
        .filter(|u| m.is_leader(u))
        .chain(units.iter().filter(|u| !m.is_leader(u)));
    leader_first
        .map(|u| m.units[u].version.clone())
        .find(|v| !v.is_empty())
        .unwrap_or_default()
}

pub fn print(dir: &ModelDir, format: &str) -> Result<u8> {
    let m = dir.read()?;
    match format {
        "json" => println!("{}", serde_json::to_string_pretty(&to_json(&m))?),
        "yaml" => print!("{}", serde_yaml::to_string(&to_json(&m))?),
        "tabular" | "table" => print!("{}", table(&m)),
        other => bail!("unknown format {other:?} (tabular, json or yaml)"),
    }
    Ok(0)
}

pub fn to_json(m: &Model) -> Value {
    let mut apps = Map::new();
    for (name, app) in &m.applications {
        let mut units = Map::new();
        for u in m.units_of(name) {
            let unit = &m.units[&u];
            let w = shown_workload(unit);
            let (agent, agent_msg) = agent_text(unit);
            units.insert(
                u.clone(),
                json!({
                    "workload-status": {"current": w.current, "message": w.message, "since": w.since},
                    "juju-status": {"current": agent, "message": agent_msg},
                    "leader": m.is_leader(&u),
                    "life": unit.life,
                    "machine": unit.machine.to_string(),
                    "public-address": unit.address,
                    "address": unit.address,
                    "open-ports": unit.ports,
                    "workload-version": unit.version,
                    "queued-hooks": unit.queue.iter().map(|e| e.name.clone()).collect::<Vec<_>>(),
                    "unit-dir": unit.dir,
                    "storage": unit.storage.iter().map(|a| json!({
                        "id": a.id, "kind": a.kind, "location": a.location, "size": a.size,
                        "loop-device": a.loop_device, "stand-in": a.stand_in,
                        "unplugged": a.unplugged,
                    })).collect::<Vec<_>>(),
                    "machine-mode": unit.machine_mode,
                    "machine-pid": crate::sim::machine::running(&unit.dir),
                }),
            );
        }
        let mut relations = Map::new();
        for r in m.relations.values() {
            let Some(ep) = r.endpoint_of(name) else {
                continue;
            };
            let remote = r.remote_app_of(name).unwrap_or(name);
            let entry = relations
                .entry(ep.name.clone())
                .or_insert_with(|| json!([]));
            if let Value::Array(list) = entry {
                list.push(json!({"related-application": remote, "interface": ep.interface, "scope": if ep.scope.is_empty() { "global" } else { ep.scope.as_str() }, "relation-id": r.id}));
            }
        }
        let s = app_status(m, app);
        apps.insert(
            name.clone(),
            json!({
                "charm": app.charm.name,
                "charm-rev": app.charm_rev,
                "charm-dir": app.charm_dir,
                "scale": units.len(),
                "version": app_version(m, name),
                "application-status": {"current": s.current, "message": s.message, "since": s.since},
                "relations": relations,
                "units": units,
            }),
        );
    }
    json!({
        "model": {"name": m.name, "uuid": m.uuid, "type": "iaas", "version": m.juju_version, "seed": m.seed, "destroyed": m.destroyed},
        "applications": apps,
    })
}

/// Left-aligned columns, two spaces apart.
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

pub fn table(m: &Model) -> String {
    let mut out = columns(&[
        vec!["Model".into(), "Version".into(), "Seed".into()],
        vec![m.name.clone(), m.juju_version.clone(), m.seed.to_string()],
    ]);
    let mut apps = vec![[
        "App", "Version", "Status", "Scale", "Charm", "Rev", "Message",
    ]
    .map(String::from)
    .to_vec()];
    let mut units = vec![[
        "Unit", "Workload", "Agent", "Machine", "Address", "Ports", "Message",
    ]
    .map(String::from)
    .to_vec()];
    for (name, app) in &m.applications {
        let s = app_status(m, app);
        let scale = m.units_of(name).len().to_string();
        apps.push(vec![
            name.clone(),
            app_version(m, name),
            s.current,
            scale,
            app.charm.name.clone(),
            app.charm_rev.to_string(),
            s.message,
        ]);
        for u in m.units_of(name) {
            let unit = &m.units[&u];
            let w = shown_workload(unit);
            let star = if m.is_leader(&u) { "*" } else { "" };
            let ports: Vec<&str> = unit.ports.iter().map(String::as_str).collect();
            units.push(vec![
                format!("{u}{star}"),
                w.current,
                agent_text(unit).0.to_string(),
                match unit.machine_mode.as_str() {
                    "" | "direct" => unit.machine.to_string(),
                    mode => format!("{} ({mode})", unit.machine),
                },
                unit.address.clone(),
                ports.join(","),
                w.message,
            ]);
        }
    }
    out.push('\n');
    out.push_str(&columns(&apps));
    out.push('\n');
    out.push_str(&columns(&units));
    let rels: Vec<Vec<String>> = m
        .relations
        .values()
        .map(|r| {
            let eps: Vec<String> = r
                .endpoints
                .iter()
                .map(|e| format!("{}:{}", e.app, e.name))
                .collect();
            let kind = if r.is_peer() { "peer" } else { "regular" };
            vec![
                r.id.to_string(),
                eps.join(" "),
                r.endpoints[0].interface.clone(),
                kind.into(),
            ]
        })
        .collect();
    let storage: Vec<Vec<String>> = m
        .units
        .values()
        .flat_map(|u| {
            u.storage.iter().map(|a| {
                vec![
                    u.name.clone(),
                    a.id.clone(),
                    a.kind.clone(),
                    format!("{} MiB", a.size >> 20),
                    a.location.display().to_string(),
                    if a.unplugged {
                        "missing from the machine (plug-volumes brings it back)".to_string()
                    } else {
                        a.stand_in.clone().unwrap_or_default()
                    },
                ]
            })
        })
        .collect();
    if !storage.is_empty() {
        out.push('\n');
        let mut rows = vec![["Unit", "Storage", "Type", "Size", "Location", "Note"]
            .map(String::from)
            .to_vec()];
        rows.extend(storage);
        out.push_str(&columns(&rows));
    }
    if !rels.is_empty() {
        out.push('\n');
        let mut rows = vec![["Id", "Endpoints", "Interface", "Type"]
            .map(String::from)
            .to_vec()];
        rows.extend(rels);
        out.push_str(&columns(&rows));
    }
    out
}
