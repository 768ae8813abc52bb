//! state-get, state-set, state-delete (the unit's key-value store, staged
//! until the hook exits 0), and storage-get, storage-list.

use super::args::{self, key_values, option, switch, usage, FORMAT};
use super::format::render;
use super::Call;
use crate::sim::commit::overlay;
use crate::sim::error::{bail, Result};
use serde_json::{json, Value};

pub fn state_get(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT, switch(&["strict"])])?;
    let store = overlay(
        Some(&call.model.unit(&call.unit)?.store),
        Some(&call.context().staged.store),
    );
    let v = match p.positional.as_slice() {
        [] => serde_json::to_value(store)?,
        [key] => match store.get(key) {
            Some(v) => Value::String(v.clone()),
            None if p.has("strict") => bail!("key {key:?} not found"),
            None => Value::Null,
        },
        more => return Err(usage(format!("unrecognized args: {:?}", &more[1..]))),
    };
    render(&v, p.format())
}

pub fn state_set(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[option(&["file"])])?;
    let mut changes = Vec::new();
    if let Some(file) = p.get("file") {
        let text = match file {
            "-" => call.stdin.clone().unwrap_or_default(),
            path => std::fs::read_to_string(path)?,
        };
        let map: std::collections::BTreeMap<String, String> = serde_yaml::from_str(&text)?;
        changes.extend(map);
    }
    changes.extend(key_values(&p.positional)?);
    call.context_mut().staged.store.extend(changes);
    Ok(String::new())
}

pub fn state_delete(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[])?;
    let [key] = p.positional.as_slice() else {
        return Err(usage("usage: state-delete <key>"));
    };
    call.context_mut()
        .staged
        .store
        .insert(key.clone(), String::new());
    Ok(String::new())
}

/// The unit's storage instances: (id, name, location, kind).
fn storage_of(call: &Call) -> Result<Vec<(String, String, String, String)>> {
    let u = call.model.unit(&call.unit)?;
    Ok(u.storage
        .iter()
        .map(|a| {
            let kind = if a.kind == "block" {
                "block"
            } else {
                "filesystem"
            };
            (
                a.id.clone(),
                a.name.clone(),
                a.location.display().to_string(),
                kind.to_string(),
            )
        })
        .collect())
}

pub fn storage_list(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT])?;
    let filter = p.positional.first();
    let ids: Vec<Value> = storage_of(call)?
        .into_iter()
        .filter(|(_, name, _, _)| filter.is_none_or(|f| f == name))
        .map(|(id, _, _, _)| Value::String(id))
        .collect();
    render(&Value::Array(ids), p.format())
}

pub fn storage_get(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT, option(&["s"])])?;
    let id = match p.get("s").map(String::from).or_else(|| {
        std::env::var("JUJU_STORAGE_ID")
            .ok()
            .filter(|s| !s.is_empty())
    }) {
        Some(id) => id,
        None => return Err(usage("no storage instance specified")),
    };
    let Some((_, _, location, kind)) = storage_of(call)?.into_iter().find(|(i, ..)| *i == id)
    else {
        bail!("storage {id:?} not found");
    };
    let all = json!({"kind": kind, "location": location});
    let v = match p.positional.as_slice() {
        [] => all,
        [key] => all.get(key).cloned().unwrap_or(Value::Null),
        more => return Err(usage(format!("unrecognized args: {:?}", &more[1..]))),
    };
    render(&v, p.format())
}
