//! The dry run's view of the `juju refresh` itself: what the model keeps
//! and drops going from the charm the unit runs now (JUJU_CHARM_DIR, under
//! `juju exec`) to this binary's own metadata.yaml and config.yaml. The
//! comparison is compat.rs (pure); this adds the live facts the hook tools
//! give: relation ids per endpoint, attached storage, stored option values.

use super::compat::{self, Change, CharmDecl, Comparison};
use crate::hooktools::HookTools;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Everything the refresh section shows.
#[derive(Debug, Clone, Default)]
pub struct RefreshView {
    /// The old charm's dir; None when JUJU_CHARM_DIR is not set (by hand).
    pub old_dir: Option<PathBuf>,
    /// Why nothing was compared (no dir, unreadable metadata).
    pub unavailable: Option<String>,
    pub old: CharmDecl,
    pub new: CharmDecl,
    pub cmp: Comparison,
    /// Relation ids of each old endpoint (empty without hook tools).
    pub relations: BTreeMap<String, Vec<String>>,
    /// Instances attached of each old storage.
    pub attached: BTreeMap<String, usize>,
    /// Stored option values (config-get); None without hook tools.
    pub stored: Option<Map<String, Value>>,
    /// What the hook tools could not tell.
    pub unread: Vec<String>,
    /// The machine's base from its os-release (None: it does not say).
    pub machine_base: Option<String>,
    /// The bases this charm declares.
    pub bases: Vec<String>,
}

impl RefreshView {
    /// Refusals `juju refresh` would make.
    pub fn refusals(&self) -> Vec<String> {
        // Juju checks the base first, on the client, whatever the old charm.
        let base = super::bases::refusal(self.machine_base.as_deref(), &self.bases);
        if self.unavailable.is_some() {
            return base.into_iter().collect();
        }
        let mut r: Vec<String> = base.into_iter().collect();
        r.extend(compat::refusals(
            &self.cmp,
            &self.old,
            &self.new,
            |ep| self.relations.get(ep).cloned().unwrap_or_default(),
            |st| self.attached.get(st).copied().unwrap_or(0),
        ));
        r
    }

    /// Values set on the old charm that the refresh drops. Only values that
    /// differ from the old default count: an unset option stores nothing.
    pub fn dropped_values(&self) -> Vec<(String, Value, String)> {
        let Some(stored) = &self.stored else {
            return Vec::new();
        };
        let set: Map<String, Value> = stored
            .iter()
            .filter(|(k, v)| {
                self.old
                    .options
                    .get(*k)
                    .is_none_or(|o| o.default.as_ref() != Some(*v))
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        compat::dropped_values(&self.new, &set)
    }

    /// Resources the new charm declares that the application lacks.
    pub fn new_resources(&self) -> Vec<String> {
        named(&self.cmp.resources, |c| *c == Change::New)
    }
}

fn named(items: &[(String, Change)], f: impl Fn(&Change) -> bool) -> Vec<String> {
    items
        .iter()
        .filter(|(_, c)| f(c))
        .map(|(n, _)| n.clone())
        .collect()
}

fn read_decl(dir: &Path) -> Result<CharmDecl, String> {
    let meta = dir.join("metadata.yaml");
    let text = std::fs::read_to_string(&meta).map_err(|e| format!("{}: {e}", meta.display()))?;
    let config = std::fs::read_to_string(dir.join("config.yaml")).ok();
    CharmDecl::parse(&text, config.as_deref()).map_err(|e| format!("{}: {e}", dir.display()))
}

/// Reads the old charm from `old_dir`, the machine's base from
/// `<root>/etc/os-release` and, with hook tools, the live facts.
pub fn observe(old_dir: Option<PathBuf>, tools: Option<&HookTools>, root: &Path) -> RefreshView {
    let new = CharmDecl::ours();
    let mut v = RefreshView {
        old_dir: old_dir.clone(),
        new: new.clone(),
        machine_base: std::fs::read_to_string(root.join("etc/os-release"))
            .ok()
            .and_then(|t| super::bases::machine_base(&t)),
        bases: super::bases::ours(),
        ..Default::default()
    };
    let Some(dir) = old_dir else {
        v.unavailable = Some(
            "JUJU_CHARM_DIR is not set, so the charm this unit runs is unknown (run it under juju exec)"
                .into(),
        );
        return v;
    };
    match read_decl(&dir) {
        Ok(old) => v.old = old,
        Err(e) => {
            v.unavailable = Some(format!("the old charm's metadata: {e}"));
            return v;
        }
    }
    v.cmp = compat::compare(&v.old, &new);
    let Some(tools) = tools else {
        v.unread
            .push("relations, storage and stored values (no hook tools)".into());
        return v;
    };
    for ep in v.old.endpoints.keys() {
        match tools.relation_ids(ep) {
            Ok(ids) => {
                v.relations.insert(ep.clone(), ids);
            }
            Err(e) => v.unread.push(format!("relation-ids {ep}: {e}")),
        }
    }
    for st in v.old.storage.keys() {
        match tools.storage_list(st) {
            Ok(ids) => {
                v.attached.insert(st.clone(), ids.len());
            }
            Err(e) => v.unread.push(format!("storage-list {st}: {e}")),
        }
    }
    match tools.config_get() {
        Ok(m) => v.stored = Some(m),
        Err(e) => v.unread.push(format!("config-get: {e}")),
    }
    v
}

fn change_text(c: &Change) -> String {
    match c {
        Change::Kept => "kept".into(),
        Change::New => "new".into(),
        Change::Dropped => "DROPPED".into(),
        Change::Changed(d) => format!("CHANGED ({})", d.join(", ")),
    }
}

pub fn text(v: &RefreshView) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "\nRefresh (what juju refresh keeps and drops):");
    let _ = writeln!(
        s,
        "  machine base {}; this charm's bases: {}",
        v.machine_base
            .as_deref()
            .unwrap_or("unknown (no os-release)"),
        v.bases.join(", ")
    );
    if let Some(why) = &v.unavailable {
        let _ = writeln!(s, "  not compared: {why}");
        for r in v.refusals() {
            let _ = writeln!(s, "  juju refresh would refuse: {r}");
        }
        return s;
    }
    if let Some(d) = &v.old_dir {
        let _ = writeln!(
            s,
            "  from the charm at {} ({:?}) to this one ({:?})",
            d.display(),
            v.old.name,
            v.new.name
        );
    }
    for u in &v.unread {
        let _ = writeln!(s, "  not read: {u}");
    }
    for (name, c) in &v.cmp.endpoints {
        let Some(e) = v.old.endpoints.get(name).or(v.new.endpoints.get(name)) else {
            continue;
        };
        let rel = match v.relations.get(name) {
            Some(ids) if !ids.is_empty() => format!("; relations {}", ids.join(", ")),
            Some(_) => "; no relations".into(),
            None => String::new(),
        };
        let scope = if e.scope == "global" {
            String::new()
        } else {
            format!(", scope {}", e.scope)
        };
        let _ = writeln!(
            s,
            "  endpoint {name} ({} {}{scope}): {}{rel}",
            e.role,
            e.interface,
            change_text(c)
        );
    }
    for (name, c) in &v.cmp.storage {
        let attached = v
            .attached
            .get(name)
            .map(|n| format!("; {n} attached"))
            .unwrap_or_default();
        let _ = writeln!(s, "  storage {name}: {}{attached}", change_text(c));
    }
    for (name, c) in &v.cmp.resources {
        let pass = if *c == Change::New {
            format!(" — pass it: juju refresh ... --resource {name}=<file>")
        } else {
            String::new()
        };
        let _ = writeln!(s, "  resource {name}: {}{pass}", change_text(c));
    }
    let list = |f: &dyn Fn(&Change) -> bool| {
        let n = named(&v.cmp.options, f);
        if n.is_empty() {
            "(none)".to_string()
        } else {
            n.join(", ")
        }
    };
    let _ = writeln!(s, "  options kept: {}", list(&|c| *c == Change::Kept));
    let _ = writeln!(s, "  options new: {}", list(&|c| *c == Change::New));
    let _ = writeln!(s, "  options removed: {}", list(&|c| *c == Change::Dropped));
    for (name, c) in &v.cmp.options {
        if matches!(c, Change::Changed(_)) {
            let _ = writeln!(s, "  option {name}: {}", change_text(c));
        }
    }
    for (name, value, why) in v.dropped_values() {
        let _ = writeln!(
            s,
            "  option {name}: the stored value {value} is dropped ({why})"
        );
    }
    for (name, ids) in &v.relations {
        let peer_dropped = v.old.endpoints.get(name).is_some_and(|e| e.role == "peers")
            && matches!(
                v.cmp.endpoints.iter().find(|(n, _)| n == name),
                Some((_, Change::Dropped | Change::Changed(_)))
            );
        if peer_dropped && !ids.is_empty() {
            let _ = writeln!(
                s,
                "  Warning: the peer relation {} is dropped with its data (leadership and member records)",
                ids.join(", ")
            );
        }
    }
    for r in v.refusals() {
        let _ = writeln!(s, "  juju refresh would refuse: {r}");
    }
    s
}

pub fn to_json(v: &RefreshView) -> Value {
    if let Some(why) = &v.unavailable {
        return json!({"compared": false, "reason": why, "old_charm_dir": v.old_dir,
                      "machine_base": v.machine_base, "bases": v.bases,
                      "refusals": v.refusals()});
    }
    let diff = |c: &Change| match c {
        Change::Changed(d) => json!(d),
        _ => json!([]),
    };
    let endpoints: Vec<Value> = v
        .cmp
        .endpoints
        .iter()
        .map(|(name, c)| {
            let e = v.old.endpoints.get(name).or(v.new.endpoints.get(name));
            json!({
                "name": name,
                "change": c.as_str(),
                "differences": diff(c),
                "role": e.map(|e| e.role.clone()),
                "interface": e.map(|e| e.interface.clone()),
                "scope": e.map(|e| e.scope.clone()),
                "relations": v.relations.get(name),
            })
        })
        .collect();
    let storage: Vec<Value> = v
        .cmp
        .storage
        .iter()
        .map(|(name, c)| {
            json!({"name": name, "change": c.as_str(), "differences": diff(c),
                   "attached": v.attached.get(name)})
        })
        .collect();
    let resources: Vec<Value> = v
        .cmp
        .resources
        .iter()
        .map(|(name, c)| json!({"name": name, "change": c.as_str(), "differences": diff(c)}))
        .collect();
    let dropped: Vec<Value> = v
        .dropped_values()
        .into_iter()
        .map(|(name, value, why)| json!({"name": name, "stored": value, "why": why}))
        .collect();
    let changed: Vec<Value> = v
        .cmp
        .options
        .iter()
        .filter(|(_, c)| matches!(c, Change::Changed(_)))
        .map(|(name, c)| json!({"name": name, "differences": diff(c)}))
        .collect();
    json!({
        "compared": true,
        "machine_base": v.machine_base,
        "bases": v.bases,
        "old_charm_dir": v.old_dir,
        "old_charm": v.old.name,
        "new_charm": v.new.name,
        "unread": v.unread,
        "endpoints": endpoints,
        "storage": storage,
        "resources": resources,
        "resources_to_pass": v.new_resources(),
        "options": {
            "kept": named(&v.cmp.options, |c| *c == Change::Kept),
            "new": named(&v.cmp.options, |c| *c == Change::New),
            "removed": named(&v.cmp.options, |c| *c == Change::Dropped),
            "changed": changed,
            "dropped_values": dropped,
        },
        "refusals": v.refusals(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(old_meta: &str, old_config: &str) -> RefreshView {
        let old = CharmDecl::parse(old_meta, Some(old_config)).unwrap();
        let new = CharmDecl::ours();
        RefreshView {
            old_dir: Some("/old".into()),
            cmp: compat::compare(&old, &new),
            old,
            new,
            ..Default::default()
        }
    }

    const META: &str = "name: etcd\npeers:\n  cluster:\n    interface: etcd\nprovides:\n  db:\n    interface: etcd\n  website:\n    interface: http\n";
    const CONFIG: &str = "options:\n  port:\n    type: int\n    default: 2379\n  snapshot_count:\n    type: int\n    default: 0\n  legacy:\n    type: string\n    default: a\n  unset_legacy:\n    type: string\n    default: b\n";

    #[test]
    fn a_dropped_endpoint_with_a_relation_is_a_refusal_in_text_and_json() {
        let mut v = view(META, CONFIG);
        v.relations
            .insert("website".into(), vec!["website:7".into()]);
        v.relations.insert("db".into(), vec![]);
        let t = text(&v);
        assert!(
            t.contains("endpoint website (provides http): DROPPED; relations website:7"),
            "{t}"
        );
        assert!(
            t.contains("endpoint db (provides etcd): kept; no relations"),
            "{t}"
        );
        assert!(
            t.contains(
                "juju refresh would refuse: would break relation website:7 on endpoint website"
            ),
            "{t}"
        );
        assert!(t.contains("resource snapshot: new — pass it"), "{t}");
        let j = to_json(&v);
        assert_eq!(
            j["refusals"][0],
            "would break relation website:7 on endpoint website"
        );
        assert_eq!(j["resources_to_pass"], json!(["core", "etcd", "snapshot"]));
        // Without the relation: no refusal.
        v.relations.insert("website".into(), vec![]);
        assert!(v.refusals().is_empty());
    }

    #[test]
    fn stored_values_are_dropped_only_when_set_and_not_fitting() {
        let mut v = view(META, CONFIG);
        v.stored = Some(
            json!({"port": 4001, "snapshot_count": 5000, "legacy": "set", "unset_legacy": "b"})
                .as_object()
                .unwrap()
                .clone(),
        );
        let d = v.dropped_values();
        let names: Vec<&str> = d.iter().map(|(n, _, _)| n.as_str()).collect();
        // snapshot_count is a string here: 5000 (an int) does not fit.
        assert_eq!(names, ["legacy", "snapshot_count"], "{d:?}");
        let j = to_json(&v);
        assert_eq!(j["options"]["dropped_values"][0]["stored"], "set");
        assert_eq!(j["options"]["removed"], json!(["legacy", "unset_legacy"]));
        assert!(j["options"]["new"]
            .as_array()
            .unwrap()
            .contains(&json!("snapd_refresh")));
        assert!(j["options"]["kept"]
            .as_array()
            .unwrap()
            .contains(&json!("port")));
        let t = text(&v);
        assert!(
            t.contains(
                "option legacy: the stored value \"set\" is dropped (the option is removed)"
            ),
            "{t}"
        );
    }

    #[test]
    fn nothing_is_compared_without_the_old_charm() {
        let v = observe(None, None, Path::new("/nonexistent"));
        assert!(v.unavailable.is_some());
        assert!(text(&v).contains("not compared: JUJU_CHARM_DIR is not set"));
        assert_eq!(to_json(&v)["compared"], false);
        assert!(v.refusals().is_empty());
        let v = observe(
            Some("/nonexistent/charm".into()),
            None,
            Path::new("/nonexistent"),
        );
        assert!(v
            .unavailable
            .unwrap()
            .contains("/nonexistent/charm/metadata.yaml"));
    }
}
