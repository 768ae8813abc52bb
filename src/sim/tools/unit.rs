//! The unit's own tools: config-get, network-get, unit-get, status-set/get,
//! application-version-set, ports, goal-state, juju-log, the state store
//! and storage-get/storage-list.
//! status-set, application-version-set and juju-log land at once; ports and
//! state-set wait for the hook's exit status.

use super::args::{self, key_values, option, switch, usage, FORMAT, RELATION};
use super::format::render;
use super::Call;
use crate::sim::commit::overlay;
use crate::sim::config;
use crate::sim::error::{bail, Result};
use crate::sim::model::{app_of, Life, Status};
use crate::sim::store;
use serde_json::{json, Map, Value};

fn no_positional(p: &args::Parsed) -> Result<()> {
    if p.positional.is_empty() {
        Ok(())
    } else {
        Err(usage(format!("unrecognized args: {:?}", p.positional)))
    }
}

pub fn config_get(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT, switch(&["all", "a"])])?;
    let values = config::effective(call.model.app(call.app())?, p.has("all"));
    let v = match p.positional.as_slice() {
        [] => Value::Object(values),
        [key] => values.get(key).cloned().unwrap_or(Value::Null),
        more => return Err(usage(format!("unrecognized args: {:?}", &more[1..]))),
    };
    render(&v, p.format())
}

pub fn network_get(call: &mut Call, argv: &[String]) -> Result<String> {
    let short: [&'static [&'static str]; 4] = [
        &["ingress-address"],
        &["bind-address"],
        &["egress-subnets"],
        &["primary-address"],
    ];
    let flags = [
        FORMAT,
        RELATION,
        switch(short[0]),
        switch(short[1]),
        switch(short[2]),
        switch(short[3]),
    ];
    let p = args::parse(argv, &flags)?;
    match p.positional.as_slice() {
        [_binding] => {}
        [] => return Err(usage("no endpoint specified")),
        more => return Err(usage(format!("unrecognized args: {:?}", &more[1..]))),
    }
    if let Some(r) = p.get("r") {
        call.relation(Some(r))?;
    }
    let addr = call.model.unit(&call.unit)?.address.clone();
    let (prefix, _) = addr.rsplit_once('.').unwrap_or((&addr, ""));
    let cidr = format!("{prefix}.0/24");
    let egress = json!([format!("{addr}/32")]);
    let mut picked: Vec<(&str, Value)> = Vec::new();
    if p.has("ingress-address") {
        picked.push(("ingress-address", json!(addr)));
    }
    if p.has("bind-address") || p.has("primary-address") {
        picked.push(("bind-address", json!(addr)));
    }
    if p.has("egress-subnets") {
        picked.push(("egress-subnets", egress.clone()));
    }
    let v = match picked.len() {
        0 => json!({
            "bind-addresses": [{
                "mac-address": "",
                "interface-name": "lo",
                "addresses": [{"hostname": "", "value": addr, "cidr": cidr, "address": addr}],
                "macaddress": "",
                "interfacename": "lo",
            }],
            "egress-subnets": egress,
            "ingress-addresses": [addr],
        }),
        1 => picked.remove(0).1,
        _ => Value::Object(
            picked
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        ),
    };
    render(&v, p.format())
}

pub fn unit_get(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT])?;
    match p.positional.as_slice() {
        [what] if what == "private-address" || what == "public-address" => {
            let addr = call.model.unit(&call.unit)?.address.clone();
            render(&Value::String(addr), p.format())
        }
        [what] => Err(usage(format!("unknown setting {what:?}"))),
        _ => Err(usage("usage: unit-get private-address|public-address")),
    }
}

const STATUSES: &[&str] = &["maintenance", "blocked", "waiting", "active"];

pub fn status_set(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[switch(&["application"])])?;
    let (current, message) = match p.positional.split_first() {
        Some((s, rest)) => (s.clone(), rest.join(" ")),
        None => return Err(usage("invalid args, require <status> [message] [data]")),
    };
    if !STATUSES.contains(&current.as_str()) {
        return Err(usage(format!(
            "invalid status {current:?}, expected one of {STATUSES:?}"
        )));
    }
    let status = Status {
        current,
        message,
        since: store::now_rfc3339(),
    };
    if p.has("application") {
        if !call.is_leader() {
            bail!("cannot set application status: this unit is not the leader");
        }
        if !call.dry_run() {
            let app = call.app().to_string();
            call.model.app_mut(&app)?.status = Some(status);
        }
    } else if !call.dry_run() {
        call.model.unit_mut(&call.unit)?.set_workload(status);
    }
    Ok(String::new())
}

pub fn status_get(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(
        argv,
        &[FORMAT, switch(&["application"]), switch(&["include-data"])],
    )?;
    no_positional(&p)?;
    let describe =
        |s: &Status| json!({"status": s.current, "message": s.message, "status-data": {}});
    let v = if p.has("application") {
        if !call.is_leader() {
            bail!("finding application status: this unit is not the leader");
        }
        let app = call.model.app(call.app())?;
        let own = app.status.clone().unwrap_or_else(|| Status {
            current: "unknown".into(),
            ..Default::default()
        });
        let units: Map<String, Value> = call
            .model
            .units_of(call.app())
            .iter()
            .map(|u| (u.clone(), describe(&call.model.units[u].workload)))
            .collect();
        let mut app_v = describe(&own);
        app_v["units"] = Value::Object(units);
        json!({ "application-status": app_v })
    } else {
        let w = &call.model.unit(&call.unit)?.workload;
        if p.has("include-data") {
            describe(w)
        } else {
            Value::String(w.current.clone())
        }
    };
    render(&v, p.format())
}

pub fn application_version_set(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[])?;
    let [version] = p.positional.as_slice() else {
        return Err(usage("usage: application-version-set <version>"));
    };
    if !call.dry_run() {
        call.model.unit_mut(&call.unit)?.version = version.clone();
    }
    Ok(String::new())
}

/// `2379`, `2379/tcp`, `8000-8100/udp`, `icmp` → the canonical form.
fn port_spec(raw: &str) -> Result<String> {
    if raw == "icmp" {
        return Ok(raw.into());
    }
    let (range, proto) = raw.split_once('/').unwrap_or((raw, "tcp"));
    if !matches!(proto, "tcp" | "udp") {
        return Err(usage(format!(
            "invalid protocol {proto:?}: expected tcp or udp"
        )));
    }
    let (from, to) = range.split_once('-').unwrap_or((range, range));
    let parse = |s: &str| s.parse::<u16>().ok().filter(|p| *p > 0);
    match (parse(from), parse(to)) {
        (Some(a), Some(b)) if a == b => Ok(format!("{a}/{proto}")),
        (Some(a), Some(b)) if a < b => Ok(format!("{a}-{b}/{proto}")),
        _ => Err(usage(format!("invalid port or range {raw:?}"))),
    }
}

fn port_call(call: &mut Call, argv: &[String], open: bool) -> Result<String> {
    let p = args::parse(argv, &[FORMAT, option(&["endpoints"])])?;
    let [raw] = p.positional.as_slice() else {
        return Err(usage(
            "usage: open-port|close-port <port>[/<protocol>] or <from>-<to>[/<protocol>] or icmp",
        ));
    };
    let spec = port_spec(raw)?;
    call.context_mut().staged.ports.push((open, spec));
    Ok(String::new())
}

pub fn open_port(call: &mut Call, argv: &[String]) -> Result<String> {
    port_call(call, argv, true)
}

pub fn close_port(call: &mut Call, argv: &[String]) -> Result<String> {
    port_call(call, argv, false)
}

pub fn opened_ports(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT, switch(&["endpoints"])])?;
    no_positional(&p)?;
    let mut ports = call.model.unit(&call.unit)?.ports.clone();
    for (open, port) in &call.context().staged.ports {
        if *open {
            ports.insert(port.clone());
        } else {
            ports.remove(port);
        }
    }
    render(&serde_json::to_value(ports)?, p.format())
}

pub fn goal_state(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT])?;
    no_positional(&p)?;
    let since = store::now_rfc3339();
    let goal = |life: Life| {
        if life == Life::Alive {
            "active"
        } else {
            "dying"
        }
    };
    let units: Map<String, Value> = call
        .model
        .units_of(call.app())
        .iter()
        .map(|u| {
            (
                u.clone(),
                json!({"status": goal(call.model.units[u].life), "since": since}),
            )
        })
        .collect();
    let mut relations = Map::new();
    for rel in call
        .model
        .relations
        .values()
        .filter(|r| r.members.contains_key(&call.unit))
    {
        let Some(ep) = rel.endpoint_of(call.app()) else {
            continue;
        };
        let entry = relations
            .entry(ep.name.clone())
            .or_insert_with(|| json!({}));
        for other in rel.members.keys().filter(|o| **o != call.unit) {
            if !rel.is_peer() && app_of(other) == call.app() {
                continue;
            }
            let life = call
                .model
                .units
                .get(other)
                .map(|u| u.life)
                .unwrap_or(Life::Dying);
            entry[other.as_str()] = json!({"status": if life == Life::Alive { "joined" } else { "dying" }, "since": since});
        }
        if let Some(remote) = rel.remote_app_of(call.app()).filter(|_| !rel.is_peer()) {
            entry[remote] = json!({"status": "joined", "since": since});
        }
    }
    render(&json!({"units": units, "relations": relations}), p.format())
}

pub fn juju_log(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(
        argv,
        &[FORMAT, option(&["log-level", "l"]), switch(&["debug"])],
    )?;
    if p.positional.is_empty() {
        return Err(usage("no message specified"));
    }
    let level = match (p.has("debug"), p.get("log-level")) {
        (true, _) => "DEBUG".to_string(),
        (false, Some(l)) => l.to_ascii_uppercase(),
        (false, None) => "INFO".to_string(),
    };
    if !matches!(
        level.as_str(),
        "TRACE" | "DEBUG" | "INFO" | "WARNING" | "WARN" | "ERROR" | "CRITICAL"
    ) {
        return Err(usage(format!("invalid log level {level:?}")));
    }
    let record = json!({
        "time": store::now_rfc3339(),
        "unit": call.unit,
        "context": call.context,
        "level": level,
        "message": p.positional.join(" "),
    });
    store::append_jsonl(&call.dir.juju_log(), &record)?;
    Ok(String::new())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports() {
        assert_eq!(port_spec("2379").unwrap(), "2379/tcp");
        assert_eq!(port_spec("53/udp").unwrap(), "53/udp");
        assert_eq!(port_spec("8000-8100/tcp").unwrap(), "8000-8100/tcp");
        assert_eq!(port_spec("icmp").unwrap(), "icmp");
        assert!(port_spec("0").is_err());
        assert!(port_spec("80/sctp").is_err());
        assert!(port_spec("9-3").is_err());
    }
}

/// The unit's storage instances: (id, name, location).
fn storage_of(call: &Call) -> Result<Vec<(String, String, String)>> {
    let u = call.model.unit(&call.unit)?;
    let names = &call.model.app(call.app())?.charm.storage;
    Ok(names
        .iter()
        .map(|n| {
            let dir = crate::sim::hookenv::storage_dir(&u.dir, n);
            (
                crate::sim::hookenv::storage_id(n, u.machine),
                n.clone(),
                dir.display().to_string(),
            )
        })
        .collect())
}

pub fn storage_list(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT])?;
    let filter = p.positional.first();
    let ids: Vec<Value> = storage_of(call)?
        .into_iter()
        .filter(|(_, name, _)| filter.is_none_or(|f| f == name))
        .map(|(id, _, _)| Value::String(id))
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
    let Some((_, _, location)) = storage_of(call)?.into_iter().find(|(i, _, _)| *i == id) else {
        bail!("storage {id:?} not found");
    };
    let all = json!({"kind": "filesystem", "location": location});
    let v = match p.positional.as_slice() {
        [] => all,
        [key] => all.get(key).cloned().unwrap_or(Value::Null),
        more => return Err(usage(format!("unrecognized args: {:?}", &more[1..]))),
    };
    render(&v, p.format())
}
