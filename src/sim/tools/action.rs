//! action-get, action-set, action-fail, action-log: only inside an action,
//! and all of them land at once in the action's record.

use super::args::{self, key_values, usage, FORMAT};
use super::format::render;
use super::Call;
use crate::sim::error::{bail, Result};
use crate::sim::model::ActionRecord;
use serde_json::{Map, Value};

fn record<'c>(call: &'c mut Call) -> Result<&'c mut ActionRecord> {
    let Some(id) = call.context().action.clone() else {
        bail!("not running an action");
    };
    match call.model.actions.get_mut(&id) {
        Some(r) => Ok(r),
        None => bail!("action {id} not found"),
    }
}

pub fn action_get(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT])?;
    let params = Value::Object(record(call)?.params.clone());
    let v = match p.positional.as_slice() {
        [] => params,
        [key] => key
            .split('.')
            .try_fold(&params, |v, k| v.get(k))
            .cloned()
            .unwrap_or(Value::Null),
        more => return Err(usage(format!("unrecognized args: {:?}", &more[1..]))),
    };
    render(&v, p.format())
}

/// Keys of action results: lowercase letters, digits and `-`, starting and
/// ending with a letter or digit.
fn valid_key(k: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !k.is_empty() && k.chars().all(|c| ok(c) || c == '-') && k.starts_with(ok) && k.ends_with(ok)
}

const RESERVED: &[&str] = &["stdout", "stdout-encoding", "stderr", "stderr-encoding"];

pub fn action_set(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[])?;
    let kvs = key_values(&p.positional)?;
    if kvs.is_empty() {
        return Err(usage("no key=value pairs given"));
    }
    for (k, _) in &kvs {
        if let Some(bad) = k.split('.').find(|part| !valid_key(part)) {
            return Err(usage(format!(
                "key {bad:?} must start and end with lowercase alphanumeric, and contain only lowercase alphanumeric and hyphens"
            )));
        }
        if RESERVED.contains(&k.split('.').next().unwrap_or_default()) {
            return Err(usage(format!("cannot set reserved action key {k:?}")));
        }
    }
    let rec = record(call)?;
    for (k, v) in kvs {
        let parts: Vec<&str> = k.split('.').collect();
        let (last, path) = parts.split_last().expect("split yields one part");
        let mut map: &mut Map<String, Value> = &mut rec.results;
        for part in path {
            let slot = map
                .entry(part.to_string())
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            map = slot.as_object_mut().expect("made an object");
        }
        map.insert(last.to_string(), Value::String(v));
    }
    Ok(String::new())
}

pub fn action_fail(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[])?;
    let message = if p.positional.is_empty() {
        "action failed without reason given".to_string()
    } else {
        p.positional.join(" ")
    };
    let rec = record(call)?;
    rec.status = "failed".into();
    rec.message = message;
    Ok(String::new())
}

pub fn action_log(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[])?;
    if p.positional.is_empty() {
        return Err(usage("no message specified"));
    }
    let message = p.positional.join(" ");
    record(call)?.log.push(message);
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        assert!(valid_key("a-1"));
        assert!(!valid_key("A"));
        assert!(!valid_key("-a"));
        assert!(!valid_key("a_b"));
        assert!(!valid_key(""));
    }
}
