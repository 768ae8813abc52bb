//! The monitoring endpoints the Python charm offered, doing real work
//! (shared/interfaces.md §6):
//! - `prometheus` (prometheus-manual): the leader asks for a scrape job over
//!   every started member's client address, and a second one over their
//!   maintenance agents' metrics listeners (`etcd-charm-agent`);
//! - `grafana` (grafana-dashboard): the leader registers our dashboard
//!   (templates/grafana-dashboard.json) once Prometheus is related;
//! - `nrpe-external-master`: every unit writes its Nagios checks (nagios.rs)
//!   and lists them in `monitors`.
//!
//! Same split as the charm: [`observe`] reads relations, files and the one
//! random value a new request needs; [`plan`] is pure; [`apply`] writes.

use super::nagios;
use super::observed::{Mode, Observed};
use super::scrape_jobs;
use super::steps::{Plan, Step};
use crate::context::{Event, HookContext, RelationKind};
use crate::error::{io, Result};
use crate::etcd::ClientTls;
use crate::hooktools::{Databag, HookTools};
use crate::paths::Paths;
use crate::service::{Backend, Service};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tracing::{info, warn};

pub use super::observed::{Monitoring, RelationData};
pub use super::steps::MonitoringStep;

pub const PROMETHEUS: &str = "prometheus";
pub const GRAFANA: &str = "grafana";
pub const NRPE: &str = "nrpe-external-master";

const DASHBOARD: &str = include_str!("../../templates/grafana-dashboard.json");
const REQUEST_PREFIX: &str = "request_";
/// The scrape job of etcd's own `/metrics`.
pub const ETCD_JOB: &str = "etcd";
/// The scrape job of the maintenance agents' `/metrics` (agent::scrape).
pub const AGENT_JOB: &str = "etcd-charm-agent";
/// Leadership data: the unit whose requests stand. Juju tells nobody that
/// a unit lost leadership; writing this makes every other unit run
/// leader-settings-changed, where a deposed leader withdraws its requests.
pub const REQUESTS_BY: &str = "monitoring-requests-by";
const RESPONSE_PREFIX: &str = "response_";

impl RelationData {
    fn remote_app(&self) -> Option<&str> {
        self.remotes.keys().next().and_then(|u| u.split('/').next())
    }
}

impl std::fmt::Display for MonitoringStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MonitoringStep::Publish { relation, data } => {
                let keys: Vec<&str> = data.keys().map(|k| k.as_str()).collect();
                write!(f, "publish {} on {relation}", keys.join(", "))
            }
            MonitoringStep::NrpeFiles { write, remove } => write!(
                f,
                "write {} and remove {} Nagios check file(s)",
                write.len(),
                remove.len()
            ),
            MonitoringStep::Refused {
                relation,
                unit,
                reason,
            } => write!(f, "report that {unit} on {relation} refused: {reason}"),
        }
    }
}

impl MonitoringStep {
    /// The failpoint name of the step.
    pub fn key(&self) -> &'static str {
        match self {
            MonitoringStep::Publish { .. } => "monitoring-publish",
            MonitoringStep::NrpeFiles { .. } => "nrpe-files",
            MonitoringStep::Refused { .. } => "monitoring-refused",
        }
    }
}

// ---- observe ----

/// A hook tool's answer; in a dry run a failure makes the monitoring state
/// unknown instead of failing.
fn call<T>(
    mode: Mode,
    ok: &mut bool,
    unread: &mut Vec<String>,
    what: &str,
    f: impl FnOnce() -> std::result::Result<T, crate::hooktools::HookToolError>,
) -> Result<Option<T>> {
    match (mode, f()) {
        (_, Ok(v)) => Ok(Some(v)),
        (Mode::Hook, Err(e)) => Err(e.into()),
        (Mode::DryRun { .. }, Err(e)) => {
            if *ok {
                unread.push(format!(
                    "{what}: {e}; the monitoring endpoints are left out of the plan"
                ));
            }
            *ok = false;
            Ok(None)
        }
    }
}

/// A random (version 4) UUID, the id charms.reactive requests carry.
pub fn uuid4() -> Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    let dev = Path::new("/dev/urandom");
    std::fs::File::open(dev)
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(io("reading", dev))?;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

/// Check files of ours on disk, by canonical path.
fn our_files(paths: &Paths) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    for name in nagios::ALL_NAMES {
        let p = nagios::nrpe_file(name);
        if let Ok(text) = std::fs::read_to_string(paths.host(&p)) {
            out.insert(p, text);
        }
    }
    if let Ok(dir) = std::fs::read_dir(paths.host(nagios::EXPORT_DIR)) {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if nagios::is_our_export(&name) {
                if let Ok(text) = std::fs::read_to_string(e.path()) {
                    out.insert(Path::new(nagios::EXPORT_DIR).join(name), text);
                }
            }
        }
    }
    out
}

/// Reads the three endpoints. Every hook-tool call is a round trip to the
/// agent, so: update-status reads nothing (it only reports; relation and
/// membership changes come with their own hooks), one `goal-state` says
/// which endpoints have relations, and only those are read; the config is
/// read again only with an nrpe relation.
pub fn observe(
    ctx: &HookContext,
    tools: &HookTools,
    paths: &Paths,
    service: &Service,
    is_leader: bool,
    mode: Mode,
    unread: &mut Vec<String>,
) -> Result<Monitoring> {
    let mut m = Monitoring {
        check_binary: ctx.charm_dir.join("bin/etcd-charm"),
        snap_backend: matches!(service.backend, Backend::Snap { .. }),
        ..Default::default()
    };
    if mode == (Mode::DryRun { tools: false }) || ctx.event == Event::UpdateStatus {
        return Ok(m);
    }
    let mut ok = true;
    let goal = call(mode, &mut ok, unread, "goal-state", || tools.goal_state())?;
    m.related = goal
        .as_ref()
        .and_then(|g| g["relations"].as_object())
        .map(|r| r.keys().cloned().collect())
        .unwrap_or_default();
    let related = |endpoint: &str| m.related.contains(endpoint);
    // The relation this hook is breaking is gone for us; in a departed hook
    // the remote unit has left our view (also when we are the one leaving).
    let (broken, departing) = match (&ctx.event, &ctx.relation) {
        (Event::Relation { kind, .. }, Some(r)) => (
            (*kind == RelationKind::Broken).then(|| r.id.clone()),
            (*kind == RelationKind::Departed)
                .then(|| Some((r.id.clone(), r.remote_unit.clone()?)))
                .flatten(),
        ),
        _ => (None, None),
    };
    for endpoint in [PROMETHEUS, GRAFANA, NRPE]
        .into_iter()
        .filter(|e| related(e))
    {
        let ids = call(mode, &mut ok, unread, endpoint, || {
            tools.relation_ids(endpoint)
        })?
        .unwrap_or_default();
        let read_remotes = endpoint == NRPE || is_leader;
        let mut rels = Vec::new();
        for id in ids.into_iter().filter(|i| Some(i) != broken.as_ref()) {
            let mut rel = RelationData {
                own: call(mode, &mut ok, unread, &id, || {
                    tools.relation_get(&id, &ctx.unit_name)
                })?
                .unwrap_or_default(),
                ..Default::default()
            };
            if read_remotes {
                let units = call(mode, &mut ok, unread, &id, || tools.relation_list(&id))?
                    .unwrap_or_default();
                let gone = |u: &String| departing.as_ref() == Some(&(id.clone(), u.clone()));
                for u in units.into_iter().filter(|u| !gone(u)) {
                    let bag = call(mode, &mut ok, unread, &id, || tools.relation_get(&id, &u))?
                        .unwrap_or_default();
                    rel.remotes.insert(u, bag);
                }
            }
            if is_leader && endpoint != NRPE && request_id(&rel.own, endpoint).is_none() {
                rel.fresh_id = uuid4()?;
            }
            if is_leader && endpoint == PROMETHEUS && job_request_id(&rel.own, AGENT_JOB).is_none()
            {
                rel.fresh_agent_id = uuid4()?;
            }
            rel.id = id;
            rels.push(rel);
        }
        match endpoint {
            PROMETHEUS => m.prometheus = rels,
            GRAFANA => m.grafana = rels,
            _ => m.nrpe = rels,
        }
    }
    m.nrpe_files = our_files(paths);
    m.known = ok;
    Ok(m)
}

// ---- plan (pure) ----

/// The id of our existing request on `endpoint`, if this databag holds one.
fn request_id(own: &Databag, endpoint: &str) -> Option<String> {
    if endpoint == GRAFANA {
        named_request_id(own, "name", "etcd")
    } else {
        job_request_id(own, ETCD_JOB)
    }
}

/// The id of our existing prometheus request for scrape job `job`.
fn job_request_id(own: &Databag, job: &str) -> Option<String> {
    named_request_id(own, "job_name", job)
}

fn named_request_id(own: &Databag, name_key: &str, name: &str) -> Option<String> {
    own.iter().find_map(|(k, v)| {
        let id = k.strip_prefix(REQUEST_PREFIX)?;
        let req: Value = serde_json::from_str(v).ok()?;
        (req["request_id"] == id && req[name_key] == name).then(|| id.to_string())
    })
}

/// The prometheus-manual request: a scrape job over `targets`. Over TLS
/// (every member serves https) the job is https with the CA and the client
/// pair at the top level, as the Python charm sent them: etcd asks a client
/// certificate of `/metrics` too. The request goes through relation-set's
/// stdin, and steps show keys by name only.
pub fn prometheus_request(id: &str, targets: &[String], tls: Option<&ClientTls>) -> String {
    job_request(ETCD_JOB, id, targets, tls)
}

/// A prometheus-manual request for scrape job `job`.
pub fn job_request(job: &str, id: &str, targets: &[String], tls: Option<&ClientTls>) -> String {
    let mut v = json!({
        "job_name": job,
        "job_data": {
            "scheme": if tls.is_some() { "https" } else { "http" },
            "static_configs": [{"targets": targets}],
        },
        "request_id": id,
    });
    if let Some(t) = tls {
        v["ca_cert"] = json!(t.ca_pem);
        v["client_cert"] = json!(t.cert_pem);
        v["client_key"] = json!(t.key_pem);
    }
    // serde_json's maps are sorted: the text is stable across hooks.
    v.to_string()
}

/// Replaces the template's placeholders in every string of `v`.
fn fill(v: &mut Value, datasource: &str, job: &str) {
    match v {
        Value::String(s) => {
            *s = s
                .replace("__DATASOURCE__", datasource)
                .replace("__JOB__", job)
        }
        Value::Array(a) => a.iter_mut().for_each(|x| fill(x, datasource, job)),
        Value::Object(o) => o.values_mut().for_each(|x| fill(x, datasource, job)),
        _ => {}
    }
}

/// Our dashboard, its panels reading the related Prometheus' source and
/// the scrape job `etcd-<prometheus request id>` (Prometheus' name for it).
pub fn dashboard(prometheus_app: &str, prometheus_request_id: &str) -> Value {
    // The template is part of the binary and tested below.
    let mut d: Value = serde_json::from_str(DASHBOARD).expect("templates/grafana-dashboard.json");
    let source = format!("{prometheus_app} - Juju generated source");
    fill(&mut d, &source, &format!("etcd-{prometheus_request_id}"));
    d
}

pub fn grafana_request(id: &str, dashboard: Value) -> String {
    json!({"name": "etcd", "dashboard": dashboard, "request_id": id}).to_string()
}

/// Keys to set so `own` holds exactly `want` among our request keys (every
/// other `request_*` key is deleted with an empty value).
fn request_changes(own: &Databag, want: Vec<(String, String)>) -> Databag {
    let mut d: Databag = own
        .keys()
        .filter(|k| k.starts_with(REQUEST_PREFIX))
        .filter(|k| !want.iter().any(|(w, _)| w == *k))
        .filter(|k| !own[*k].is_empty())
        .map(|k| (k.clone(), String::new()))
        .collect();
    for (k, v) in want {
        if own.get(&k) != Some(&v) {
            d.insert(k, v);
        }
    }
    d
}

/// A failure answer to request `id` from any remote unit.
fn refusals(rel: &RelationData, id: &str, p: &mut Plan) {
    for (unit, bag) in &rel.remotes {
        let Some(raw) = bag.get(&format!("{RESPONSE_PREFIX}{id}")) else {
            continue;
        };
        let reason = match serde_json::from_str::<Value>(raw) {
            Ok(r) if r["success"] == Value::Bool(true) => continue,
            Ok(r) => r["reason"]
                .as_str()
                .unwrap_or("no reason given")
                .to_string(),
            Err(e) => format!("unreadable response {raw:?}: {e}"),
        };
        p.steps.push(Step::Monitoring(MonitoringStep::Refused {
            relation: rel.id.clone(),
            unit: unit.clone(),
            reason,
        }));
    }
}

fn publish(p: &mut Plan, relation: &str, data: Databag) {
    if !data.is_empty() {
        p.steps.push(Step::Monitoring(MonitoringStep::Publish {
            relation: relation.to_string(),
            data,
        }));
    }
}

pub fn plan(o: &Observed, paths: &Paths, p: &mut Plan) {
    let m = &o.monitoring;
    if !m.known {
        return;
    }
    // prometheus: the leader's request; everyone else withdraws any request
    // left from a time it led. Without a view of the cluster the request
    // stays as it is.
    let targets = scrape_jobs::etcd_targets(o);
    let agent_targets = scrape_jobs::agent_targets(o);
    let tls = scrape_jobs::scrape_tls(o);
    let mut prometheus_up: Option<(String, String)> = None; // (app, request id)
    for rel in &m.prometheus {
        let id = request_id(&rel.own, PROMETHEUS).unwrap_or_else(|| rel.fresh_id.clone());
        let agent_id =
            job_request_id(&rel.own, AGENT_JOB).unwrap_or_else(|| rel.fresh_agent_id.clone());
        let key = |id: &str| format!("{REQUEST_PREFIX}{id}");
        let kept = |id: &str| rel.own.get(&key(id)).map(|have| (key(id), have.clone()));
        let want = match (&targets, o.is_leader && !id.is_empty()) {
            (_, false) => None,
            (Some(t), true) => {
                let mut w = vec![(key(&id), prometheus_request(&id, t, tls))];
                if let (Some(a), false) = (&agent_targets, agent_id.is_empty()) {
                    let req = job_request(AGENT_JOB, &agent_id, a, tls);
                    w.push((key(&agent_id), req));
                }
                Some(w)
            }
            (None, true) => match kept(&id) {
                Some(have) => Some(
                    [Some(have), kept(&agent_id)]
                        .into_iter()
                        .flatten()
                        .collect(),
                ),
                None => continue,
            },
        };
        if let Some(w) = want {
            if prometheus_up.is_none() {
                if let Some(app) = rel.remote_app() {
                    prometheus_up = Some((app.to_string(), id.clone()));
                }
            }
            for (k, _) in &w {
                refusals(rel, &k[REQUEST_PREFIX.len()..], p);
            }
            publish(p, &rel.id, request_changes(&rel.own, w));
        } else {
            publish(p, &rel.id, request_changes(&rel.own, Vec::new()));
        }
    }
    // grafana: the leader's dashboard, once a Prometheus is related.
    for rel in &m.grafana {
        let id = request_id(&rel.own, GRAFANA).unwrap_or_else(|| rel.fresh_id.clone());
        let want = match (&prometheus_up, o.is_leader && !id.is_empty()) {
            (Some((app, prom_id)), true) => {
                refusals(rel, &id, p);
                Some((
                    format!("{REQUEST_PREFIX}{id}"),
                    grafana_request(&id, dashboard(app, prom_id)),
                ))
            }
            _ => None,
        };
        publish(
            p,
            &rel.id,
            request_changes(&rel.own, want.into_iter().collect()),
        );
    }
    let requests = !m.prometheus.is_empty() || !m.grafana.is_empty();
    if o.is_leader && requests && o.leader.get(REQUESTS_BY) != Some(o.unit.as_str()) {
        let mut d = Databag::new();
        d.insert(REQUESTS_BY.into(), o.unit.clone());
        p.steps.push(Step::SetLeaderData(d));
    }
    plan_nrpe(o, paths, p);
}

fn plan_nrpe(o: &Observed, paths: &Paths, p: &mut Plan) {
    let m = &o.monitoring;
    // A config that does not parse has blocked the plan already; config.rs
    // keeps both nagios options to one line (a newline would start a Nagios
    // directive).
    let Ok(c) = &o.config else { return };
    let checks = nagios::checks_for(m.snap_backend, o.tls.is_some());
    let groups = nagios::service_groups(&c.nagios_servicegroups, &c.nagios_context);
    let mut want = BTreeMap::new();
    for rel in m.nrpe.iter().filter(|r| !r.remotes.is_empty()) {
        let remote_host = rel.remotes.values().find_map(|b| {
            b.get("nagios_hostname")
                .filter(|h| !h.is_empty() && nagios::one_line(h))
        });
        let host = nagios::host_name(remote_host.map(|s| s.as_str()), &c.nagios_context, &o.unit);
        want.extend(nagios::files(
            &checks,
            &host,
            &groups,
            &m.check_binary,
            paths.root(),
        ));
        let mut bag = Databag::new();
        bag.insert("primary".into(), "False".into());
        bag.insert("monitors".into(), nagios::render_monitors(&checks));
        let changed = bag
            .into_iter()
            .filter(|(k, v)| rel.own.get(k) != Some(v))
            .collect();
        publish(p, &rel.id, changed);
    }
    let write: BTreeMap<PathBuf, String> = want
        .iter()
        .filter(|(path, text)| m.nrpe_files.get(*path) != Some(*text))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let remove: Vec<PathBuf> = m
        .nrpe_files
        .keys()
        .filter(|path| !want.contains_key(*path))
        .cloned()
        .collect();
    if !write.is_empty() || !remove.is_empty() {
        p.steps.push(Step::Monitoring(MonitoringStep::NrpeFiles {
            write,
            remove,
        }));
    }
}

// ---- apply ----

const NRPE_UNIT: &str = "nagios-nrpe-server.service";

/// nagios-nrpe-server, if its systemd unit is installed on this host (it
/// is not under a test root).
fn nrpe_installed(paths: &Paths) -> bool {
    [
        "/lib/systemd/system",
        "/usr/lib/systemd/system",
        "/etc/systemd/system",
    ]
    .iter()
    .any(|d| paths.host(Path::new(d).join(NRPE_UNIT)).exists())
}

/// nrpe reads its command definitions at start: restart it after a change.
/// A failed restart is a warning, not a failed hook: etcd is unaffected.
fn restart_nrpe(paths: &Paths) {
    if !nrpe_installed(paths) {
        info!("{NRPE_UNIT} is not installed here; not restarting it");
        return;
    }
    match std::process::Command::new("systemctl")
        .args(["restart", NRPE_UNIT])
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => info!("restarted {NRPE_UNIT}"),
        Ok(out) => warn!(
            "systemctl restart {NRPE_UNIT} exited {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => warn!("could not run systemctl restart {NRPE_UNIT}: {e}"),
    }
}

pub fn apply(step: &MonitoringStep, tools: &HookTools, paths: &Paths) -> Result<()> {
    match step {
        MonitoringStep::Publish { relation, data } => tools.relation_set(relation, data)?,
        MonitoringStep::NrpeFiles { write, remove } => {
            for (path, text) in write {
                let host = paths.host(path);
                crate::durable::write_atomic(&host, text.as_bytes())
                    .map_err(io("writing", &host))?;
            }
            for path in remove {
                let host = paths.host(path);
                match std::fs::remove_file(&host) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(io("removing", &host)(e)),
                }
            }
            restart_nrpe(paths);
        }
        MonitoringStep::Refused {
            relation,
            unit,
            reason,
        } => warn!("{unit} on {relation} refused our request: {reason}"),
    }
    Ok(())
}

#[cfg(test)]
#[path = "monitoring_tests.rs"]
mod tests;
