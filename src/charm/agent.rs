//! The charm's side of the maintenance agent (crate::agent): what observe
//! reads (is it installed, with which arguments, and its state over one
//! loopback GET, no hook tool), the one plan step that starts, replaces or
//! stops it, its apply, and the notes its problems add to the status.

use super::observed::Observed;
use super::steps::{Plan, Step};
use crate::agent::options::{host_port, listen_addr, MetricsListener};
use crate::agent::service::{self, Installed};
use crate::agent::state::AgentState;
use crate::context::Event;
use crate::hooktools::StatusKind;
use crate::paths::Paths;
use crate::service::Service;

pub use super::observed::AgentSeen;
pub use super::steps::AgentStep;

impl std::fmt::Display for AgentStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentStep::Ensure(a) => write!(f, "run the maintenance agent ({})", a.join(" ")),
            AgentStep::Replace(a) => write!(
                f,
                "restart the maintenance agent on the charm's new binary ({})",
                a.join(" ")
            ),
            AgentStep::Stop => write!(f, "stop the maintenance agent"),
            AgentStep::Remove => write!(f, "remove the maintenance agent"),
        }
    }
}

fn read_state(i: &Installed) -> Option<std::result::Result<AgentState, String>> {
    let listen = i.listen()?;
    i.running.then(|| crate::agent::http::get_state(listen))
}

pub fn observe(paths: &Paths, svc: &Service) -> AgentSeen {
    let installed = service::installed(paths, &svc.backend);
    let state = installed.as_ref().and_then(read_state);
    AgentSeen {
        installed,
        state,
        program: service::program_id(),
    }
}

/// The scrape listener for the related Prometheus (on another machine):
/// only while `prometheus` has a relation, on the unit's ingress address
/// at `agent_metrics_port`; https with client certificates once the unit
/// has its TLS files, plain http only by `allow_insecure_listeners` (rule
/// 7). Without a view of the relations (update-status reads none) it stays
/// as the running agent has it.
fn metrics_listener(o: &Observed, paths: &Paths) -> Option<MetricsListener> {
    let c = o.config.as_ref().ok()?;
    let related = if o.monitoring.known {
        !o.monitoring.prometheus.is_empty()
    } else {
        let installed = o.agent.as_ref()?.installed.as_ref()?;
        MetricsListener::of_args(&installed.args).is_some()
    };
    if !related || c.agent.metrics_port == 0 || o.client_address.is_empty() {
        return None;
    }
    let tls_dir = o.tls.is_some().then(|| paths.common_dir());
    if tls_dir.is_none() && !c.allow_insecure_listeners {
        tracing::debug!(
            "no metrics listener for prometheus: the unit has no TLS yet and \
             allow_insecure_listeners is false"
        );
        return None;
    }
    Some(MetricsListener {
        listen: host_port(&o.client_address, c.agent.metrics_port),
        tls_dir,
    })
}

/// The running agent answered with a binary other than the charm's (an
/// agent from before `exe` was reported says none: also stale).
fn stale_binary(seen: &AgentSeen) -> bool {
    match (&seen.state, &seen.program) {
        (Some(Ok(s)), Some(program)) => s.exe != *program,
        _ => false,
    }
}

/// The agent's step, if it is not as the options want (pure).
pub fn plan(o: &Observed, paths: &Paths, p: &Plan) -> Option<Step> {
    let seen = o.agent.as_ref()?;
    let running = seen.installed.as_ref().is_some_and(|i| i.running);
    let step = match &o.event {
        Event::Remove => seen.installed.is_some().then_some(AgentStep::Remove),
        Event::Stop => running.then_some(AgentStep::Stop),
        _ if o.is_leaving() => None,
        _ => {
            let c = o.config.as_ref().ok()?;
            if !c.agent.enabled {
                return running.then_some(Step::Agent(AgentStep::Stop));
            }
            let starts = p
                .steps
                .iter()
                .any(|s| matches!(s, Step::StartEtcd | Step::RestartEtcd));
            if !(o.active || starts) {
                return None;
            }
            let listen = listen_addr(&o.client_address, c.agent.port);
            let mut want = c.agent.args(&o.unit, &listen);
            if let Some(m) = metrics_listener(o, paths) {
                want.extend(m.args());
            }
            let same = seen
                .installed
                .as_ref()
                .is_some_and(|i| i.running && i.args == want);
            if !same {
                Some(AgentStep::Ensure(want))
            } else if stale_binary(seen) {
                Some(AgentStep::Replace(want))
            } else {
                None
            }
        }
    };
    step.map(Step::Agent)
}

/// An agent that will not run blocks the unit saying why (a taken port,
/// a missing binary); etcd itself is not held up by it.
pub fn apply(step: &AgentStep, paths: &Paths, svc: &Service) -> Option<(StatusKind, String)> {
    let r = match step {
        AgentStep::Ensure(args) => service::ensure(paths, &svc.backend, args, false),
        AgentStep::Replace(args) => service::ensure(paths, &svc.backend, args, true),
        AgentStep::Stop => service::stop(paths, &svc.backend),
        AgentStep::Remove => service::remove(paths, &svc.backend),
    };
    let e = r.err()?;
    tracing::warn!("maintenance agent: {e}");
    let hint = match step {
        AgentStep::Ensure(_) | AgentStep::Replace(_) => "; fix it or set maintenance_agent=false",
        _ => "",
    };
    Some((StatusKind::Blocked, format!("maintenance agent: {e}{hint}")))
}

/// What the agent reports, as notes for an active status (pure).
pub fn notes_of(state: Option<&std::result::Result<AgentState, String>>) -> Vec<String> {
    match state {
        None => Vec::new(),
        Some(Err(e)) => vec![e.clone()],
        Some(Ok(s)) => s
            .problems
            .iter()
            .map(|p| format!("maintenance agent: {p}"))
            .collect(),
    }
}

/// None once the options turn the agent off: this hook stops it, and what
/// it said before is no longer true of the unit.
pub fn notes(o: &Observed) -> Vec<String> {
    if o.config.as_ref().is_ok_and(|c| !c.agent.enabled) {
        return Vec::new();
    }
    notes_of(o.agent.as_ref().and_then(|a| a.state.as_ref()))
}

/// For the quiet update-status: the same notes from one GET.
pub fn quiet_notes(paths: &Paths) -> Vec<String> {
    let svc = Service::from_env(paths.clone(), "auto");
    let state = service::installed(paths, &svc.backend)
        .as_ref()
        .and_then(read_state);
    notes_of(state.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(args: Option<Vec<String>>) -> AgentSeen {
        AgentSeen {
            installed: args.map(|args| Installed {
                args,
                running: true,
            }),
            state: None,
            program: Some("8:1".into()),
        }
    }

    fn paths() -> Paths {
        Paths::new("/r")
    }

    fn running_unit(agent: Option<AgentSeen>) -> Observed {
        let mut o = crate::charm::plan_tests::fresh(false);
        o.active = true;
        o.client_address = "127.86.0.1".into();
        o.agent = agent;
        o
    }

    #[test]
    fn the_agent_follows_the_options() {
        let empty = Plan::default();
        // Not observed (a dry run, the plan tests): never a step.
        assert_eq!(plan(&running_unit(None), &paths(), &empty), None);
        // Not running: started with the options' command line.
        let o = running_unit(Some(seen(None)));
        let want = o
            .config
            .as_ref()
            .unwrap()
            .agent
            .args(&o.unit, "127.86.0.1:9379");
        assert_eq!(
            plan(&o, &paths(), &empty),
            Some(Step::Agent(AgentStep::Ensure(want.clone())))
        );
        // Running as wanted: nothing; with other arguments: replaced.
        assert_eq!(
            plan(
                &running_unit(Some(seen(Some(want.clone())))),
                &paths(),
                &empty
            ),
            None
        );
        let old = vec!["agent".to_string(), "--listen".into(), "127.0.0.1:1".into()];
        assert!(matches!(
            plan(
                &running_unit(Some(seen(Some(old.clone())))),
                &paths(),
                &empty
            ),
            Some(Step::Agent(AgentStep::Ensure(_)))
        ));
        // Running as wanted on a binary that is no longer the charm's (a
        // refresh replaced it), or one too old to say: restarted on it.
        for exe in ["8:0", ""] {
            let mut a = seen(Some(want.clone()));
            a.state = Some(Ok(AgentState {
                exe: exe.into(),
                ..Default::default()
            }));
            assert_eq!(
                plan(&running_unit(Some(a.clone())), &paths(), &empty),
                Some(Step::Agent(AgentStep::Replace(want.clone()))),
                "{exe:?}"
            );
            a.state = Some(Ok(AgentState {
                exe: "8:1".into(),
                ..Default::default()
            }));
            assert_eq!(plan(&running_unit(Some(a)), &paths(), &empty), None);
        }
        // Turned off: stopped.
        let mut off = running_unit(Some(seen(Some(old.clone()))));
        off.config.as_mut().unwrap().agent.enabled = false;
        assert_eq!(
            plan(&off, &paths(), &empty),
            Some(Step::Agent(AgentStep::Stop))
        );
        // No etcd running and none starting: not started yet.
        let mut idle = running_unit(Some(seen(None)));
        idle.active = false;
        assert_eq!(plan(&idle, &paths(), &empty), None);
        let starting = Plan {
            steps: vec![Step::StartEtcd],
            ..Default::default()
        };
        assert!(plan(&idle, &paths(), &starting).is_some());
        // Stop and remove hooks.
        let mut stop = running_unit(Some(seen(Some(old.clone()))));
        stop.event = Event::Stop;
        assert_eq!(
            plan(&stop, &paths(), &empty),
            Some(Step::Agent(AgentStep::Stop))
        );
        stop.event = Event::Remove;
        assert_eq!(
            plan(&stop, &paths(), &empty),
            Some(Step::Agent(AgentStep::Remove))
        );
    }

    #[test]
    fn the_metrics_listener_only_while_prometheus_is_related() {
        use crate::agent::options::arg_value;
        let wanted = |o: &Observed| match plan(o, &paths(), &Plan::default()) {
            Some(Step::Agent(AgentStep::Ensure(a))) => a,
            other => panic!("{other:?}"),
        };
        let mut o = running_unit(Some(seen(None)));
        o.monitoring.known = true;
        // No prometheus relation: no listener.
        assert_eq!(MetricsListener::of_args(&wanted(&o)), None);
        // Related, TLS: https on the ingress address with the common dir.
        o.monitoring.prometheus = vec![Default::default()];
        o.tls = Some(crate::etcd::ClientTls {
            ca_pem: "ca".into(),
            cert_pem: "c".into(),
            key_pem: "k".into(),
        });
        let a = wanted(&o);
        assert_eq!(arg_value(&a, "--metrics-listen"), Some("127.86.0.1:9380"));
        assert_eq!(
            arg_value(&a, "--metrics-tls"),
            Some(paths().common_dir().to_str().unwrap())
        );
        // update-status reads no relation: the running agent keeps it.
        let mut quiet = running_unit(Some(seen(Some(a.clone()))));
        quiet.tls = o.tls.clone();
        assert_eq!(plan(&quiet, &paths(), &Plan::default()), None);
        // Without TLS: none, unless the operator allows plain listeners.
        o.tls = None;
        o.config.as_mut().unwrap().allow_insecure_listeners = false;
        assert_eq!(MetricsListener::of_args(&wanted(&o)), None);
        o.config.as_mut().unwrap().allow_insecure_listeners = true;
        let a = wanted(&o);
        assert_eq!(arg_value(&a, "--metrics-listen"), Some("127.86.0.1:9380"));
        assert_eq!(arg_value(&a, "--metrics-tls"), None);
        // agent_metrics_port=0: off.
        o.config.as_mut().unwrap().agent.metrics_port = 0;
        assert_eq!(MetricsListener::of_args(&wanted(&o)), None);
    }

    #[test]
    fn problems_become_notes() {
        assert!(notes_of(None).is_empty());
        let s = AgentState {
            problems: vec!["scheduled snapshot failed: disk full".into()],
            ..Default::default()
        };
        assert_eq!(
            notes_of(Some(&Ok(s))),
            ["maintenance agent: scheduled snapshot failed: disk full"]
        );
        assert_eq!(notes_of(Some(&Err("no answer".into()))), ["no answer"]);
    }

    #[test]
    fn an_agent_turned_off_leaves_no_note() {
        let mut a = seen(Some(vec!["agent".into()]));
        a.state = Some(Ok(AgentState {
            problems: vec!["scheduled snapshots paused: 4 kept".into()],
            ..Default::default()
        }));
        let mut o = running_unit(Some(a));
        assert_eq!(notes(&o).len(), 1);
        o.config.as_mut().unwrap().agent.enabled = false;
        assert!(notes(&o).is_empty());
    }
}
