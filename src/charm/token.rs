//! The cluster token: created once, by the leader, and only when no earlier
//! record of it can be found (rule 1). Every later leader, retried hook and
//! upgrade reads it back.

use super::observed::TOKEN;
use super::observed::{LeaderData, Observed};
use crate::layout::DiskLayout;
use crate::paths::Paths;
use std::path::PathBuf;

pub use super::steps::TokenSource;

impl std::fmt::Display for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::AppDatabag => write!(f, "leadership data (peer app databag)"),
            TokenSource::LeaderGet => write!(f, "leadership data (leader-get)"),
            TokenSource::ConfigFile(p) => write!(f, "initial-cluster-token in {}", p.display()),
            TokenSource::EnvConfig(p) => write!(f, "ETCD_INITIAL_CLUSTER_TOKEN in {}", p.display()),
            TokenSource::Generated => write!(f, "newly generated"),
        }
    }
}

/// A token must be a plain word: it is written into etcd.conf.yml and
/// leadership data, and a hand-edited value must not slip through.
pub fn check(token: &str) -> Result<(), String> {
    if token.is_empty() || token.len() > 128 {
        return Err(format!("cluster token {token:?} must be 1-128 characters"));
    }
    if !token
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(format!(
            "cluster token {token:?} may hold only letters, digits, '.', '_' and '-'"
        ));
    }
    Ok(())
}

/// Looks for the token where earlier charms and this one may have left it,
/// in order of authority. Malformed values are skipped here; `check` on the
/// leadership value reports them.
pub fn recover(
    app: Option<&str>,
    leader_get: Option<&str>,
    disk: &DiskLayout,
    config_path: PathBuf,
) -> Option<(String, TokenSource)> {
    let ok = |t: &&str| check(t).is_ok();
    if let Some(t) = app.filter(ok) {
        return Some((t.to_string(), TokenSource::AppDatabag));
    }
    if let Some(t) = leader_get.filter(ok) {
        return Some((t.to_string(), TokenSource::LeaderGet));
    }
    if let Some(Ok(c)) = &disk.config {
        if let Some(t) = c.initial_cluster_token.as_deref().filter(ok) {
            return Some((t.to_string(), TokenSource::ConfigFile(config_path)));
        }
    }
    for (path, env) in &disk.env_configs {
        if let Some(t) = env
            .get("ETCD_INITIAL_CLUSTER_TOKEN")
            .map(|s| s.as_str())
            .filter(ok)
        {
            return Some((t.to_string(), TokenSource::EnvConfig(path.clone())));
        }
    }
    None
}

/// 16 characters of A–Z0–9 from the kernel's random source.
pub fn generate() -> Result<String, String> {
    use std::io::Read;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut bytes = [0u8; 64];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("reading /dev/urandom for a cluster token: {e}"))?;
    // Rejection sampling keeps the distribution uniform.
    let limit = 252u8; // largest multiple of 36 below 256
    let token: String = bytes
        .iter()
        .filter(|b| **b < limit)
        .take(16)
        .map(|b| ALPHABET[(*b % 36) as usize] as char)
        .collect();
    if token.len() < 16 {
        return Err("the random source gave too few usable bytes".into());
    }
    Ok(token)
}

/// Where the token comes from, or why none may be had yet.
pub(super) fn choose_token(
    o: &Observed,
    paths: &Paths,
    may_generate: bool,
) -> Result<Option<(String, TokenSource)>, String> {
    let LeaderData { app, legacy } = &o.leader;
    for (k, bag) in [("peer app databag", app), ("leader-get", legacy)] {
        if let Some(t) = bag.get(TOKEN).filter(|t| !t.is_empty()) {
            check(t).map_err(|e| format!("leadership data ({k}): {e}"))?;
        }
    }
    if let Some(found) = recover(
        app.get(TOKEN).map(|s| s.as_str()),
        legacy.get(TOKEN).map(|s| s.as_str()),
        &o.disk,
        paths.unhost(paths.config_file()),
    ) {
        return Ok(Some(found));
    }
    if o.is_leader && may_generate {
        return o
            .fresh_token
            .clone()
            .map(|t| Some((t, TokenSource::Generated)));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::FoundConfig;

    fn layout(conf_token: Option<&str>, env_token: Option<&str>) -> DiskLayout {
        let config = conf_token.map(|t| {
            Ok(FoundConfig {
                initial_cluster_token: Some(t.to_string()),
                ..Default::default()
            })
        });
        let env_configs = env_token
            .map(|t| {
                vec![(
                    PathBuf::from("/c/etcd.conf.2x"),
                    [("ETCD_INITIAL_CLUSTER_TOKEN".to_string(), t.to_string())].into(),
                )]
            })
            .unwrap_or_default();
        DiskLayout {
            config,
            env_configs,
            locations: vec![],
            migration: Default::default(),
        }
    }

    #[test]
    fn recovery_order_is_app_then_leader_get_then_config_then_env() {
        let d = layout(Some("CONF01"), Some("ENV001"));
        let p = PathBuf::from("/c/etcd.conf.yml");
        assert_eq!(
            recover(Some("APP001"), Some("LG0001"), &d, p.clone()).unwrap(),
            ("APP001".into(), TokenSource::AppDatabag)
        );
        assert_eq!(
            recover(None, Some("LG0001"), &d, p.clone()).unwrap().1,
            TokenSource::LeaderGet
        );
        assert_eq!(
            recover(None, None, &d, p.clone()).unwrap(),
            ("CONF01".into(), TokenSource::ConfigFile(p.clone()))
        );
        let d = layout(None, Some("ENV001"));
        assert_eq!(recover(None, None, &d, p.clone()).unwrap().0, "ENV001");
        assert_eq!(recover(None, None, &layout(None, None), p), None);
    }

    #[test]
    fn malformed_values_are_not_recovered() {
        let d = layout(Some("bad token\n"), None);
        assert_eq!(
            recover(Some(""), Some("a:b"), &d, PathBuf::from("/x")),
            None
        );
        assert!(check("ABC123").is_ok());
        assert!(check("etcd-cluster.1_x").is_ok());
        assert!(check("x y").is_err());
        assert!(check("").is_err());
    }

    #[test]
    fn generated_tokens_are_16_chars_and_differ() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert_eq!(a.len(), 16);
        assert!(check(&a).is_ok());
        assert_ne!(a, b);
    }
}
