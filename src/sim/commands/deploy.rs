//! `deploy` and `add-unit`: a new application (with its peer relations) and
//! new units, each with its own machine, directory, charm copy and address.

use super::{split_kv, Ctx};
use crate::sim::charmdir;
use crate::sim::charmspec;
use crate::sim::cli::MachineArgs;
use crate::sim::config;
use crate::sim::error::{bail, Context as _, Result};
use crate::sim::events;
use crate::sim::identity;
use crate::sim::machine;
use crate::sim::model::{Application, CharmMeta, Endpoint, Model, Relation, Status, Unit};
use crate::sim::resources;
use crate::sim::store::{self, ModelDir};
use crate::sim::tools;
use std::path::{Path, PathBuf};

pub const DEFAULT_JUJU_VERSION: &str = "3.6.4";
pub const DEFAULT_SEED: u64 = 1;

#[allow(clippy::too_many_arguments)]
pub fn deploy(
    ctx: &Ctx,
    charm_dir: &Path,
    name: Option<String>,
    num_units: u32,
    [config_args, env_args, storage_args]: &[Vec<String>; 3],
    juju_version: Option<String>,
    base: &str,
    resource_args: &[String],
    machines: &MachineArgs,
) -> Result<u8> {
    let charm_dir = std::fs::canonicalize(charm_dir).ctx(charm_dir.display())?;
    let meta = charmdir::read_charm(&charm_dir)?;
    let app_name = name.unwrap_or_else(|| meta.name.clone());
    if !valid_app_name(&app_name) {
        bail!("invalid application name {app_name:?}");
    }
    let base = charmspec::parse_base(base)?;
    // A charm that lists no bases is an old-style local charm: any base.
    if !meta.bases.is_empty() && !meta.bases.contains(&base) {
        bail!(
            "base {base:?} not supported by charm, the charm supported bases are: {}",
            meta.bases.join(", ")
        );
    }
    let uploads = resources::parse_args(resource_args)?;
    let settings = config_args
        .iter()
        .map(|c| split_kv(c, "--config"))
        .collect::<Result<Vec<_>>>()?;
    let env = env_args
        .iter()
        .map(|e| split_kv(e, "--env"))
        .collect::<Result<Vec<_>>>()?;
    let storage = storage_directives(&meta, storage_args)?;
    let systemd_env = machines
        .systemd_env
        .iter()
        .map(|e| split_kv(e, "--systemd-env"))
        .collect::<Result<Vec<_>>>()?;
    let mode = machines.mode();
    if mode != "direct" && mode != machine::SYSTEMD_MODE {
        bail!("--machines {mode:?}: direct or systemd");
    }
    let dir = &ctx.dir;
    let seed = ctx.seed.get();
    let range = ctx
        .address_range
        .as_deref()
        .map(identity::range_prefix)
        .transpose()?;
    let version = dir.update(|m| {
        if m.name.is_empty() || m.destroyed {
            init_model(m, dir, seed, range.clone());
        }
        if let Some(v) = &juju_version {
            m.juju_version = v.clone();
        }
        if m.applications.contains_key(&app_name) {
            bail!("application {app_name:?} already exists");
        }
        let mut app = Application {
            name: app_name.clone(),
            charm: meta.clone(),
            env: env.into_iter().collect(),
            base: base.clone(),
            storage_directives: storage,
            machines: mode.clone(),
            machine_binds: machines.binds.clone(),
            systemd_env: systemd_env.into_iter().collect(),
            ..Default::default()
        };
        config::apply(&mut app, &settings, &[])?;
        resources::store(dir, &mut app, &uploads)?;
        store_charm(m, dir, &mut app, &charm_dir)?;
        m.applications.insert(app_name.clone(), app);
        for ep in meta.peers.keys() {
            add_peer_relation(m, &app_name, &meta, ep);
        }
        add_units(m, dir, &app_name, num_units, None)?;
        Ok(m.juju_version.clone())
    })?;
    tools::install_links(dir, &version)?;
    ctx.progress.note(&format!(
        "deployed {app_name} ({num_units} units) in {} (seed {})",
        dir.root.display(),
        dir.read()?.seed
    ));
    provision(ctx)?;
    ctx.settle()
}

/// Gives every new unit its machine: a systemd machine when its application
/// asks for one and this host can make it, else the direct mode (saying why).
/// A systemd machine that boots wrong (masks not taken) is an error.
pub fn provision(ctx: &Ctx) -> Result<()> {
    let m = ctx.dir.read()?;
    let todo: Vec<_> = m
        .units
        .values()
        .filter(|u| u.machine_mode.is_empty())
        .map(|u| {
            let app = &m.applications[&u.app];
            let binds = machine::binds_of(app, u);
            (u.name.clone(), u.dir.clone(), app.machines.clone(), binds)
        })
        .collect();
    for (unit, unit_dir, mode, binds) in todo {
        let got = if mode != machine::SYSTEMD_MODE {
            "direct".to_string()
        } else {
            match machine::boot(&unit_dir, &binds) {
                Ok(pid) => {
                    ctx.progress
                        .note(&format!("{unit}: systemd machine booted (pid {pid})"));
                    machine::SYSTEMD_MODE.to_string()
                }
                Err(machine::BootError::Unavailable(why)) => {
                    let mode = format!("direct (no systemd machine: {why})");
                    eprintln!("jujusim: {unit}: {mode}");
                    mode
                }
                Err(machine::BootError::Failed(why)) => {
                    bail!("{unit}: systemd machine refused: {why}")
                }
            }
        };
        ctx.dir.update(|m| {
            if let Some(u) = m.units.get_mut(&unit) {
                u.machine_mode = got;
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// A new peer relation of `app` on endpoint `ep` of `meta`; its id.
pub fn add_peer_relation(m: &mut Model, app: &str, meta: &CharmMeta, ep: &str) -> u32 {
    let id = m.next_relation;
    m.next_relation += 1;
    let spec = meta.endpoint_specs.get(ep);
    let endpoint = Endpoint {
        app: app.to_string(),
        name: ep.to_string(),
        interface: meta.peers.get(ep).cloned().unwrap_or_default(),
        role: "peer".into(),
        scope: spec.map(|s| s.scope.clone()).unwrap_or_default(),
    };
    m.relations.insert(
        id,
        Relation {
            id,
            endpoints: vec![endpoint],
            ..Default::default()
        },
    );
    id
}

/// `--storage name=size` checked against the charm's declared storage.
fn storage_directives(
    meta: &crate::sim::model::CharmMeta,
    args: &[String],
) -> Result<std::collections::BTreeMap<String, u64>> {
    let mut out = std::collections::BTreeMap::new();
    for raw in args {
        let (name, size) = crate::sim::storage::parse_directive(raw)?;
        if !meta.storage.contains(&name) {
            bail!(
                "--storage {raw:?}: charm {:?} declares no storage {name:?}",
                meta.name
            );
        }
        if let Some(min) = meta.storage_specs.get(&name).and_then(|s| s.minimum_size) {
            if size < min {
                bail!("--storage {raw:?}: {name} needs at least {} MiB", min >> 20);
            }
        }
        out.insert(name, size);
    }
    Ok(out)
}

fn valid_app_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
}

fn init_model(m: &mut Model, dir: &ModelDir, seed: Option<u64>, range: Option<String>) {
    m.destroyed = false;
    m.name = identity::model_name(&dir.root);
    m.uuid = identity::model_uuid(&dir.root);
    m.address_prefix = range.unwrap_or_else(|| identity::address_prefix(&dir.root));
    m.juju_version = DEFAULT_JUJU_VERSION.into();
    m.seed = seed.unwrap_or(DEFAULT_SEED);
    m.prng = m.seed;
}

/// Keeps the model's own copy of a charm (units copy from it, as Juju keeps
/// the charm archive), as a new revision of `app`.
pub fn store_charm(
    m: &mut Model,
    dir: &ModelDir,
    app: &mut Application,
    source: &Path,
) -> Result<PathBuf> {
    m.next_charm_rev += 1;
    let target = dir
        .charms_dir()
        .join(format!("{}-{}", app.name, m.next_charm_rev));
    charmdir::replace_tree(source, &target)?;
    app.charm_dir = target.clone();
    app.charm_rev = m.next_charm_rev;
    Ok(target)
}

/// Creates `n` units of `app` and queues their deploy hooks; the first unit
/// of an application without a leader becomes its leader.
pub fn add_units(
    m: &mut Model,
    dir: &ModelDir,
    app: &str,
    n: u32,
    storage: Option<&std::collections::BTreeMap<String, u64>>,
) -> Result<Vec<String>> {
    let mut added = Vec::new();
    for _ in 0..n {
        let a = m.app_mut(app)?;
        let number = a.next_unit;
        a.next_unit += 1;
        let charm = a.charm_dir.clone();
        let name = format!("{app}/{number}");
        // One address per machine, so units of different applications
        // never share one.
        let Some(address) = identity::unit_address(&m.address_prefix, m.next_machine) else {
            bail!("{name}: a model has room for 254 machines");
        };
        let unit_dir = dir.units_dir().join(format!("{app}-{number}"));
        if unit_dir.exists() {
            std::fs::remove_dir_all(&unit_dir).ctx(format!("clearing {}", unit_dir.display()))?;
        }
        let unit = Unit {
            name: name.clone(),
            app: app.to_string(),
            number,
            machine: m.next_machine,
            dir: unit_dir,
            address,
            base: m.app(app)?.base.clone(),
            workload: Status {
                current: "waiting".into(),
                message: "agent initialising".into(),
                since: store::now_rfc3339(),
            },
            ..Default::default()
        };
        m.next_machine += 1;
        charmdir::copy_tree(&charm, &unit.charm_dir())?;
        std::fs::create_dir_all(unit.root())?;
        write_os_release(&unit.root(), &unit.base)?;
        let mut unit = unit;
        let a = m.app(app)?;
        let sizes = storage.unwrap_or(&a.storage_directives);
        for s in &a.charm.storage {
            let spec = a.charm.storage_specs.get(s).cloned().unwrap_or_default();
            // A storage with a minimum count of 0 gets an instance only when asked.
            let Some(size) = sizes
                .get(s)
                .copied()
                .or((spec.count_min > 0).then_some(spec.minimum_size.unwrap_or(1 << 30)))
            else {
                continue;
            };
            let id = crate::sim::hookenv::storage_id(s, unit.machine);
            let att = crate::sim::storage::attach(&dir.root, &unit.dir, &id, s, &spec, size)?;
            if let Some(why) = &att.stand_in {
                eprintln!("jujusim: {name}: storage {id}: {why}");
            }
            unit.storage.push(att);
        }
        m.units.insert(name.clone(), unit);
        let a = m.app_mut(app)?;
        if a.leader.is_none() {
            a.leader = Some(name.clone());
        }
        added.push(name);
    }
    for name in &added {
        events::new_unit(m, name);
    }
    Ok(added)
}

pub fn add_unit(ctx: &Ctx, app: Option<&str>, n: u32, storage_args: &[String]) -> Result<u8> {
    let dir = &ctx.dir;
    let added = dir.update(|m| {
        let app = m.default_app(app)?;
        let given = if storage_args.is_empty() {
            None
        } else {
            Some(storage_directives(&m.app(&app)?.charm, storage_args)?)
        };
        add_units(m, dir, &app, n, given.as_ref())
    })?;
    ctx.progress.note(&format!("added {}", added.join(", ")));
    provision(ctx)?;
    ctx.settle()
}

/// The machine's /etc/os-release under the unit's root, for its base
/// (`ubuntu@20.04` -> ID=ubuntu, VERSION_ID="20.04"), as on a Juju machine.
fn write_os_release(root: &std::path::Path, base: &str) -> Result<()> {
    let (id, version) = base.split_once('@').unwrap_or((base, ""));
    let etc = root.join("etc");
    std::fs::create_dir_all(&etc)?;
    std::fs::write(
        etc.join("os-release"),
        format!("NAME=\"{id}\"\nID={id}\nVERSION_ID=\"{version}\"\n"),
    )?;
    Ok(())
}
