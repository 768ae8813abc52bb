//! Storage instances, as Juju gives them to a machine unit: a `filesystem`
//! storage is a directory; a `block` storage is a device. Here a block
//! device is a sparse file in the model dir attached to a loop device with
//! `losetup` (root only); where that cannot be done, a plain directory
//! stands in for the device, and `status` says so.
//!
//! Releasing an instance (detach-storage, unit removal, destroy) unmounts
//! whatever the unit mounted from it and detaches the loop device, bounded
//! and logged, so a model leaves no loop devices or mounts behind.

use crate::sim::error::{bail, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A storage as metadata.yaml declares it, and one attached instance.
pub use crate::sim::model::{Attachment, StorageSpec};

/// `1G`, `512M`, `2T`, a plain number of MiB (as Juju reads sizes).
pub fn parse_size(raw: &str) -> Result<u64> {
    let raw = raw.trim();
    let (num, unit) = match raw.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => raw.split_at(i),
        None => (raw, "M"),
    };
    let n: u64 = match num.parse() {
        Ok(n) if n > 0 => n,
        _ => bail!("storage size {raw:?}: expected a number with M, G or T"),
    };
    let shift = match unit.trim_end_matches(['i', 'B']) {
        "M" | "m" => 20,
        "G" | "g" => 30,
        "T" | "t" => 40,
        other => bail!("storage size {raw:?}: unknown unit {other:?} (M, G or T)"),
    };
    Ok(n << shift)
}

/// `name=size` of `--storage`; the size may carry a `,count` Juju accepts.
pub fn parse_directive(raw: &str) -> Result<(String, u64)> {
    let Some((name, rest)) = raw.split_once('=') else {
        bail!("--storage: expected NAME=SIZE, got {raw:?}");
    };
    let size = rest.split(',').next().unwrap_or(rest);
    Ok((name.to_string(), parse_size(size)?))
}

/// Creates the instance `id` of storage `name` for a unit: a directory
/// for a filesystem storage; a sparse file on a loop device for a block
/// storage (a directory standing in when losetup fails).
pub fn attach(
    model_root: &Path,
    unit_dir: &Path,
    id: &str,
    name: &str,
    spec: &StorageSpec,
    size: u64,
) -> Result<Attachment> {
    let dir = crate::sim::hookenv::storage_dir(unit_dir, name);
    let mut a = Attachment {
        id: id.to_string(),
        name: name.to_string(),
        kind: spec.kind.clone(),
        size,
        location: dir.clone(),
        ..Default::default()
    };
    if spec.kind != "block" {
        std::fs::create_dir_all(&dir)?;
        return Ok(a);
    }
    let images = model_root.join("storage");
    std::fs::create_dir_all(&images)?;
    let backing = images.join(format!("{}.img", id.replace('/', "-")));
    // An image already there (a volume prepared beforehand, as a test
    // does to attach a disk that holds data) is kept, only grown to size.
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&backing)?;
    if f.metadata()?.len() < size {
        f.set_len(size)?;
    }
    drop(f);
    a.backing = Some(backing.clone());
    // JUJUSIM_NO_LOOP=1 takes the stand-in path on purpose (its tests).
    let attached = if std::env::var_os("JUJUSIM_NO_LOOP").is_some_and(|v| v == "1") {
        Err("JUJUSIM_NO_LOOP=1 is set".to_string())
    } else {
        attach_loop(&backing)
    };
    match attached {
        Ok(dev) if dev.starts_with("/dev/") => {
            a.location = PathBuf::from(&dev);
            a.loop_device = Some(dev);
        }
        outcome => {
            let why = match outcome {
                Ok(out) => format!("losetup printed {out:?}"),
                Err(e) => e,
            };
            std::fs::create_dir_all(&dir)?;
            a.stand_in = Some(format!(
                "no loop device ({why}): the directory {} stands in for the block device",
                dir.display()
            ));
            tracing::warn!("{id}: {}", a.stand_in.as_deref().unwrap_or_default());
        }
    }
    Ok(a)
}

/// Unmounts everything mounted from the instance (or below the unit's
/// dir from it) and detaches its loop device. Bounded; returns what it did
/// (or failed to do), for the log.
pub fn release(a: &Attachment, unit_dir: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    // A stand-in directory can only have been bind-mounted by the unit,
    // somewhere under its own dir.
    let under = a.stand_in.as_ref().map(|_| unit_dir);
    for mount_point in mounts_from(a.loop_device.as_deref(), under) {
        let done = run(Command::new("umount").arg(&mount_point))
            .or_else(|_| run(Command::new("umount").arg("-l").arg(&mount_point)));
        notes.push(match done {
            Ok(_) => format!("{}: unmounted {}", a.id, mount_point.display()),
            Err(e) => format!("{}: cannot unmount {}: {e}", a.id, mount_point.display()),
        });
    }
    if let Some(dev) = &a.loop_device {
        notes.push(match run(Command::new("losetup").arg("-d").arg(dev)) {
            Ok(_) => format!("{}: detached {dev}", a.id),
            Err(e) => format!("{}: cannot detach {dev}: {e}", a.id),
        });
    }
    notes
}

/// The volume leaves the machine (its machine is down, so nothing of it is
/// mounted any more, or what is, is unmounted): its loop device is
/// released, awaited (bounded) until the kernel has let it go, and the
/// attachment says it is unplugged. The image is kept.
pub fn unplug(a: &mut Attachment, unit_dir: &Path) -> Result<Vec<String>> {
    let Some(dev) = a.loop_device.clone() else {
        bail!("{}: no loop device to release", a.id);
    };
    let notes = release(a, unit_dir);
    // A device still busy (a mount of a machine being torn down) is only
    // marked autoclear by `losetup -d`: it goes when that mount goes.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while loop_backs(&dev, a.backing.as_deref()) {
        if std::time::Instant::now() > deadline {
            bail!(
                "{}: {dev} still holds {} 15 s after its release ({})",
                a.id,
                a.backing.as_deref().unwrap_or(Path::new("?")).display(),
                notes.join("; ")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    a.loop_device = None;
    a.unplugged = true;
    Ok(notes)
}

/// An unplugged volume comes back: its image on a new loop device (the
/// kernel's next free one, as a late disk may get another name).
pub fn plug(a: &mut Attachment) -> Result<String> {
    let Some(backing) = a.backing.clone() else {
        bail!("{}: no image to attach", a.id);
    };
    let dev = match attach_loop(&backing) {
        Ok(dev) if dev.starts_with("/dev/") => dev,
        Ok(out) => bail!("{}: losetup printed {out:?}", a.id),
        Err(e) => bail!("{}: {e}", a.id),
    };
    a.location = PathBuf::from(&dev);
    a.loop_device = Some(dev.clone());
    a.unplugged = false;
    Ok(format!(
        "{}: {} attached again as {dev}",
        a.id,
        backing.display()
    ))
}

/// Whether loop device `dev` (still) serves `backing`.
fn loop_backs(dev: &str, backing: Option<&Path>) -> bool {
    let name = Path::new(dev).file_name().unwrap_or_default();
    let file = Path::new("/sys/block").join(name).join("loop/backing_file");
    match (std::fs::read_to_string(file), backing) {
        (Ok(b), Some(want)) => {
            let want = std::fs::canonicalize(want).unwrap_or_else(|_| want.to_path_buf());
            Path::new(b.trim()) == want
        }
        (Ok(_), None) => true,
        (Err(_), _) => false,
    }
}

/// After `<name>-storage-detaching` succeeded: the instance is gone.
pub fn release_named(u: &mut crate::sim::model::Unit, name: &str) {
    let (gone, kept): (Vec<Attachment>, Vec<Attachment>) = std::mem::take(&mut u.storage)
        .into_iter()
        .partition(|a| a.name == name);
    u.storage = kept;
    for a in gone {
        for note in release(&a, &u.dir) {
            eprintln!("jujusim: {}: {note}", u.name);
        }
    }
}

/// Every instance of the unit (its removal, or destroy).
pub fn release_all(u: &mut crate::sim::model::Unit) {
    for a in std::mem::take(&mut u.storage) {
        for note in release(&a, &u.dir) {
            eprintln!("jujusim: {}: {note}", u.name);
        }
    }
}

/// Mount points whose source is `device`, or (for a stand-in) any mount
/// under `under`, deepest first (nested mounts go before their parents).
fn mounts_from(device: Option<&str>, under: Option<&Path>) -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let dev_id = device.and_then(|d| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(d).ok().map(|m| m.rdev())
    });
    let mut out: Vec<PathBuf> = Vec::new();
    for line in info.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            continue;
        };
        let (Some(point), Some(src)) = (fields.get(4), fields.get(sep + 2)) else {
            continue;
        };
        let point = PathBuf::from(unescape(point));
        let by_device = device.is_some_and(|d| *src == d)
            || dev_id.is_some_and(|id| {
                fields.get(2).is_some_and(|mm| {
                    let (ma, mi) = mm.split_once(':').unwrap_or(("", ""));
                    let (ma, mi): (u64, u64) = (ma.parse().unwrap_or(0), mi.parse().unwrap_or(0));
                    nix::sys::stat::makedev(ma, mi) == id
                })
            });
        let by_dir = under.is_some_and(|d| point.starts_with(d) && point != d);
        if by_device || by_dir {
            out.push(point);
        }
    }
    out.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    out.dedup();
    out
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Where jujusims of every model on the host take turns at `losetup`.
const LOSETUP_LOCK: &str = "/run/lock/jujusim-losetup.lock";

/// `losetup --find --show` under a host-wide lock: the free-device search
/// and the attach are two steps, and two callers at once can be handed the
/// same device (one then fails, and its volume would be a directory).
fn attach_loop(backing: &Path) -> std::result::Result<String, String> {
    use nix::fcntl::{Flock, FlockArg};
    let _ = std::fs::create_dir_all("/run/lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOSETUP_LOCK)
        .map_err(|e| format!("{LOSETUP_LOCK}: {e}"))?;
    let _held = Flock::lock(lock, FlockArg::LockExclusive)
        .map_err(|(_, e)| format!("{LOSETUP_LOCK}: flock: {e}"))?;
    run(Command::new("losetup")
        .args(["--find", "--show"])
        .arg(backing))
}

/// Runs a command with a bound; its trimmed stdout, or why it failed.
fn run(cmd: &mut Command) -> std::result::Result<String, String> {
    use std::process::Stdio;
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{cmd:?}: timed out"));
            }
        }
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "{:?} exited {}: {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_as_juju_reads_them() {
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("64").unwrap(), 64 << 20);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert!(parse_size("x").is_err() && parse_size("1Q").is_err());
        assert_eq!(
            parse_directive("data=1G,1").unwrap(),
            ("data".into(), 1 << 30)
        );
        assert!(parse_directive("data").is_err());
    }
}
