//! The snap backend: etcd from the `etcd` snap as `snap.etcd.etcd.service`,
//! plus our drop-in. Every command is built by a pure function (tested
//! below); the few functions that run them stay thin, since neither snapd
//! nor a systemd PID 1 exist where the tests run.

use super::{err, write_atomic, Cmd, Installed, Result, SnapdRefresh};
use crate::paths::Paths;
use crate::render::{render_dropin, DropIn};

/// The unit snapd writes for the etcd snap's `etcd` app.
pub const SNAP_UNIT: &str = "snap.etcd.etcd.service";

/// `systemctl` exits with this when the unit does not exist (no snap yet).
const SYSTEMCTL_NOT_LOADED: i32 = 5;

pub fn snap_install_cmd(channel: &str) -> Cmd {
    Cmd::new("snap", &["install", "etcd", "--channel", channel])
}

pub fn snap_refresh_cmd(channel: &str) -> Cmd {
    Cmd::new("snap", &["refresh", "etcd", "--channel", channel])
}

/// Holds etcd's automatic refreshes (snapd 2.58+: indefinitely); the
/// charm's own `snap refresh etcd --channel` still goes through.
pub fn snap_hold_cmd() -> Cmd {
    Cmd::new("snap", &["refresh", "--hold", "etcd"])
}

pub fn snap_unhold_cmd() -> Cmd {
    Cmd::new("snap", &["refresh", "--unhold", "etcd"])
}

/// Machine-wide, as the Python charm set it (on `core`, the old name of
/// snapd's `system` settings).
pub fn refresh_timer_cmd(timer: &str) -> Cmd {
    Cmd::new(
        "snap",
        &["set", "system", &format!("refresh.timer={timer}")],
    )
}

pub fn unset_refresh_timer_cmd() -> Cmd {
    Cmd::new("snap", &["unset", "system", "refresh.timer"])
}

/// What `snapd_refresh` runs: `max` holds etcd and leaves the machine's
/// timer alone; a timer or `""` unholds etcd and sets or resets the timer.
pub fn snapd_refresh_cmds(policy: &SnapdRefresh) -> Vec<Cmd> {
    match policy {
        SnapdRefresh::Hold => vec![snap_hold_cmd()],
        SnapdRefresh::Timer(t) => vec![snap_unhold_cmd(), refresh_timer_cmd(t)],
        SnapdRefresh::SnapdDefault => vec![snap_unhold_cmd(), unset_refresh_timer_cmd()],
    }
}

pub(super) fn set_snapd_refresh(policy: &SnapdRefresh) -> Result<()> {
    for cmd in snapd_refresh_cmds(policy) {
        cmd.run()?;
    }
    Ok(())
}

pub fn snap_list_cmd() -> Cmd {
    Cmd::new("snap", &["list", "etcd"])
}

/// `systemctl <verb> snap.etcd.etcd.service`: start, stop, restart, is-active.
pub fn systemctl_cmd(verb: &str) -> Cmd {
    Cmd::new("systemctl", &[verb, SNAP_UNIT])
}

/// Lets the confined etcd reach `/media` (where the data storage is mounted).
pub fn snap_connect_media_cmd() -> Cmd {
    Cmd::new("snap", &["connect", "etcd:removable-media"])
}

pub fn daemon_reload_cmd() -> Cmd {
    Cmd::new("systemctl", &["daemon-reload"])
}

pub fn journal_cmd(lines: usize) -> Cmd {
    let n = lines.to_string();
    Cmd::new(
        "journalctl",
        &[
            "--unit",
            SNAP_UNIT,
            "--lines",
            &n,
            "--no-pager",
            "--output",
            "short-iso",
        ],
    )
}

/// The etcd row of `snap list etcd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapInfo {
    pub version: String,
    pub revision: String,
    /// None for a snap installed from a file (`-` in the Tracking column).
    pub tracking: Option<String>,
}

/// Reads `snap list etcd`: a header line, then
/// `etcd  3.4.22  233  3.4/stable  canonical✓  -`.
pub fn parse_snap_list(stdout: &str) -> Option<SnapInfo> {
    stdout.lines().skip(1).find_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        match cols.as_slice() {
            ["etcd", version, revision, tracking, ..] => Some(SnapInfo {
                version: version.to_string(),
                revision: revision.to_string(),
                tracking: (*tracking != "-").then(|| tracking.to_string()),
            }),
            _ => None,
        }
    })
}

/// A channel as snap reports it in Tracking: `3.4` → `3.4/stable`,
/// `edge` → `latest/edge`, `3.4/stable` unchanged.
pub fn normalize_channel(channel: &str) -> String {
    const RISKS: [&str; 4] = ["stable", "candidate", "beta", "edge"];
    match channel {
        "" => "latest/stable".to_string(),
        c if c.contains('/') => c.to_string(),
        c if RISKS.contains(&c) => format!("latest/{c}"),
        c => format!("{c}/stable"),
    }
}

/// What `install` must run: nothing when the snap already tracks the
/// channel; `snap refresh` when it tracks another; `snap install` when absent.
pub fn plan_snap(current: Option<&SnapInfo>, channel: &str) -> Option<Cmd> {
    match current {
        None => Some(snap_install_cmd(channel)),
        Some(info) if info.tracking.as_deref() == Some(normalize_channel(channel).as_str()) => None,
        Some(_) => Some(snap_refresh_cmd(channel)),
    }
}

pub(super) fn snap_info() -> Result<Option<SnapInfo>> {
    let cmd = snap_list_cmd();
    let out = cmd.output()?;
    if out.status.success() {
        return Ok(parse_snap_list(&String::from_utf8_lossy(&out.stdout)));
    }
    if String::from_utf8_lossy(&out.stderr).contains("no matching snaps installed") {
        return Ok(None);
    }
    Err(err(cmd.to_string(), super::failure_text(&out)))
}

/// Why etcd cannot run on a machine without snapd, and the two ways out.
const NO_SNAP: &str = "this machine has no `snap` command: install snapd, or on a machine without snapd and systemd set ETCD_CHARM_SERVICE=direct";

pub(super) fn install(paths: &Paths, channel: &str) -> Result<Installed> {
    // Not a hook error (a retry cannot help): a status saying what to do.
    if super::find_on_path("snap").is_none() {
        return Ok(Installed::Missing {
            reason: NO_SNAP.to_string(),
        });
    }
    if let Some(cmd) = plan_snap(snap_info()?.as_ref(), channel) {
        cmd.run()?;
    }
    ensure_dropin(paths)?;
    Ok(match snap_info()? {
        Some(info) => Installed::Ready {
            version: info.version,
        },
        None => Installed::Missing {
            reason: "the etcd snap is not installed after `snap install`".to_string(),
        },
    })
}

pub(super) fn version() -> Option<String> {
    snap_info().ok().flatten().map(|i| i.version)
}

/// The drop-in as this charm binary would write it.
fn dropin(paths: &Paths) -> Result<DropIn> {
    let charm_binary = std::env::current_exe().map_err(|e| {
        err(
            "write the systemd drop-in",
            format!("finding the charm binary: {e}"),
        )
    })?;
    let root = std::path::absolute(paths.root()).map_err(|e| {
        err(
            "write the systemd drop-in",
            format!("resolving the root: {e}"),
        )
    })?;
    // etcd's data dir on the data volume: no start before it is mounted.
    let mp = paths.host(crate::mounts::VOLUME_MOUNT_POINT);
    let requires_mounts_for = paths
        .data_dir()
        .starts_with(&mp)
        .then(|| std::path::absolute(&mp).unwrap_or(mp));
    let d = DropIn {
        charm_binary,
        root,
        requires_mounts_for,
    };
    d.validate()
        .map_err(|e| err("write the systemd drop-in", e.to_string()))?;
    Ok(d)
}

pub(super) fn desired_dropin(paths: &Paths) -> Result<String> {
    Ok(render_dropin(&dropin(paths)?))
}

pub(super) fn ensure_dropin(paths: &Paths) -> Result<bool> {
    let text = desired_dropin(paths)?;
    let path = paths.systemd_dropin();
    if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
        return Ok(false);
    }
    write_atomic(&path, text.as_bytes())
        .map_err(|e| err(format!("write {}", path.display()), e.to_string()))?;
    daemon_reload_cmd().run()?;
    Ok(true)
}

pub(super) fn remove_dropin(paths: &Paths) -> Result<()> {
    let path = paths.systemd_dropin();
    match std::fs::remove_file(&path) {
        Ok(()) => daemon_reload_cmd().run().map(drop),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(err(format!("remove {}", path.display()), e.to_string())),
    }
}

/// What systemd says of the unit: `systemctl show -p ActiveState,Result,NRestarts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitState {
    pub active_state: String,
    /// `success`, `exit-code`, `start-limit-hit`, ...
    pub result: String,
    pub n_restarts: u32,
}

impl UnitState {
    /// A failed unit, or one past its start limit, refuses a start ("start
    /// request repeated too quickly") until `systemctl reset-failed`.
    pub fn needs_reset(&self) -> bool {
        self.active_state == "failed" || self.result == "start-limit-hit"
    }

    /// One line for a status: why the unit is down, as systemd says it.
    pub fn describe(&self) -> String {
        let why = match self.result.as_str() {
            "start-limit-hit" => "systemd's start limit was hit".to_string(),
            "" | "success" => format!("unit {}", self.active_state),
            r => format!("unit {} ({r})", self.active_state),
        };
        format!("{why}, {} automatic restarts", self.n_restarts)
    }
}

pub fn unit_state_cmd() -> Cmd {
    Cmd::new(
        "systemctl",
        &["show", "-p", "ActiveState,Result,NRestarts", SNAP_UNIT],
    )
}

pub fn reset_failed_cmd() -> Cmd {
    systemctl_cmd("reset-failed")
}

/// Reads `ActiveState=failed\nResult=start-limit-hit\nNRestarts=5`.
pub fn parse_unit_state(stdout: &str) -> UnitState {
    let mut st = UnitState::default();
    for line in stdout.lines() {
        match line.trim().split_once('=') {
            Some(("ActiveState", v)) => st.active_state = v.to_string(),
            Some(("Result", v)) => st.result = v.to_string(),
            Some(("NRestarts", v)) => st.n_restarts = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    st
}

pub(super) fn unit_state() -> Result<UnitState> {
    unit_state_cmd().run().map(|out| parse_unit_state(&out))
}

/// The journal's last non-empty line, short, with anything after a
/// `key`/`password`/`token` word cut off (a status is no place for secrets).
pub fn one_line_tail(journal: &str) -> String {
    let line = journal
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no journal");
    let lower = line.to_lowercase();
    let cut = ["private", "password", "token", "begin "]
        .iter()
        .filter_map(|w| lower.find(w))
        .min()
        .unwrap_or(line.len());
    let line = &line[..line.floor_char_boundary(cut)];
    let mut s: String = line.chars().take(160).collect();
    if s.len() < line.len() {
        s.push_str("...");
    }
    s
}

/// `systemctl start|restart`, after `reset-failed` when earlier failures
/// left the unit failed or past its start limit; on failure the unit's
/// state and the journal's last line (a refusal by the start guard shows
/// up there).
fn start_verb(paths: &Paths, verb: &str) -> Result<()> {
    ensure_dropin(paths)?;
    let before = unit_state().unwrap_or_default();
    if before.needs_reset() {
        tracing::info!("{SNAP_UNIT}: {}; systemctl reset-failed", before.describe());
        reset_failed_cmd().run()?;
    }
    systemctl_cmd(verb).run().map(drop).map_err(|mut e| {
        let state = unit_state().unwrap_or_default();
        e.problem = format!(
            "{}; journal: {}; systemctl: {}",
            state.describe(),
            one_line_tail(&log_tail(20)),
            e.problem.lines().next().unwrap_or("")
        );
        e
    })
}

pub(super) fn start(paths: &Paths) -> Result<()> {
    start_verb(paths, "start")
}

pub(super) fn restart(paths: &Paths) -> Result<()> {
    start_verb(paths, "restart")
}

pub(super) fn stop() -> Result<()> {
    let cmd = systemctl_cmd("stop");
    let out = cmd.output()?;
    match out.status.code() {
        Some(0) | Some(SYSTEMCTL_NOT_LOADED) => Ok(()),
        _ => Err(err(cmd.to_string(), super::failure_text(&out))),
    }
}

/// Only `active` counts: `activating` (waiting to be restarted), `failed`
/// and `inactive` (a removed member that exited 0) do not.
pub(super) fn is_active() -> Result<bool> {
    let out = systemctl_cmd("is-active").output()?;
    Ok(String::from_utf8_lossy(&out.stdout).trim() == "active")
}

pub(super) fn log_tail(lines: usize) -> String {
    match journal_cmd(lines).output() {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(e) => format!("(no journal: {e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(c: &Cmd) -> Vec<&str> {
        std::iter::once(c.program.as_str())
            .chain(c.args.iter().map(String::as_str))
            .collect()
    }

    #[test]
    fn snap_commands() {
        assert_eq!(
            argv(&snap_install_cmd("3.4/stable")),
            ["snap", "install", "etcd", "--channel", "3.4/stable"]
        );
        assert_eq!(
            argv(&snap_refresh_cmd("3.5/edge")),
            ["snap", "refresh", "etcd", "--channel", "3.5/edge"]
        );
        assert_eq!(argv(&snap_list_cmd()), ["snap", "list", "etcd"]);
    }

    #[test]
    fn snapd_refresh_commands() {
        let all = |p: SnapdRefresh| -> Vec<Vec<String>> {
            snapd_refresh_cmds(&p)
                .iter()
                .map(|c| argv(c).into_iter().map(String::from).collect())
                .collect()
        };
        assert_eq!(
            all(SnapdRefresh::Hold),
            [["snap", "refresh", "--hold", "etcd"]]
        );
        assert_eq!(
            all(SnapdRefresh::Timer("fri,23:00-01:00".into())),
            [
                vec!["snap", "refresh", "--unhold", "etcd"],
                vec!["snap", "set", "system", "refresh.timer=fri,23:00-01:00"]
            ]
        );
        assert_eq!(
            all(SnapdRefresh::SnapdDefault),
            [
                vec!["snap", "refresh", "--unhold", "etcd"],
                vec!["snap", "unset", "system", "refresh.timer"]
            ]
        );
    }

    #[test]
    fn systemctl_commands_name_the_snap_unit() {
        for verb in ["start", "stop", "restart", "is-active"] {
            assert_eq!(
                argv(&systemctl_cmd(verb)),
                ["systemctl", verb, "snap.etcd.etcd.service"]
            );
        }
        assert_eq!(argv(&daemon_reload_cmd()), ["systemctl", "daemon-reload"]);
        assert_eq!(
            argv(&journal_cmd(20)),
            [
                "journalctl",
                "--unit",
                "snap.etcd.etcd.service",
                "--lines",
                "20",
                "--no-pager",
                "--output",
                "short-iso"
            ]
        );
    }

    const LIST: &str = "Name  Version  Rev  Tracking    Publisher   Notes\n\
                        etcd  3.4.22   233  3.4/stable  canonical✓  -\n";

    #[test]
    fn reads_snap_list() {
        assert_eq!(
            parse_snap_list(LIST),
            Some(SnapInfo {
                version: "3.4.22".into(),
                revision: "233".into(),
                tracking: Some("3.4/stable".into()),
            })
        );
        let local = "Name Version Rev Tracking Publisher Notes\netcd 3.4.23 x1 - - -\n";
        assert_eq!(parse_snap_list(local).unwrap().tracking, None);
        assert_eq!(
            parse_snap_list("Name Version Rev Tracking Publisher Notes\n"),
            None
        );
        assert_eq!(parse_snap_list(""), None);
    }

    #[test]
    fn channels_normalize_as_snap_tracks_them() {
        assert_eq!(normalize_channel("3.4"), "3.4/stable");
        assert_eq!(normalize_channel("3.4/stable"), "3.4/stable");
        assert_eq!(normalize_channel("edge"), "latest/edge");
        assert_eq!(normalize_channel(""), "latest/stable");
        assert_eq!(normalize_channel("latest/edge/fix"), "latest/edge/fix");
    }

    #[test]
    fn reads_the_unit_state_and_when_to_reset_it() {
        assert_eq!(
            argv(&unit_state_cmd()),
            [
                "systemctl",
                "show",
                "-p",
                "ActiveState,Result,NRestarts",
                "snap.etcd.etcd.service"
            ]
        );
        assert_eq!(
            argv(&reset_failed_cmd()),
            ["systemctl", "reset-failed", "snap.etcd.etcd.service"]
        );
        let hit = parse_unit_state("NRestarts=5\nResult=start-limit-hit\nActiveState=failed\n");
        assert_eq!(hit.active_state, "failed");
        assert_eq!(hit.n_restarts, 5);
        assert!(hit.needs_reset());
        assert!(hit.describe().contains("start limit"), "{}", hit.describe());
        let up = parse_unit_state("ActiveState=active\nResult=success\nNRestarts=0\n");
        assert!(!up.needs_reset());
        let exited = parse_unit_state("ActiveState=inactive\nResult=success\nNRestarts=0\n");
        assert!(!exited.needs_reset());
        assert!(parse_unit_state("ActiveState=failed\nResult=exit-code\n").needs_reset());
    }

    #[test]
    fn the_tail_is_one_short_line_without_secrets() {
        let j = "a\nDec 01 etcd[1]: refusing to start: empty data dir\n\n";
        assert_eq!(
            one_line_tail(j),
            "Dec 01 etcd[1]: refusing to start: empty data dir"
        );
        assert_eq!(one_line_tail(""), "no journal");
        let k = one_line_tail("x: loaded -----BEGIN PRIVATE KEY----- MIIE");
        assert!(!k.contains("PRIVATE") && !k.contains("MIIE"), "{k}");
        assert!(one_line_tail(&"é".repeat(500)).chars().count() <= 163);
    }

    #[test]
    fn install_refresh_or_nothing() {
        let info = parse_snap_list(LIST).unwrap();
        assert_eq!(plan_snap(None, "3.4"), Some(snap_install_cmd("3.4")));
        assert_eq!(plan_snap(Some(&info), "3.4"), None);
        assert_eq!(plan_snap(Some(&info), "3.4/stable"), None);
        assert_eq!(
            plan_snap(Some(&info), "3.5/stable"),
            Some(snap_refresh_cmd("3.5/stable"))
        );
        let local = SnapInfo {
            tracking: None,
            ..info
        };
        assert_eq!(
            plan_snap(Some(&local), "3.4/stable"),
            Some(snap_refresh_cmd("3.4/stable"))
        );
    }
}
