//! The unit's own tools: config-get, network-get, unit-get, status-set/get,
//! application-version-set, goal-state, juju-log. All of them read, or land
//! at once (status-set survives a failed hook).

use super::args::{self, option, switch, usage, FORMAT, RELATION};
use super::format::render;
use super::Call;
use crate::sim::config;
use crate::sim::error::{bail, Result};
use crate::sim::model::{app_of, Life, Status};
use crate::sim::store;
use serde_json::{json, Map, Value};

pub(super) fn no_positional(p: &args::Parsed) -> Result<()> {
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
