//! The environment Juju gives a hook, an action or `juju exec`, and which
//! program it runs.

use crate::sim::model::{app_of, expand, Event, Model};
use crate::sim::store::ModelDir;
use std::path::{Path, PathBuf};

/// What runs in a context.
#[derive(Debug, Clone)]
pub enum Work {
    Hook(Event),
    Action {
        name: String,
        id: String,
    },
    /// `exec UNIT -- CMD…`: the tools and context, but no hook.
    Exec,
}

impl Work {
    /// The name used in context ids and logs.
    pub fn label(&self) -> &str {
        match self {
            Work::Hook(ev) => &ev.name,
            Work::Action { name, .. } => name,
            Work::Exec => "exec",
        }
    }

    /// `hooks/<name>` or `actions/<name>` (none for exec).
    pub fn dispatch_path(&self) -> Option<String> {
        match self {
            Work::Hook(ev) => Some(format!("hooks/{}", ev.name)),
            Work::Action { name, .. } => Some(format!("actions/{name}")),
            Work::Exec => None,
        }
    }
}

/// Every variable the hook gets (on top of the caller's environment, from
/// which JUJU_* and JUJUSIM_* are removed).
pub fn build(
    model: &Model,
    dir: &ModelDir,
    unit: &str,
    context: &str,
    work: &Work,
) -> Vec<(String, String)> {
    let u = &model.units[unit];
    let app = &model.applications[app_of(unit)];
    let charm_dir = u.charm_dir();
    let path = match std::env::var("PATH") {
        Ok(p) if !p.is_empty() => format!("{}:{p}", dir.tools_dir().display()),
        _ => format!("{}:/usr/local/bin:/usr/bin:/bin", dir.tools_dir().display()),
    };
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), path),
        ("JUJU_CHARM_DIR".into(), charm_dir.display().to_string()),
        ("CHARM_DIR".into(), charm_dir.display().to_string()),
        ("JUJU_UNIT_NAME".into(), unit.into()),
        ("JUJU_MODEL_NAME".into(), model.name.clone()),
        ("JUJU_MODEL_UUID".into(), model.uuid.clone()),
        ("JUJU_MACHINE_ID".into(), u.machine.to_string()),
        ("JUJU_VERSION".into(), model.juju_version.clone()),
        ("JUJU_CONTEXT_ID".into(), context.into()),
        (
            "JUJU_AGENT_SOCKET_ADDRESS".into(),
            u.dir.join("agent.socket").display().to_string(),
        ),
        ("JUJUSIM_MODEL".into(), dir.root.display().to_string()),
        ("JUJUSIM_UNIT_ROOT".into(), u.root().display().to_string()),
    ];
    if let Some(p) = work.dispatch_path() {
        env.push(("JUJU_DISPATCH_PATH".into(), p));
    }
    match work {
        Work::Hook(ev) => {
            env.push(("JUJU_HOOK_NAME".into(), ev.name.clone()));
            if let Some(r) = ev.relation.and_then(|id| model.relations.get(&id)) {
                let app_name = app_of(unit);
                if let Some(ep) = r.endpoint_of(app_name) {
                    env.push(("JUJU_RELATION".into(), ep.name.clone()));
                    env.push(("JUJU_RELATION_ID".into(), format!("{}:{}", ep.name, r.id)));
                }
                env.push((
                    "JUJU_REMOTE_UNIT".into(),
                    ev.remote_unit.clone().unwrap_or_default(),
                ));
                env.push((
                    "JUJU_REMOTE_APP".into(),
                    ev.remote_app.clone().unwrap_or_default(),
                ));
                if let Some(d) = &ev.departing_unit {
                    env.push(("JUJU_DEPARTING_UNIT".into(), d.clone()));
                }
            }
            if let Some(s) = &ev.storage {
                env.push(("JUJU_STORAGE_ID".into(), storage_id(s, u.machine)));
                // A block storage's location is its device.
                let location = u
                    .storage
                    .iter()
                    .find(|a| &a.name == s)
                    .map(|a| a.location.clone())
                    .unwrap_or_else(|| storage_dir(&u.dir, s));
                env.push((
                    "JUJU_STORAGE_LOCATION".into(),
                    location.display().to_string(),
                ));
            }
        }
        Work::Action { name, id } => {
            env.push(("JUJU_ACTION_NAME".into(), name.clone()));
            env.push(("JUJU_ACTION_UUID".into(), id.clone()));
        }
        Work::Exec => {}
    }
    for (k, v) in &app.env {
        env.push((k.clone(), expand(v, unit, &u.root())));
    }
    if u.machine_mode == crate::sim::machine::SYSTEMD_MODE {
        env.retain(|(k, _)| k != "PATH" && !app.systemd_env.contains_key(k));
        env.push((
            "PATH".into(),
            crate::sim::machine::hook_path(&dir.tools_dir()),
        ));
        for (k, v) in &app.systemd_env {
            env.push((k.clone(), expand(v, unit, &u.root())));
        }
    }
    env
}

/// A storage instance's id: one instance per storage name per machine, so
/// the machine number keeps ids unique in the model.
pub fn storage_id(storage: &str, machine: u32) -> String {
    format!("{storage}/{machine}")
}

/// Where a unit's storage instance is mounted.
pub fn storage_dir(unit_dir: &Path, storage: &str) -> PathBuf {
    unit_dir.join("storage").join(storage)
}

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `<charm>/dispatch` when executable, else `hooks/<name>` or
/// `actions/<name>`; None when the charm has neither (a missing hook is
/// skipped, as in Juju).
pub fn program(charm_dir: &Path, work: &Work) -> Option<PathBuf> {
    let dispatch = charm_dir.join("dispatch");
    if executable(&dispatch) {
        return Some(dispatch);
    }
    let p = charm_dir.join(work.dispatch_path()?);
    executable(&p).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders() {
        assert_eq!(
            expand("{unit_root}/x-{unit}", "a/1", Path::new("/m/u")),
            "/m/u/x-a/1"
        );
    }
}
