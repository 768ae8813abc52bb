//! relation-ids, relation-list, relation-get, relation-set, with Juju's
//! visibility rules: a unit reads its own bag and its counterparts' bags;
//! a peer app bag is readable by every unit and writable by the leader; in a
//! cross-application relation a unit reads the remote app's bag, and its own
//! app's bag only when it leads. Writes are staged until the hook exits 0.

use super::args::{self, key_values, option, switch, usage, FORMAT, RELATION};
use super::format::render;
use super::Call;
use crate::sim::commit::overlay;
use crate::sim::error::{bail, Result, SimError};
use crate::sim::model::{app_of, Databag, Relation};
use serde_json::Value;

impl Call<'_> {
    /// The relation named by `-r` (`cluster:3` or `3`), else the hook's own;
    /// the unit must be in it.
    pub(super) fn relation(&self, flag: Option<&str>) -> Result<&Relation> {
        let (raw, from_flag) = match (flag, self.env.relation_id.as_deref()) {
            (Some(r), _) => (r, true),
            (None, Some(r)) => (r, false),
            (None, None) => bail!("no relation id specified"),
        };
        let not_found = || {
            if from_flag {
                usage(format!(
                    "invalid value {raw:?} for option -r: relation not found"
                ))
            } else {
                SimError::new(format!("relation {raw:?} not found"))
            }
        };
        let number = raw.rsplit(':').next().unwrap_or(raw);
        let id: u32 = number.parse().map_err(|_| not_found())?;
        let rel = self.model.relations.get(&id).ok_or_else(not_found)?;
        if let Some((name, _)) = raw.split_once(':') {
            if rel.endpoint_of(self.app()).is_none_or(|e| e.name != name) {
                return Err(not_found());
            }
        }
        if !rel.members.contains_key(&self.unit) {
            return Err(not_found());
        }
        Ok(rel)
    }
}

pub fn relation_ids(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT])?;
    let endpoint = match p.positional.as_slice() {
        [e] => e.clone(),
        [] => match std::env::var("JUJU_RELATION")
            .ok()
            .filter(|e| !e.is_empty())
        {
            Some(e) => e,
            None => return Err(usage("no endpoint name specified")),
        },
        more => return Err(usage(format!("unrecognized args: {:?}", &more[1..]))),
    };
    let ids: Vec<Value> = call
        .model
        .relations
        .values()
        .filter(|r| r.members.contains_key(&call.unit))
        .filter(|r| {
            r.endpoint_of(call.app())
                .is_some_and(|e| e.name == endpoint)
        })
        .filter_map(|r| r.key_for(call.app()).map(Value::String))
        .collect();
    render(&Value::Array(ids), p.format())
}

pub fn relation_list(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT, RELATION, switch(&["app"])])?;
    if !p.positional.is_empty() {
        return Err(usage(format!("unrecognized args: {:?}", p.positional)));
    }
    let rel = call.relation(p.get("r"))?;
    if p.has("app") {
        let remote = rel.remote_app_of(call.app()).unwrap_or_default();
        return render(&Value::String(remote.to_string()), p.format());
    }
    let mut units: Vec<&String> = rel.members[&call.unit].joined.iter().collect();
    units.sort_by_key(|u| (app_of(u).to_string(), unit_number(u)));
    render(&serde_json::to_value(units)?, p.format())
}

fn unit_number(unit: &str) -> u32 {
    unit.rsplit('/')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

pub fn relation_get(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT, RELATION, switch(&["app"])])?;
    let (key, target) = match p.positional.as_slice() {
        [] => (None, None),
        [k] => (Some(k.clone()), None),
        [k, t] => (Some(k.clone()), Some(t.clone())),
        more => return Err(usage(format!("unrecognized args: {:?}", &more[2..]))),
    };
    let key = key.filter(|k| k != "-");
    let bag = if p.has("app") {
        let app = match target.or_else(|| call.env.remote_app.clone()) {
            Some(a) => a,
            None => return Err(usage("no application specified")),
        };
        read_app_bag(call, p.get("r"), &app)?
    } else {
        let unit = match target.or_else(|| call.env.remote_unit.clone()) {
            Some(u) => u,
            None => return Err(usage("no unit id specified")),
        };
        read_unit_bag(call, p.get("r"), &unit)?
    };
    let v = match key {
        None => serde_json::to_value(bag)?,
        Some(k) => bag
            .get(&k)
            .map(|v| Value::String(v.clone()))
            .unwrap_or(Value::Null),
    };
    render(&v, p.format())
}

fn read_unit_bag(call: &Call, flag: Option<&str>, unit: &str) -> Result<Databag> {
    let rel = call.relation(flag)?;
    if unit == call.unit {
        let staged = call.context().staged.unit_bags.get(&rel.id);
        return Ok(overlay(rel.unit_bags.get(unit), staged));
    }
    let visible = (rel.is_peer() || app_of(unit) != call.app())
        && (rel.members.contains_key(unit) || rel.unit_bags.contains_key(unit));
    if !visible {
        bail!(
            "cannot read settings for unit {unit:?} in relation {:?}: unit not found",
            rel.key_for(call.app()).unwrap_or_default()
        );
    }
    Ok(rel.unit_bags.get(unit).cloned().unwrap_or_default())
}

fn read_app_bag(call: &Call, flag: Option<&str>, app: &str) -> Result<Databag> {
    let rel = call.relation(flag)?;
    if rel.endpoint_of(app).is_none() {
        bail!(
            "cannot read settings for application {app:?}: not in relation {}",
            rel.key_for(call.app()).unwrap_or_default()
        );
    }
    if app == call.app() {
        if !rel.is_peer() && !call.is_leader() {
            bail!(
                "permission denied: only the leader can read its application's data in relation {}",
                rel.key_for(call.app()).unwrap_or_default()
            );
        }
        let staged = call.context().staged.app_bags.get(&rel.id);
        return Ok(overlay(rel.app_bags.get(app), staged));
    }
    Ok(rel.app_bags.get(app).cloned().unwrap_or_default())
}

pub fn relation_set(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(
        argv,
        &[FORMAT, RELATION, switch(&["app"]), option(&["file"])],
    )?;
    let mut changes = Databag::new();
    if let Some(file) = p.get("file") {
        let text = match file {
            "-" => call.stdin.clone().unwrap_or_default(),
            path => {
                std::fs::read_to_string(path).map_err(|e| SimError::new(format!("{path}: {e}")))?
            }
        };
        changes.extend(yaml_map(&text)?);
    }
    changes.extend(key_values(&p.positional)?);
    let id = call.relation(p.get("r"))?.id;
    if p.has("app") {
        if !call.is_leader() {
            bail!(
                "cannot write relation settings: unit {} is not the leader",
                call.unit
            );
        }
        call.context_mut()
            .staged
            .app_bags
            .entry(id)
            .or_default()
            .extend(changes);
    } else {
        call.context_mut()
            .staged
            .unit_bags
            .entry(id)
            .or_default()
            .extend(changes);
    }
    Ok(String::new())
}

/// A YAML map of settings; scalar values become strings, null deletes.
fn yaml_map(text: &str) -> Result<Databag> {
    let v: serde_yaml::Value = serde_yaml::from_str(text)?;
    let map = match v {
        serde_yaml::Value::Null => return Ok(Databag::new()),
        serde_yaml::Value::Mapping(m) => m,
        _ => bail!("expected a YAML map of settings"),
    };
    let mut out = Databag::new();
    for (k, v) in map {
        let key = match k {
            serde_yaml::Value::String(s) => s,
            other => bail!("settings keys must be strings, got {other:?}"),
        };
        let value = match v {
            serde_yaml::Value::Null => String::new(),
            serde_yaml::Value::String(s) => s,
            serde_yaml::Value::Bool(b) => b.to_string(),
            serde_yaml::Value::Number(n) => n.to_string(),
            _ => bail!("value of {key:?} must be a string"),
        };
        out.insert(key, value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_settings() {
        let m = yaml_map("a: x\nb: 2\nc:\nd: ''\n").unwrap();
        assert_eq!(m["a"], "x");
        assert_eq!(m["b"], "2");
        assert_eq!(m["c"], "");
        assert_eq!(m["d"], "");
        assert!(yaml_map("[1]").is_err());
        assert!(yaml_map("").unwrap().is_empty());
    }
}
