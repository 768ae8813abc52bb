//! `config [APP] [k=v…] [--reset k]`: print, or set and run config-changed
//! on every unit when a value changed.

use super::{split_kv, Ctx};
use crate::sim::config;
use crate::sim::error::{bail, Result};
use crate::sim::events;
use crate::sim::model::HookKind;

pub fn config(ctx: &Ctx, args: &[String], reset: &[String], format: &str) -> Result<u8> {
    let (app, kvs) = match args.split_first() {
        Some((first, rest)) if !first.contains('=') => (Some(first.as_str()), rest),
        _ => (None, args),
    };
    let settings = kvs
        .iter()
        .map(|kv| split_kv(kv, "config"))
        .collect::<Result<Vec<_>>>()?;
    if settings.is_empty() && reset.is_empty() {
        let m = ctx.dir.read()?;
        let app = m.default_app(app)?;
        let values = serde_json::Value::Object(config::effective(m.app(&app)?, false));
        match format {
            "json" => println!("{}", serde_json::to_string_pretty(&values)?),
            "yaml" => print!("{}", serde_yaml::to_string(&values)?),
            other => bail!("unknown format {other:?} (yaml or json)"),
        }
        return Ok(0);
    }
    let changed = ctx.dir.update(|m| {
        let app = m.default_app(app)?;
        let changed = config::apply(m.app_mut(&app)?, &settings, reset)?;
        if changed {
            events::to_all(m, &app, HookKind::ConfigChanged);
        }
        Ok(changed)
    })?;
    if !changed {
        ctx.progress.note("config unchanged");
    }
    ctx.settle()
}
