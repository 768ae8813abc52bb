//! The `data` storage on real etcd through jujusim: a new unit's empty
//! device is formatted, mounted at <root>/media/etcd and holds etcd's data;
//! a device with a file system is never formatted (and an etcd member on it
//! is used); a unit taken over with its data on the volume stays there; a
//! detached storage takes its member out of the cluster cleanly.
//!
//! Block devices are jujusim's loop devices (we run as root). Where the
//! machine has none, jujusim's directory stand-in is used and said so.

mod upgrade_support;
use upgrade_support::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const KEYS: usize = 20;

fn storage_model() -> Model {
    Model::new()
}

fn volume(m: &Model, unit: &str) -> PathBuf {
    m.root(unit).join("media/etcd")
}

fn mounted(p: &Path) -> Option<String> {
    let p = std::fs::canonicalize(p).ok()?;
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(&*p.to_string_lossy()))
        .map(String::from)
}

/// Says which kind of device the test runs on; true for loop devices.
fn on_loop_devices(m: &Model, unit: &str) -> bool {
    let st = &m.unit(unit)["storage"][0];
    match st["loop-device"].as_str() {
        Some(dev) => {
            eprintln!("{unit}: data storage on the loop device {dev}");
            true
        }
        None => {
            etcd_charm::prereq::skip(
                "charm_storage loop device",
                &format!(
                    "{unit}: no loop device here, the directory stand-in is used: {}",
                    st["stand-in"]
                ),
                "run as root where losetup can attach (util-linux)",
            );
            false
        }
    }
}

fn config_data_dir(m: &Model, unit: &str) -> String {
    let conf =
        std::fs::read_to_string(m.root(unit).join("var/snap/etcd/common/etcd.conf.yml")).unwrap();
    conf.lines()
        .find_map(|l| l.strip_prefix("data-dir:"))
        .unwrap()
        .trim()
        .trim_matches(['\'', '"'])
        .to_string()
}

fn fstab(m: &Model, unit: &str) -> String {
    std::fs::read_to_string(m.root(unit).join("etc/fstab")).unwrap_or_default()
}

fn answers(ep: &str) -> bool {
    etcdctl(ep, &["endpoint", "health"]).status.success()
}

#[test]
fn a_new_unit_runs_etcd_on_its_formatted_volume_and_detaching_leaves_the_cluster() {
    let m = storage_model();
    m.deploy_with(1, &["--storage", "data=1G"]);
    let loops = on_loop_devices(&m, "etcd/0");
    m.assert_all_healthy(1);
    let vol = volume(&m, "etcd/0");
    if loops {
        let line = mounted(&vol).expect("the volume is mounted");
        assert!(line.contains(" ext4 "), "{line}");
    }
    assert_eq!(
        config_data_dir(&m, "etcd/0"),
        vol.join("data").display().to_string()
    );
    assert!(vol.join("data/member/wal").is_dir());
    assert!(
        !m.data_dir("etcd/0").join("member").exists(),
        "nothing in the snap's data dir"
    );
    let tab = fstab(&m, "etcd/0");
    assert!(
        tab.contains(&format!("{} ", vol.display())) && tab.contains("nofail"),
        "{tab}"
    );
    put_keys(&m.endpoint("etcd/0"), "k", KEYS);

    // A second unit gets the same storage (deploy's directive).
    m.ok(&["add-unit"]);
    m.assert_all_healthy(2);
    assert!(volume(&m, "etcd/1").join("data/member/wal").is_dir());
    assert_eq!(members(&m.endpoints()).len(), 2);

    // Detaching etcd/1's storage takes its member out, stops its etcd and
    // unmounts; the keys stay on etcd/0.
    let ep1 = m.endpoint("etcd/1");
    m.ok(&["detach-storage", "etcd/1", "data/1"]);
    let ms = members(&m.endpoint("etcd/0"));
    assert_eq!(ms.len(), 1, "{ms:?}");
    assert_eq!(ms[0].1, "etcd0");
    assert_keys(&m.endpoint("etcd/0"), "k", KEYS);
    assert!(!answers(&ep1), "etcd/1's etcd is not running");
    assert!(mounted(&volume(&m, "etcd/1")).is_none());
    let (_, s, msg) = m
        .workloads()
        .into_iter()
        .find(|(u, ..)| u == "etcd/1")
        .unwrap();
    assert_eq!(s, "blocked", "{msg}");
    // Later hooks do not start etcd on the bare mount point.
    m.ok(&["update-status"]);
    assert!(!answers(&ep1));

    // Removing a unit with its storage: stop leaves the cluster, detaching
    // unmounts, and jujusim releases the loop device.
    m.ok(&["add-unit"]);
    let ms = members(&m.endpoint("etcd/0"));
    assert_eq!(ms.len(), 2, "{ms:?}");
    let vol2 = volume(&m, "etcd/2");
    let dev2 = m.unit("etcd/2")["storage"][0]["location"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(loops.then(|| mounted(&vol2)).is_none_or(|l| l.is_some()));
    m.ok(&["remove-unit", "etcd/2"]);
    let ms = members(&m.endpoint("etcd/0"));
    assert_eq!(ms.len(), 1, "{ms:?}");
    assert_keys(&m.endpoint("etcd/0"), "k", KEYS);
    assert!(mounted(&vol2).is_none());
    if loops {
        // The kernel clears an autoclear loop device once its last user is
        // gone, which may be a moment after the umount returned.
        wait_until(
            &format!("{dev2} to be released"),
            Duration::from_secs(15),
            || {
                let listed = Command::new("losetup").arg("-l").output().unwrap();
                !String::from_utf8_lossy(&listed.stdout)
                    .lines()
                    .any(|l| l.starts_with(&format!("{dev2} ")))
            },
        );
    }
}

#[test]
fn a_detaching_volume_whose_member_may_not_leave_fails_the_hook_with_etcd_running() {
    let m = storage_model();
    m.deploy_with(3, &["--storage", "data=1G"]);
    m.assert_all_healthy(3);
    put_keys(&m.endpoints(), "k", KEYS);
    let held = m.hold_down("etcd/2");
    // Taking etcd/1's data away would leave one of two members up: its
    // detaching hook fails, so Juju keeps the disk under the live voter.
    let out = m.run(&["detach-storage", "etcd/1", "data/1"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let u = m.unit("etcd/1");
    assert_eq!(
        u["juju-status"]["message"], "hook failed: \"data-storage-detaching\"",
        "{u}"
    );
    assert_eq!(
        u["storage"][0]["id"], "data/1",
        "the storage stays attached: {u}"
    );
    let why = m.last_output("etcd/1", "data-storage-detaching");
    assert!(
        why.contains("no quorum") && why.contains("juju resolve etcd/1"),
        "the hook says why and what to do: {why}"
    );
    let ep1 = m.endpoint("etcd/1");
    assert!(answers(&ep1), "etcd/1's etcd still runs");
    assert!(mounted(&volume(&m, "etcd/1")).is_some(), "still mounted");
    assert_eq!(members(&m.endpoint("etcd/0")).len(), 3);
    let eps = format!("{},{ep1}", m.endpoint("etcd/0"));
    assert_eq!(puts_ok(&eps, "after", 10), 10, "writes after the refusal");

    // The down member returns; the retried hook leaves the cluster, stops
    // etcd and unmounts; the storage is released.
    m.bring_back(held);
    m.ok(&["resolve", "etcd/1"]);
    let ms = members(&m.endpoint("etcd/0"));
    assert_eq!(ms.len(), 2, "{ms:?}");
    assert!(!answers(&ep1), "etcd/1's etcd is stopped");
    assert!(mounted(&volume(&m, "etcd/1")).is_none());
    assert!(m.unit("etcd/1")["storage"][0].is_null());
    assert_keys(&m.endpoint("etcd/0"), "k", KEYS);
}

#[test]
fn a_volume_with_a_file_system_is_not_formatted_and_its_member_is_used() {
    // A volume as a first model leaves it: an etcd member and keys on it.
    let a = storage_model();
    a.deploy_with(1, &["--storage", "data=1G"]);
    if !on_loop_devices(&a, "etcd/0") {
        return;
    }
    a.assert_all_healthy(1);
    put_keys(&a.endpoint("etcd/0"), "a", KEYS);
    let ids = etcd_charm::wal::read_ids(&volume(&a, "etcd/0").join("data"))
        .unwrap()
        .unwrap();
    a.ok(&["destroy"]);
    let image = a.dir.join("storage/data-0.img");
    // And a file of someone's beside the data.
    let mnt = tempfile::tempdir().unwrap();
    let st = Command::new("mount")
        .args(["-o", "loop"])
        .arg(&image)
        .arg(mnt.path())
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::write(mnt.path().join("keep.txt"), "precious").unwrap();
    assert!(Command::new("umount")
        .arg(mnt.path())
        .status()
        .unwrap()
        .success());

    // A second model attaches that volume to its new unit.
    let b = storage_model();
    std::fs::create_dir_all(b.dir.join("storage")).unwrap();
    let st = Command::new("cp")
        .arg("--sparse=always")
        .arg(&image)
        .arg(b.dir.join("storage/data-0.img"))
        .status()
        .unwrap();
    assert!(st.success());
    drop(a);
    b.deploy_with(1, &["--storage", "data=1G"]);
    assert!(on_loop_devices(&b, "etcd/0"));
    let vol = volume(&b, "etcd/0");
    assert_eq!(
        std::fs::read_to_string(vol.join("keep.txt")).unwrap(),
        "precious",
        "the file system was not formatted"
    );
    wait_until("etcd/0 healthy", Duration::from_secs(60), || {
        b.workloads()[0].1 == "active"
    });
    b.assert_all_healthy(1);
    assert_eq!(
        live_ids(&b.endpoint("etcd/0")),
        ids,
        "the member on the volume is used"
    );
    assert_keys(&b.endpoint("etcd/0"), "a", KEYS);
}

#[test]
fn a_device_with_an_unknown_signature_is_not_formatted() {
    let m = storage_model();
    // A volume that holds a swap signature (not a file system): blocked,
    // left as it is.
    std::fs::create_dir_all(m.dir.join("storage")).unwrap();
    let image = m.dir.join("storage/data-0.img");
    let f = std::fs::File::create(&image).unwrap();
    f.set_len(1 << 30).unwrap();
    drop(f);
    let made = Command::new("mkswap").arg("-q").arg(&image).status();
    if !made.is_ok_and(|s| s.success()) {
        etcd_charm::prereq::skip(
            "charm_storage swap signature",
            "no mkswap",
            "apt-get install util-linux",
        );
        return;
    }
    let before = std::fs::read(&image).unwrap()[..1 << 20].to_vec();
    m.deploy_with(1, &["--storage", "data=1G"]);
    if !on_loop_devices(&m, "etcd/0") {
        return;
    }
    let (_, s, msg) = m.workloads().remove(0);
    assert_eq!(s, "blocked", "{msg}");
    assert!(
        msg.contains("swap") && msg.contains("not formatted"),
        "{msg}"
    );
    assert_eq!(std::fs::read(&image).unwrap()[..1 << 20], before[..]);
}

#[test]
fn a_unit_taken_over_with_its_data_on_the_volume_keeps_it_there() {
    let up = Upgrade::deploy(1, &[]);
    let u = "etcd/0";
    let legacy = bootstrap_legacy(&up, KEYS, true);
    // The Python charm's layout: the volume at /media/etcd (a tmpfs here),
    // the member in /media/etcd/data, fstab's line, data-dir there.
    let root = up.m.root(u);
    let vol = root.join("media/etcd");
    std::fs::create_dir_all(&vol).unwrap();
    assert!(Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256m", "tmpfs"])
        .arg(&vol)
        .status()
        .unwrap()
        .success());
    let _unmount = Unmount(vol.clone());
    let data = vol.join("data");
    std::fs::create_dir_all(&data).unwrap();
    assert!(Command::new("cp")
        .arg("-a")
        .arg(up.legacy_dir(u).join("member"))
        .arg(&data)
        .status()
        .unwrap()
        .success());
    std::fs::remove_dir_all(up.legacy_dir(u)).unwrap();
    let paths = up.paths(u);
    let ip = up.m.address(u);
    std::fs::write(
        paths.config_file(),
        snap_migrated_config("etcd0", &data, &ip),
    )
    .unwrap();
    let _ = std::fs::remove_file(paths.env_config_2x());
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(
        root.join("etc/fstab"),
        "/dev/vdb /media/etcd ext4 defaults 0 0\n",
    )
    .unwrap();
    up.start_old_etcd();
    let ep = up.m.endpoint(u);
    assert_eq!(live_ids(&ep), legacy.ids[0].1);

    let out = up.refresh(&[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    up.m.assert_all_healthy(1);
    assert_eq!(live_ids(&ep), legacy.ids[0].1);
    assert_keys(&ep, "legacy", KEYS);
    assert_eq!(config_data_dir(&up.m, u), data.display().to_string());
    assert!(data.join("member/wal").is_dir(), "still on the volume");
    let snap = paths.snap_data_dir();
    assert!(
        !snap.join("member").exists() && !snap.join("member.incoming").exists(),
        "nothing migrated off the volume: {:?}",
        names(&snap)
    );
    // And a reboot converges the same way.
    up.m.ok(&["reboot", u]);
    up.m.assert_all_healthy(1);
    assert_eq!(live_ids(&ep), legacy.ids[0].1);
    // etcd stopped before the tmpfs goes (on a panic, lazily after).
    up.m.ok(&["destroy"]);
}

/// Unmounts the test's own tmpfs on drop (after the model stopped etcd).
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn without_loop_devices_the_stand_in_directory_is_bind_mounted() {
    // As on a machine where losetup fails: jujusim's directory stand-in.
    let m = storage_model();
    let out = m
        .command(&[
            "deploy",
            m.charm.to_str().unwrap(),
            "--config",
            "bind_to_all_interfaces=false",
            "--env",
            "ETCD_CHARM_SERVICE=direct",
            "--env",
            "ETCD_CHARM_ROOT={unit_root}",
            "--storage",
            "data=1G",
        ])
        .env("JUJUSIM_NO_LOOP", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The stand-in is what this test is about: asked for, not skipped.
    assert!(m.unit("etcd/0")["storage"][0]["loop-device"].is_null());
    assert!(m.ok(&["status"]).contains("stands in"));
    m.assert_all_healthy(1);
    let vol = volume(&m, "etcd/0");
    let stand_in = PathBuf::from(m.unit("etcd/0")["storage"][0]["location"].as_str().unwrap());
    assert!(mounted(&vol).is_some(), "bind-mounted");
    assert!(
        stand_in.join("data/member/wal").is_dir(),
        "the data is in the stand-in"
    );
    assert!(fstab(&m, "etcd/0").contains("bind,nofail"));
    m.ok(&["destroy"]);
    assert!(mounted(&vol).is_none(), "destroy unmounts the bind mount");
}
