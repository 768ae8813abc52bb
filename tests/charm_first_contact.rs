//! First contact: what a new user gets from the commands README gives,
//! on a machine as it comes (no snapd here, and no `--env` they would not
//! know to pass).

mod charm_support;
use charm_support::*;

/// `jujusim deploy <charm> -n 3` without `--env ETCD_CHARM_SERVICE=direct`
/// picks the snap backend; on a machine without snapd every unit must end
/// `blocked` saying what is missing and what to do, with no hook in error
/// (a retried hook cannot install snapd).
#[test]
fn a_deploy_without_snapd_blocks_every_unit_saying_what_to_do() {
    if let Some(dir) = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .find(|d| d.join("snap").is_file())
    {
        // There a deploy would really install the etcd snap.
        etcd_charm::prereq::skip(
            "charm_first_contact",
            &format!("{} has a `snap` command", dir.join("snap").display()),
            "run the suite on a machine without snapd",
        );
        return;
    }
    let m = Model::new();
    let charm = m.charm.to_str().unwrap().to_string();
    // ETCD_CHARM_ROOT keeps the test off the host's /etc and /var; the
    // backend is left to its default, as a user's deploy leaves it.
    let out = m
        .command(&[
            "deploy",
            &charm,
            "-n",
            "3",
            "--env",
            "ETCD_CHARM_ROOT={unit_root}",
        ])
        .env_remove("ETCD_CHARM_SERVICE")
        .output()
        .expect("running jujusim");
    let log = String::from_utf8_lossy(&m.run(&["log"]).stdout).into_owned();
    assert!(
        out.status.success(),
        "deploy failed: {}\n--- hook log ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        tail(&log, 40)
    );

    let status = m.status();
    let units = status["applications"]["etcd"]["units"].as_object().unwrap();
    assert_eq!(units.len(), 3, "{status:#}");
    for (name, u) in units {
        let ws = &u["workload-status"];
        assert_eq!(ws["current"], "blocked", "{name}: {u:#}");
        let msg = ws["message"].as_str().unwrap_or("");
        for want in [
            "no `snap` command",
            "install snapd",
            "ETCD_CHARM_SERVICE=direct",
        ] {
            assert!(msg.contains(want), "{name}: {msg:?} lacks {want:?}");
        }
        assert_ne!(u["juju-status"]["current"], "error", "{name}: {u:#}");
        // Every hook exited 0, and install ran once (a failed one is retried).
        let unit_log = m.ok(&["log", "--unit", name]);
        let lines: Vec<&str> = unit_log.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(
            lines.iter().all(|l| l.contains("exit 0")),
            "{name}:\n{unit_log}"
        );
        let installs = lines.iter().filter(|l| l.contains(" install ")).count();
        assert_eq!(installs, 1, "{name}:\n{unit_log}");
    }
    assert!(!log.contains("could not run snap"), "{log}");
}
