//! What a hook staged lands here, as one transaction, when it exits 0:
//! relation data (queueing `-relation-changed` on whoever sees it), ports
//! and the state store. On a failure the staged changes are simply dropped.

use crate::sim::events;
use crate::sim::model::{app_of, Databag, Model, Staged};

/// Applies `changes` to `bag` ("" deletes); true if anything changed.
pub fn apply_changes(bag: &mut Databag, changes: &Databag) -> bool {
    let before = bag.clone();
    for (k, v) in changes {
        if v.is_empty() {
            bag.remove(k);
        } else {
            bag.insert(k.clone(), v.clone());
        }
    }
    *bag != before
}

/// `bag` as the writer sees it inside its own hook: committed + staged.
pub fn overlay(bag: Option<&Databag>, staged: Option<&Databag>) -> Databag {
    let mut out = bag.cloned().unwrap_or_default();
    if let Some(s) = staged {
        apply_changes(&mut out, s);
    }
    out
}

pub fn commit(model: &mut Model, unit: &str, staged: &Staged) {
    let app = app_of(unit).to_string();
    for (rel, changes) in &staged.unit_bags {
        let Some(r) = model.relations.get_mut(rel) else {
            continue;
        };
        if apply_changes(r.unit_bags.entry(unit.to_string()).or_default(), changes) {
            events::unit_bag_changed(model, *rel, unit);
        }
    }
    for (rel, changes) in &staged.app_bags {
        let Some(r) = model.relations.get_mut(rel) else {
            continue;
        };
        if apply_changes(r.app_bags.entry(app.clone()).or_default(), changes) {
            events::app_bag_changed(model, *rel, &app, unit);
        }
    }
    let Some(u) = model.units.get_mut(unit) else {
        return;
    };
    for (open, port) in &staged.ports {
        if *open {
            u.ports.insert(port.clone());
        } else {
            u.ports.remove(port);
        }
    }
    apply_changes(&mut u.store, &staged.store);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_value_deletes() {
        let mut bag: Databag = [("a".to_string(), "1".to_string())].into();
        let changes: Databag = [
            ("a".to_string(), String::new()),
            ("b".to_string(), "2".to_string()),
        ]
        .into();
        assert!(apply_changes(&mut bag, &changes));
        assert_eq!(bag, [("b".to_string(), "2".to_string())].into());
        assert!(!apply_changes(&mut bag, &changes));
    }
}
