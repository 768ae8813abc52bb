//! Systemd machines (`deploy --machines systemd`): each unit's machine is a
//! PID + mount namespace whose PID 1 is the host's own `/lib/systemd/systemd`,
//! so units, drop-ins, `Restart=`, enablement at boot and journald behave as
//! on a VM. The network and the rest of the file system are the host's; the
//! machine's own `/etc/systemd/system`, `/var/snap`, `/snap`, `/var/log`,
//! `/media`, `/home` are bound from the unit's root (so they survive reboots), `/run`
//! is a private tmpfs, and `/etc` is the machine's own as on a VM: an overlay
//! on the host's, its changes kept in the unit's dir (so a charm's fstab line
//! goes to the machine's `/etc/fstab`, never the host's, and survives a
//! reboot). Hooks run inside via `nsenter -t PID -m -p`.
//!
//! DANGER: systemd's boot runs `systemd-tmpfiles --remove`, which would empty
//! the host's `/tmp` (shared with everything running here). Every machine is
//! booted with the masks below written into its private `/run` first, the
//! boot script refuses to exec systemd unless they are in place, and a booted
//! machine whose `systemd-tmpfiles-setup.service` is not `masked-runtime` is
//! killed at once. Never boot one any other way.
//!
//! jujusim knows machines and systemd here, never the charm's workload.

use crate::sim::runner::Spawn;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const SYSTEMD: &str = "/lib/systemd/systemd";

/// The systemd a machine boots: `JUJUSIM_SYSTEMD` when set (tests point it
/// at a missing file to see the fallback), else the host's.
fn systemd_bin() -> String {
    std::env::var("JUJUSIM_SYSTEMD")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| SYSTEMD.to_string())
}

/// `--machines systemd`; anything else (or nothing) is the direct mode.
pub const SYSTEMD_MODE: &str = "systemd";

/// Units masked in the machine's `/run` before systemd starts: nothing in a
/// machine may touch the shared host (tmpfiles would empty `/tmp`).
pub const MASKS: &[&str] = &[
    "systemd-tmpfiles-setup.service",
    "systemd-tmpfiles-setup-dev.service",
    "systemd-tmpfiles-setup-dev-early.service",
    "systemd-tmpfiles-clean.service",
    "systemd-tmpfiles-clean.timer",
    "systemd-udevd.service",
    "systemd-udev-trigger.service",
    "systemd-udev-settle.service",
    "systemd-udevd-control.socket",
    "systemd-udevd-kernel.socket",
    "systemd-sysctl.service",
    "systemd-binfmt.service",
    "systemd-modules-load.service",
    "systemd-remount-fs.service",
    "systemd-firstboot.service",
    "systemd-machine-id-commit.service",
    "systemd-random-seed.service",
    "getty.target",
    "console-getty.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
    "e2scrub_all.timer",
    "fstrim.timer",
    "logrotate.timer",
    "man-db.timer",
    "dpkg-db-backup.timer",
];

/// Runs as PID 1 of the new namespace: the machine's own /etc (an overlay
/// on the host's, checked: exit 96 if it did not take), binds, private
/// /run, masks, a check that the masks are there (exit 97), then systemd.
/// `$1` is the mask list; the `SRC:DST` binds come one a line in
/// `$MACHINE_BINDS`, the overlay's dirs in `$MACHINE_ETC_UPPER` and
/// `$MACHINE_ETC_WORK` (not as arguments, so that `procs`, which matches
/// command lines naming a unit's root, never takes this process for one of
/// the unit's workloads). The overlay shows the host's /etc as it is on
/// disk: a file the host has bind-mounted under /etc is not carried over
/// (this host has none).
const BOOT_SCRIPT: &str = r#"set -e
masks=$1
mount -t overlay overlay \
    -o "lowerdir=/etc,upperdir=$MACHINE_ETC_UPPER,workdir=$MACHINE_ETC_WORK" /etc || exit 96
unset MACHINE_ETC_UPPER MACHINE_ETC_WORK
# The newest mount at /etc must be that overlay, or the machine would write
# the host's /etc (its fstab: no machine would boot after that).
awk '$5 == "/etc" { t = ""; for (i = 7; i < NF; i++) if ($i == "-") { t = $(i + 1); break } }
     END { exit t != "overlay" }' /proc/self/mountinfo || exit 96
printf '%s\n' "$MACHINE_BINDS" | while IFS= read -r b; do
    [ -z "$b" ] || mount --bind "${b%%:*}" "${b#*:}"
done
unset MACHINE_BINDS
systemd=$MACHINE_SYSTEMD; unset MACHINE_SYSTEMD
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/systemd/system
for u in $masks; do ln -sf /dev/null "/run/systemd/system/$u"; done
for u in systemd-tmpfiles-setup.service systemd-tmpfiles-clean.service; do
    [ "$(readlink "/run/systemd/system/$u")" = /dev/null ] || exit 97
done
exec "$systemd" --system --unit=multi-user.target
"#;

/// The directories every machine keeps for itself, under the unit's root.
/// `/media` too: the charm mounts its `data` volume at `/media/etcd`, and
/// the bare mount point must be the machine's, as on a VM's root disk.
/// `/home`: snapshots and pre-restore backups land in `/home/ubuntu`, one
/// machine's never beside another's (or the host's).
pub const OWN_DIRS: &[&str] = &[
    "/etc/systemd/system",
    "/var/snap",
    "/snap",
    "/var/log",
    "/media",
    "/home",
];

/// The exit code of the boot script when the machine's own /etc did not
/// take (the masks' is 97).
const ETC_NOT_OWN: i32 = 96;

/// The overlay's upper and work dirs of a unit's machine's /etc: in the
/// unit's dir, outside its root, kept across reboots.
pub fn etc_dirs(unit_dir: &Path) -> (PathBuf, PathBuf) {
    let d = unit_dir.join("machine-etc");
    (d.join("upper"), d.join("work"))
}

/// The effective uid, from /proc (nix's `user` feature is not enabled).
fn effective_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("Uid:"))?.to_string();
            line.split_whitespace().nth(2).map(|e| e == "0")
        })
        .unwrap_or(false)
}

/// Why systemd machines cannot be made on this host, if they cannot.
pub fn unavailable() -> Option<String> {
    if !effective_root() {
        return Some("not root (namespaces and mounts need it)".into());
    }
    let systemd = systemd_bin();
    if !Path::new(&systemd).is_file() {
        return Some(format!("no {systemd}"));
    }
    for tool in ["unshare", "nsenter", "mount"] {
        let found = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !found {
            return Some(format!("no {tool} (util-linux)"));
        }
    }
    None
}

/// How a boot failed: the host cannot make namespaces (fall back to the
/// direct mode), or a machine came up wrong (refuse).
#[derive(Debug)]
pub enum BootError {
    Unavailable(String),
    Failed(String),
}

/// The machine's PID 1 (host view) is recorded here.
pub fn pid_file(unit_dir: &Path) -> PathBuf {
    unit_dir.join("machine.pid")
}

/// The binds of a unit's machine: its own dirs, then the application's
/// `--machine-bind SRC:DST` (already expanded).
pub fn binds(root: &Path, extra: &[String]) -> Vec<String> {
    let own = OWN_DIRS
        .iter()
        .map(|d| format!("{}:{d}", root.join(&d[1..]).display()));
    own.chain(extra.iter().cloned()).collect()
}

/// A unit's binds, with its application's `--machine-bind`s expanded.
pub fn binds_of(app: &crate::sim::model::Application, u: &crate::sim::model::Unit) -> Vec<String> {
    let extra: Vec<String> = app
        .machine_binds
        .iter()
        .map(|b| crate::sim::model::expand(b, &u.name, &u.root()))
        .collect();
    binds(&u.root(), &extra)
}

fn comm(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
}

fn alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat.rfind(')').and_then(|i| stat[i + 2..].chars().next());
    !matches!(state, None | Some('Z') | Some('X'))
}

/// Is `pid` a systemd in a PID namespace other than ours?
fn is_machine(pid: i32) -> bool {
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
    alive(pid)
        && comm(pid).as_deref() == Some("systemd")
        && ns(&pid.to_string()).is_some_and(|n| Some(n) != ns("self"))
}

/// The running machine of a unit, if it has one.
pub fn running(unit_dir: &Path) -> Option<i32> {
    let pid = std::fs::read_to_string(pid_file(unit_dir))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    is_machine(pid).then_some(pid)
}

fn children(ppid: i32) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    let rest = &s[s.rfind(')')? + 2..];
                    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
                })
                == Some(ppid)
        })
        .collect()
}

/// A command run inside machine `pid`, with its output.
pub fn inside(pid: i32, args: &[&str]) -> std::io::Result<std::process::Output> {
    Command::new("nsenter")
        .args(["-t", &pid.to_string(), "-m", "-p", "--"])
        .args(args)
        .stdin(Stdio::null())
        .output()
}

fn inside_text(pid: i32, args: &[&str]) -> String {
    inside(pid, args)
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Boots a machine with these binds (creating their directories), checks
/// that the masks took, records its PID 1 and returns it.
pub fn boot(unit_dir: &Path, binds: &[String]) -> Result<i32, BootError> {
    if let Some(why) = unavailable() {
        return Err(BootError::Unavailable(why));
    }
    if let Some(pid) = running(unit_dir) {
        return Err(BootError::Failed(format!(
            "machine already running (pid {pid})"
        )));
    }
    for b in binds {
        let Some((src, dst)) = b.split_once(':') else {
            return Err(BootError::Failed(format!("bad bind {b:?} (SRC:DST)")));
        };
        for d in [src, dst] {
            std::fs::create_dir_all(d)
                .map_err(|e| BootError::Failed(format!("creating {d}: {e}")))?;
        }
    }
    // The machine's own /etc: an overlay's options are split at commas and
    // colons (and its dirs must not be below each other).
    let (etc_upper, etc_work) = etc_dirs(unit_dir);
    for d in [&etc_upper, &etc_work] {
        let s = d.to_string_lossy();
        if s.contains([',', ':', '\\']) || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(BootError::Failed(format!(
                "{s}: the machine's /etc overlay cannot name a dir with ',', ':', '\\' or white space"
            )));
        }
        std::fs::create_dir_all(d)
            .map_err(|e| BootError::Failed(format!("creating {}: {e}", d.display())))?;
    }
    // A persistent journal, as on an Ubuntu VM (journald keeps it when the
    // directory exists): the machine's own /var/log, bound from its root.
    for b in binds.iter().filter(|b| b.ends_with(":/var/log")) {
        let src = &b[..b.len() - ":/var/log".len()];
        let _ = std::fs::create_dir_all(Path::new(src).join("journal"));
    }
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--fork",
        "--pid",
        "--mount",
        "--mount-proc",
        "--propagation",
        "private",
        "/bin/sh",
        "-c",
        BOOT_SCRIPT,
        "jujusim-machine",
    ])
    .arg(MASKS.join(" "))
    .env_clear()
    .env("MACHINE_BINDS", binds.join("\n"))
    .env("MACHINE_ETC_UPPER", &etc_upper)
    .env("MACHINE_ETC_WORK", &etc_work)
    .env("MACHINE_SYSTEMD", systemd_bin())
    .env(
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    )
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .process_group(0);
    let mut outer = cmd
        .spawn()
        .map_err(|e| BootError::Unavailable(format!("unshare: {e}")))?;
    let outer_pid = outer.id() as i32;
    // Reap the outer process whenever it ends, so it never lingers.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut pid = None;
    let mut devices_since: Option<Instant> = None;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = outer.try_wait() {
            let why = format!("unshare/boot script exited ({status}) before systemd ran");
            return Err(if status.code() == Some(97) {
                BootError::Failed(format!("{why}: the masks were not in place"))
            } else if status.code() == Some(ETC_NOT_OWN) {
                BootError::Failed(format!(
                    "{why}: the machine's own /etc (an overlay on the host's, {} and {}) did not take; \
                     refusing to run a machine on the host's /etc",
                    etc_upper.display(),
                    etc_work.display()
                ))
            } else {
                BootError::Unavailable(why)
            });
        }
        if pid.is_none() {
            pid = children(outer_pid)
                .into_iter()
                .find(|p| comm(*p).as_deref() == Some("systemd"));
        }
        if let Some(p) = pid {
            let state = inside_text(p, &["systemctl", "is-system-running"]);
            // A boot that waits only for devices (an fstab volume late or
            // missing: `nofail` lets it go on, and with udev masked no
            // device unit ever appears, see `only_devices_pending`) is up
            // as far as the Juju agent goes: on a VM jujud runs while
            // systemd waits out the device timeout (90 s).
            let waiting = state == "starting" && only_devices_pending(p);
            devices_since = if waiting {
                devices_since.or(Some(Instant::now()))
            } else {
                None
            };
            let settled = devices_since.is_some_and(|t| t.elapsed() >= Duration::from_secs(1));
            if state == "running" || state == "degraded" || settled {
                let mask = inside_text(
                    p,
                    &["systemctl", "is-enabled", "systemd-tmpfiles-setup.service"],
                );
                if mask != "masked-runtime" {
                    kill_and_wait(p);
                    return Err(BootError::Failed(format!(
                        "systemd-tmpfiles-setup.service is {mask:?}, not masked-runtime: machine killed"
                    )));
                }
                // And once more from outside: the machine's /etc is its own.
                let etc = inside_text(p, &["stat", "-f", "-c", "%T", "/etc"]);
                if etc != "overlayfs" {
                    kill_and_wait(p);
                    return Err(BootError::Failed(format!(
                        "the machine's /etc is on {etc:?}, not its own overlay: machine killed"
                    )));
                }
                std::fs::write(pid_file(unit_dir), format!("{p}\n"))
                    .map_err(|e| BootError::Failed(format!("recording the pid: {e}")))?;
                // The outer unshare waits for PID 1; let it go on its own.
                std::thread::spawn(move || outer.wait());
                return Ok(p);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(p) = pid {
        kill_and_wait(p);
    }
    let _ = outer.kill();
    Err(BootError::Failed(
        "not running after 60 s: stopped it".into(),
    ))
}

/// Every job systemd is running is a device's: the rest of the boot waits
/// on devices only. udev is masked in a machine, so nothing ever plugs a
/// device unit: a mount of an fstab line by `UUID=` (a charm's volume)
/// waits out its device timeout, with whatever is ordered after it.
fn only_devices_pending(pid: i32) -> bool {
    let jobs = inside_text(pid, &["systemctl", "list-jobs", "--no-legend", "--plain"]);
    devices_only(&jobs)
}

/// `systemctl list-jobs --no-legend --plain` lines (JOB UNIT TYPE STATE):
/// some job running, and every running job a device's.
fn devices_only(jobs: &str) -> bool {
    let running: Vec<&str> = jobs
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(3) == Some(&"running")).then(|| f[1])
        })
        .collect();
    !running.is_empty() && running.iter().all(|u| u.ends_with(".device"))
}

/// SIGKILL to PID 1 ends every process of its namespace.
fn kill_and_wait(pid: i32) -> bool {
    use nix::sys::signal::{kill, Signal};
    let _ = kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && alive(pid) {
        std::thread::sleep(Duration::from_millis(20));
    }
    !alive(pid)
}

/// Stops a unit's machine, if it runs (bounded); true if one was stopped.
pub fn stop(unit_dir: &Path) -> bool {
    let Some(pid) = running(unit_dir) else {
        return false;
    };
    let stopped = kill_and_wait(pid);
    if stopped {
        let _ = std::fs::remove_file(pid_file(unit_dir));
    }
    stopped
}

/// Stops every machine of a model (each unit dir, removed ones included).
pub fn stop_all(model: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(model.join("units")) else {
        return 0;
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| stop(&e.path()))
        .count()
}

/// `spawn` as run inside machine `pid`: the same program, environment and
/// working directory, through `nsenter`.
pub fn wrap(pid: i32, spawn: Spawn) -> Spawn {
    let mut args = vec![
        "-t".to_string(),
        pid.to_string(),
        "-m".into(),
        "-p".into(),
        format!("--wd={}", spawn.cwd.display()),
        "--".into(),
        spawn.program.display().to_string(),
    ];
    args.extend(spawn.args);
    Spawn {
        program: "nsenter".into(),
        args,
        ..spawn
    }
}

/// The PATH of a hook on a systemd machine: the tools, then a VM's.
pub fn hook_path(tools: &Path) -> String {
    format!(
        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        tools.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_cover_what_touches_the_host() {
        for u in [
            "systemd-tmpfiles-setup.service",
            "systemd-tmpfiles-clean.service",
            "systemd-tmpfiles-clean.timer",
            "systemd-udevd.service",
            "systemd-sysctl.service",
            "systemd-binfmt.service",
            "systemd-modules-load.service",
            "systemd-remount-fs.service",
        ] {
            assert!(MASKS.contains(&u), "{u}");
        }
        assert!(BOOT_SCRIPT.contains("exit 97"));
        assert!(BOOT_SCRIPT.contains(&format!("exit {ETC_NOT_OWN}")));
    }

    /// The machine's /etc overlay comes before the binds (its
    /// /etc/systemd/system is bound on top of it), and /media is its own.
    #[test]
    fn etc_is_the_machines_own_and_media_too() {
        let overlay = BOOT_SCRIPT.find("mount -t overlay").unwrap();
        let binds = BOOT_SCRIPT.find("mount --bind").unwrap();
        assert!(overlay < binds);
        assert!(OWN_DIRS.contains(&"/media"));
        assert!(OWN_DIRS.contains(&"/home"));
        let (upper, work) = etc_dirs(Path::new("/m/units/etcd-0"));
        assert_eq!(upper, Path::new("/m/units/etcd-0/machine-etc/upper"));
        assert_eq!(work, Path::new("/m/units/etcd-0/machine-etc/work"));
        assert!(!upper.starts_with("/m/units/etcd-0/root"));
    }

    #[test]
    fn a_boot_waiting_only_for_devices_is_told_apart() {
        let late_volume = "56 snap.etcd.etcd.service start waiting\n\
             1 multi-user.target start waiting\n\
             29 media-etcd.mount start waiting\n\
             30 dev-disk-by\\x2duuid-b640.device start running\n";
        assert!(devices_only(late_volume));
        let booting = "30 dev-disk-by\\x2duuid-b640.device start running\n\
             41 snap.etcd.etcd.service start running\n";
        assert!(!devices_only(booting));
        assert!(!devices_only(""));
        assert!(!devices_only("1 multi-user.target start waiting\n"));
    }

    #[test]
    fn wraps_in_nsenter() {
        let s = wrap(
            42,
            Spawn {
                program: "/c/dispatch".into(),
                args: vec!["x".into()],
                cwd: "/c".into(),
                env: vec![],
                timeout: Duration::from_secs(1),
                capture: crate::sim::runner::Capture::Inherit,
                still_running: None,
            },
        );
        assert_eq!(s.program, PathBuf::from("nsenter"));
        assert_eq!(
            s.args,
            ["-t", "42", "-m", "-p", "--wd=/c", "--", "/c/dispatch", "x"]
        );
    }

    #[test]
    fn own_dirs_come_from_the_root() {
        let b = binds(Path::new("/m/u/root"), &["/a:/b".into()]);
        assert_eq!(b[0], "/m/u/root/etc/systemd/system:/etc/systemd/system");
        assert_eq!(b.last().unwrap(), "/a:/b");
    }
}
