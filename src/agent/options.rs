//! The agent's charm options (`maintenance_agent`, `agent_*`), parsed from
//! `config-get` into checked values, and the command line they become: the
//! charm passes everything to the agent as arguments, so the unit file (or
//! the running process) is the whole truth about what the agent does.

use serde_json::{Map, Value};
use std::time::Duration;

/// The agent's loopback HTTP port when `agent_port` is not set.
pub const DEFAULT_PORT: u16 = 9379;
/// The scrape listener's port when `agent_metrics_port` is not set.
pub const DEFAULT_METRICS_PORT: u16 = 9380;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentOptions {
    /// `maintenance_agent`: run the agent at all.
    pub enabled: bool,
    /// `agent_port`: the loopback port of its JSON state and /metrics.
    pub port: u16,
    /// `agent_snapshot_interval`: between scheduled snapshots; zero: none.
    pub snapshot_interval: Duration,
    /// `agent_snapshot_retention`: how many scheduled snapshots are kept.
    pub snapshot_retention: u32,
    /// `agent_defrag_threshold`: defragment once this share (percent) of
    /// the db file is free pages; 0 at every check (tests), 100 never.
    pub defrag_threshold: u8,
    /// `agent_check_interval`: how often the agent looks at its member.
    pub check_interval: Duration,
    /// `agent_metrics_port`: the port of `/metrics` on the unit's address
    /// while Prometheus is related; zero: no such listener.
    pub metrics_port: u16,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            enabled: true,
            port: DEFAULT_PORT,
            snapshot_interval: Duration::from_secs(6 * 3600),
            snapshot_retention: 4,
            defrag_threshold: 50,
            check_interval: Duration::from_secs(60),
            metrics_port: DEFAULT_METRICS_PORT,
        }
    }
}

/// `90s`, `10m`, `6h`, `1h30m`, `1d`; `0` or empty is zero.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if t.is_empty() || t == "0" {
        return Ok(Duration::ZERO);
    }
    let (mut total, mut num) = (0u64, String::new());
    for c in t.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => {
                return Err(format!(
                    "{t:?} is not a duration such as 90s, 10m, 6h or 1h30m"
                ))
            }
        };
        let n: u64 = num
            .parse()
            .map_err(|_| format!("{t:?} is not a duration such as 90s, 10m, 6h or 1h30m"))?;
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| format!("{t:?} is too long"))?;
        num.clear();
    }
    if !num.is_empty() {
        return Err(format!("{t:?} has no unit (write 90s, 10m, 6h)"));
    }
    Ok(Duration::from_secs(total))
}

/// Seconds, as [`parse_duration`] reads them back.
pub fn format_duration(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

fn int(m: &Map<String, Value>, key: &str) -> Result<Option<i64>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| format!("config {key}={n} is not an integer")),
        Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("config {key}={s:?} is not an integer")),
        Some(v) => Err(format!("config {key}={v} is not an integer")),
    }
}

fn duration(m: &Map<String, Value>, key: &str, default: Duration) -> Result<Duration, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::String(s)) => parse_duration(s).map_err(|e| format!("config {key}: {e}")),
        Some(v) => Err(format!("config {key}={v} is not a duration string")),
    }
}

impl AgentOptions {
    pub fn parse(m: &Map<String, Value>) -> Result<AgentOptions, String> {
        let d = AgentOptions::default();
        let enabled = match m.get("maintenance_agent") {
            None | Some(Value::Null) => d.enabled,
            Some(Value::Bool(b)) => *b,
            Some(v) => return Err(format!("config maintenance_agent={v} is not a boolean")),
        };
        let port = match int(m, "agent_port")? {
            None => d.port,
            Some(p) if (1..=65535).contains(&p) => p as u16,
            Some(p) => return Err(format!("config agent_port={p} is not a TCP port")),
        };
        let metrics_port = match int(m, "agent_metrics_port")? {
            None => d.metrics_port,
            Some(p) if (0..=65535).contains(&p) => p as u16,
            Some(p) => {
                return Err(format!(
                    "config agent_metrics_port={p} is not a TCP port (0: off)"
                ))
            }
        };
        let snapshot_retention = match int(m, "agent_snapshot_retention")? {
            None => d.snapshot_retention,
            Some(n) if (1..=1000).contains(&n) => n as u32,
            Some(n) => {
                return Err(format!(
                    "config agent_snapshot_retention={n} must be between 1 and 1000"
                ))
            }
        };
        let defrag_threshold = match int(m, "agent_defrag_threshold")? {
            None => d.defrag_threshold,
            Some(n) if (0..=100).contains(&n) => n as u8,
            Some(n) => {
                return Err(format!(
                    "config agent_defrag_threshold={n} is not a percentage (0-100)"
                ))
            }
        };
        let check_interval = duration(m, "agent_check_interval", d.check_interval)?;
        if check_interval < Duration::from_secs(1) {
            return Err("config agent_check_interval must be at least 1s".into());
        }
        Ok(AgentOptions {
            enabled,
            port,
            snapshot_interval: duration(m, "agent_snapshot_interval", d.snapshot_interval)?,
            snapshot_retention,
            defrag_threshold,
            check_interval,
            metrics_port,
        })
    }

    /// `etcd-charm agent <these>`: what the unit file or the direct
    /// backend runs. `listen` is `host:port` on loopback.
    pub fn args(&self, unit: &str, listen: &str) -> Vec<String> {
        vec![
            "agent".into(),
            "--unit".into(),
            unit.into(),
            "--listen".into(),
            listen.into(),
            "--snapshot-interval".into(),
            format_duration(self.snapshot_interval),
            "--snapshot-retention".into(),
            self.snapshot_retention.to_string(),
            "--defrag-threshold".into(),
            self.defrag_threshold.to_string(),
            "--check-interval".into(),
            format_duration(self.check_interval),
        ]
    }
}

/// The scrape listener the charm wants: `/metrics` on `listen`, over TLS
/// with the files in `tls_dir`, plain http without.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsListener {
    pub listen: String,
    pub tls_dir: Option<std::path::PathBuf>,
}

impl MetricsListener {
    /// Appended to [`AgentOptions::args`].
    pub fn args(&self) -> Vec<String> {
        let mut a = vec!["--metrics-listen".into(), self.listen.clone()];
        if let Some(d) = &self.tls_dir {
            a.extend(["--metrics-tls".into(), d.display().to_string()]);
        }
        a
    }

    /// The listener an agent command line asks for.
    pub fn of_args(args: &[String]) -> Option<MetricsListener> {
        Some(MetricsListener {
            listen: arg_value(args, "--metrics-listen")?.to_string(),
            tls_dir: arg_value(args, "--metrics-tls").map(Into::into),
        })
    }
}

/// `host:port`, an IPv6 host in brackets.
pub fn host_port(host: &str, port: u16) -> String {
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        _ => format!("{host}:{port}"),
    }
}

/// Where the agent listens: on loopback ([`crate::addr::own_loopback`]).
pub fn listen_addr(unit_address: &str, port: u16) -> String {
    format!("{}:{port}", crate::addr::own_loopback(unit_address))
}

/// The value of `--flag` in an agent command line.
pub fn arg_value<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.windows(2)
        .find(|w| w[0] == flag)
        .map(|w| w[1].as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Result<AgentOptions, String> {
        AgentOptions::parse(v.as_object().unwrap())
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86_400));
        assert_eq!(parse_duration("").unwrap(), Duration::ZERO);
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("h").is_err());
        let d = Duration::from_secs(7200);
        assert_eq!(parse_duration(&format_duration(d)).unwrap(), d);
    }

    #[test]
    fn defaults_and_bad_values() {
        assert_eq!(parse(json!({})).unwrap(), AgentOptions::default());
        let o = parse(json!({"maintenance_agent": false, "agent_port": 9400,
            "agent_snapshot_interval": "5s", "agent_snapshot_retention": 2,
            "agent_defrag_threshold": 0, "agent_check_interval": "2s"}))
        .unwrap();
        assert!(!o.enabled);
        assert_eq!(o.port, 9400);
        assert_eq!(o.metrics_port, DEFAULT_METRICS_PORT);
        assert_eq!(
            parse(json!({"agent_metrics_port": 0}))
                .unwrap()
                .metrics_port,
            0
        );
        assert_eq!(o.snapshot_interval, Duration::from_secs(5));
        assert_eq!((o.snapshot_retention, o.defrag_threshold), (2, 0));
        for (bad, names) in [
            (json!({"agent_port": 0}), "agent_port=0"),
            (
                json!({"agent_metrics_port": 70000}),
                "agent_metrics_port=70000",
            ),
            (
                json!({"agent_snapshot_retention": 0}),
                "agent_snapshot_retention=0",
            ),
            (
                json!({"agent_defrag_threshold": 101}),
                "agent_defrag_threshold=101",
            ),
            (json!({"agent_check_interval": "0"}), "agent_check_interval"),
            (
                json!({"agent_snapshot_interval": "often"}),
                "agent_snapshot_interval",
            ),
            (json!({"maintenance_agent": "yes"}), "maintenance_agent"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(names), "{e}");
        }
    }

    #[test]
    fn the_command_line_carries_every_option() {
        let a = AgentOptions::default().args("etcd/0", "127.0.0.1:9379");
        assert_eq!(a[0], "agent");
        assert_eq!(arg_value(&a, "--unit"), Some("etcd/0"));
        assert_eq!(arg_value(&a, "--listen"), Some("127.0.0.1:9379"));
        assert_eq!(arg_value(&a, "--snapshot-interval"), Some("21600s"));
        assert_eq!(arg_value(&a, "--check-interval"), Some("60s"));
    }

    #[test]
    fn the_metrics_listener_round_trips_through_the_command_line() {
        let plain = MetricsListener {
            listen: "10.0.0.5:9380".into(),
            tls_dir: None,
        };
        assert_eq!(plain.args(), ["--metrics-listen", "10.0.0.5:9380"]);
        let tls = MetricsListener {
            tls_dir: Some("/var/snap/etcd/common".into()),
            ..plain.clone()
        };
        let mut a = AgentOptions::default().args("etcd/0", "127.0.0.1:9379");
        assert_eq!(MetricsListener::of_args(&a), None);
        a.extend(tls.args());
        assert_eq!(
            arg_value(&a, "--metrics-tls"),
            Some("/var/snap/etcd/common")
        );
        assert_eq!(MetricsListener::of_args(&a), Some(tls));
        assert_eq!(host_port("fd00::5", 9380), "[fd00::5]:9380");
        assert_eq!(host_port("10.0.0.5", 9380), "10.0.0.5:9380");
    }

    #[test]
    fn it_listens_on_loopback_only() {
        assert_eq!(listen_addr("127.0.3.4", 9379), "127.0.3.4:9379");
        assert_eq!(listen_addr("10.0.0.5", 9379), "127.0.0.1:9379");
        assert_eq!(listen_addr("etcd-0.local", 1), "127.0.0.1:1");
    }
}
