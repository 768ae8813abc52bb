//! resource-get: the path of the application's stored copy of a resource.

use super::args::{self, usage};
use super::Call;
use crate::sim::error::{bail, Result};

pub fn resource_get(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[])?;
    let name = match p.positional.as_slice() {
        [name] => name,
        [] => return Err(usage("missing required resource name")),
        more => return Err(usage(format!("unrecognized args: {:?}", &more[1..]))),
    };
    let app = call.model.app(call.app())?;
    if !app.charm.resources.contains_key(name) {
        bail!("could not download resource: resource {name:?} not found");
    }
    match app.resources.get(name) {
        Some(path) if path.is_file() => Ok(format!("{}\n", path.display())),
        _ => bail!(
            "could not download resource: resource {name:?} was never uploaded (pass --resource {name}=PATH to deploy or refresh)"
        ),
    }
}
