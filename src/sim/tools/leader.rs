//! is-leader, leader-get, leader-set. leader-set lands at once (it survives
//! a failed hook) and queues leader-settings-changed on the other units.

use super::args::{self, key_values, usage, FORMAT};
use super::format::render;
use super::Call;
use crate::sim::commit::apply_changes;
use crate::sim::error::{bail, Result};
use crate::sim::events;
use serde_json::Value;

pub fn is_leader(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT])?;
    if !p.positional.is_empty() {
        return Err(usage(format!("unrecognized args: {:?}", p.positional)));
    }
    render(&Value::Bool(call.is_leader()), p.format())
}

pub fn leader_get(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT])?;
    let data = &call.model.app(call.app())?.leader_data;
    let v = match p.positional.as_slice() {
        [] => serde_json::to_value(data)?,
        [key] if key == "-" => serde_json::to_value(data)?,
        [key] => data
            .get(key)
            .map(|v| Value::String(v.clone()))
            .unwrap_or(Value::Null),
        more => return Err(usage(format!("unrecognized args: {:?}", &more[1..]))),
    };
    render(&v, p.format())
}

pub fn leader_set(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[])?;
    let changes = key_values(&p.positional)?.into_iter().collect();
    if !call.is_leader() {
        bail!("cannot write leadership settings: cannot write settings: not the leader");
    }
    if call.dry_run() {
        return Ok(String::new());
    }
    let app = call.app().to_string();
    let changed = apply_changes(&mut call.model.app_mut(&app)?.leader_data, &changes);
    if changed {
        events::leader_settings_changed(call.model, &app);
    }
    Ok(String::new())
}
