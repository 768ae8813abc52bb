//! The `data` storage volume: what is on the machine (fstab, mounts, the
//! attached device and its signature) and the commands that prepare and
//! release it. The charm's planner decides from these facts (charm/volume.rs).
//!
//! As the Python charm did, the volume is mounted at `/media/etcd` (the etcd
//! snap's `removable-media` plug reaches `/media`) and etcd's data dir is
//! `/media/etcd/data`. Unlike it, a device is formatted only when it holds
//! no file system signature and no data, and the fstab line has `nofail`.
//!
//! Which data dir is canonical is decided from observed facts only (rule 3):
//! the volume is in use when fstab mounts something at `/media/etcd`,
//! something is mounted there, or etcd.conf.yml's data-dir is under it.

use crate::error::{Error, Result};
use crate::paths::Paths;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The storage name in metadata.yaml.
pub const NAME: &str = "data";
/// Where the volume is mounted (as configs and fstab name it).
pub const MOUNT_POINT: &str = crate::mounts::VOLUME_MOUNT_POINT;
/// etcd's data dir on the volume.
pub const DATA_DIR: &str = "/media/etcd/data";
/// Bytes read from the start of a device to tell "empty" from "holds data".
const PROBE_BYTES: usize = 1 << 20;

/// What a device holds, by `blkid -p` and its first MiB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signature {
    /// No signature and only zeros: safe to format.
    Empty,
    /// A file system blkid names (`ext4`, `xfs`…), with its UUID if any.
    FileSystem {
        fs_type: String,
        uuid: Option<String>,
    },
    /// A signature that is not a file system (a partition table, LVM, RAID…).
    Other(String),
    /// No signature, but not zeros either: someone's data.
    Data,
    /// The location is a directory (jujusim's stand-in for a device).
    Directory,
    /// Could not be read: why.
    Unreadable(String),
}

/// The attached `data` storage instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    pub id: Option<String>,
    /// The device path (or the stand-in directory).
    pub path: PathBuf,
    pub signature: Signature,
}

use crate::mounts::unescape;
pub use crate::mounts::{mounted_at, Mounted};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageFacts {
    /// The mount point under the root.
    pub mount_point: PathBuf,
    /// fstab's line for the mount point, as found.
    pub fstab: Option<String>,
    pub mounted: Option<Mounted>,
    /// etcd.conf.yml's data-dir is under the mount point.
    pub config_on_volume: bool,
    /// The attached storage, when there is one (and was looked up).
    pub device: Option<Device>,
    /// This hook is `data-storage-detaching`.
    pub detaching: bool,
    /// This hook is `data-storage-attached`.
    pub attaching: bool,
}

impl StorageFacts {
    /// The volume holds (or must hold) etcd's data dir.
    pub fn in_use(&self) -> bool {
        self.fstab.is_some() || self.mounted.is_some() || self.config_on_volume
    }

    /// The mounted file system is the attached device's.
    pub fn mounted_is_device(&self) -> bool {
        match (&self.mounted, &self.device) {
            (Some(m), Some(d)) => match &d.signature {
                Signature::Directory => true,
                _ => rdev(&d.path).is_some_and(|r| r == m.dev),
            },
            _ => false,
        }
    }
}

/// The paths with the canonical data dir on the volume when it is in use.
/// Reads fstab, the mount table and etcd.conf.yml only (no hook tools).
pub fn paths(base: Paths) -> Paths {
    let mp = base.host(MOUNT_POINT);
    if fstab_line(&base, &mp).is_some() || mounted_at(&mp).is_some() || config_on_volume(&base, &mp)
    {
        base.with_data_dir(DATA_DIR)
    } else {
        base
    }
}

/// Everything above, and the attached device (from the storage hook's
/// environment, else `storage-list`/`storage-get`, looked up only while the
/// volume is not in use yet). `look_up` false: no hook tool is called.
pub fn observe(
    paths: &Paths,
    event: &crate::context::Event,
    hook_location: Option<&Path>,
    look_up: Option<&crate::hooktools::HookTools>,
) -> Result<StorageFacts> {
    use crate::context::Event;
    let mp = paths.host(MOUNT_POINT);
    let (attaching, detaching) = match event {
        Event::Storage { name, attached } if name == NAME => (*attached, !*attached),
        _ => (false, false),
    };
    let mut f = StorageFacts {
        fstab: fstab_line(paths, &mp),
        mounted: mounted_at(&mp),
        config_on_volume: config_on_volume(paths, &mp),
        mount_point: mp,
        attaching,
        detaching,
        device: None,
    };
    let location = match (attaching || detaching, hook_location) {
        (true, Some(l)) => Some((None, l.to_path_buf())),
        // Each lookup is a call to the Juju agent: only while the volume is
        // not in use yet, and only in the hooks that set a unit up.
        _ => match look_up {
            Some(tools) if !f.in_use() && sets_up(event) => {
                // A charm revision that does not declare the storage may
                // get an error rather than an empty list: no storage then.
                let found = tools.storage_list(NAME).and_then(|ids| match ids.first() {
                    Some(id) => tools
                        .storage_get(id, "location")
                        .map(|l| l.map(|l| (Some(id.clone()), PathBuf::from(l)))),
                    None => Ok(None),
                });
                found.unwrap_or_else(|e| {
                    tracing::warn!("no {NAME} storage looked up: {e}");
                    None
                })
            }
            _ => None,
        },
    };
    if let Some((id, path)) = location {
        // Only the attached hook formats, so only it needs the signature
        // read; elsewhere the device is known by its path.
        let signature = if f.mounted.is_none() {
            signature(&path)
        } else {
            Signature::Unreadable("not read: mounted".into())
        };
        f.device = Some(Device {
            id,
            path,
            signature,
        });
    }
    Ok(f)
}

fn sets_up(event: &crate::context::Event) -> bool {
    use crate::context::Event;
    matches!(
        event,
        Event::Install | Event::Start | Event::UpgradeCharm | Event::ConfigChanged
    )
}

fn config_on_volume(paths: &Paths, mp: &Path) -> bool {
    crate::layout::read_found_config(paths)
        .and_then(|c| c.ok())
        .and_then(|c| crate::layout::configured_data_dir(paths, &c))
        .is_some_and(|d| d.starts_with(mp))
}

/// The fstab line (not a comment) whose mount point is `mp`.
fn fstab_line(paths: &Paths, mp: &Path) -> Option<String> {
    let text = std::fs::read_to_string(paths.host("/etc/fstab")).ok()?;
    text.lines()
        .find(|l| fstab_mount_point(paths, l).is_some_and(|p| p == mp))
        .map(String::from)
}

fn fstab_mount_point(paths: &Paths, line: &str) -> Option<PathBuf> {
    let l = line.trim();
    if l.starts_with('#') {
        return None;
    }
    l.split_whitespace()
        .nth(1)
        .map(|p| paths.from_config(unescape(p)))
}

/// The device number a block device node stands for.
fn rdev(p: &Path) -> Option<u64> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = std::fs::metadata(p).ok()?;
    m.file_type().is_block_device().then(|| m.rdev())
}

/// What `device` holds: `blkid -p` (low-level probe, no cache) for any
/// signature, then its first MiB for data without one.
pub fn signature(device: &Path) -> Signature {
    if device.is_dir() {
        return Signature::Directory;
    }
    let out = Command::new("blkid")
        .args(["-p", "-o", "export"])
        .arg(device)
        .stdin(Stdio::null())
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => return Signature::Unreadable(format!("cannot run blkid: {e}")),
    };
    match out.status.code() {
        Some(0) => {
            let text = String::from_utf8_lossy(&out.stdout);
            let get = |k: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(&format!("{k}=")))
                    .map(String::from)
            };
            match (get("TYPE"), get("USAGE").as_deref()) {
                (Some(t), Some("filesystem")) => Signature::FileSystem {
                    fs_type: t,
                    uuid: get("UUID"),
                },
                (Some(t), usage) => {
                    Signature::Other(format!("{t} ({})", usage.unwrap_or("unknown usage")))
                }
                (None, _) => match get("PTTYPE") {
                    Some(pt) => Signature::Other(format!("a {pt} partition table")),
                    None => Signature::Other(text.lines().collect::<Vec<_>>().join(" ")),
                },
            }
        }
        // blkid: 2 = nothing found.
        Some(2) => match first_bytes_zero(device) {
            Ok(true) => Signature::Empty,
            Ok(false) => Signature::Data,
            Err(e) => Signature::Unreadable(e),
        },
        _ => Signature::Unreadable(format!(
            "blkid -p {} failed: {}",
            device.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

fn first_bytes_zero(device: &Path) -> std::result::Result<bool, String> {
    use std::io::Read;
    let mut f = std::fs::File::open(device).map_err(|e| format!("{}: {e}", device.display()))?;
    let mut buf = vec![0u8; PROBE_BYTES];
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => return Err(format!("reading {}: {e}", device.display())),
        }
    }
    Ok(buf[..got].iter().all(|b| *b == 0))
}

/// The fstab line the charm writes: by UUID when the file system has one
/// (device names move between boots), `nofail` so a missing volume never
/// stops the machine from booting.
pub fn fstab_entry(spec: &str, mount_point: &Path, fs_type: &str) -> String {
    let opts = if fs_type == "none" {
        "bind,nofail"
    } else {
        "defaults,nofail"
    };
    format!("{spec} {} {fs_type} {opts} 0 0", mount_point.display())
}

// ------------------------------------------------------------------ apply

/// What apply does to the volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeStep {
    /// `mkfs.ext4` — only after a fresh probe still finds nothing on it.
    Format { device: PathBuf },
    /// Mounts `device` (`fs_type` `none`: a bind mount of a directory).
    Mount {
        device: PathBuf,
        fs_type: String,
        mount_point: PathBuf,
    },
    /// Replaces (or adds) fstab's line for the mount point.
    WriteFstab {
        device: PathBuf,
        mount_point: PathBuf,
    },
    /// Unmounts; fails while anything (etcd) still uses it.
    Unmount { mount_point: PathBuf },
    /// Drops fstab's line for the mount point.
    RemoveFstab { mount_point: PathBuf },
    /// Connects the snap's `removable-media` plug (snap backend), so the
    /// confined etcd may use /media/etcd.
    ConnectMedia,
}

impl std::fmt::Display for VolumeStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VolumeStep::Format { device } => {
                write!(f, "format the empty storage {} as ext4", device.display())
            }
            VolumeStep::Mount {
                device,
                mount_point,
                ..
            } => write!(f, "mount {} at {}", device.display(), mount_point.display()),
            VolumeStep::WriteFstab { mount_point, .. } => {
                write!(f, "add the fstab line for {}", mount_point.display())
            }
            VolumeStep::Unmount { mount_point } => write!(f, "unmount {}", mount_point.display()),
            VolumeStep::RemoveFstab { mount_point } => {
                write!(f, "remove the fstab line for {}", mount_point.display())
            }
            VolumeStep::ConnectMedia => write!(f, "connect etcd's removable-media plug"),
        }
    }
}

/// Performs one step; `connect_media` is the service's plug connection.
pub fn apply(
    step: &VolumeStep,
    paths: &Paths,
    connect_media: &dyn Fn() -> Result<()>,
) -> Result<()> {
    match step {
        VolumeStep::ConnectMedia => connect_media(),
        VolumeStep::Format { device } => {
            // Re-probed at the moment of writing: never mkfs a signature.
            let sig = signature(device);
            if sig != Signature::Empty {
                return Err(Error::Other(format!(
                    "refusing to format {}: it now holds {sig:?}",
                    device.display()
                )));
            }
            // No -F: mkfs.ext4 itself asks (and, with no stdin, refuses)
            // if it finds a file system after all.
            run(Command::new("mkfs.ext4")
                .args(["-q", "-L", "etcd-data"])
                .arg(device))?;
            tracing::info!("formatted {} as ext4", device.display());
            Ok(())
        }
        VolumeStep::Mount {
            device,
            fs_type,
            mount_point,
        } => {
            std::fs::create_dir_all(mount_point)
                .map_err(crate::error::io("creating", mount_point))?;
            let mut cmd = Command::new("mount");
            if fs_type == "none" {
                cmd.arg("--bind");
            } else {
                cmd.args(["-t", fs_type]);
            }
            run(cmd.arg(device).arg(mount_point))?;
            tracing::info!("mounted {} at {}", device.display(), mount_point.display());
            Ok(())
        }
        VolumeStep::WriteFstab {
            device,
            mount_point,
        } => {
            let (spec, fs_type) = match signature(device) {
                Signature::FileSystem { fs_type, uuid } => (
                    uuid.map(|u| format!("UUID={u}"))
                        .unwrap_or_else(|| device.display().to_string()),
                    fs_type,
                ),
                Signature::Directory => (device.display().to_string(), "none".to_string()),
                other => {
                    return Err(Error::Other(format!(
                        "{} holds no file system to name in fstab ({other:?})",
                        device.display()
                    )))
                }
            };
            edit_fstab(
                paths,
                mount_point,
                Some(fstab_entry(&spec, mount_point, &fs_type)),
            )
        }
        VolumeStep::Unmount { mount_point } => {
            if mounted_at(mount_point).is_some() {
                run(Command::new("umount").arg(mount_point))?;
                tracing::info!("unmounted {}", mount_point.display());
            }
            Ok(())
        }
        VolumeStep::RemoveFstab { mount_point } => edit_fstab(paths, mount_point, None),
    }
}

/// Rewrites fstab (atomically, beside it) with `line` as the only line for
/// `mount_point`, or none.
fn edit_fstab(paths: &Paths, mount_point: &Path, line: Option<String>) -> Result<()> {
    let file = paths.host("/etc/fstab");
    let old = std::fs::read_to_string(&file).unwrap_or_default();
    let mut lines: Vec<String> = old
        .lines()
        .filter(|l| fstab_mount_point(paths, l).is_none_or(|p| p != mount_point))
        .map(String::from)
        .collect();
    lines.extend(line);
    let mut text = lines.join("\n");
    text.push('\n');
    if text == old {
        return Ok(());
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(crate::error::io("creating", dir))?;
    }
    let tmp = file.with_extension("etcd-charm.tmp");
    std::fs::write(&tmp, &text).map_err(crate::error::io("writing", &tmp))?;
    std::fs::rename(&tmp, &file).map_err(crate::error::io("renaming", &tmp))?;
    tracing::info!("updated {} for {}", file.display(), mount_point.display());
    Ok(())
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::Other(format!("running {:?}: {e}", cmd.get_program())))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Other(format!(
            "{:?} {:?} exited {}: {}",
            cmd.get_program(),
            cmd.get_args().collect::<Vec<_>>(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fstab_line_is_found_and_rewritten_idempotently() {
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths::new(tmp.path());
        let mp = paths.host(MOUNT_POINT);
        std::fs::create_dir_all(paths.host("/etc")).unwrap();
        // As the Python charm wrote it: host paths, no nofail.
        std::fs::write(
            paths.host("/etc/fstab"),
            "# a comment /media/etcd\nUUID=1 / ext4 defaults 0 1\n/dev/vdb /media/etcd ext4 defaults 0 0\n",
        )
        .unwrap();
        assert_eq!(
            fstab_line(&paths, &mp).as_deref(),
            Some("/dev/vdb /media/etcd ext4 defaults 0 0")
        );
        assert_eq!(paths_of(&paths), paths.host(DATA_DIR));
        let line = fstab_entry("UUID=abc", &mp, "ext4");
        edit_fstab(&paths, &mp, Some(line.clone())).unwrap();
        edit_fstab(&paths, &mp, Some(line.clone())).unwrap();
        let text = std::fs::read_to_string(paths.host("/etc/fstab")).unwrap();
        assert_eq!(text.matches("/media/etcd ").count(), 1, "{text}");
        assert!(
            text.contains("UUID=1 / ext4") && text.contains(&line),
            "{text}"
        );
        assert!(line.contains("nofail"));
        edit_fstab(&paths, &mp, None).unwrap();
        assert_eq!(fstab_line(&paths, &mp), None);
        assert_eq!(paths_of(&paths), paths.snap_data_dir());
    }

    fn paths_of(p: &Paths) -> PathBuf {
        super::paths(p.clone()).data_dir()
    }

    #[test]
    fn signatures_of_files() {
        let tmp = tempfile::tempdir().unwrap();
        let zeros = tmp.path().join("zeros");
        std::fs::write(&zeros, vec![0u8; 4 << 20]).unwrap();
        assert_eq!(signature(&zeros), Signature::Empty);
        let data = tmp.path().join("data");
        let mut bytes = vec![0u8; 4 << 20];
        bytes[70_000] = 1;
        std::fs::write(&data, bytes).unwrap();
        assert_eq!(signature(&data), Signature::Data);
        assert_eq!(signature(tmp.path()), Signature::Directory);
        let fs = tmp.path().join("fs");
        std::fs::write(&fs, vec![0u8; 8 << 20]).unwrap();
        let made = Command::new("mkfs.ext4")
            .args(["-q", "-F"])
            .arg(&fs)
            .status();
        if made.is_ok_and(|s| s.success()) {
            assert!(
                matches!(signature(&fs), Signature::FileSystem { ref fs_type, uuid: Some(_) } if fs_type == "ext4"),
                "{:?}",
                signature(&fs)
            );
        }
    }
}
