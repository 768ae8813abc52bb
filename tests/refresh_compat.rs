//! `juju refresh` from the Python etcd charm: the charm as packed must keep
//! every endpoint (name, role, interface, scope), the storage, the resources
//! and every option (name, type, default) of the Python charm, whose merged
//! metadata, config and actions are in tests/fixtures/python-charm/ (from
//! interfaces.md §2). One message lists every item that would be lost.

mod charm_support;

use etcd_charm::charm::compat::{compare, Change, CharmDecl};
use std::path::Path;

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn fixture(name: &str) -> String {
    read(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/python-charm")
            .join(name),
    )
}

/// Everything the packed charm would lose or change versus the Python one.
fn offences(old: &CharmDecl, new: &CharmDecl) -> Vec<String> {
    let cmp = compare(old, new);
    let mut out = Vec::new();
    if old.name != new.name {
        out.push(format!(
            "charm name {:?} → {:?} (a --path refresh needs the same name)",
            old.name, new.name
        ));
    }
    for (kind, items) in [
        ("endpoint", &cmp.endpoints),
        ("storage", &cmp.storage),
        ("resource", &cmp.resources),
        ("option", &cmp.options),
    ] {
        for (name, change) in items {
            match change {
                Change::Dropped => out.push(format!("{kind} {name}: missing")),
                Change::Changed(d) => out.push(format!("{kind} {name}: {}", d.join(", "))),
                Change::Kept | Change::New => {}
            }
        }
    }
    out
}

#[test]
fn the_packed_charm_keeps_everything_the_python_charm_declared() {
    let old = CharmDecl::parse(&fixture("metadata.yaml"), Some(&fixture("config.yaml"))).unwrap();
    // The fixture itself must say what interfaces.md §2 says, or the check is void.
    assert_eq!(old.endpoints.len(), 7, "{:?}", old.endpoints.keys());
    assert_eq!(old.options.len(), 12, "{:?}", old.options.keys());
    assert_eq!(old.resources.len(), 3);
    assert_eq!(old.storage.len(), 1);

    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("charm");
    charm_support::pack_charm(&dir);
    let new = CharmDecl::parse(
        &read(&dir.join("metadata.yaml")),
        Some(&read(&dir.join("config.yaml"))),
    )
    .unwrap();
    let bad = offences(&old, &new);
    assert!(
        bad.is_empty(),
        "a juju refresh from the Python etcd charm would lose or change {} item(s):\n  {}",
        bad.len(),
        bad.join("\n  ")
    );
}

/// A refresh keeps no actions (they are the new charm's), so they are not
/// compared; the fixture must still hold the eleven of §2 for later work.
#[test]
fn the_python_charms_actions_parse() {
    let actions: serde_yaml::Value = serde_yaml::from_str(&fixture("actions.yaml")).unwrap();
    let names: Vec<&str> = actions
        .as_mapping()
        .unwrap()
        .keys()
        .filter_map(|k| k.as_str())
        .collect();
    assert_eq!(names.len(), 11, "{names:?}");
    assert!(names.contains(&"snapshot") && names.contains(&"health"));
}

/// The comparison itself finds a loss: a charm dir with the endpoints and
/// options this charm declared before it declared the Python charm's.
#[test]
fn a_charm_missing_endpoints_and_options_is_reported_item_by_item() {
    let old = CharmDecl::parse(&fixture("metadata.yaml"), Some(&fixture("config.yaml"))).unwrap();
    let new = CharmDecl::parse(
        "name: etcd\npeers:\n  cluster:\n    interface: etcd\nprovides:\n  db:\n    interface: etcd\n  nrpe-external-master:\n    interface: nrpe-external-master\n",
        Some("options:\n  port:\n    type: string\n    default: \"2379\"\n"),
    )
    .unwrap();
    let bad = offences(&old, &new);
    for needle in [
        "endpoint proxy: missing",
        "endpoint certificates: missing",
        "endpoint nrpe-external-master: scope container → global",
        "storage data: missing",
        "resource snapshot: missing",
        "option port: type int → string, default 2379 → \"2379\"",
        "option snapd_refresh: missing",
    ] {
        assert!(
            bad.iter().any(|b| b == needle),
            "{needle:?} not in {bad:#?}"
        );
    }
}
