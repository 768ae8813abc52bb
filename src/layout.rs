//! What is on disk: etcd.conf.yml as it really may be (ours, the Python
//! charm's, or the snap's 2.x → 3.x rewrite), etcd.conf / etcd.conf.2x, and
//! every place a member may live, each with the IDs its WAL records.
//!
//! Parsing is pure ([`parse_found_config`], [`parse_env_config`]); reading
//! the disk is [`observe`], which never writes. [`start_guard`] is the one
//! check run right before etcd starts.
//!
//! About 630 lines before its tests, past the house's ~600: the guard, the
//! migration's staged names and the space facts read the very locations
//! `observe` finds, and splitting them off would have each re-derive them.
//! The next addition here should move the config parsing (`FoundConfig`,
//! the 2.x env file) into a module of its own.

use crate::paths::Paths;
use crate::wal::{self, WalError, WalIds};
use serde_yaml::Value;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

/// A copy in progress, in the canonical data dir: never trusted.
pub const INCOMING: &str = "member.incoming";
/// A copy whose sizes and WAL IDs matched its source.
pub const VERIFIED: &str = "member.verified";
/// `ETCD_CHARM_MIGRATE=copy` forces the copy path (tests on one file system).
pub const FORCE_ENV: &str = "ETCD_CHARM_MIGRATE";

/// `<stamp>-migrate-<name>-<member id hex>`.
pub fn snapshot_name(stamp: &str, member_name: &str, member_id: u64) -> String {
    format!("{stamp}-migrate-{member_name}-{member_id:x}")
}

/// The member ID of a complete snapshot dir of `member_name`'s, else None.
pub fn parse_snapshot_name(dir_name: &str, member_name: &str) -> Option<u64> {
    let marker = format!("-migrate-{member_name}-");
    let at = dir_name.rfind(&marker)?;
    let hex = &dir_name[at + marker.len()..];
    if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// An etcd.conf.yml as found: every key optional, empty values as None.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FoundConfig {
    pub name: Option<String>,
    pub data_dir: Option<String>,
    pub wal_dir: Option<String>,
    pub initial_cluster: Option<String>,
    pub initial_cluster_token: Option<String>,
    pub initial_cluster_state: Option<String>,
    pub initial_advertise_peer_urls: Option<String>,
    pub advertise_client_urls: Option<String>,
    /// Every key as text (empty values as ""), for diffs and messages.
    pub raw: BTreeMap<String, String>,
}

/// Lenient: accepts quoted values, `wal-dir: ''`, `snapshot-count:` with
/// nothing, lists or comma strings for URL keys. Err names what is wrong.
pub fn parse_found_config(text: &str) -> Result<FoundConfig, String> {
    let doc: Value = serde_yaml::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
    let map = match doc {
        Value::Mapping(m) => m,
        Value::Null => {
            return Err("holds no settings: expected a YAML mapping of etcd settings".into())
        }
        other => {
            return Err(format!(
                "expected a YAML mapping of etcd settings, found {}",
                kind(&other)
            ))
        }
    };
    let mut raw = BTreeMap::new();
    for (k, v) in &map {
        let key = match k {
            Value::String(s) => s.clone(),
            Value::Number(_) | Value::Bool(_) => text_of(k),
            other => return Err(format!("a key is {}, not text", kind(other))),
        };
        raw.insert(key, text_of(v));
    }
    let plain = |key: &str| {
        raw.get(key)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let list = |key: &str| raw.get(key).map(|v| join_list(v)).filter(|v| !v.is_empty());
    Ok(FoundConfig {
        name: plain("name"),
        data_dir: plain("data-dir"),
        wal_dir: plain("wal-dir"),
        initial_cluster: list("initial-cluster"),
        initial_cluster_token: plain("initial-cluster-token"),
        initial_cluster_state: plain("initial-cluster-state"),
        initial_advertise_peer_urls: list("initial-advertise-peer-urls"),
        advertise_client_urls: list("advertise-client-urls"),
        raw,
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// A YAML value as one line of text: null is "", lists are comma-joined,
/// mappings are `{k: v, …}`.
fn text_of(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Sequence(items) => items.iter().map(text_of).collect::<Vec<_>>().join(","),
        Value::Mapping(m) => {
            let inner: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}: {}", text_of(k), text_of(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        Value::Tagged(t) => text_of(&t.value),
    }
}

/// `"a, b,,c "` → `"a,b,c"`.
fn join_list(v: &str) -> String {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(",")
}

/// `ETCD_NAME=etcd0` lines (optionally quoted values, `#` comments).
pub fn parse_env_config(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").map_or(line, str::trim_start);
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let valid_key =
            !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid_key {
            continue;
        }
        out.insert(key.to_string(), env_value(value.trim()));
    }
    out
}

/// One shell-ish value: `"…"` (with `\"` and `\\`), `'…'` (literal), or bare
/// text up to a ` #` comment.
fn env_value(v: &str) -> String {
    let mut chars = v.chars();
    match chars.next() {
        Some('"') => {
            let mut out = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => match chars.next() {
                        Some(n @ ('"' | '\\' | '$' | '`')) => out.push(n),
                        Some(n) => {
                            out.push('\\');
                            out.push(n);
                        }
                        None => out.push('\\'),
                    },
                    c => out.push(c),
                }
            }
            out
        }
        Some('\'') => chars.take_while(|&c| c != '\'').collect(),
        _ => {
            let end = v
                .char_indices()
                .find(|&(i, c)| c == '#' && v[..i].ends_with(char::is_whitespace))
                .map_or(v.len(), |(i, _)| i);
            v[..end].trim_end().to_string()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// `/var/snap/etcd/current`
    Canonical,
    /// `/var/snap/etcd/current/<name>.etcd`
    Legacy,
    /// A `data-dir` named by the found config that is neither of the above.
    Configured,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// Host path (under the root).
    pub path: PathBuf,
    pub role: Role,
    pub exists: bool,
    /// What its WAL says: Ok(None) no member, Ok(Some) a member, Err unreadable.
    pub member: Result<Option<WalIds>, WalError>,
    /// What the migration planner needs to know besides the member.
    pub facts: DirFacts,
}

/// Facts about one location that decide how a member is moved out of it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirFacts {
    /// `<path>/member` exists, with or without a WAL.
    pub member_dir: bool,
    /// The separate WAL dir the config names for this location, if any.
    pub wal_dir: Option<PathBuf>,
    /// The file system (st_dev) of `member/`, else of the nearest existing
    /// directory on the way to it: a rename works only within one.
    pub device: Option<u64>,
    /// Size of the bbolt db `member/snap/db`, when there is one.
    pub db_size: Option<u64>,
    /// The newest modification time of anything under `member/` (and the
    /// wal-dir): tells a copy or a snapshot taken before it from one after.
    pub newest_change: Option<SystemTime>,
}

/// A member dir an interrupted migration left in the canonical data dir
/// (`member.incoming`, `member.verified`; see [`crate::migrate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    pub path: PathBuf,
    /// What its `wal/` says.
    pub member: Result<Option<WalIds>, WalError>,
    /// Holds no entries at all.
    pub empty: bool,
    /// The directory's own mtime: a verified copy is stamped when verified.
    pub mtime: Option<SystemTime>,
}

/// A migration snapshot in the backup dir: `<stamp>-migrate-<name>-<id>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub path: PathBuf,
    pub member_id: u64,
    /// When its newest file was written.
    pub newest_change: Option<SystemTime>,
}

/// What an earlier or interrupted migration left, for the planner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrationFacts {
    pub incoming: Option<Staged>,
    pub verified: Option<Staged>,
    /// This member's migration snapshots, complete ones only.
    pub snapshots: Vec<Snapshot>,
    /// `ETCD_CHARM_MIGRATE=copy`: copy even within one file system (tests).
    pub force_copy: bool,
    /// Sizes and free space a copy needs (None when not read, as in pure
    /// tests: the planner then leaves the check to the executor).
    pub space: Option<SpaceFacts>,
}

/// What decides whether a migration's copies fit (see [`crate::space`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpaceFacts {
    /// Bytes under each non-canonical location's `member/` (and its
    /// wal-dir), by location path.
    pub member_bytes: BTreeMap<PathBuf, u64>,
    /// Free bytes in the canonical data dir's file system.
    pub canonical_free: u64,
    /// Free bytes in the backup dir's file system.
    pub backup_free: u64,
    /// Both are one file system: a copy and a snapshot share its space.
    pub same_fs: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskLayout {
    /// None: no etcd.conf.yml. Some(Err): present but unreadable/unparseable.
    pub config: Option<Result<FoundConfig, String>>,
    /// etcd.conf, then etcd.conf.2x, whichever exist.
    pub env_configs: Vec<(PathBuf, BTreeMap<String, String>)>,
    /// Canonical first, then legacy, then configured; no duplicates.
    pub locations: Vec<Location>,
    pub migration: MigrationFacts,
}

impl DiskLayout {
    /// The parsed etcd.conf.yml, if there is one and it parsed.
    pub fn found_config(&self) -> Option<&FoundConfig> {
        self.config.as_ref().and_then(|c| c.as_ref().ok())
    }
}

/// Reads `etcd.conf.yml`: None when absent; Err (naming the file) when it
/// cannot be read or parsed.
pub fn read_found_config(paths: &Paths) -> Option<Result<FoundConfig, String>> {
    let file = paths.config_file();
    match std::fs::read_to_string(&file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(Err(format!("cannot read {}: {e}", file.display()))),
        Ok(text) => Some(parse_found_config(&text).map_err(|e| format!("{}: {e}", file.display()))),
    }
}

/// The host path of the data dir a config names, normalised lexically.
pub fn configured_data_dir(paths: &Paths, config: &FoundConfig) -> Option<PathBuf> {
    config
        .data_dir
        .as_deref()
        .map(|d| paths.from_config(normalize(Path::new(d))))
}

/// Reads everything above. Never writes. `member_name` is e.g. `etcd0`.
pub fn observe(paths: &Paths, member_name: &str) -> DiskLayout {
    let config = read_found_config(paths);
    let env_configs = [paths.env_config(), paths.env_config_2x()]
        .into_iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let parsed = parse_env_config(&text);
            Some((p, parsed))
        })
        .collect();

    let found = config.as_ref().and_then(|c| c.as_ref().ok());
    let configured = found.and_then(|c| configured_data_dir(paths, c));
    let wal_dir = found
        .and_then(|c| c.wal_dir.as_deref())
        .map(|w| paths.from_config(normalize(Path::new(w))));

    let mut candidates = vec![
        (normalize(&paths.data_dir()), Role::Canonical),
        (normalize(&paths.legacy_data_dir(member_name)), Role::Legacy),
    ];
    if let Some(c) = &configured {
        candidates.push((c.clone(), Role::Configured));
    }
    let mut locations: Vec<Location> = Vec::new();
    for (path, role) in candidates {
        if locations.iter().any(|l| same_place(&l.path, &path)) {
            continue;
        }
        // The config's wal-dir belongs to whichever location it configures.
        let is_configured = configured.as_ref().is_some_and(|c| same_place(c, &path));
        let member = match (&wal_dir, is_configured) {
            (Some(w), true) => wal::read_ids_in_wal_dir(w),
            _ => wal::read_ids(&path),
        };
        let own_wal = if is_configured { wal_dir.clone() } else { None };
        locations.push(Location {
            exists: path.is_dir(),
            facts: dir_facts(&path, own_wal),
            path,
            role,
            member,
        });
    }
    let mut migration = migration_facts(paths, member_name);
    migration.space = space_facts(paths, &locations);
    DiskLayout {
        config,
        env_configs,
        locations,
        migration,
    }
}

/// Free space and source sizes, read only when a member sits outside the
/// canonical dir (the only time a migration copies).
fn space_facts(paths: &Paths, locations: &[Location]) -> Option<SpaceFacts> {
    let sources: Vec<&Location> = locations
        .iter()
        .filter(|l| l.role != Role::Canonical && l.facts.member_dir)
        .collect();
    if sources.is_empty() {
        return None;
    }
    let mut member_bytes = BTreeMap::new();
    for l in sources {
        let mut n = tree_bytes(&l.path.join("member"));
        if let Some(w) = &l.facts.wal_dir {
            n += tree_bytes(w);
        }
        member_bytes.insert(l.path.clone(), n);
    }
    let canon = paths.data_dir();
    let backups = paths.backup_dir();
    Some(SpaceFacts {
        member_bytes,
        canonical_free: crate::space::free_bytes(&canon).ok()?,
        backup_free: crate::space::free_bytes(&backups).ok()?,
        same_fs: device_of(&canon) == device_of(&backups),
    })
}

/// Bytes in the files under `dir` (symlinks not followed; bounded depth).
pub fn tree_bytes(dir: &Path) -> u64 {
    fn walk(p: &Path, depth: usize) -> u64 {
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            return 0;
        };
        if meta.is_file() {
            return meta.len();
        }
        if !meta.is_dir() || depth >= 8 {
            return 0;
        }
        std::fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| walk(&e.path(), depth + 1)).sum())
            .unwrap_or(0)
    }
    walk(dir, 0)
}

fn dir_facts(data_dir: &Path, wal_dir: Option<PathBuf>) -> DirFacts {
    let member = data_dir.join("member");
    let mut newest = newest_change(&member);
    if let Some(w) = &wal_dir {
        newest = newest.max(newest_change(w));
    }
    DirFacts {
        member_dir: member.is_dir(),
        device: device_of(&member),
        db_size: std::fs::metadata(member.join("snap").join("db"))
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len()),
        newest_change: newest,
        wal_dir,
    }
}

/// st_dev of `p`, or of its nearest existing ancestor.
pub fn device_of(p: &Path) -> Option<u64> {
    p.ancestors()
        .find_map(|a| std::fs::metadata(a).ok())
        .map(|m| m.dev())
}

/// The newest mtime of `dir` and everything under it (bounded depth; a
/// member dir is shallow). None when `dir` does not exist.
pub fn newest_change(dir: &Path) -> Option<SystemTime> {
    fn walk(p: &Path, depth: usize, newest: &mut Option<SystemTime>) {
        let Ok(meta) = std::fs::symlink_metadata(p) else {
            return;
        };
        if let Ok(t) = meta.modified() {
            *newest = (*newest).max(Some(t));
        }
        if meta.is_dir() && depth < 8 {
            if let Ok(entries) = std::fs::read_dir(p) {
                for e in entries.flatten() {
                    walk(&e.path(), depth + 1, newest);
                }
            }
        }
    }
    let mut newest = None;
    walk(dir, 0, &mut newest);
    newest
}

fn staged(path: PathBuf) -> Option<Staged> {
    let meta = std::fs::symlink_metadata(&path).ok()?;
    Some(Staged {
        member: wal::read_ids_in_wal_dir(&path.join("wal")),
        empty: std::fs::read_dir(&path).map_or(true, |mut d| d.next().is_none()),
        mtime: meta.modified().ok(),
        path,
    })
}

fn migration_facts(paths: &Paths, member_name: &str) -> MigrationFacts {
    let data = paths.data_dir();
    let mut snapshots = Vec::new();
    if let Ok(entries) = std::fs::read_dir(paths.backup_dir()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(member_id) = parse_snapshot_name(&name, member_name) {
                snapshots.push(Snapshot {
                    newest_change: newest_change(&e.path()),
                    path: e.path(),
                    member_id,
                });
            }
        }
    }
    snapshots.sort_by(|a, b| a.path.cmp(&b.path));
    MigrationFacts {
        incoming: staged(data.join(INCOMING)),
        verified: staged(data.join(VERIFIED)),
        snapshots,
        force_copy: std::env::var(FORCE_ENV).is_ok_and(|v| v == "copy"),
        space: None,
    }
}

/// The start guard (rule 2 made physical): Err with a message naming both
/// paths when the configured data dir holds no member but another known
/// location does. Run as ExecStartPre and by the direct backend.
///
/// "Known" means the canonical dir and `<name>.etcd` under it, `name` taken
/// from the config. A WAL that exists but cannot be read still counts as a
/// member elsewhere (starting would orphan it); in the configured dir it
/// counts as present (etcd itself will then say what is wrong). No config,
/// an unparseable one, or one without `data-dir` passes: the guard only
/// stops the one mistake it can see for certain.
pub fn start_guard(paths: &Paths) -> Result<(), String> {
    let Some(Ok(config)) = read_found_config(paths) else {
        return Ok(());
    };
    let Some(configured) = configured_data_dir(paths, &config) else {
        return Ok(());
    };
    // The data volume late or missing at boot (fstab's `nofail` lets the
    // boot go on): on the bare mount point etcd would run on the root disk,
    // an empty dir beside the member on the volume (issue 19.7).
    let mp = paths.host(crate::mounts::VOLUME_MOUNT_POINT);
    let mp_abs = std::path::absolute(&mp).unwrap_or_else(|_| mp.clone());
    if configured.starts_with(&mp) && crate::mounts::mounted_at(&mp_abs).is_none() {
        return Err(format!(
            "refusing to start etcd: its data dir {} is on the data volume, and nothing is \
             mounted at {} (the volume is late, or missing); started, it would run on the root \
             disk. Mount the volume (mount {}) and start etcd again",
            paths.unhost(&configured).display(),
            crate::mounts::VOLUME_MOUNT_POINT,
            crate::mounts::VOLUME_MOUNT_POINT
        ));
    }
    let here = match config.wal_dir.as_deref() {
        Some(w) => wal::read_ids_in_wal_dir(&paths.from_config(normalize(Path::new(w)))),
        None => wal::read_ids(&configured),
    };
    // A `member/` whose WAL is gone (wiped, moved) or unreadable: etcd
    // would take it for a fresh dir and rejoin under the member ID the
    // cluster still lists for its peer URL, with an empty raft log.
    let member_dir = configured.join("member");
    match &here {
        Ok(Some(_)) => return Ok(()),
        Err(e) => {
            return Err(format!(
                "refusing to start etcd: the WAL of {} cannot be read ({}); \
                 the charm's next hook moves the member aside and rejoins it as a new member",
                member_dir.display(),
                e.problem
            ))
        }
        Ok(None) if member_dir.is_dir() => {
            return Err(format!(
                "refusing to start etcd: {} holds no WAL{}: started, it would rejoin as its \
                 old voter with an empty log. The charm's next hook moves it aside and \
                 rejoins it as a new member",
                member_dir.display(),
                if member_dir.join("snap/db").is_file() {
                    " (only snap/db)"
                } else {
                    ""
                }
            ))
        }
        Ok(None) => {}
    }
    // (the place to name, where its WAL would be)
    let data_dir = |d: PathBuf| (d.clone(), wal::wal_dir_of(&d));
    let mut others = vec![data_dir(normalize(&paths.data_dir()))];
    if paths.snap_data_dir() != paths.data_dir() {
        // The canonical dir is the storage volume: the snap's is another place.
        others.push(data_dir(normalize(&paths.snap_data_dir())));
    }
    if let Some(name) = &config.name {
        others.push(data_dir(normalize(&paths.legacy_data_dir(name))));
    }
    // A migration's copy waiting to be put in place is this member too.
    for staged in [INCOMING, VERIFIED] {
        let dir = paths.data_dir().join(staged);
        others.push((dir.clone(), dir.join("wal")));
    }
    let mut found = Vec::new();
    for (other, other_wal) in others {
        if same_place(&other, &configured) {
            continue;
        }
        match wal::read_ids_in_wal_dir(&other_wal) {
            Ok(None) => {}
            Ok(Some(ids)) => found.push(format!("{} holds {ids}", other.display())),
            Err(e) => found.push(format!(
                "{} holds a WAL that cannot be read ({})",
                other.display(),
                e.problem
            )),
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    Err(format!(
        "refusing to start etcd: {} sets data-dir {} (on disk {}), which holds no member, \
         but {}. Starting would create a new, empty member beside the existing one. \
         Let the charm move the member into place (its next hook does; \
         `etcd-charm upgrade-charm --dry-run` shows how), or point data-dir at \
         the existing member's directory, then start again.",
        paths.config_file().display(),
        config.data_dir.as_deref().unwrap_or_default(),
        configured.display(),
        found.join("; and "),
    ))
}

/// Lexical clean-up: drops `.` and trailing slashes, folds `..`.
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let at_root = out.has_root() && out.parent().is_none();
                if !at_root && !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Same path text, or (both existing) the same directory through symlinks:
/// `/var/snap/etcd/current` is a symlink to the snap's revision dir.
fn same_place(a: &Path, b: &Path) -> bool {
    if normalize(a) == normalize(b) {
        return true;
    }
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::write_test_segment;

    const PYTHON_CHARM: &str = include_str!("../tests/fixtures/layout/python-charm.etcd.conf.yml");
    const SNAP_MIGRATED: &str =
        include_str!("../tests/fixtures/layout/snap-migrated.etcd.conf.yml");
    const URL_LISTS: &str = include_str!("../tests/fixtures/layout/url-lists.etcd.conf.yml");
    const ENV_2X: &str = include_str!("../tests/fixtures/layout/etcd.conf.2x");

    const OLD: WalIds = WalIds {
        member_id: 0x8e9e_05c5_2164_694d,
        cluster_id: 0xcdf8_1819_4e3a_8c32,
    };
    const NEW: WalIds = WalIds {
        member_id: 0x1111,
        cluster_id: 0x2222,
    };

    fn s(v: &str) -> Option<String> {
        Some(v.to_string())
    }

    #[test]
    fn python_charm_config() {
        let c = parse_found_config(PYTHON_CHARM).unwrap();
        assert_eq!(c.name, s("etcd1"));
        assert_eq!(c.data_dir, s("/var/snap/etcd/current"));
        assert_eq!(c.wal_dir, None);
        assert_eq!(
            c.initial_cluster,
            s("etcd0=https://10.5.0.10:2380,etcd1=https://10.5.0.11:2380")
        );
        assert_eq!(c.initial_cluster_token, s("Q7XK2P"));
        assert_eq!(c.initial_cluster_state, s("existing"));
        assert_eq!(c.initial_advertise_peer_urls, s("https://10.5.0.11:2380"));
        assert_eq!(c.advertise_client_urls, s("https://10.5.0.11:2379"));
        assert_eq!(c.raw["snapshot-count"], "10000");
        assert_eq!(c.raw["wal-dir"], "");
        assert_eq!(c.raw["proxy"], "off");
        assert_eq!(c.raw["strict-reconfig-check"], "true");
        assert_eq!(c.raw["log-outputs"], "stderr");
        assert!(c.raw["client-transport-security"].contains("client-cert-auth: true"));
    }

    #[test]
    fn snap_migrated_config() {
        let c = parse_found_config(SNAP_MIGRATED).unwrap();
        assert_eq!(c.name, s("etcd0"));
        assert_eq!(c.data_dir, s("/var/snap/etcd/current/etcd0.etcd"));
        assert_eq!(c.wal_dir, None, "wal-dir: '' is unset");
        assert_eq!(c.raw["wal-dir"], "");
        assert_eq!(c.raw["snapshot-count"], "", "snapshot-count: with nothing");
        assert_eq!(c.initial_cluster, None);
        assert_eq!(c.initial_cluster_token, None);
        assert_eq!(c.initial_cluster_state, None);
        assert!(!c.raw.contains_key("initial-cluster"));
        assert_eq!(c.initial_advertise_peer_urls, s("https://10.5.0.10:2380"));
        assert_eq!(c.advertise_client_urls, s("https://10.5.0.10:2379"));
        assert_eq!(c.raw["heartbeat-interval"], "100");
    }

    #[test]
    fn url_keys_as_lists_are_comma_joined() {
        let c = parse_found_config(URL_LISTS).unwrap();
        assert_eq!(
            c.initial_cluster,
            s("etcd0=https://10.5.0.10:2380,etcd1=https://10.5.0.11:2380,etcd2=https://10.5.0.12:2380")
        );
        assert_eq!(c.initial_advertise_peer_urls, s("https://10.5.0.12:2380"));
        assert_eq!(
            c.advertise_client_urls,
            s("https://10.5.0.12:2379,http://127.0.0.1:4001")
        );
        assert_eq!(c.initial_cluster_state, s("existing"));
        let spaced =
            parse_found_config("advertise-client-urls: 'https://a:2379, https://b:2379,'\n")
                .unwrap();
        assert_eq!(
            spaced.advertise_client_urls,
            s("https://a:2379,https://b:2379")
        );
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        for (text, want) in [
            ("", "no settings"),
            ("# only a comment\n", "no settings"),
            ("- a\n- b\n", "found a list"),
            ("just text\n", "found a string"),
            ("name: [unclosed\n", "not valid YAML"),
            ("name: a\nname: b\n", "not valid YAML"),
            ("? [a, b]\n: c\n", "not text"),
        ] {
            let err = parse_found_config(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err}");
        }
    }

    #[test]
    fn env_config_as_the_2x_snap_left_it() {
        let e = parse_env_config(ENV_2X);
        assert_eq!(e["ETCD_NAME"], "etcd0");
        assert_eq!(e["ETCD_DATA_DIR"], "/var/snap/etcd/current/etcd0.etcd");
        assert_eq!(
            e["ETCD_INITIAL_CLUSTER"],
            "etcd0=https://10.5.0.10:2380,etcd1=https://10.5.0.11:2380"
        );
        assert_eq!(e["ETCD_INITIAL_CLUSTER_TOKEN"], "Q7XK2P");
        assert_eq!(e["ETCD_ADVERTISE_CLIENT_URLS"], "https://10.5.0.10:2379");
        assert!(!e.contains_key("ETCD_WAL_DIR"), "commented out");
        assert!(!e.contains_key("#ETCD_WAL_DIR"));
    }

    #[test]
    fn env_config_edge_cases() {
        let e = parse_env_config(
            "export ETCD_NAME=etcd3\n\
             \n   # indented comment\n\
             ETCD_A=bare value # trailing comment\n\
             ETCD_B=\"quoted # not a comment\" # but this is\n\
             ETCD_C='single \"x\"'\n\
             ETCD_D=\"esc \\\"q\\\" \\\\ \\n\"\n\
             ETCD_E=\n\
             ETCD_F=a#b\n\
             not a line\n\
             BAD KEY=x\n\
             =novalue\n",
        );
        assert_eq!(e["ETCD_NAME"], "etcd3");
        assert_eq!(e["ETCD_A"], "bare value");
        assert_eq!(e["ETCD_B"], "quoted # not a comment");
        assert_eq!(e["ETCD_C"], "single \"x\"");
        assert_eq!(e["ETCD_D"], "esc \"q\" \\ \\n");
        assert_eq!(e["ETCD_E"], "");
        assert_eq!(e["ETCD_F"], "a#b");
        assert_eq!(e.len(), 7, "{e:?}");
    }

    /// A temp root with an optional config and members at the given dirs.
    fn root(config: Option<&str>, members: &[(&str, WalIds)]) -> (tempfile::TempDir, Paths) {
        let tmp = tempfile::tempdir().unwrap();
        let paths = Paths::new(tmp.path());
        if let Some(text) = config {
            std::fs::create_dir_all(paths.common_dir()).unwrap();
            std::fs::write(paths.config_file(), text).unwrap();
        }
        for (dir, ids) in members {
            write_test_segment(&paths.host(dir), *ids).unwrap();
        }
        (tmp, paths)
    }

    fn summary(l: &DiskLayout, paths: &Paths) -> Vec<(PathBuf, Role, bool, Option<WalIds>)> {
        l.locations
            .iter()
            .map(|x| {
                (
                    paths.unhost(&x.path),
                    x.role,
                    x.exists,
                    x.member.clone().expect("readable WAL"),
                )
            })
            .collect()
    }

    #[test]
    fn observe_an_empty_machine() {
        let (_tmp, paths) = root(None, &[]);
        let l = observe(&paths, "etcd0");
        assert_eq!(l.config, None);
        assert!(l.env_configs.is_empty());
        assert_eq!(
            summary(&l, &paths),
            vec![
                (
                    "/var/snap/etcd/current".into(),
                    Role::Canonical,
                    false,
                    None
                ),
                (
                    "/var/snap/etcd/current/etcd0.etcd".into(),
                    Role::Legacy,
                    false,
                    None
                ),
            ]
        );
        assert_eq!(start_guard(&paths), Ok(()));
    }

    #[test]
    fn observe_a_snap_migrated_unit() {
        let (_tmp, paths) = root(
            Some(SNAP_MIGRATED),
            &[("/var/snap/etcd/current/etcd0.etcd", OLD)],
        );
        std::fs::write(paths.env_config_2x(), ENV_2X).unwrap();
        let l = observe(&paths, "etcd0");
        assert_eq!(l.found_config().unwrap().name, s("etcd0"));
        assert_eq!(l.env_configs.len(), 1);
        assert_eq!(l.env_configs[0].0, paths.env_config_2x());
        assert_eq!(l.env_configs[0].1["ETCD_NAME"], "etcd0");
        // The configured dir is the legacy one: listed once, as Legacy.
        assert_eq!(
            summary(&l, &paths),
            vec![
                ("/var/snap/etcd/current".into(), Role::Canonical, true, None),
                (
                    "/var/snap/etcd/current/etcd0.etcd".into(),
                    Role::Legacy,
                    true,
                    Some(OLD)
                ),
            ]
        );
        assert_eq!(start_guard(&paths), Ok(()));
    }

    #[test]
    fn observe_lists_a_configured_dir_last_and_uses_its_wal_dir() {
        let (_tmp, paths) = root(
            Some("name: etcd0\ndata-dir: /srv/etcd/./data/\nwal-dir: /srv/etcd-wal\n"),
            &[("/var/snap/etcd/current", NEW)],
        );
        crate::wal::write_test_segment_in_wal_dir(&paths.host("/srv/etcd-wal"), OLD).unwrap();
        std::fs::create_dir_all(paths.host("/srv/etcd/data")).unwrap();
        std::fs::write(paths.env_config(), "ETCD_NAME=etcd0\n").unwrap();
        let l = observe(&paths, "etcd0");
        assert_eq!(l.env_configs[0].0, paths.env_config());
        assert_eq!(
            summary(&l, &paths),
            vec![
                (
                    "/var/snap/etcd/current".into(),
                    Role::Canonical,
                    true,
                    Some(NEW)
                ),
                (
                    "/var/snap/etcd/current/etcd0.etcd".into(),
                    Role::Legacy,
                    false,
                    None
                ),
                ("/srv/etcd/data".into(), Role::Configured, true, Some(OLD)),
            ]
        );
        assert_eq!(start_guard(&paths), Ok(()));
    }

    #[test]
    fn observe_reports_a_bad_config_and_a_bad_wal() {
        let (_tmp, paths) = root(Some("- not\n- a map\n"), &[]);
        let wal_dir = paths.data_dir().join("member/wal");
        std::fs::create_dir_all(&wal_dir).unwrap();
        std::fs::write(
            wal_dir.join("0000000000000000-0000000000000000.wal"),
            [1u8; 5],
        )
        .unwrap();
        let l = observe(&paths, "etcd0");
        let err = l.config.clone().unwrap().unwrap_err();
        assert!(
            err.contains("etcd.conf.yml") && err.contains("found a list"),
            "{err}"
        );
        assert!(l.locations[0].member.is_err());
        // An unparseable config is for etcd to reject, not the guard.
        assert_eq!(start_guard(&paths), Ok(()));
    }

    #[test]
    fn guard_refuses_an_empty_canonical_dir_beside_a_legacy_member() {
        let (_tmp, paths) = root(
            Some("name: 'etcd0'\ndata-dir: '/var/snap/etcd/current'\n"),
            &[("/var/snap/etcd/current/etcd0.etcd", OLD)],
        );
        let err = start_guard(&paths).unwrap_err();
        assert!(err.contains("refusing to start"), "{err}");
        assert!(
            err.contains(&paths.data_dir().display().to_string()),
            "{err}"
        );
        assert!(
            err.contains(&paths.legacy_data_dir("etcd0").display().to_string()),
            "{err}"
        );
        assert!(
            err.contains("8e9e05c52164694d") && err.contains("cdf818194e3a8c32"),
            "{err}"
        );
    }

    #[test]
    fn guard_refuses_an_empty_legacy_dir_beside_a_canonical_member() {
        let (_tmp, paths) = root(Some(SNAP_MIGRATED), &[("/var/snap/etcd/current", NEW)]);
        let err = start_guard(&paths).unwrap_err();
        assert!(
            err.contains("etcd0.etcd") && err.contains("member 1111"),
            "{err}"
        );
    }

    #[test]
    fn guard_refuses_when_the_other_wal_is_unreadable() {
        let (_tmp, paths) = root(Some("name: etcd0\ndata-dir: /var/lib/etcd\n"), &[]);
        let wal_dir = paths.data_dir().join("member/wal");
        std::fs::create_dir_all(&wal_dir).unwrap();
        std::fs::write(
            wal_dir.join("0000000000000000-0000000000000000.wal"),
            [0u8; 64],
        )
        .unwrap();
        let err = start_guard(&paths).unwrap_err();
        assert!(err.contains("cannot be read"), "{err}");
    }

    /// Issue 19.7: the config puts the data dir on the data volume, and
    /// nothing is mounted there (late at boot, or missing): even with a
    /// member on the bare mount point's dir, no start on the root disk.
    #[test]
    fn guard_refuses_a_data_dir_on_a_volume_that_is_not_mounted() {
        let (_tmp, paths) = root(
            Some("name: etcd0\ndata-dir: /media/etcd/data\n"),
            &[("/media/etcd/data", NEW)],
        );
        let err = start_guard(&paths).unwrap_err();
        assert!(
            err.contains("/media/etcd/data is on the data volume")
                && err.contains("nothing is mounted at /media/etcd"),
            "{err}"
        );
        // Elsewhere, a mount point is not asked for.
        let (_tmp, paths) = root(
            Some("name: etcd0\ndata-dir: /var/snap/etcd/common/data\n"),
            &[("/var/snap/etcd/common/data", NEW)],
        );
        assert_eq!(start_guard(&paths), Ok(()));
    }

    #[test]
    fn guard_passes_when_the_configured_dir_holds_a_member() {
        // Both hold members: the configured one is what etcd will run.
        let (_tmp, paths) = root(
            Some("name: etcd0\ndata-dir: /var/snap/etcd/current\n"),
            &[
                ("/var/snap/etcd/current", NEW),
                ("/var/snap/etcd/current/etcd0.etcd", OLD),
            ],
        );
        assert_eq!(start_guard(&paths), Ok(()));
        // No data-dir key: nothing certain to guard.
        let (_tmp, paths) = root(Some("name: etcd0\n"), &[("/var/snap/etcd/current", NEW)]);
        assert_eq!(start_guard(&paths), Ok(()));
        // A fresh machine with our config: nothing anywhere.
        let (_tmp, paths) = root(Some(PYTHON_CHARM), &[]);
        assert_eq!(start_guard(&paths), Ok(()));
    }

    #[test]
    fn guard_refuses_a_member_dir_without_its_wal() {
        let (_tmp, paths) = root(
            Some("name: etcd0\ndata-dir: /var/snap/etcd/current\n"),
            &[("/var/snap/etcd/current", NEW)],
        );
        assert_eq!(start_guard(&paths), Ok(()));
        let member = paths.data_dir().join("member");
        std::fs::create_dir_all(member.join("snap")).unwrap();
        std::fs::write(member.join("snap/db"), b"bolt").unwrap();
        std::fs::rename(member.join("wal"), paths.data_dir().join("wal.away")).unwrap();
        let err = start_guard(&paths).unwrap_err();
        assert!(
            err.contains("refusing to start") && err.contains("holds no WAL (only snap/db)"),
            "{err}"
        );
        // An unreadable WAL is no better.
        std::fs::create_dir_all(member.join("wal")).unwrap();
        std::fs::write(
            member.join("wal/0000000000000000-0000000000000000.wal"),
            [0u8; 64],
        )
        .unwrap();
        let err = start_guard(&paths).unwrap_err();
        assert!(err.contains("cannot be read"), "{err}");
    }

    #[test]
    fn guard_ignores_other_names_legacy_dirs() {
        // etcd5.etcd is not this member's legacy dir (name etcd0).
        let (_tmp, paths) = root(
            Some("name: etcd0\ndata-dir: /var/snap/etcd/current\n"),
            &[("/var/snap/etcd/current/etcd5.etcd", OLD)],
        );
        assert_eq!(start_guard(&paths), Ok(()));
    }

    #[test]
    fn symlinked_current_is_one_place() {
        let (_tmp, paths) = root(None, &[]);
        let rev = paths.host("/var/snap/etcd/230");
        std::fs::create_dir_all(&rev).unwrap();
        std::os::unix::fs::symlink(&rev, paths.data_dir()).unwrap();
        write_test_segment(&rev.join("etcd0.etcd"), OLD).unwrap();
        std::fs::create_dir_all(paths.common_dir()).unwrap();
        std::fs::write(
            paths.config_file(),
            "name: etcd0\ndata-dir: /var/snap/etcd/230/etcd0.etcd\n",
        )
        .unwrap();
        let l = observe(&paths, "etcd0");
        assert_eq!(l.locations.len(), 2, "{:?}", l.locations);
        assert_eq!(l.locations[1].member, Ok(Some(OLD)));
        assert_eq!(start_guard(&paths), Ok(()));
    }

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("/a/./b/../c/")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("a/../../b")), PathBuf::from("../b"));
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
    }
}
