//! What a `juju refresh` from one charm to another keeps and drops, by
//! Juju's own rules (interfaces.md §1): pure functions over two charms'
//! metadata.yaml and config.yaml. The dry run adds the live model (which
//! endpoints have relations, which storage is attached, the stored option
//! values); tests/refresh_compat.rs holds this charm against the Python one.

use serde_json::Value;
use std::collections::BTreeMap;

/// This charm's own declarations, as packed.
pub const METADATA: &str = include_str!("../../packaging/metadata.yaml");
pub const CONFIG: &str = include_str!("../../packaging/config.yaml");

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// provides, requires or peers.
    pub role: String,
    pub interface: String,
    /// global (Juju's default) or container.
    pub scope: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Storage {
    /// block or filesystem.
    pub kind: String,
    pub location: Option<String>,
    /// The most instances allowed; None is unbounded.
    pub max: Option<u64>,
    pub minimum_size: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub kind: String,
    pub filename: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OptionSpec {
    /// string, int, float or boolean.
    pub kind: String,
    pub default: Option<Value>,
}

/// One charm's declarations: what a refresh compares.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CharmDecl {
    pub name: String,
    pub endpoints: BTreeMap<String, Endpoint>,
    pub storage: BTreeMap<String, Storage>,
    pub resources: BTreeMap<String, Resource>,
    pub options: BTreeMap<String, OptionSpec>,
}

fn yaml(text: &str, what: &str) -> Result<Value, String> {
    let v: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| format!("{what}: not YAML: {e}"))?;
    serde_json::to_value(v).map_err(|e| format!("{what}: {e}"))
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// `multiple: range:` as Juju reads it: `N`, `N-M`, `N-` (unbounded).
fn range_max(range: &str) -> Result<Option<u64>, String> {
    let bad = || format!("storage range {range:?} is not N, N-M or N-");
    let hi = match range.split_once('-') {
        None => range,
        Some((_, "")) => return Ok(None),
        Some((_, hi)) => hi,
    };
    hi.trim().parse().map(Some).map_err(|_| bad())
}

impl CharmDecl {
    /// From a charm's metadata.yaml and config.yaml texts (config may be
    /// absent: a charm with no options).
    pub fn parse(metadata: &str, config: Option<&str>) -> Result<CharmDecl, String> {
        let m = yaml(metadata, "metadata.yaml")?;
        let mut d = CharmDecl {
            name: str_of(&m, "name").unwrap_or_default(),
            ..Default::default()
        };
        for role in ["provides", "requires", "peers"] {
            let Some(eps) = m.get(role).and_then(Value::as_object) else {
                continue;
            };
            for (name, e) in eps {
                // `db: etcd` is short for `db: {interface: etcd}`.
                let interface = match e {
                    Value::String(s) => s.clone(),
                    _ => str_of(e, "interface").ok_or_else(|| {
                        format!("metadata.yaml: endpoint {name} has no interface")
                    })?,
                };
                let scope = str_of(e, "scope").unwrap_or_else(|| "global".into());
                d.endpoints.insert(
                    name.clone(),
                    Endpoint {
                        role: role.into(),
                        interface,
                        scope,
                    },
                );
            }
        }
        if let Some(st) = m.get("storage").and_then(Value::as_object) {
            for (name, s) in st {
                let max = match s.get("multiple").and_then(|m| m.get("range")) {
                    None => Some(1),
                    Some(Value::Number(n)) => n.as_u64(),
                    Some(r) => range_max(r.as_str().unwrap_or_default())?,
                };
                d.storage.insert(
                    name.clone(),
                    Storage {
                        kind: str_of(s, "type").unwrap_or_default(),
                        location: str_of(s, "location"),
                        max,
                        minimum_size: str_of(s, "minimum-size"),
                    },
                );
            }
        }
        if let Some(rs) = m.get("resources").and_then(Value::as_object) {
            for (name, r) in rs {
                d.resources.insert(
                    name.clone(),
                    Resource {
                        kind: str_of(r, "type").unwrap_or_else(|| "file".into()),
                        filename: str_of(r, "filename"),
                    },
                );
            }
        }
        if let Some(text) = config {
            let c = yaml(text, "config.yaml")?;
            if let Some(opts) = c.get("options").and_then(Value::as_object) {
                for (name, o) in opts {
                    d.options.insert(
                        name.clone(),
                        OptionSpec {
                            kind: str_of(o, "type").unwrap_or_else(|| "string".into()),
                            default: o.get("default").cloned().filter(|v| !v.is_null()),
                        },
                    );
                }
            }
        }
        Ok(d)
    }

    /// This binary's own packaging/.
    pub fn ours() -> CharmDecl {
        CharmDecl::parse(METADATA, Some(CONFIG)).expect("packaging/ YAML parses (unit-tested)")
    }
}

/// What becomes of one item across the refresh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Kept,
    /// Only in the new charm.
    New,
    /// Only in the old charm.
    Dropped,
    /// In both, declared differently: what differs.
    Changed(Vec<String>),
}

impl Change {
    pub fn as_str(&self) -> &'static str {
        match self {
            Change::Kept => "kept",
            Change::New => "new",
            Change::Dropped => "dropped",
            Change::Changed(_) => "changed",
        }
    }
}

/// Old → new, by name, each item's fate (sorted by name).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Comparison {
    pub endpoints: Vec<(String, Change)>,
    pub storage: Vec<(String, Change)>,
    pub resources: Vec<(String, Change)>,
    pub options: Vec<(String, Change)>,
}

/// A named field and how to show it.
type Field<'a, T> = (&'a str, fn(&T) -> String);

fn diffs<T>(old: &T, new: &T, fields: &[Field<'_, T>]) -> Vec<String> {
    fields
        .iter()
        .filter_map(|(what, get)| {
            let (a, b) = (get(old), get(new));
            (a != b).then(|| format!("{what} {a} → {b}"))
        })
        .collect()
}

fn compare_maps<T>(
    old: &BTreeMap<String, T>,
    new: &BTreeMap<String, T>,
    differ: impl Fn(&T, &T) -> Vec<String>,
) -> Vec<(String, Change)> {
    let mut names: Vec<&String> = old.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .map(|n| {
            let change = match (old.get(n), new.get(n)) {
                (Some(a), Some(b)) => match differ(a, b) {
                    d if d.is_empty() => Change::Kept,
                    d => Change::Changed(d),
                },
                (Some(_), None) => Change::Dropped,
                _ => Change::New,
            };
            (n.clone(), change)
        })
        .collect()
}

fn show(v: &Option<Value>) -> String {
    match v {
        None => "(none)".into(),
        Some(v) => v.to_string(),
    }
}

fn max_text(m: &Option<u64>) -> String {
    m.map_or("unbounded".into(), |n| n.to_string())
}

pub fn compare(old: &CharmDecl, new: &CharmDecl) -> Comparison {
    Comparison {
        endpoints: compare_maps(&old.endpoints, &new.endpoints, |a, b| {
            diffs(
                a,
                b,
                &[
                    ("role", |e: &Endpoint| e.role.clone()),
                    ("interface", |e: &Endpoint| e.interface.clone()),
                    ("scope", |e: &Endpoint| e.scope.clone()),
                ],
            )
        }),
        storage: compare_maps(&old.storage, &new.storage, |a, b| {
            diffs(
                a,
                b,
                &[
                    ("type", |s: &Storage| s.kind.clone()),
                    ("location", |s: &Storage| {
                        s.location.clone().unwrap_or_else(|| "(none)".into())
                    }),
                    ("maximum count", |s: &Storage| max_text(&s.max)),
                    ("minimum size", |s: &Storage| {
                        s.minimum_size.clone().unwrap_or_else(|| "(none)".into())
                    }),
                ],
            )
        }),
        resources: compare_maps(&old.resources, &new.resources, |a, b| {
            diffs(
                a,
                b,
                &[
                    ("type", |r: &Resource| r.kind.clone()),
                    ("filename", |r: &Resource| {
                        r.filename.clone().unwrap_or_else(|| "(none)".into())
                    }),
                ],
            )
        }),
        options: compare_maps(&old.options, &new.options, |a, b| {
            diffs(
                a,
                b,
                &[
                    ("type", |o: &OptionSpec| o.kind.clone()),
                    ("default", |o: &OptionSpec| show(&o.default)),
                ],
            )
        }),
    }
}

/// Whether Juju would keep a stored value under an option of this type.
pub fn fits(kind: &str, v: &Value) -> bool {
    match kind {
        "string" => v.is_string(),
        "int" => v.as_i64().is_some(),
        "float" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => true,
    }
}

/// Refusals of `juju refresh` that follow from the declarations alone, with
/// the live facts: `related(endpoint)` lists an endpoint's relation ids,
/// `attached(storage)` counts its instances.
pub fn refusals(
    cmp: &Comparison,
    old: &CharmDecl,
    new: &CharmDecl,
    related: impl Fn(&str) -> Vec<String>,
    attached: impl Fn(&str) -> usize,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, change) in &cmp.endpoints {
        let peer = old.endpoints.get(name).is_some_and(|e| e.role == "peers");
        let breaks = matches!(change, Change::Dropped | Change::Changed(_));
        if breaks && !peer {
            for id in related(name) {
                out.push(format!("would break relation {id} on endpoint {name}"));
            }
        }
    }
    for (name, change) in &cmp.storage {
        let n = attached(name);
        match change {
            Change::Dropped if n > 0 => out.push(format!("in-use storage {name:?} removed")),
            Change::Changed(_) => {
                let (a, b) = (&old.storage[name], &new.storage[name]);
                if a.kind != b.kind {
                    out.push(format!(
                        "storage {name:?}: type {} → {} is refused",
                        a.kind, b.kind
                    ));
                }
                if a.location != b.location {
                    out.push(format!("storage {name:?}: a location change is refused"));
                }
                if b.max.is_some() && (a.max.is_none() || b.max < a.max) {
                    out.push(format!(
                        "storage {name:?}: maximum count {} → {} is refused",
                        max_text(&a.max),
                        max_text(&b.max)
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// Options whose stored value a refresh drops: removed from the charm, or
/// no longer of a type that holds it. (name, stored value, why).
pub fn dropped_values(
    new: &CharmDecl,
    stored: &serde_json::Map<String, Value>,
) -> Vec<(String, Value, String)> {
    stored
        .iter()
        .filter_map(|(k, v)| match new.options.get(k) {
            None => Some((k.clone(), v.clone(), "the option is removed".into())),
            Some(o) if !fits(&o.kind, v) => Some((
                k.clone(),
                v.clone(),
                format!(
                    "the value is not a {}; it falls back to the default",
                    o.kind
                ),
            )),
            Some(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const OLD: &str = "name: etcd\npeers:\n  cluster:\n    interface: etcd\nprovides:\n  db:\n    interface: etcd\n  nrpe-external-master:\n    interface: nrpe-external-master\n    scope: container\nrequires:\n  certificates: tls-certificates\nstorage:\n  data:\n    type: block\n    multiple:\n      range: 0-1\n    minimum-size: 1G\nresources:\n  snapshot:\n    type: file\n    filename: snapshot.tar.gz\n";
    const OLD_CONFIG: &str = "options:\n  port:\n    type: int\n    default: 2379\n  snapshot_count:\n    type: string\n    default: auto\n  gone:\n    type: string\n    default: x\n";

    fn old() -> CharmDecl {
        CharmDecl::parse(OLD, Some(OLD_CONFIG)).unwrap()
    }

    #[test]
    fn parses_the_shapes_juju_accepts() {
        let d = old();
        assert_eq!(d.name, "etcd");
        assert_eq!(d.endpoints["certificates"].interface, "tls-certificates");
        assert_eq!(d.endpoints["certificates"].role, "requires");
        assert_eq!(d.endpoints["db"].scope, "global");
        assert_eq!(d.endpoints["nrpe-external-master"].scope, "container");
        assert_eq!(d.storage["data"].max, Some(1));
        assert_eq!(d.options["port"].default, Some(json!(2379)));
        assert_eq!(range_max("0-").unwrap(), None);
        assert_eq!(range_max("2").unwrap(), Some(2));
        assert!(range_max("x-y").is_err());
    }

    #[test]
    fn our_packaging_parses_and_keeps_the_python_charms_endpoints() {
        let ours = CharmDecl::ours();
        assert_eq!(ours.name, "etcd");
        let cmp = compare(&old(), &ours);
        let get =
            |v: &[(String, Change)], n: &str| v.iter().find(|(k, _)| k == n).unwrap().1.clone();
        for ep in ["cluster", "db", "nrpe-external-master", "certificates"] {
            assert_eq!(get(&cmp.endpoints, ep), Change::Kept, "{ep}");
        }
        assert_eq!(get(&cmp.storage, "data"), Change::Kept);
        assert_eq!(get(&cmp.resources, "snapshot"), Change::Kept);
        assert_eq!(get(&cmp.resources, "core"), Change::New);
        assert_eq!(get(&cmp.options, "gone"), Change::Dropped);
        assert_eq!(get(&cmp.options, "tls_cipher_suites"), Change::New);
    }

    #[test]
    fn a_dropped_or_retyped_endpoint_with_relations_is_refused() {
        let mut new = old();
        new.endpoints.remove("db");
        new.endpoints.get_mut("certificates").unwrap().role = "provides".into();
        new.endpoints.remove("cluster"); // a peer: dropped with its data, not refused
        let cmp = compare(&old(), &new);
        assert_eq!(cmp.endpoints[0].0, "certificates");
        assert_eq!(
            cmp.endpoints[0].1,
            Change::Changed(vec!["role requires → provides".into()])
        );
        let related = |ep: &str| match ep {
            "db" => vec!["db:3".to_string()],
            "certificates" => vec!["certificates:5".to_string()],
            "cluster" => vec!["cluster:0".to_string()],
            _ => vec![],
        };
        let r = refusals(&cmp, &old(), &new, related, |_| 0);
        assert_eq!(
            r,
            [
                "would break relation certificates:5 on endpoint certificates",
                "would break relation db:3 on endpoint db"
            ]
        );
        // Without live relations nothing is refused.
        assert!(refusals(&cmp, &old(), &new, |_| vec![], |_| 0).is_empty());
    }

    #[test]
    fn storage_refusals() {
        let mut new = old();
        new.storage.remove("data");
        let cmp = compare(&old(), &new);
        assert_eq!(cmp.storage, [("data".to_string(), Change::Dropped)]);
        assert!(refusals(&cmp, &old(), &new, |_| vec![], |_| 0).is_empty());
        assert_eq!(
            refusals(&cmp, &old(), &new, |_| vec![], |_| 1),
            ["in-use storage \"data\" removed"]
        );
        let mut new = old();
        let s = new.storage.get_mut("data").unwrap();
        s.kind = "filesystem".into();
        s.location = Some("/srv".into());
        let cmp = compare(&old(), &new);
        let r = refusals(&cmp, &old(), &new, |_| vec![], |_| 0);
        assert_eq!(r.len(), 2, "{r:?}");
        // A higher maximum is fine; a lower one is not.
        let mut new = old();
        new.storage.get_mut("data").unwrap().max = None;
        let cmp = compare(&old(), &new);
        assert!(refusals(&cmp, &old(), &new, |_| vec![], |_| 0).is_empty());
        let mut lower = new.clone();
        lower.storage.get_mut("data").unwrap().max = Some(1);
        let cmp = compare(&new, &lower);
        assert_eq!(refusals(&cmp, &new, &lower, |_| vec![], |_| 0).len(), 1);
    }

    #[test]
    fn stored_values_that_no_longer_fit_are_dropped() {
        let new = CharmDecl::parse(
            "name: etcd\n",
            Some("options:\n  port:\n    type: int\n  snapshot_count:\n    type: int\n"),
        )
        .unwrap();
        let stored = json!({"port": 4001, "snapshot_count": "auto", "gone": "y"});
        let d = dropped_values(&new, stored.as_object().unwrap());
        let names: Vec<&str> = d.iter().map(|(n, _, _)| n.as_str()).collect();
        assert_eq!(names, ["gone", "snapshot_count"]);
        assert_eq!(d[1].1, json!("auto"));
        assert!(fits("float", &json!(1)) && !fits("int", &json!(1.5)));
    }
}
