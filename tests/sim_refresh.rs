//! jujusim refuses a refresh exactly as Juju does (shared/interfaces.md §1),
//! one test per rule: refused with Juju's message and nothing changed, or
//! accepted with the documented effect. The charms are copies of
//! tests/charms/refreshtest with one thing changed, as a new revision might.

mod sim_support;
use serde_json::Value;
use sim_support::*;
use std::path::{Path, PathBuf};

const APP: &str = "refreshtest";

fn test_charm(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/charms")
        .join(name)
}

/// A copy of refreshtest with each `(file, from, to)` replacement made
/// (`from` must be there), and each `(file, text)` written.
fn variant(sim: &Sim, dir: &str, edits: &[(&str, &str, &str)], writes: &[(&str, &str)]) -> PathBuf {
    let to = sim.path(dir);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(test_charm(APP)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    for (file, from, with) in edits {
        let path = to.join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} has no {from:?}");
        std::fs::write(&path, text.replacen(from, with, 1)).unwrap();
    }
    for (file, text) in writes {
        std::fs::write(to.join(file), text).unwrap();
    }
    to
}

/// Deploys `n` units of refreshtest with its `blob` resource.
fn deploy(sim: &Sim, n: u32, extra: &[&str]) {
    let blob = sim.path("blob-v1.bin");
    std::fs::write(&blob, "blob v1\n").unwrap();
    let resource = format!("blob={}", blob.display());
    let charm = test_charm(APP);
    let n = n.to_string();
    let mut args = vec![
        "deploy",
        charm.to_str().unwrap(),
        "-n",
        &n,
        "--resource",
        &resource,
    ];
    args.extend_from_slice(extra);
    sim.ok(&args);
}

/// refreshtest related to a refreshclient unit over db.
fn deploy_related(sim: &Sim) {
    deploy(sim, 1, &[]);
    let client = test_charm("refreshclient");
    sim.ok(&["deploy", client.to_str().unwrap()]);
    sim.ok(&["integrate", "refreshtest:db", "refreshclient:db"]);
}

/// What a refused refresh must leave as it was: the model's view of the
/// application (charm revision and dir, relations, units, statuses, queues),
/// its config, the hooks run, and the charm on the unit.
fn snapshot(sim: &Sim) -> (Value, String, usize, String) {
    (
        sim.status()["applications"].clone(),
        sim.ok(&["config", APP, "--format", "json"]),
        sim.hook_log().len(),
        std::fs::read_to_string(sim.unit_dir("refreshtest/0").join("charm/metadata.yaml")).unwrap(),
    )
}

/// Refreshes to `charm`, which must be refused with exactly `reason`
/// (charm URL `local:<name>-<rev>`), changing nothing.
fn refused(sim: &Sim, charm: &Path, name_rev: &str, reason: &str, extra: &[&str]) {
    let before = snapshot(sim);
    let mut args = vec!["refresh", APP, "--path", charm.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = sim.run(&args);
    let stderr = text(&out.stderr);
    assert!(
        !out.status.success(),
        "refresh to {} was accepted",
        charm.display()
    );
    let expect =
        format!("cannot upgrade application \"{APP}\" to charm \"local:{name_rev}\": {reason}\n");
    assert!(
        stderr.ends_with(&expect),
        "expected {expect:?}, got {stderr:?}"
    );
    assert_eq!(snapshot(sim), before, "a refused refresh changed the model");
}

fn refresh_ok(sim: &Sim, charm: &Path, extra: &[&str]) {
    let mut args = vec!["refresh", APP, "--path", charm.to_str().unwrap()];
    args.extend_from_slice(extra);
    sim.ok(&args);
}

fn charm_rev(sim: &Sim) -> Value {
    sim.status()["applications"][APP]["charm-rev"].clone()
}

#[test]
fn an_endpoint_with_a_live_relation_must_keep_role_interface_and_scope() {
    let sim = Sim::new();
    deploy_related(&sim);
    let db = "  db:\n    interface: refreshtest-db\n";
    let cases = [
        ("removed", (db, "")),
        (
            "role",
            (
                "provides:\n  db:\n    interface: refreshtest-db\nrequires:\n",
                "requires:\n  db:\n    interface: refreshtest-db\n",
            ),
        ),
        ("interface", (db, "  db:\n    interface: other-db\n")),
        (
            "scope",
            (
                db,
                "  db:\n    interface: refreshtest-db\n    scope: container\n",
            ),
        ),
    ];
    for (what, (from, to)) in cases {
        let charm = variant(
            &sim,
            &format!("db-{what}"),
            &[("metadata.yaml", from, to)],
            &[],
        );
        // Juju's key: the requirer's endpoint first.
        refused(
            &sim,
            &charm,
            "refreshtest-3",
            "would break relation \"refreshclient:db refreshtest:db\"",
            &[],
        );
    }
    // The relation is still there and still works.
    assert_eq!(
        sim.exec_ok("refreshclient/0", "relation-list -r db:1 --format=json"),
        "[\"refreshtest/0\"]\n"
    );
}

#[test]
fn an_endpoint_without_a_relation_may_change_or_go() {
    let sim = Sim::new();
    deploy_related(&sim);
    // backend is not related: removing it is fine; db keeps its relation.
    let charm = variant(
        &sim,
        "no-backend",
        &[(
            "metadata.yaml",
            "requires:\n  backend:\n    interface: refreshtest-backend\n",
            "",
        )],
        &[],
    );
    refresh_ok(&sim, &charm, &[]);
    assert_eq!(charm_rev(&sim), 3);
    assert!(sim
        .hooks("refreshtest/0")
        .contains(&"upgrade-charm".to_string()));
    assert_eq!(
        sim.exec_ok("refreshclient/0", "relation-list -r db:1 --format=json"),
        "[\"refreshtest/0\"]\n"
    );
}

#[test]
fn a_renamed_peer_endpoint_drops_the_old_relation_and_its_data_and_creates_a_new_one() {
    let sim = Sim::new();
    deploy(&sim, 2, &[]);
    sim.exec_ok("refreshtest/0", "relation-set -r cluster:0 kept=no");
    assert_eq!(
        sim.exec_ok(
            "refreshtest/1",
            "relation-get -r cluster:0 kept refreshtest/0"
        ),
        "no\n"
    );
    let before: Vec<usize> = ["refreshtest/0", "refreshtest/1"]
        .iter()
        .map(|u| sim.hooks(u).len())
        .collect();
    let charm = variant(
        &sim,
        "ring",
        &[("metadata.yaml", "  cluster:\n", "  ring:\n")],
        &[],
    );
    refresh_ok(&sim, &charm, &[]);
    for (i, unit) in ["refreshtest/0", "refreshtest/1"].iter().enumerate() {
        let other = format!("refreshtest/{}", 1 - i);
        let hooks = sim.hook_lines(unit)[before[i]..].to_vec();
        let names: Vec<&str> = hooks.iter().map(|l| l.split(' ').next().unwrap()).collect();
        assert_eq!(names[0], "upgrade-charm", "{unit}: {hooks:?}");
        for hook in [
            "ring-relation-created",
            "ring-relation-joined",
            "ring-relation-changed",
        ] {
            assert!(names.contains(&hook), "{unit} ran no {hook}: {hooks:?}");
        }
        assert!(
            hooks.contains(&format!(
                "ring-relation-joined remote={other} app=refreshtest rel=ring:1 departing="
            )),
            "{unit}: {hooks:?}"
        );
        assert!(
            !names.iter().any(|h| h.starts_with("cluster-")),
            "{unit}: {hooks:?}"
        );
        assert_eq!(
            sim.exec_ok(unit, "relation-ids cluster --format=json"),
            "[]\n"
        );
        assert_eq!(
            sim.exec_ok(unit, "relation-ids ring --format=json"),
            "[\"ring:1\"]\n"
        );
    }
    // The new relation starts empty: the old one's data went with it.
    assert_eq!(
        sim.exec_ok(
            "refreshtest/1",
            "relation-get -r ring:1 --format=json - refreshtest/0"
        ),
        "{}\n"
    );
    let rels = &sim.status()["applications"][APP]["relations"];
    assert!(rels.get("cluster").is_none(), "{rels}");
    assert_eq!(rels["ring"][0]["relation-id"], 1);
}

#[test]
fn removed_storage_with_instances_is_refused() {
    let sim = Sim::new();
    deploy(&sim, 1, &[]);
    let cache = "  cache:\n    type: block\n    multiple:\n      range: 0-2\n";
    let charm = variant(&sim, "no-cache", &[("metadata.yaml", cache, "")], &[]);
    refused(
        &sim,
        &charm,
        "refreshtest-2",
        "in-use storage \"cache\" removed",
        &[],
    );
    // A store with a minimum count may never go.
    let data = "  data:\n    type: filesystem\n    location: /srv/data\n";
    let charm = variant(&sim, "no-data", &[("metadata.yaml", data, "")], &[]);
    refused(
        &sim,
        &charm,
        "refreshtest-2",
        "required storage \"data\" removed",
        &[],
    );
}

#[test]
fn a_storage_type_change_is_refused() {
    let sim = Sim::new();
    deploy(&sim, 1, &[]);
    let charm = variant(
        &sim,
        "cache-fs",
        &[(
            "metadata.yaml",
            "    type: block\n",
            "    type: filesystem\n",
        )],
        &[],
    );
    refused(
        &sim,
        &charm,
        "refreshtest-2",
        "existing storage \"cache\" type changed from \"block\" to \"filesystem\"",
        &[],
    );
}

#[test]
fn a_storage_location_change_is_refused() {
    let sim = Sim::new();
    deploy(&sim, 1, &[]);
    let charm = variant(
        &sim,
        "data-moved",
        &[(
            "metadata.yaml",
            "location: /srv/data",
            "location: /srv/other",
        )],
        &[],
    );
    refused(
        &sim,
        &charm,
        "refreshtest-2",
        "existing storage \"data\" location changed from \"/srv/data\" to \"/srv/other\"",
        &[],
    );
}

#[test]
fn a_lower_storage_maximum_is_refused_and_a_higher_one_accepted() {
    let sim = Sim::new();
    deploy(&sim, 1, &[]);
    let fewer = variant(
        &sim,
        "cache-0-1",
        &[("metadata.yaml", "range: 0-2", "range: 0-1")],
        &[],
    );
    refused(
        &sim,
        &fewer,
        "refreshtest-2",
        "existing storage \"cache\" range contracted: max decreased from 2 to 1",
        &[],
    );
    let more = variant(
        &sim,
        "cache-0-",
        &[("metadata.yaml", "range: 0-2", "range: 0-")],
        &[],
    );
    refresh_ok(&sim, &more, &[]);
    assert_eq!(charm_rev(&sim), 2);
}

#[test]
fn a_removed_or_retyped_option_falls_back_to_its_default() {
    let sim = Sim::new();
    deploy(
        &sim,
        1,
        &[
            "--config",
            "mode=fast",
            "--config",
            "level=5",
            "--config",
            "extra=x",
        ],
    );
    let get = || -> Value {
        serde_json::from_str(&sim.exec_ok("refreshtest/0", "config-get --format=json")).unwrap()
    };
    assert_eq!(
        get(),
        serde_json::json!({"mode": "fast", "level": 5, "extra": "x"})
    );
    // mode becomes an int ("fast" no longer fits), extra goes, level stays.
    let retyped = variant(
        &sim,
        "retyped",
        &[
            ("config.yaml", "    type: string\n    default: slow", "    type: int\n    default: 7"),
            (
                "config.yaml",
                "  extra:\n    type: string\n    default: e\n    description: An option a new revision removes.\n",
                "",
            ),
        ],
        &[],
    );
    refresh_ok(&sim, &retyped, &[]);
    assert_eq!(get(), serde_json::json!({"mode": 7, "level": 5}));
    // Back on the original options: the dropped values are gone for good.
    let original = variant(&sim, "original", &[], &[("VERSION", "3\n")]);
    refresh_ok(&sim, &original, &[]);
    assert_eq!(
        get(),
        serde_json::json!({"mode": "slow", "level": 5, "extra": "e"})
    );
}

#[test]
fn a_local_refresh_needs_the_same_charm_name() {
    let sim = Sim::new();
    deploy(&sim, 1, &[]);
    let charm = variant(
        &sim,
        "renamed",
        &[("metadata.yaml", "name: refreshtest", "name: othertest")],
        &[],
    );
    refused(
        &sim,
        &charm,
        "othertest-2",
        "cannot refresh \"refreshtest\" to \"othertest\"",
        &[],
    );
}

#[test]
fn a_resource_new_to_the_application_must_be_passed() {
    let sim = Sim::new();
    deploy(&sim, 1, &[]);
    let stored = sim.exec_ok("refreshtest/0", "resource-get blob");
    assert_eq!(std::fs::read_to_string(stored.trim()).unwrap(), "blob v1\n");
    let charm = variant(
        &sim,
        "more-resources",
        &[(
            "metadata.yaml",
            "resources:\n",
            "resources:\n  extra:\n    type: file\n    filename: extra.txt\n",
        )],
        &[],
    );
    refused(
        &sim,
        &charm,
        "refreshtest-2",
        "new resource \"extra\" was missing, please provide it via --resource",
        &[],
    );
    let file = sim.path("extra.txt");
    std::fs::write(&file, "extra v1\n").unwrap();
    let flag = format!("extra={}", file.display());
    refresh_ok(&sim, &charm, &["--resource", &flag]);
    let path = sim.exec_ok("refreshtest/0", "resource-get extra");
    assert!(path.trim().ends_with("/extra/extra.txt"), "{path}");
    assert_eq!(std::fs::read_to_string(path.trim()).unwrap(), "extra v1\n");
    // The resource it already had needs nothing.
    let again = variant(
        &sim,
        "again",
        &[(
            "metadata.yaml",
            "resources:\n",
            "resources:\n  extra:\n    type: file\n    filename: extra.txt\n",
        )],
        &[("VERSION", "3\n")],
    );
    refresh_ok(&sim, &again, &[]);
    assert_eq!(
        std::fs::read_to_string(sim.exec_ok("refreshtest/0", "resource-get blob").trim()).unwrap(),
        "blob v1\n"
    );
    // A resource the charm does not declare is an error of the tool.
    assert!(!sim
        .exec("refreshtest/0", "resource-get nope")
        .status
        .success());
}

const MANIFEST_NOBLE: &str =
    "bases:\n- architectures: [amd64]\n  channel: '24.04'\n  name: ubuntu\n";

#[test]
fn the_charm_bases_must_include_the_machine_base() {
    let sim = Sim::new();
    deploy(&sim, 1, &[]);
    // A packed charm's manifest.yaml that lists noble only.
    let noble = variant(&sim, "noble", &[], &[("manifest.yaml", MANIFEST_NOBLE)]);
    refused(
        &sim,
        &noble,
        "refreshtest-2",
        "base \"ubuntu@22.04\" not supported by charm, the charm supported bases are: ubuntu@24.04",
        &[],
    );
    // charmcraft.yaml's long form, listing jammy among others.
    let both = variant(
        &sim,
        "both",
        &[],
        &[(
            "charmcraft.yaml",
            "type: charm\nbases:\n- build-on:\n  - name: ubuntu\n    channel: '22.04'\n  run-on:\n  - name: ubuntu\n    channel: '22.04'\n  - name: ubuntu\n    channel: '24.04'\n",
        )],
    );
    refresh_ok(&sim, &both, &[]);
    assert_eq!(charm_rev(&sim), 2);
    // metadata.yaml `series:`.
    let jammy = variant(
        &sim,
        "jammy",
        &[("metadata.yaml", "peers:\n", "series: [jammy]\npeers:\n")],
        &[],
    );
    refresh_ok(&sim, &jammy, &[]);
    assert_eq!(charm_rev(&sim), 3);
}

#[test]
fn the_machine_base_comes_from_deploy_base() {
    let sim = Sim::new();
    // No bases declared (old-style local charm): any base deploys.
    deploy(&sim, 1, &["--base", "ubuntu@24.04"]);
    let jammy = variant(
        &sim,
        "jammy",
        &[("metadata.yaml", "peers:\n", "series: [jammy]\npeers:\n")],
        &[],
    );
    refused(
        &sim,
        &jammy,
        "refreshtest-2",
        "base \"ubuntu@24.04\" not supported by charm, the charm supported bases are: ubuntu@22.04",
        &[],
    );
    let noble = variant(&sim, "noble", &[], &[("manifest.yaml", MANIFEST_NOBLE)]);
    refresh_ok(&sim, &noble, &[]);
    // A unit added later runs on the application's base too.
    sim.ok(&["add-unit", APP]);
    refused(
        &sim,
        &jammy,
        "refreshtest-3",
        "base \"ubuntu@24.04\" not supported by charm, the charm supported bases are: ubuntu@22.04",
        &[],
    );
    // deploy refuses a base the charm does not list.
    let other = Sim::new();
    let out = other.run(&["deploy", jammy.to_str().unwrap(), "--base", "ubuntu@24.04"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("base \"ubuntu@24.04\" not supported by charm, the charm supported bases are: ubuntu@22.04"),
        "{}",
        text(&out.stderr)
    );
}
