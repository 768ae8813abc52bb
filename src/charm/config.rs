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
}

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
        }
    }
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
        let heartbeat_interval = positive("heartbeat_interval", d.heartbeat_interval)?;
        let election_timeout = positive("election_timeout", d.election_timeout)?;
        // etcd refuses to start otherwise; say so before it does.
        if heartbeat_interval
            .checked_mul(5)
            .is_none_or(|min| election_timeout < min)
        {
            return Err(format!(
                "config election_timeout={election_timeout} must be at least 5 x heartbeat_interval={heartbeat_interval}"
            ));
        }
        let bind_to_all_interfaces = match m.get("bind_to_all_interfaces") {
            None | Some(Value::Null) => d.bind_to_all_interfaces,
            Some(Value::Bool(b)) => *b,
            Some(v) => {
                return Err(format!(
                    "config bind_to_all_interfaces={v} is not a boolean"
                ))
            }
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
        })
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
        ] {
            let e = parse(v.clone()).unwrap_err();
            assert!(e.contains(needle), "{v}: {e}");
        }
    }
}
