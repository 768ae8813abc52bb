//! jujusim's block storage: `deploy --storage`, a loop device (or a
//! directory standing in for it, said so), storage-get/list, the attached
//! and detaching hooks, `detach-storage`, and nothing left behind.

mod sim_support;

use sim_support::{charm, text, Sim};
use std::path::Path;

/// simtest with a block storage `disk` (range 0-1) beside its `data`.
fn block_charm(sim: &Sim) -> std::path::PathBuf {
    let dest = sim.path("charm");
    std::fs::create_dir_all(&dest).unwrap();
    for f in ["dispatch", "metadata.yaml", "config.yaml", "actions.yaml"] {
        std::fs::copy(charm().join(f), dest.join(f)).unwrap();
    }
    let meta = std::fs::read_to_string(dest.join("metadata.yaml")).unwrap();
    let meta = meta.replace(
        "storage:\n",
        "storage:\n  disk:\n    type: block\n    multiple:\n      range: 0-1\n    minimum-size: 16M\n",
    );
    std::fs::write(dest.join("metadata.yaml"), meta).unwrap();
    dest
}

/// Loop devices backed by a file under `dir`.
fn loops_under(dir: &Path) -> Vec<String> {
    let out = std::process::Command::new("losetup")
        .args(["-l", "-n", "-O", "NAME,BACK-FILE"])
        .output();
    let Ok(out) = out else { return vec![] };
    let dir = std::fs::canonicalize(dir).unwrap_or(dir.to_path_buf());
    text(&out.stdout)
        .lines()
        .filter(|l| l.contains(&*dir.to_string_lossy()))
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect()
}

fn mounts_under(dir: &Path) -> Vec<String> {
    let dir = std::fs::canonicalize(dir).unwrap_or(dir.to_path_buf());
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(String::from))
        .filter(|p| p.starts_with(&*dir.to_string_lossy()))
        .collect()
}

#[test]
fn block_storage_is_a_device_with_hooks_and_is_released() {
    let sim = Sim::new();
    let c = block_charm(&sim);
    // Unit 0 mounts its device in the attached hook, as a charm would.
    sim.ok(&[
        "deploy",
        c.to_str().unwrap(),
        "-n",
        "2",
        "--storage",
        "disk=64M",
    ]);
    let st = sim.status();
    let s0 = &st["applications"]["simtest"]["units"]["simtest/0"]["storage"];
    let disk = s0
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "disk/0")
        .expect("disk/0 attached")
        .clone();
    let loop_dev = disk["loop-device"].as_str().map(String::from);
    match &loop_dev {
        Some(dev) => eprintln!("disk/0 is the loop device {dev}"),
        None => eprintln!(
            "NO LOOP DEVICE on this machine, the directory stand-in is tested: {}",
            disk["stand-in"]
        ),
    }
    assert_eq!(
        sim.exec_ok("simtest/0", "storage-get -s disk/0 kind")
            .trim(),
        "block"
    );
    let location = sim.exec_ok("simtest/0", "storage-get -s disk/0 location");
    assert_eq!(location.trim(), disk["location"].as_str().unwrap());
    if let Some(dev) = &loop_dev {
        assert_eq!(location.trim(), dev);
        let bytes = std::fs::metadata(disk["location"].as_str().unwrap());
        assert!(bytes.is_ok(), "the device exists");
    }
    let list = sim.exec_ok("simtest/0", "storage-list --format=json");
    assert!(list.contains("disk/0") && list.contains("data/0"), "{list}");
    let hooks = sim.hooks("simtest/0");
    let attached = hooks.iter().position(|h| h == "disk-storage-attached");
    let install = hooks.iter().position(|h| h == "install");
    assert!(attached.is_some() && attached < install, "{hooks:?}");
    let table = sim.ok(&["status"]);
    assert!(table.contains("disk/0"), "{table}");
    if loop_dev.is_none() {
        assert!(table.contains("stands in"), "{table}");
    }

    // A mount from the device, then detach-storage: detaching runs, the
    // mount and the loop device are gone, the instance too.
    if let Some(dev) = &loop_dev {
        let mnt = sim.root("simtest/0").join("mnt");
        sim.exec_ok(
            "simtest/0",
            &format!(
                "mkfs.ext4 -q {dev} && mkdir -p {0} && mount {dev} {0}",
                mnt.display()
            ),
        );
        assert_eq!(mounts_under(&sim.model).len(), 1);
    }
    sim.ok(&["detach-storage", "simtest/0", "disk/0"]);
    assert_eq!(
        sim.hooks("simtest/0").last().unwrap(),
        "disk-storage-detaching"
    );
    assert!(
        mounts_under(&sim.model).is_empty(),
        "{:?}",
        mounts_under(&sim.model)
    );
    if let Some(dev) = &loop_dev {
        assert!(!loops_under(&sim.model).contains(dev));
    }
    let out = sim.exec("simtest/0", "storage-get -s disk/0 kind");
    assert!(!out.status.success(), "disk/0 is gone");

    // Unit removal runs detaching after stop; destroy releases the rest.
    sim.ok(&["remove-unit", "simtest/1"]);
    let log: Vec<String> = sim
        .runs()
        .into_iter()
        .filter(|(u, _)| u == "simtest/1")
        .map(|(_, h)| h)
        .collect();
    let stop = log.iter().position(|h| h == "stop").unwrap();
    let det = log
        .iter()
        .position(|h| h == "disk-storage-detaching")
        .unwrap();
    assert!(stop < det, "{log:?}");
    sim.ok(&["add-unit", "--storage", "disk=32M"]);
    assert!(loop_dev.is_none() || !loops_under(&sim.model).is_empty());
    sim.ok(&["destroy"]);
    assert!(
        loops_under(&sim.model).is_empty(),
        "{:?}",
        loops_under(&sim.model)
    );
    assert!(mounts_under(&sim.model).is_empty());
}

#[test]
fn without_storage_directives_a_zero_minimum_storage_is_not_attached() {
    let sim = Sim::new();
    let c = block_charm(&sim);
    sim.ok(&["deploy", c.to_str().unwrap()]);
    let list = sim.exec_ok("simtest/0", "storage-list --format=json");
    assert!(!list.contains("disk") && list.contains("data/0"), "{list}");
    assert!(!sim
        .hooks("simtest/0")
        .contains(&"disk-storage-attached".to_string()));
    let bad = sim.run(&["add-unit", "--storage", "disk=1M"]);
    assert!(!bad.status.success() && text(&bad.stderr).contains("at least 16 MiB"));
    let bad = sim.run(&["add-unit", "--storage", "nope=1G"]);
    assert!(!bad.status.success() && text(&bad.stderr).contains("no storage"));
}

/// `reboot --volumes-missing`: the machine comes back without its volume
/// (its loop device released, a mount of it undone, the model still has
/// the storage attached and says it is missing); `plug-volumes` attaches
/// the same image again, no hook run; destroy leaves nothing behind.
#[test]
fn a_volume_left_off_at_a_reboot_is_missing_until_plugged_again() {
    let sim = Sim::new();
    let _destroy = DestroyOnDrop(&sim);
    let c = block_charm(&sim);
    sim.ok(&["deploy", c.to_str().unwrap(), "--storage", "disk=64M"]);
    let disk = |sim: &Sim| {
        let st = sim.status();
        st["applications"]["simtest"]["units"]["simtest/0"]["storage"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == "disk/0")
            .expect("disk/0 attached")
            .clone()
    };
    let Some(dev) = disk(&sim)["loop-device"].as_str().map(String::from) else {
        // The stand-in directory has no device to leave off: refused.
        let out = sim.run(&["reboot", "simtest/0", "--volumes-missing"]);
        assert!(
            !out.status.success() && text(&out.stderr).contains("no volume on a loop device"),
            "{out:?}"
        );
        return;
    };
    let mnt = sim.root("simtest/0").join("mnt");
    sim.exec_ok(
        "simtest/0",
        &format!(
            "mkfs.ext4 -q {dev} && mkdir -p {0} && mount {dev} {0}",
            mnt.display()
        ),
    );
    assert_eq!(mounts_under(&sim.model).len(), 1);
    sim.ok(&["reboot", "simtest/0", "--volumes-missing"]);
    assert!(mounts_under(&sim.model).is_empty());
    assert!(
        loops_under(&sim.model).is_empty(),
        "{:?}",
        loops_under(&sim.model)
    );
    let d = disk(&sim);
    assert_eq!(d["unplugged"], true, "{d}");
    assert!(d["loop-device"].is_null(), "{d}");
    assert!(sim.ok(&["status"]).contains("missing from the machine"));
    assert_eq!(sim.hooks("simtest/0").last().unwrap(), "start");

    let hooks = sim.hooks("simtest/0").len();
    sim.ok(&["plug-volumes", "simtest/0"]);
    let d = disk(&sim);
    let back = d["loop-device"].as_str().expect("a loop device again");
    assert_eq!(d["location"].as_str(), Some(back));
    assert_eq!(d["unplugged"], false);
    assert_eq!(loops_under(&sim.model), vec![back.to_string()]);
    assert_eq!(sim.hooks("simtest/0").len(), hooks, "no hook ran");
    // The same file system: the image was kept.
    let blkid = std::process::Command::new("blkid")
        .args(["-p", "-o", "value", "-s", "TYPE", back])
        .output()
        .unwrap();
    assert_eq!(text(&blkid.stdout).trim(), "ext4");
    let again = sim.run(&["plug-volumes", "simtest/0"]);
    assert!(
        !again.status.success() && text(&again.stderr).contains("no missing volume"),
        "{again:?}"
    );
    sim.ok(&["destroy"]);
    assert!(loops_under(&sim.model).is_empty());
    assert!(mounts_under(&sim.model).is_empty());
}

/// Destroys the model on drop, also on panic: its loop devices and mounts
/// never outlive the test.
struct DestroyOnDrop<'a>(&'a Sim);

impl Drop for DestroyOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.run(&["destroy"]);
    }
}
