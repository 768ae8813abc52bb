//! What `juju refresh` refuses, and how it switches peer relations
//! (shared/interfaces.md §1; juju/juju `state/application.go` SetCharm,
//! `checkStorageUpgrade`, `checkRelationsOps`, and the CLI's local-charm
//! refresher). Checks run in Juju's order: base, charm name and resources
//! on the client, then storage and relations in the controller. A refusal
//! is the reason alone; the caller prefixes
//! `cannot upgrade application "<app>" to charm "<url>"`.

use crate::sim::model::{CharmMeta, Model, Relation};
use std::collections::BTreeSet;

/// Why Juju would refuse to move `app` to `new`, or None. `provided` names
/// the resources passed with `--resource`.
pub fn check(
    m: &Model,
    app: &str,
    new: &CharmMeta,
    provided: &BTreeSet<String>,
) -> Result<(), String> {
    let a = m.applications.get(app).ok_or("no such application")?;
    let old = &a.charm;
    // A charm declaring no bases is an old-style local charm: Juju accepts
    // it on whatever base the machine runs.
    if !new.bases.is_empty() {
        for unit in m.units_of(app) {
            let base = &m.units[&unit].base;
            if !new.bases.contains(base) {
                return Err(format!(
                    "base {base:?} not supported by charm, the charm supported bases are: {}",
                    new.bases.join(", ")
                ));
            }
        }
    }
    if new.name != old.name {
        return Err(format!("cannot refresh {:?} to {:?}", old.name, new.name));
    }
    for name in provided {
        if !new.resources.contains_key(name) {
            return Err(format!("charm has no resource {name:?}"));
        }
    }
    for name in new.resources.keys() {
        let known = old.resources.contains_key(name) || a.resources.contains_key(name);
        if !known && !provided.contains(name) {
            return Err(format!(
                "new resource {name:?} was missing, please provide it via --resource"
            ));
        }
    }
    check_storage(m, app, old, new)?;
    for r in m.relations.values().filter(|r| !r.is_peer()) {
        let Some(ep) = r.endpoint_of(app) else {
            continue;
        };
        let implemented = new.endpoint_specs.get(&ep.name).is_some_and(|spec| {
            spec.role == ep.role
                && spec.interface == ep.interface
                // A global relation cannot move to a container-scoped
                // endpoint; a container one takes either.
                && (ep.scope == "container" || spec.scope != "container")
        });
        if !implemented {
            return Err(format!("would break relation {:?}", relation_key(r)));
        }
    }
    Ok(())
}

/// Juju's `checkStorageUpgrade`, with its wording.
fn check_storage(m: &Model, app: &str, old: &CharmMeta, new: &CharmMeta) -> Result<(), String> {
    for (name, spec) in &old.storage_specs {
        if new.storage_specs.contains_key(name) {
            continue;
        }
        if spec.count_min > 0 {
            return Err(format!("required storage {name:?} removed"));
        }
        if attached(m, app, old, name) > 0 {
            return Err(format!("in-use storage {name:?} removed"));
        }
    }
    // -1 is unbounded.
    let less = |a: i64, b: i64| a != -1 && (b == -1 || a < b);
    for (name, n) in &new.storage_specs {
        let Some(o) = old.storage_specs.get(name) else {
            continue;
        };
        if n.kind != o.kind {
            return Err(format!(
                "existing storage {name:?} type changed from {:?} to {:?}",
                o.kind, n.kind
            ));
        }
        if n.shared != o.shared {
            return Err(format!(
                "existing storage {name:?} shared changed from {} to {}",
                o.shared, n.shared
            ));
        }
        if n.read_only != o.read_only {
            return Err(format!(
                "existing storage {name:?} read-only changed from {} to {}",
                o.read_only, n.read_only
            ));
        }
        if n.location != o.location {
            return Err(format!(
                "existing storage {name:?} location changed from {:?} to {:?}",
                o.location, n.location
            ));
        }
        if less(n.count_max, o.count_max) {
            let old_max = match o.count_max {
                -1 => "<unbounded>".to_string(),
                max => max.to_string(),
            };
            return Err(format!(
                "existing storage {name:?} range contracted: max decreased from {old_max} to {}",
                n.count_max
            ));
        }
        if !o.location.is_empty() && o.count_max == 1 && n.count_max != 1 {
            return Err(format!(
                "existing storage {name:?} with location changed from single to multiple"
            ));
        }
    }
    Ok(())
}

/// Storage instances of `name` attached to the application's units. The
/// simulator gives each unit one instance of every store its charm declares
/// (deploy::add_units); should it ever track instances, count those here.
fn attached(m: &Model, app: &str, old: &CharmMeta, name: &str) -> usize {
    if !old.storage.iter().any(|s| s == name) {
        return 0;
    }
    m.units_of(app).len()
}

/// Juju's relation key: endpoints `app:name`, requirer before provider
/// before peer, then by name, joined with a space
/// (`kubernetes-control-plane:etcd etcd:db`).
pub fn relation_key(r: &Relation) -> String {
    let order = |role: &str| match role {
        "requirer" => 0,
        "provider" => 1,
        _ => 2,
    };
    let mut eps: Vec<(u8, String)> = r
        .endpoints
        .iter()
        .map(|e| (order(&e.role), format!("{}:{}", e.app, e.name)))
        .collect();
    eps.sort();
    eps.into_iter()
        .map(|(_, s)| s)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The peer relations a refresh drops: those whose endpoint name the new
/// charm no longer has (Juju removes them with their data; an endpoint
/// that keeps its name keeps its relation).
pub fn stale_peers(m: &Model, app: &str, new: &CharmMeta) -> Vec<u32> {
    m.relations
        .values()
        .filter(|r| r.is_peer())
        .filter(|r| {
            r.endpoint_of(app)
                .is_some_and(|e| !new.peers.contains_key(&e.name))
        })
        .map(|r| r.id)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::Endpoint;

    #[test]
    fn key_puts_the_requirer_first() {
        let ep = |app: &str, name: &str, role: &str| Endpoint {
            app: app.into(),
            name: name.into(),
            interface: "etcd".into(),
            role: role.into(),
            scope: "global".into(),
        };
        let r = Relation {
            endpoints: vec![
                ep("etcd", "db", "provider"),
                ep("kubernetes-control-plane", "etcd", "requirer"),
            ],
            ..Default::default()
        };
        assert_eq!(relation_key(&r), "kubernetes-control-plane:etcd etcd:db");
        let peer = Relation {
            endpoints: vec![ep("etcd", "cluster", "peer")],
            ..Default::default()
        };
        assert_eq!(relation_key(&peer), "etcd:cluster");
    }
}
