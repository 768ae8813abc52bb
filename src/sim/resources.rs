//! Charm resources (metadata.yaml `resources:`, type file): what
//! `--resource NAME=PATH` uploads, kept as the model's own copy under
//! `<model>/resources/<app>/<name>/<filename>`, which `resource-get` names.

use crate::sim::error::{bail, Context as _, Result};
use crate::sim::model::Application;
use crate::sim::store::ModelDir;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `NAME=PATH` arguments, each file checked to exist.
pub fn parse_args(args: &[String]) -> Result<BTreeMap<String, PathBuf>> {
    let mut out = BTreeMap::new();
    for raw in args {
        let (name, path) = crate::sim::commands::split_kv(raw, "--resource")?;
        let path = std::fs::canonicalize(&path).ctx(format!("file for resource {name:?}"))?;
        if !path.is_file() {
            bail!(
                "file for resource {name:?}: {} is not a file",
                path.display()
            );
        }
        out.insert(name, path);
    }
    Ok(out)
}

/// Copies each uploaded file into the model and records it on `app`, whose
/// charm must declare it.
pub fn store(
    dir: &ModelDir,
    app: &mut Application,
    given: &BTreeMap<String, PathBuf>,
) -> Result<()> {
    for (name, src) in given {
        let Some(spec) = app.charm.resources.get(name) else {
            bail!("charm has no resource {name:?}");
        };
        let target = dir
            .root
            .join("resources")
            .join(&app.name)
            .join(name)
            .join(&spec.filename);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).ctx(parent.display())?;
        }
        std::fs::copy(src, &target).ctx(format!("copying {}", src.display()))?;
        app.resources.insert(name.clone(), target);
    }
    Ok(())
}
