//! Reading a charm directory (metadata.yaml, config.yaml, actions.yaml, or
//! the same sections of charmcraft.yaml) and copying it with its symlinks.

use crate::sim::error::{bail, Context as _, Result};
use crate::sim::model::{ActionSpec, CharmMeta, OptionSpec};
use serde_json::Value;
use serde_yaml::Value as Yaml;
use std::fs;
use std::path::Path;

fn read_yaml(path: &Path) -> Result<Option<Yaml>> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(serde_yaml::from_str(&text).ctx(path.display())?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads what the simulator needs from a charm directory.
pub fn read_charm(dir: &Path) -> Result<CharmMeta> {
    let charmcraft = read_yaml(&dir.join("charmcraft.yaml"))?.unwrap_or(Yaml::Null);
    let metadata = read_yaml(&dir.join("metadata.yaml"))?.unwrap_or_else(|| charmcraft.clone());
    let Some(name) = metadata.get("name").and_then(Yaml::as_str) else {
        bail!(
            "{}: no metadata.yaml (or charmcraft.yaml) with a name",
            dir.display()
        );
    };
    let config = read_yaml(&dir.join("config.yaml"))?
        .or_else(|| charmcraft.get("config").cloned())
        .unwrap_or(Yaml::Null);
    let actions = read_yaml(&dir.join("actions.yaml"))?
        .or_else(|| charmcraft.get("actions").cloned())
        .unwrap_or(Yaml::Null);
    Ok(CharmMeta {
        name: name.to_string(),
        peers: endpoints(&metadata, "peers"),
        provides: endpoints(&metadata, "provides"),
        requires: endpoints(&metadata, "requires"),
        storage: keys(metadata.get("storage")),
        storage_specs: storage_specs(metadata.get("storage")),
        options: options(&config)?,
        actions: action_specs(&actions)?,
    })
}

fn keys(v: Option<&Yaml>) -> Vec<String> {
    v.and_then(Yaml::as_mapping)
        .map(|m| {
            m.keys()
                .filter_map(|k| k.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Each storage's `type`, minimum count (`multiple: range: N-M` → N, no
/// `multiple` → 1) and `minimum-size`.
fn storage_specs(
    v: Option<&Yaml>,
) -> std::collections::BTreeMap<String, crate::sim::storage::StorageSpec> {
    let mut out = std::collections::BTreeMap::new();
    for (k, s) in v.and_then(Yaml::as_mapping).into_iter().flatten() {
        let Some(name) = k.as_str() else { continue };
        let kind = s.get("type").and_then(Yaml::as_str).unwrap_or("filesystem");
        let range = s.get("multiple").and_then(|m| m.get("range"));
        let range = range
            .and_then(Yaml::as_str)
            .map(String::from)
            .or_else(|| range.and_then(Yaml::as_u64).map(|n| n.to_string()));
        let minimum = match range {
            Some(r) => r
                .split('-')
                .next()
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(1),
            None => 1,
        };
        let minimum_size = s.get("minimum-size").and_then(|v| match v {
            Yaml::String(t) => crate::sim::storage::parse_size(t).ok(),
            Yaml::Number(n) => n.as_u64().map(|n| n << 20),
            _ => None,
        });
        out.insert(
            name.to_string(),
            crate::sim::storage::StorageSpec {
                kind: kind.to_string(),
                minimum,
                minimum_size,
            },
        );
    }
    out
}

/// endpoint → interface.
fn endpoints(metadata: &Yaml, section: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    if let Some(map) = metadata.get(section).and_then(Yaml::as_mapping) {
        for (k, v) in map {
            let Some(name) = k.as_str() else { continue };
            let interface = match v {
                Yaml::String(s) => s.clone(),
                other => other
                    .get("interface")
                    .and_then(Yaml::as_str)
                    .unwrap_or(name)
                    .to_string(),
            };
            out.insert(name.to_string(), interface);
        }
    }
    out
}

fn to_json(v: &Yaml) -> Result<Value> {
    Ok(serde_json::to_value(v)?)
}

fn options(config: &Yaml) -> Result<std::collections::BTreeMap<String, OptionSpec>> {
    let mut out = std::collections::BTreeMap::new();
    let Some(map) = config.get("options").and_then(Yaml::as_mapping) else {
        return Ok(out);
    };
    for (k, v) in map {
        let Some(name) = k.as_str() else { continue };
        let kind = v
            .get("type")
            .and_then(Yaml::as_str)
            .unwrap_or("string")
            .to_string();
        if !matches!(
            kind.as_str(),
            "string" | "int" | "float" | "boolean" | "secret"
        ) {
            bail!("config.yaml: option {name}: unknown type {kind:?}");
        }
        let default = match v.get("default") {
            None | Some(Yaml::Null) => None,
            Some(d) => Some(
                crate::sim::config::coerce(&kind, &to_json(d)?)
                    .ctx(format!("config.yaml: default of {name}"))?,
            ),
        };
        out.insert(name.to_string(), OptionSpec { kind, default });
    }
    Ok(out)
}

fn action_specs(actions: &Yaml) -> Result<std::collections::BTreeMap<String, ActionSpec>> {
    let mut out = std::collections::BTreeMap::new();
    let Some(map) = actions.as_mapping() else {
        return Ok(out);
    };
    for (k, v) in map {
        let Some(name) = k.as_str() else { continue };
        let params = match v.get("params") {
            Some(p @ Yaml::Mapping(_)) => match to_json(p)? {
                Value::Object(m) => m,
                _ => Default::default(),
            },
            _ => Default::default(),
        };
        let required = v
            .get("required")
            .and_then(Yaml::as_sequence)
            .map(|s| {
                s.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let closed = v.get("additionalProperties").and_then(Yaml::as_bool) == Some(false);
        out.insert(
            name.to_string(),
            ActionSpec {
                params,
                required,
                closed,
            },
        );
    }
    Ok(out)
}

/// Copies `from` to `to` (which must not exist), keeping symlinks as
/// symlinks and file modes; `.git` is left out.
pub fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to).ctx(to.display())?;
    for entry in fs::read_dir(from).ctx(from.display())? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst).ctx(dst.display())?;
        } else if kind.is_dir() {
            if entry.file_name() == ".git" {
                continue;
            }
            copy_tree(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).ctx(format!("copying {}", src.display()))?;
        }
    }
    Ok(())
}

/// Replaces `to` with a fresh copy of `from`.
pub fn replace_tree(from: &Path, to: &Path) -> Result<()> {
    if to.symlink_metadata().is_ok() {
        fs::remove_dir_all(to).ctx(format!("removing {}", to.display()))?;
    }
    copy_tree(from, to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_metadata_config_actions() {
        let d = tempfile::tempdir().unwrap();
        fs::write(
            d.path().join("metadata.yaml"),
            "name: x\npeers:\n  cluster:\n    interface: x-peer\nprovides:\n  db: pg\n",
        )
        .unwrap();
        fs::write(
            d.path().join("config.yaml"),
            "options:\n  port:\n    type: int\n    default: 5\n  name:\n    type: string\n",
        )
        .unwrap();
        fs::write(
            d.path().join("actions.yaml"),
            "snap:\n  params:\n    n:\n      type: integer\n      default: 2\n",
        )
        .unwrap();
        let m = read_charm(d.path()).unwrap();
        assert_eq!(m.name, "x");
        assert_eq!(m.peers["cluster"], "x-peer");
        assert_eq!(m.provides["db"], "pg");
        assert_eq!(m.options["port"].default, Some(Value::from(5)));
        assert_eq!(m.options["name"].default, None);
        assert_eq!(m.actions["snap"].params["n"]["default"], Value::from(2));
    }

    #[test]
    fn copy_keeps_symlinks() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        fs::create_dir_all(src.join("hooks")).unwrap();
        fs::write(src.join("dispatch"), "x").unwrap();
        std::os::unix::fs::symlink("../dispatch", src.join("hooks/install")).unwrap();
        copy_tree(&src, &d.path().join("dst")).unwrap();
        assert_eq!(
            fs::read_link(d.path().join("dst/hooks/install")).unwrap(),
            Path::new("../dispatch")
        );
    }
}
