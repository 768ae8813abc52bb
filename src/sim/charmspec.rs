//! The parts of a charm's metadata that decide whether Juju lets a refresh
//! through (shared/interfaces.md §1): endpoint roles and scopes, storage
//! specs, resources and the bases the charm runs on.

use crate::sim::error::{bail, Result};
use crate::sim::model::{EndpointSpec, ResourceSpec, StorageSpec};
use serde_yaml::Value as Yaml;
use std::collections::BTreeMap;

/// Every endpoint of `peers`, `provides` and `requires`, with its role.
pub fn endpoint_specs(metadata: &Yaml) -> BTreeMap<String, EndpointSpec> {
    let mut out = BTreeMap::new();
    for (section, role) in [
        ("peers", "peer"),
        ("provides", "provider"),
        ("requires", "requirer"),
    ] {
        let Some(map) = metadata.get(section).and_then(Yaml::as_mapping) else {
            continue;
        };
        for (k, v) in map {
            let Some(name) = k.as_str() else { continue };
            let (interface, scope) = match v {
                Yaml::String(s) => (s.clone(), "global".to_string()),
                other => (
                    other
                        .get("interface")
                        .and_then(Yaml::as_str)
                        .unwrap_or(name)
                        .to_string(),
                    other
                        .get("scope")
                        .and_then(Yaml::as_str)
                        .unwrap_or("global")
                        .to_string(),
                ),
            };
            out.insert(
                name.to_string(),
                EndpointSpec {
                    role: role.into(),
                    interface,
                    scope,
                },
            );
        }
    }
    out
}

/// metadata.yaml `storage:`. Without `multiple`, a store holds exactly one
/// instance; `multiple: range:` is `N`, `N-` (unbounded) or `N-M`.
pub fn storage_specs(metadata: &Yaml) -> Result<BTreeMap<String, StorageSpec>> {
    let mut out = BTreeMap::new();
    let Some(map) = metadata.get("storage").and_then(Yaml::as_mapping) else {
        return Ok(out);
    };
    for (k, v) in map {
        let Some(name) = k.as_str() else { continue };
        let kind = v.get("type").and_then(Yaml::as_str).unwrap_or("filesystem");
        if !matches!(kind, "filesystem" | "block") {
            bail!("metadata.yaml: storage {name}: unknown type {kind:?}");
        }
        let (count_min, count_max) = match v.get("multiple").and_then(|m| m.get("range")) {
            None => (1, 1),
            Some(r) => parse_range(r).ok_or_else(|| {
                crate::sim::error::SimError::new(format!(
                    "metadata.yaml: storage {name}: bad multiple range {r:?}"
                ))
            })?,
        };
        out.insert(
            name.to_string(),
            StorageSpec {
                kind: kind.into(),
                location: v
                    .get("location")
                    .and_then(Yaml::as_str)
                    .unwrap_or_default()
                    .to_string(),
                shared: v.get("shared").and_then(Yaml::as_bool).unwrap_or(false),
                read_only: v.get("read-only").and_then(Yaml::as_bool).unwrap_or(false),
                count_min,
                count_max,
                minimum_size: v.get("minimum-size").and_then(|v| match v {
                    Yaml::String(t) => crate::sim::storage::parse_size(t).ok(),
                    Yaml::Number(n) => n.as_u64().map(|n| n << 20),
                    _ => None,
                }),
            },
        );
    }
    Ok(out)
}

fn parse_range(r: &Yaml) -> Option<(i64, i64)> {
    if let Some(n) = r.as_i64() {
        return (n >= 0).then_some((n, n));
    }
    let s = r.as_str()?.trim();
    let (min, max) = match s.split_once('-') {
        None => {
            let n = s.parse().ok()?;
            (n, n)
        }
        Some((a, "")) => (a.parse().ok()?, -1),
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
    };
    (min >= 0 && (max == -1 || max >= min)).then_some((min, max))
}

/// metadata.yaml `resources:` (`type` defaults to file, as in Juju).
pub fn resources(metadata: &Yaml) -> BTreeMap<String, ResourceSpec> {
    let mut out = BTreeMap::new();
    if let Some(map) = metadata.get("resources").and_then(Yaml::as_mapping) {
        for (k, v) in map {
            let Some(name) = k.as_str() else { continue };
            let get = |key: &str| v.get(key).and_then(Yaml::as_str).map(String::from);
            out.insert(
                name.to_string(),
                ResourceSpec {
                    kind: get("type").unwrap_or_else(|| "file".into()),
                    filename: get("filename").unwrap_or_else(|| name.to_string()),
                },
            );
        }
    }
    out
}

/// The bases a charm runs on, as `name@channel`, in the order declared:
/// a packed charm's manifest.yaml `bases:` (what packaging/pack and
/// charmcraft write: `{name, channel, architectures}`), charmcraft.yaml
/// `bases:` (flat, or `build-on`/`run-on`) or `base:`, and metadata.yaml
/// `series:`. Empty when the charm declares none.
pub fn bases(metadata: &Yaml, charmcraft: &Yaml, manifest: &Yaml) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |b: String| {
        if !out.contains(&b) {
            out.push(b);
        }
    };
    for section in [manifest.get("bases"), charmcraft.get("bases")]
        .into_iter()
        .flatten()
    {
        for entry in section.as_sequence().into_iter().flatten() {
            // charmcraft.yaml's long form: the charm runs on `run-on`
            // (which defaults to `build-on`).
            let run_on = entry.get("run-on").or_else(|| entry.get("build-on"));
            let list: Vec<&Yaml> = match run_on.and_then(Yaml::as_sequence) {
                Some(seq) => seq.iter().collect(),
                None => vec![entry],
            };
            for b in list {
                if let Some(base) = base_of(b) {
                    add(base);
                }
            }
        }
    }
    if let Some(base) = charmcraft.get("base").and_then(Yaml::as_str) {
        if let Ok(b) = parse_base(base) {
            add(b);
        }
    }
    for s in metadata
        .get("series")
        .and_then(Yaml::as_sequence)
        .into_iter()
        .flatten()
    {
        if let Some(version) = s.as_str().and_then(ubuntu_version) {
            add(format!("ubuntu@{version}"));
        }
    }
    out
}

fn base_of(entry: &Yaml) -> Option<String> {
    let name = entry.get("name")?.as_str()?;
    let channel = match entry.get("channel")? {
        Yaml::String(s) => s.clone(),
        // `channel: 22.04` unquoted is a YAML float.
        Yaml::Number(n) => format!("{:.2}", n.as_f64()?),
        _ => return None,
    };
    Some(format!("{name}@{}", track(&channel)))
}

/// `22.04/stable` → `22.04`: bases compare by track.
fn track(channel: &str) -> &str {
    channel.split('/').next().unwrap_or(channel)
}

/// Checks a `--base` value: `ubuntu@22.04` (a `/risk` suffix is dropped).
pub fn parse_base(raw: &str) -> Result<String> {
    match raw.split_once('@') {
        Some((name, channel)) if !name.is_empty() && !track(channel).is_empty() => {
            Ok(format!("{name}@{}", track(channel)))
        }
        _ => bail!("invalid base {raw:?}: expected NAME@CHANNEL, e.g. ubuntu@22.04"),
    }
}

/// Ubuntu series names Juju knows, to their versions.
fn ubuntu_version(series: &str) -> Option<&'static str> {
    Some(match series {
        "trusty" => "14.04",
        "xenial" => "16.04",
        "bionic" => "18.04",
        "focal" => "20.04",
        "jammy" => "22.04",
        "kinetic" => "22.10",
        "lunar" => "23.04",
        "mantic" => "23.10",
        "noble" => "24.04",
        "oracular" => "24.10",
        "plucky" => "25.04",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(s: &str) -> Yaml {
        serde_yaml::from_str(s).unwrap()
    }

    #[test]
    fn storage_ranges() {
        let m = yaml(
            "storage:\n  a:\n    type: block\n    multiple:\n      range: 0-1\n  b:\n    type: filesystem\n    location: /srv/b\n  c:\n    type: filesystem\n    multiple:\n      range: 2-\n  d:\n    type: block\n    multiple:\n      range: 3\n",
        );
        let s = storage_specs(&m).unwrap();
        assert_eq!(
            (s["a"].kind.as_str(), s["a"].count_min, s["a"].count_max),
            ("block", 0, 1)
        );
        assert_eq!(
            (s["b"].location.as_str(), s["b"].count_min, s["b"].count_max),
            ("/srv/b", 1, 1)
        );
        assert_eq!((s["c"].count_min, s["c"].count_max), (2, -1));
        assert_eq!((s["d"].count_min, s["d"].count_max), (3, 3));
        assert!(storage_specs(&yaml("storage:\n  x:\n    type: tape\n")).is_err());
    }

    #[test]
    fn bases_from_every_form() {
        let manifest = yaml("bases:\n- architectures: [amd64]\n  channel: '22.04'\n  name: ubuntu\n- channel: '24.04'\n  name: ubuntu\n");
        assert_eq!(
            bases(&Yaml::Null, &Yaml::Null, &manifest),
            ["ubuntu@22.04", "ubuntu@24.04"]
        );
        let long = yaml("bases:\n- build-on:\n  - name: ubuntu\n    channel: '20.04'\n  run-on:\n  - name: ubuntu\n    channel: 22.04/stable\n");
        assert_eq!(bases(&Yaml::Null, &long, &Yaml::Null), ["ubuntu@22.04"]);
        let short = yaml("base: ubuntu@24.04\n");
        assert_eq!(bases(&Yaml::Null, &short, &Yaml::Null), ["ubuntu@24.04"]);
        let series = yaml("series: [focal, jammy, kubernetes]\n");
        assert_eq!(
            bases(&series, &Yaml::Null, &Yaml::Null),
            ["ubuntu@20.04", "ubuntu@22.04"]
        );
        assert!(bases(&Yaml::Null, &Yaml::Null, &Yaml::Null).is_empty());
    }

    #[test]
    fn endpoint_roles_and_scopes() {
        let m = yaml("peers:\n  p: x\nprovides:\n  nrpe:\n    interface: nrpe\n    scope: container\nrequires:\n  db:\n    interface: pg\n");
        let e = endpoint_specs(&m);
        assert_eq!(e["p"].role, "peer");
        assert_eq!(
            (e["nrpe"].role.as_str(), e["nrpe"].scope.as_str()),
            ("provider", "container")
        );
        assert_eq!(
            (e["db"].role.as_str(), e["db"].scope.as_str()),
            ("requirer", "global")
        );
    }

    #[test]
    fn base_flag() {
        assert_eq!(parse_base("ubuntu@22.04").unwrap(), "ubuntu@22.04");
        assert_eq!(parse_base("ubuntu@24.04/stable").unwrap(), "ubuntu@24.04");
        assert!(parse_base("jammy").is_err());
    }
}
