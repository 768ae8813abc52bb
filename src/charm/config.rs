//! The charm's options, parsed from `config-get --format=json` into checked
//! values. A bad value becomes a `blocked` status naming the option.

use serde_json::{Map, Value};

/// Options, with the Python etcd charm's names so a refresh keeps settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharmConfig {
    pub port: u16,
    pub management_port: u16,
    pub snapshot_count: Option<u64>,
    pub heartbeat_interval: u64,
    pub election_timeout: u64,
    pub bind_to_all_interfaces: bool,
    pub channel: String,
    /// `channel` was `auto` (or unset): `channel` above is only what a new
    /// install gets; an installed snap keeps its version (snap_upgrade.rs).
    pub channel_auto: bool,
    /// Adds `http://127.0.0.1:4001` to the client listeners (the Python
    /// charm's option of the same name).
    pub bind_with_insecure_http: bool,
    /// What snapd may do to the etcd snap on its own (snap backend only).
    pub snapd_refresh: SnapdRefresh,
    /// Go cipher-suite names, checked against what etcd accepts. Kept for
    /// the TLS work that comes next; not rendered until etcd serves TLS.
    pub tls_cipher_suites: Vec<String>,
    /// For the nrpe checks (the nrpe-external-master relation): the host
    /// name prefix and the default service group.
    pub nagios_context: String,
    /// For the nrpe checks: service groups; empty means `nagios_context`.
    pub nagios_servicegroups: String,
    /// etcd's backend quota in bytes; 0 is etcd's default (2 GiB).
    pub quota_backend_bytes: u64,
    pub auto_compaction_mode: CompactionMode,
    /// Empty: no auto-compaction. A duration (`1h`) for periodic, a
    /// revision count for revision.
    pub auto_compaction_retention: String,
    /// The operator accepts plain http without client-certificate auth on
    /// addresses other than loopback (insecure.rs); off by default (rule 7).
    pub allow_insecure_listeners: bool,
    /// The maintenance agent's options (crate::agent::options).
    pub agent: crate::agent::options::AgentOptions,
}

/// The Python charm's plain-http client listener, loopback only.
pub const INSECURE_HTTP_PORT: u16 = 4001;
pub const INSECURE_HTTP_URL: &str = "http://127.0.0.1:4001";

/// etcd refuses a larger `election-timeout` at start.
pub const MAX_ELECTION_TIMEOUT_MS: u64 = 50_000;

/// The largest quota etcd recommends (its docs: 8 GiB is the suggested
/// maximum; beyond it bbolt's mmap and defrag times degrade).
pub const MAX_QUOTA: i64 = 8 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompactionMode {
    #[default]
    Periodic,
    Revision,
}

impl CompactionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionMode::Periodic => "periodic",
            CompactionMode::Revision => "revision",
        }
    }
}

pub use crate::service::SnapdRefresh;

/// The names etcd 3.4 accepts in `cipher-suites` (its tlsutil map; 3.5 and
/// later accept these too).
pub const ETCD_CIPHER_SUITES: [&str; 22] = [
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
];

impl Default for CharmConfig {
    fn default() -> Self {
        CharmConfig {
            port: 2379,
            management_port: 2380,
            snapshot_count: None,
            heartbeat_interval: 100,
            election_timeout: 1000,
            bind_to_all_interfaces: true,
            channel: "3.4/stable".into(),
            channel_auto: true,
            bind_with_insecure_http: false,
            snapd_refresh: SnapdRefresh::Hold,
            tls_cipher_suites: Vec::new(),
            nagios_context: "juju".into(),
            nagios_servicegroups: String::new(),
            quota_backend_bytes: 0,
            auto_compaction_mode: CompactionMode::Periodic,
            auto_compaction_retention: String::new(),
            allow_insecure_listeners: false,
            agent: Default::default(),
        }
    }
}

fn boolean(m: &Map<String, Value>, key: &str, default: bool) -> Result<bool, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(format!("config {key}={v} is not a boolean")),
    }
}

fn string<'a>(m: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(v) => Err(format!("config {key}={v} is not a string")),
    }
}

/// A snapd timer such as `fri,23:00-01:00`, `mon..fri,9:00~11:00/2` or
/// `00:00-24:00/4`: it goes into `snap set` as one argument, so no spaces,
/// newlines or shell metacharacters.
fn snapd_refresh(m: &Map<String, Value>) -> Result<SnapdRefresh, String> {
    let v = string(m, "snapd_refresh")?.map(str::trim);
    Ok(match v {
        None | Some("max") => SnapdRefresh::Hold,
        Some("") => SnapdRefresh::SnapdDefault,
        Some(t)
            if t.len() <= 200
                && t.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ":,-./~".contains(c)) =>
        {
            SnapdRefresh::Timer(t.to_string())
        }
        Some(t) => {
            return Err(format!(
                "config snapd_refresh={t:?} is not \"max\", \"\" or a snapd refresh.timer (letters, digits and :,-./~ only)"
            ))
        }
    })
}

fn cipher_suites(m: &Map<String, Value>) -> Result<Vec<String>, String> {
    let text = string(m, "tls_cipher_suites")?.unwrap_or("");
    let mut out = Vec::new();
    for name in text.split(|c: char| c == ',' || c.is_whitespace()) {
        if name.is_empty() {
            continue;
        }
        if !ETCD_CIPHER_SUITES.contains(&name) {
            return Err(format!(
                "config tls_cipher_suites: {name:?} is not a TLS cipher suite etcd accepts (Go names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)"
            ));
        }
        out.push(name.to_string());
    }
    Ok(out)
}

/// A one-line word list for a nagios config file: printable, no newlines.
fn nagios(m: &Map<String, Value>, key: &str, default: &str) -> Result<String, String> {
    let v = string(m, key)?.unwrap_or(default).trim();
    if v.chars().any(|c| c.is_control()) {
        return Err(format!("config {key}={v:?} must be one line"));
    }
    Ok(v.to_string())
}

fn quota(m: &Map<String, Value>) -> Result<u64, String> {
    match int(m, "quota_backend_bytes")? {
        None => Ok(0),
        Some(n) if n < 0 => Err(format!(
            "config quota_backend_bytes={n} is negative; 0 means etcd's default (2 GiB)"
        )),
        Some(n) if n > MAX_QUOTA => Err(format!(
            "config quota_backend_bytes={n} is above 8 GiB ({MAX_QUOTA}), the most etcd supports well"
        )),
        Some(n) => Ok(n as u64),
    }
}

fn compaction_mode(m: &Map<String, Value>) -> Result<CompactionMode, String> {
    match string(m, "auto_compaction_mode")?.map(str::trim) {
        None | Some("") | Some("periodic") => Ok(CompactionMode::Periodic),
        Some("revision") => Ok(CompactionMode::Revision),
        Some(v) => Err(format!(
            "config auto_compaction_mode={v:?} is not \"periodic\" or \"revision\""
        )),
    }
}

/// A Go duration etcd accepts for periodic retention (`1h`, `30m`,
/// `1h30m`, `90s`), or a bare number of hours.
fn is_duration(s: &str) -> bool {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()) {
        return true;
    }
    let mut rest = s;
    let mut any = false;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return false;
        }
        rest = &rest[digits..];
        let unit = ["ms", "h", "m", "s"]
            .into_iter()
            .find(|u| rest.starts_with(u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
        any = true;
    }
    any
}

fn retention(m: &Map<String, Value>, mode: CompactionMode) -> Result<String, String> {
    let v = match m.get("auto_compaction_retention") {
        Some(Value::Number(n)) => n.to_string(),
        _ => string(m, "auto_compaction_retention")?
            .unwrap_or("")
            .trim()
            .to_string(),
    };
    let ok = v.is_empty()
        || match mode {
            CompactionMode::Periodic => is_duration(&v) && !v.trim_start_matches('0').is_empty(),
            CompactionMode::Revision => v.parse::<u64>().is_ok_and(|n| n > 0),
        };
    if ok {
        return Ok(v);
    }
    Err(match mode {
        CompactionMode::Periodic => format!(
            "config auto_compaction_retention={v:?} is not a duration such as 1h, 30m or 1h30m (auto_compaction_mode=periodic)"
        ),
        CompactionMode::Revision => format!(
            "config auto_compaction_retention={v:?} is not a positive number of revisions (auto_compaction_mode=revision)"
        ),
    })
}

fn int(m: &Map<String, Value>, key: &str) -> Result<Option<i64>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("config {key}={n} is not a whole number")),
        // Juju may hand back ints as strings after a hand edit; accept digits.
        Some(Value::String(s)) => s
            .trim()
            .parse::<i64>()
            .map(Some)
            .map_err(|_| format!("config {key}={s:?} is not a whole number")),
        Some(v) => Err(format!("config {key}={v} is not a whole number")),
    }
}

fn port(m: &Map<String, Value>, key: &str, default: u16) -> Result<u16, String> {
    match int(m, key)? {
        None => Ok(default),
        Some(p) if (1..=65535).contains(&p) => Ok(p as u16),
        Some(p) => Err(format!("config {key}={p} is not a TCP port (1-65535)")),
    }
}

impl CharmConfig {
    pub fn parse(m: &Map<String, Value>) -> Result<CharmConfig, String> {
        let d = CharmConfig::default();
        let port_ = port(m, "port", d.port)?;
        let management_port = port(m, "management_port", d.management_port)?;
        if port_ == management_port {
            return Err(format!(
                "config port and management_port are both {port_}; they must differ"
            ));
        }
        // A string option in the Python charm: "auto" (etcd's default) or digits.
        let auto = matches!(m.get("snapshot_count"), Some(Value::String(s)) if s.trim() == "auto" || s.trim().is_empty());
        let snapshot_count = match if auto {
            None
        } else {
            int(m, "snapshot_count")?
        } {
            None => None,
            Some(n) if n > 0 => Some(n as u64),
            // The Python charm treated 0 as "etcd's default".
            Some(0) => None,
            Some(n) => return Err(format!("config snapshot_count={n} must be positive")),
        };
        let positive = |key: &str, default: u64| -> Result<u64, String> {
            match int(m, key)? {
                None => Ok(default),
                Some(n) if n > 0 => Ok(n as u64),
                Some(n) => Err(format!("config {key}={n} must be positive")),
            }
        };
        let bind_with_insecure_http =
            boolean(m, "bind_with_insecure_http", d.bind_with_insecure_http)?;
        let insecure_port = INSECURE_HTTP_PORT;
        if bind_with_insecure_http && (port_ == insecure_port || management_port == insecure_port) {
            return Err(format!(
                "config bind_with_insecure_http=true listens on 127.0.0.1:{insecure_port}, which port or management_port already uses"
            ));
        }
        let heartbeat_interval = positive("heartbeat_interval", d.heartbeat_interval)?;
        let election_timeout = positive("election_timeout", d.election_timeout)?;
        // etcd refuses to start otherwise; say so before it does.
        if election_timeout > MAX_ELECTION_TIMEOUT_MS {
            return Err(format!(
                "config election_timeout={election_timeout} is above etcd's maximum of {MAX_ELECTION_TIMEOUT_MS} ms"
            ));
        }
        if heartbeat_interval
            .checked_mul(5)
            .is_none_or(|min| election_timeout < min)
        {
            return Err(format!(
                "config election_timeout={election_timeout} must be at least 5 x heartbeat_interval={heartbeat_interval}"
            ));
        }
        let bind_to_all_interfaces =
            boolean(m, "bind_to_all_interfaces", d.bind_to_all_interfaces)?;
        let channel_auto = match m.get("channel") {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s.trim().is_empty() || s.trim() == "auto",
            Some(_) => false,
        };
        let channel = match m.get("channel") {
            None | Some(Value::Null) => d.channel,
            // "auto": the channel this charm ships with.
            Some(Value::String(s)) if s.trim().is_empty() || s.trim() == "auto" => d.channel,
            Some(Value::String(s))
                if s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "./-_".contains(c)) =>
            {
                s.clone()
            }
            Some(v) => return Err(format!("config channel={v} is not a snap channel")),
        };
        Ok(CharmConfig {
            port: port_,
            management_port,
            snapshot_count,
            heartbeat_interval,
            election_timeout,
            bind_to_all_interfaces,
            channel,
            channel_auto,
            bind_with_insecure_http,
            snapd_refresh: snapd_refresh(m)?,
            tls_cipher_suites: cipher_suites(m)?,
            nagios_context: nagios(m, "nagios_context", &d.nagios_context)?,
            nagios_servicegroups: nagios(m, "nagios_servicegroups", &d.nagios_servicegroups)?,
            quota_backend_bytes: quota(m)?,
            auto_compaction_mode: compaction_mode(m)?,
            auto_compaction_retention: retention(m, compaction_mode(m)?)?,
            allow_insecure_listeners: boolean(
                m,
                "allow_insecure_listeners",
                d.allow_insecure_listeners,
            )?,
            agent: crate::agent::options::AgentOptions::parse(m)?,
        })
    }

    /// The space options as etcd.conf.yml takes them: only what is set.
    pub fn storage_options(&self) -> crate::render::StorageOptions {
        let retention = !self.auto_compaction_retention.is_empty();
        crate::render::StorageOptions {
            quota_backend_bytes: (self.quota_backend_bytes > 0).then_some(self.quota_backend_bytes),
            auto_compaction_mode: retention.then(|| self.auto_compaction_mode.as_str().to_string()),
            auto_compaction_retention: retention.then(|| self.auto_compaction_retention.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<CharmConfig, String> {
        CharmConfig::parse(v.as_object().unwrap())
    }

    #[test]
    fn defaults_when_unset() {
        assert_eq!(parse(json!({})).unwrap(), CharmConfig::default());
    }

    #[test]
    fn python_charm_defaults_mean_etcds_own() {
        let c = parse(json!({"snapshot_count": "auto", "channel": "auto"})).unwrap();
        assert_eq!(c, CharmConfig::default());
        assert_eq!(
            parse(json!({"snapshot_count": "5000"}))
                .unwrap()
                .snapshot_count,
            Some(5000)
        );
    }

    #[test]
    fn typed_values_are_taken() {
        let c = parse(
            json!({"port": 4001, "management_port": 7001, "snapshot_count": 5000,
            "bind_to_all_interfaces": false, "channel": "3.5/edge"}),
        )
        .unwrap();
        assert_eq!((c.port, c.management_port), (4001, 7001));
        assert_eq!(c.snapshot_count, Some(5000));
        assert!(!c.bind_to_all_interfaces);
        assert_eq!(c.channel, "3.5/edge");
    }

    #[test]
    fn bad_values_name_the_option() {
        for (v, needle) in [
            (json!({"port": 70000}), "port=70000"),
            (json!({"port": 2380}), "both 2380"),
            (json!({"heartbeat_interval": 0}), "heartbeat_interval=0"),
            (json!({"election_timeout": 300}), "election_timeout=300"),
            (json!({"election_timeout": 50001}), "maximum of 50000"),
            // 5 x this overflows a u64: refused, not a panic.
            (
                json!({"heartbeat_interval": i64::MAX, "election_timeout": 1000}),
                "election_timeout=1000",
            ),
            (
                json!({"bind_to_all_interfaces": "yes"}),
                "bind_to_all_interfaces",
            ),
            (json!({"channel": "3.4/stable\nx: y"}), "channel"),
            (json!({"snapshot_count": -1}), "snapshot_count=-1"),
            (json!({"port": 1.5}), "port=1.5"),
            (
                json!({"bind_with_insecure_http": "true"}),
                "bind_with_insecure_http",
            ),
            (
                json!({"bind_with_insecure_http": true, "port": 4001}),
                "bind_with_insecure_http=true",
            ),
            (json!({"snapd_refresh": "fri 23:00"}), "snapd_refresh"),
            (json!({"snapd_refresh": "fri;reboot"}), "snapd_refresh"),
            (json!({"snapd_refresh": "$(x)"}), "snapd_refresh"),
            (json!({"snapd_refresh": 5}), "snapd_refresh"),
            (
                json!({"tls_cipher_suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 TLS_FOO"}),
                "\"TLS_FOO\"",
            ),
            (json!({"nagios_context": "a\nb"}), "nagios_context"),
            (
                json!({"nagios_servicegroups": true}),
                "nagios_servicegroups",
            ),
        ] {
            let e = parse(v.clone()).unwrap_err();
            assert!(e.contains(needle), "{v}: {e}");
        }
    }

    #[test]
    fn space_options() {
        let c = parse(json!({"quota_backend_bytes": 4194304, "auto_compaction_retention": "1h"}))
            .unwrap();
        let s = c.storage_options();
        assert_eq!(s.quota_backend_bytes, Some(4 << 20));
        assert_eq!(s.auto_compaction_mode.as_deref(), Some("periodic"));
        assert_eq!(s.auto_compaction_retention.as_deref(), Some("1h"));
        let r =
            parse(json!({"auto_compaction_mode": "revision", "auto_compaction_retention": "1000"}))
                .unwrap();
        assert_eq!(
            r.storage_options().auto_compaction_mode.as_deref(),
            Some("revision")
        );
        // Defaults as config-get hands them over: nothing is written.
        let d = parse(
            json!({"quota_backend_bytes": 0, "auto_compaction_mode": "periodic",
            "auto_compaction_retention": ""}),
        )
        .unwrap();
        assert_eq!(d, CharmConfig::default());
        assert_eq!(d.storage_options(), Default::default());
        for t in ["1h30m", "90s", "5m", "24", "500ms"] {
            assert!(
                parse(json!({"auto_compaction_retention": t})).is_ok(),
                "{t}"
            );
        }
        for (v, needle) in [
            (json!({"quota_backend_bytes": -1}), "quota_backend_bytes=-1"),
            (
                json!({"quota_backend_bytes": (8i64 << 30) + 1}),
                "above 8 GiB",
            ),
            (
                json!({"auto_compaction_mode": "hourly"}),
                "auto_compaction_mode",
            ),
            (
                json!({"auto_compaction_retention": "1 hour"}),
                "auto_compaction_retention",
            ),
            (
                json!({"auto_compaction_retention": "h"}),
                "auto_compaction_retention",
            ),
            (
                json!({"auto_compaction_retention": "0"}),
                "auto_compaction_retention",
            ),
            (
                json!({"auto_compaction_mode": "revision", "auto_compaction_retention": "1h"}),
                "revisions",
            ),
        ] {
            let e = parse(v.clone()).unwrap_err();
            assert!(e.contains(needle), "{v}: {e}");
        }
    }

    #[test]
    fn python_charm_options_of_the_refresh() {
        let c = parse(json!({
            "bind_with_insecure_http": true,
            "snapd_refresh": "fri,23:00-01:00",
            "tls_cipher_suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
            "nagios_context": "prod",
            "nagios_servicegroups": "etcd,k8s",
        }))
        .unwrap();
        assert!(c.bind_with_insecure_http);
        assert_eq!(
            c.snapd_refresh,
            SnapdRefresh::Timer("fri,23:00-01:00".into())
        );
        assert_eq!(
            c.tls_cipher_suites,
            [
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"
            ]
        );
        assert_eq!(
            (c.nagios_context.as_str(), c.nagios_servicegroups.as_str()),
            ("prod", "etcd,k8s")
        );
        // The Python charm's defaults, as config-get hands them over.
        let d = parse(json!({"snapd_refresh": "max", "tls_cipher_suites": "",
            "nagios_context": "juju", "nagios_servicegroups": "", "bind_with_insecure_http": false}))
        .unwrap();
        assert_eq!(d, CharmConfig::default());
        assert_eq!(
            parse(json!({"snapd_refresh": ""})).unwrap().snapd_refresh,
            SnapdRefresh::SnapdDefault
        );
        for t in ["00:00-24:00/4", "mon..fri,9:00~11:00", "sat5,20:00"] {
            assert_eq!(
                parse(json!({ "snapd_refresh": t })).unwrap().snapd_refresh,
                SnapdRefresh::Timer(t.into())
            );
        }
    }
}
