//! Application config: typed values checked against the charm's config.yaml,
//! and the view `config-get` prints (defaults under operator settings).

use crate::sim::error::{bail, Result};
use crate::sim::model::{Application, OptionSpec};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Checks (and where lossless, converts) a value to an option's type.
pub fn coerce(kind: &str, v: &Value) -> Result<Value> {
    Ok(match (kind, v) {
        ("string" | "secret", Value::String(_)) => v.clone(),
        ("int", Value::Number(n)) if n.is_i64() || n.is_u64() => v.clone(),
        ("int", Value::Number(n)) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => {
            Value::from(n.as_f64().unwrap_or_default() as i64)
        }
        ("float", Value::Number(n)) => Value::from(n.as_f64().unwrap_or_default()),
        ("boolean", Value::Bool(_)) => v.clone(),
        _ => bail!("expected a {kind}, got {v}"),
    })
}

/// Parses a command-line value (`k=v`'s `v`) for an option's type.
pub fn parse(kind: &str, raw: &str) -> Result<Value> {
    Ok(match kind {
        "string" | "secret" => Value::String(raw.to_string()),
        "int" => match raw.trim().parse::<i64>() {
            Ok(i) => Value::from(i),
            Err(_) => bail!("{raw:?} is not an int"),
        },
        "float" => match raw.trim().parse::<f64>() {
            Ok(f) if f.is_finite() => Value::from(f),
            _ => bail!("{raw:?} is not a float"),
        },
        "boolean" => match raw.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" => Value::Bool(true),
            "false" | "no" | "off" => Value::Bool(false),
            _ => bail!("{raw:?} is not a boolean"),
        },
        other => bail!("unknown option type {other:?}"),
    })
}

/// The values a unit sees: defaults, then what the operator set. Options
/// with neither are left out, or given as null with `all`.
pub fn effective(app: &Application, all: bool) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, spec) in &app.charm.options {
        match app.config.get(name).or(spec.default.as_ref()) {
            Some(v) => {
                out.insert(name.clone(), v.clone());
            }
            None if all => {
                out.insert(name.clone(), Value::Null);
            }
            None => {}
        }
    }
    out
}

/// Applies `k=v` settings and `reset` names; true when any value changed.
pub fn apply(
    app: &mut Application,
    settings: &[(String, String)],
    reset: &[String],
) -> Result<bool> {
    let before = effective(app, true);
    for name in reset {
        if !app.charm.options.contains_key(name) {
            bail!("unknown option {name:?}");
        }
        app.config.remove(name);
    }
    for (k, raw) in settings {
        let Some(spec) = app.charm.options.get(k) else {
            bail!(
                "unknown option {k:?} (config.yaml of {} has {})",
                app.name,
                names(&app.charm.options)
            );
        };
        let v = parse(&spec.kind, raw).map_err(|e| e.context(format!("option {k}")))?;
        app.config.insert(k.clone(), v);
    }
    Ok(effective(app, true) != before)
}

/// Drops settings the new charm no longer has, or whose value no longer
/// fits the option's type (Juju's FilterSettings: the option falls back to
/// its default); a value that fits is kept in the new type.
pub fn retain_valid(app: &mut Application) {
    let options = &app.charm.options;
    app.config = std::mem::take(&mut app.config)
        .into_iter()
        .filter_map(|(k, v)| {
            let spec = options.get(&k)?;
            coerce(&spec.kind, &v).ok().map(|v| (k, v))
        })
        .collect();
}

fn names(options: &BTreeMap<String, OptionSpec>) -> String {
    options.keys().cloned().collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> Application {
        let mut a = Application {
            name: "a".into(),
            ..Default::default()
        };
        a.charm.options.insert(
            "port".into(),
            OptionSpec {
                kind: "int".into(),
                default: Some(Value::from(1)),
            },
        );
        a.charm.options.insert(
            "name".into(),
            OptionSpec {
                kind: "string".into(),
                default: None,
            },
        );
        a.charm.options.insert(
            "on".into(),
            OptionSpec {
                kind: "boolean".into(),
                default: Some(Value::Bool(false)),
            },
        );
        a
    }

    #[test]
    fn unset_without_default_is_omitted() {
        let a = app();
        let e = effective(&a, false);
        assert_eq!(e.get("port"), Some(&Value::from(1)));
        assert!(!e.contains_key("name"));
        assert_eq!(effective(&a, true).get("name"), Some(&Value::Null));
    }

    #[test]
    fn typed_settings() {
        let mut a = app();
        assert!(apply(
            &mut a,
            &[("port".into(), "7".into()), ("on".into(), "true".into())],
            &[]
        )
        .unwrap());
        assert_eq!(effective(&a, false)["port"], Value::from(7));
        assert!(apply(&mut a, &[("port".into(), "x".into())], &[]).is_err());
        assert!(apply(&mut a, &[("nope".into(), "1".into())], &[]).is_err());
        assert!(!apply(&mut a, &[("port".into(), "7".into())], &[]).unwrap());
        assert!(apply(&mut a, &[], &["port".into()]).unwrap());
    }
}
