//! `run-action UNIT ACTION [k=v…]`: runs `actions/<name>` (or dispatch) with
//! its parameters, prints the record, and fails if the action did.

use super::{split_kv, Ctx};
use crate::sim::error::{bail, Result};
use crate::sim::hookenv::Work;
use crate::sim::identity;
use crate::sim::invoke;
use crate::sim::model::{ActionRecord, ActionSpec};
use crate::sim::runner::{self, Capture};
use serde_json::{json, Map, Value};

/// Parameters from `k=v` (values read as YAML scalars), with the defaults of
/// actions.yaml filled in and required ones checked.
fn params(spec: &ActionSpec, args: &[String]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for (name, p) in &spec.params {
        if let Some(d) = p.get("default") {
            out.insert(name.clone(), d.clone());
        }
    }
    for raw in args {
        let (k, v) = split_kv(raw, "action parameter")?;
        if spec.closed && !spec.params.contains_key(&k) {
            bail!(
                "unknown parameter {k:?} (the action takes {:?})",
                spec.params.keys().collect::<Vec<_>>()
            );
        }
        let value: Value = match serde_yaml::from_str::<serde_yaml::Value>(&v) {
            Ok(y @ (serde_yaml::Value::Bool(_) | serde_yaml::Value::Number(_))) => {
                serde_json::to_value(y)?
            }
            _ => Value::String(v),
        };
        let value = match (
            spec.params
                .get(&k)
                .and_then(|p| p.get("type"))
                .and_then(Value::as_str),
            value,
        ) {
            (Some("string"), Value::Bool(b)) => Value::String(b.to_string()),
            (Some("string"), Value::Number(n)) => Value::String(n.to_string()),
            (_, v) => v,
        };
        out.insert(k, value);
    }
    for r in &spec.required {
        if !out.contains_key(r) {
            bail!("missing required parameter {r:?}");
        }
    }
    Ok(out)
}

pub fn run_action(
    ctx: &Ctx,
    unit: &str,
    action: &str,
    args: &[String],
    format: &str,
) -> Result<u8> {
    if !matches!(format, "yaml" | "json") {
        bail!("unknown format {format:?} (yaml or json)");
    }
    let settled = ctx.settle()?;
    let dir = &ctx.dir;
    let (opened, work) = dir.update(|m| {
        let u = m.unit(unit)?;
        let spec = match m.app(&u.app)?.charm.actions.get(action) {
            Some(s) => s.clone(),
            None => bail!("{} has no action {action:?}", u.app),
        };
        let params = params(&spec, args)?;
        m.next_context += 1;
        let seed = format!("{}/{}/{}", m.uuid, unit, m.next_context);
        let id = identity::model_uuid(std::path::Path::new(&seed));
        m.actions.insert(
            id.clone(),
            ActionRecord {
                id: id.clone(),
                unit: unit.into(),
                name: action.into(),
                params,
                status: "running".into(),
                ..Default::default()
            },
        );
        let work = Work::Action {
            name: action.into(),
            id,
        };
        Ok((invoke::open(m, dir, unit, &work, false), work))
    })?;
    let (out, err) = (
        opened.unit_dir.join("action-stdout.log"),
        opened.unit_dir.join("action-stderr.log"),
    );
    let outcome = invoke::run_charm(
        &opened,
        &work,
        ctx.opts.hook_timeout,
        Capture::Separate {
            out: out.clone(),
            err: err.clone(),
        },
        ctx.progress.still_running(unit, action),
    );
    let Work::Action { id, .. } = &work else {
        unreachable!()
    };
    let record = dir.update(|m| {
        let ok = outcome.as_ref().is_ok_and(|o| o.ok());
        invoke::close(m, &opened.context, ok);
        let rec = m.actions.get_mut(id).expect("created above");
        match &outcome {
            Ok(o) if o.ok() => {
                if rec.status == "running" {
                    rec.status = "completed".into();
                }
            }
            Ok(o) => {
                rec.status = "failed".into();
                if rec.message.is_empty() {
                    rec.message = if o.timed_out {
                        "action timed out".into()
                    } else {
                        format!("exit status {}", o.code)
                    };
                }
            }
            Err(e) => {
                rec.status = "failed".into();
                rec.message = e.to_string();
            }
        }
        Ok(rec.clone())
    })?;
    let shown = json!({
        "unit": record.unit,
        "action": record.name,
        "id": record.id,
        "status": record.status,
        "message": record.message,
        "results": record.results,
        "log": record.log,
        "stdout": runner::tail(&out, 1 << 20),
        "stderr": runner::tail(&err, 1 << 20),
    });
    match format {
        "json" => println!("{}", serde_json::to_string_pretty(&shown)?),
        _ => print!("{}", serde_yaml::to_string(&shown)?),
    }
    let after = ctx.settle()?;
    if record.status == "failed" {
        eprintln!(
            "jujusim: action {action} on {unit} failed: {}",
            record.message
        );
        return Ok(1);
    }
    // Units in error elsewhere are reported, not the action's failure.
    Ok(if settled == 3 || after == 3 { 3 } else { 0 })
}
