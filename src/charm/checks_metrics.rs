//! The `etcd-health` and `etcd-alarms` checks through etcd's loopback
//! metrics listener (loopback_metrics.rs): `/health` and `/metrics` over
//! plain http, no credentials, so they work as the `nagios` user nrpe runs
//! them as, who cannot read the root-only client key (issue 19.9).
//!
//! What etcd answers there (seen from etcd 3.4.23 and 3.5.16): `/health` is
//! 503 `{"health":"false"}` while any alarm is raised anywhere in the
//! cluster (3.5 adds `"reason":"ALARM NOSPACE"`); each `?exclude=<ALARM>`
//! leaves one alarm out, so the alarms raised are told apart by leaving
//! out the others. With every alarm left out it is false only when there
//! is no leader or a read through raft fails. `/metrics` has the member's
//! id, leader, learner, version and index gauges. The listener serves
//! nothing else (no keyspace, no `/v3`).

use super::verdict::{Level, Verdict};
use std::io::{Read, Write};
use std::time::Duration;

/// Per request; four at most, inside check_nrpe's 10 s.
const GET_TIMEOUT: Duration = Duration::from_secs(2);
/// The alarms etcd 3.4/3.5 raise (etcdserverpb.AlarmType, NONE aside).
const ALARMS: [&str; 2] = ["NOSPACE", "CORRUPT"];

fn verdict(level: Level, message: impl Into<String>) -> Verdict {
    Verdict {
        level,
        message: message.into(),
    }
}

/// The first `listen-metrics-urls` entry of etcd.conf.yml as `host:port`,
/// when it is plain http on loopback; None when the file has none (a
/// config written before this listener existed).
pub fn metrics_address(config_text: &str) -> Result<Option<String>, String> {
    let v: serde_yaml::Value =
        serde_yaml::from_str(config_text).map_err(|e| format!("etcd.conf.yml is not YAML: {e}"))?;
    let Some(first) = v["listen-metrics-urls"]
        .as_str()
        .and_then(|s| s.split(',').map(str::trim).find(|u| !u.is_empty()))
    else {
        return Ok(None);
    };
    let hostport = first
        .strip_prefix("http://")
        .map(|r| r.trim_end_matches('/'))
        .filter(|hp| !hp.contains('/'))
        .ok_or_else(|| format!("listen-metrics-urls {first} is not a plain http URL"))?;
    let host = hostport.rsplit_once(':').map_or(hostport, |(h, _)| h);
    if !super::insecure::is_loopback_host(host) {
        return Err(format!("listen-metrics-urls {first} is not on loopback"));
    }
    Ok(Some(hostport.to_string()))
}

/// GET `path` from `addr`: (status code, body).
pub fn get(addr: &str, path: &str) -> Result<(u16, String), String> {
    use std::net::ToSocketAddrs;
    let sock = addr
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("{addr} is no address"))?;
    let mut s = std::net::TcpStream::connect_timeout(&sock, GET_TIMEOUT)
        .map_err(|e| format!("http://{addr}{path}: {e}"))?;
    let _ = s.set_read_timeout(Some(GET_TIMEOUT));
    let _ = s.set_write_timeout(Some(GET_TIMEOUT));
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .and_then(|_| {
            let mut out = String::new();
            s.read_to_string(&mut out).map(|_| out)
        })
        .map_err(|e| format!("http://{addr}{path}: {e}"))
        .and_then(|resp| {
            let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
            let code = head
                .split_whitespace()
                .nth(1)
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| format!("http://{addr}{path}: no HTTP answer"))?;
            Ok((code, body.to_string()))
        })
}

/// What `/health` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub healthy: bool,
    /// etcd 3.5's `reason`; empty from 3.4.
    pub reason: String,
}

/// `/health`, leaving out the alarms in `exclude`.
pub fn health(addr: &str, exclude: &[&str]) -> Result<Health, String> {
    let query: Vec<String> = exclude.iter().map(|a| format!("exclude={a}")).collect();
    let path = if query.is_empty() {
        "/health".to_string()
    } else {
        format!("/health?{}", query.join("&"))
    };
    let (code, body) = get(addr, &path)?;
    let v: serde_json::Value = serde_json::from_str(body.trim())
        .map_err(|_| format!("http://{addr}{path} answered {code} without JSON"))?;
    Ok(Health {
        healthy: v["health"] == "true",
        reason: v["reason"].as_str().unwrap_or("").to_string(),
    })
}

/// The gauges of `/metrics` the health check reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gauges {
    pub member_id: String,
    pub version: String,
    pub has_leader: Option<bool>,
    pub is_learner: bool,
    pub raft_index: Option<u64>,
}

/// Reads the gauges out of Prometheus text (pure).
pub fn parse_metrics(text: &str) -> Gauges {
    let label = |line: &str, name: &str| {
        let start = line.find(&format!("{name}=\""))? + name.len() + 2;
        Some(line[start..].split('"').next()?.to_string())
    };
    let mut g = Gauges::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let value: f64 = value.parse().unwrap_or(f64::NAN);
        let name = series.split('{').next().unwrap_or(series);
        match name {
            "etcd_server_id" => g.member_id = label(series, "server_id").unwrap_or_default(),
            "etcd_server_version" => {
                g.version = label(series, "server_version").unwrap_or_default()
            }
            "etcd_server_has_leader" => g.has_leader = Some(value == 1.0),
            "etcd_server_is_learner" => g.is_learner = value == 1.0,
            "etcd_server_proposals_committed_total" if value >= 0.0 => {
                g.raft_index = Some(value as u64)
            }
            _ => {}
        }
    }
    g
}

/// The health check's judgement (pure): `serving` is `/health` with the
/// alarms left out, `all` with them.
pub fn judge_health(url: &str, g: &Gauges, serving: &Health, all: &Health) -> Verdict {
    let who = format!("member {} at {url}", g.member_id);
    if g.has_leader == Some(false) {
        return verdict(Level::Critical, format!("{who} sees no raft leader"));
    }
    if !serving.healthy {
        return verdict(
            Level::Critical,
            format!(
                "{who} is unhealthy: /health says false{}",
                reason(&serving.reason)
            ),
        );
    }
    if !all.healthy {
        return verdict(
            Level::Warning,
            format!(
                "{who} reports errors: an alarm is raised{} (see etcd-alarms)",
                reason(&all.reason)
            ),
        );
    }
    if g.is_learner {
        return verdict(
            Level::Warning,
            format!("{who} is a learner (not yet promoted)"),
        );
    }
    let index = g.raft_index.map(|i| i.to_string()).unwrap_or("?".into());
    verdict(
        Level::Ok,
        format!(
            "{who} is healthy; has a leader, raft index {index}, etcd {}",
            g.version
        ),
    )
}

fn reason(r: &str) -> String {
    if r.is_empty() {
        String::new()
    } else {
        format!(" ({r})")
    }
}

/// The alarm check's judgement (pure): `all` is `/health`, `none` with
/// every alarm left out, `raised` the alarms told apart.
pub fn judge_alarms(url: &str, all: &Health, none: &Health, raised: &[&str]) -> Verdict {
    if all.healthy {
        return verdict(Level::Ok, format!("no alarm raised (asked {url}/health)"));
    }
    if !none.healthy {
        return verdict(
            Level::Critical,
            format!(
                "cannot tell the alarms: etcd at {url} is unhealthy with them left out too{} \
                 (no leader?)",
                reason(&none.reason)
            ),
        );
    }
    let list = if raised.is_empty() {
        "an alarm".to_string()
    } else {
        raised.join(", ")
    };
    verdict(
        Level::Critical,
        format!(
            "alarm raised in the cluster: {list}; fix the cause, then run the alarm-disarm action"
        ),
    )
}

pub fn check_health(addr: &str) -> Verdict {
    let url = format!("http://{addr}");
    let asked = (|| {
        let g = parse_metrics(&get(addr, "/metrics")?.1);
        Ok::<_, String>((g, health(addr, &ALARMS)?, health(addr, &[])?))
    })();
    match asked {
        Ok((g, serving, all)) => judge_health(&url, &g, &serving, &all),
        Err(e) => verdict(Level::Critical, format!("etcd does not answer: {e}")),
    }
}

pub fn check_alarms(addr: &str) -> Verdict {
    let url = format!("http://{addr}");
    let asked = (|| {
        let all = health(addr, &[])?;
        if all.healthy {
            return Ok((all.clone(), all, vec![]));
        }
        let none = health(addr, &ALARMS)?;
        let mut raised = vec![];
        for a in ALARMS {
            let others: Vec<&str> = ALARMS.iter().copied().filter(|o| *o != a).collect();
            if !health(addr, &others)?.healthy {
                raised.push(a);
            }
        }
        Ok::<_, String>((all, none, raised))
    })();
    match asked {
        Ok((all, none, raised)) => judge_alarms(&url, &all, &none, &raised),
        // A member that does not answer cannot say it is fine.
        Err(e) => verdict(
            Level::Critical,
            format!("cannot read the alarms, etcd does not answer: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = "# HELP etcd_server_has_leader x\n\
        etcd_server_has_leader 1\n\
        etcd_server_id{server_id=\"dcd75628ffcc3be0\"} 1\n\
        etcd_server_is_learner 0\n\
        etcd_server_proposals_committed_total 14\n\
        etcd_server_version{server_version=\"3.4.23\"} 1\n";

    fn h(healthy: bool) -> Health {
        Health {
            healthy,
            reason: String::new(),
        }
    }

    #[test]
    fn gauges_are_read() {
        let g = parse_metrics(METRICS);
        assert_eq!(g.member_id, "dcd75628ffcc3be0");
        assert_eq!(g.version, "3.4.23");
        assert_eq!((g.has_leader, g.is_learner), (Some(true), false));
        assert_eq!(g.raft_index, Some(14));
        let none = parse_metrics(&METRICS.replace("has_leader 1", "has_leader 0"));
        assert_eq!(none.has_leader, Some(false));
    }

    #[test]
    fn health_levels() {
        let g = parse_metrics(METRICS);
        let u = "http://127.0.0.1:2381";
        let v = judge_health(u, &g, &h(true), &h(true));
        assert_eq!(v.level, Level::Ok, "{v:?}");
        assert!(v.message.contains("dcd75628ffcc3be0"), "{v:?}");
        assert_eq!(
            judge_health(u, &g, &h(true), &h(false)).level,
            Level::Warning
        );
        assert_eq!(
            judge_health(u, &g, &h(false), &h(false)).level,
            Level::Critical
        );
        let mut leaderless = g.clone();
        leaderless.has_leader = Some(false);
        let v = judge_health(u, &leaderless, &h(false), &h(false));
        assert!(v.message.contains("no raft leader"), "{v:?}");
        let mut learner = g;
        learner.is_learner = true;
        assert_eq!(
            judge_health(u, &learner, &h(true), &h(true)).level,
            Level::Warning
        );
    }

    #[test]
    fn alarm_levels() {
        let u = "http://127.0.0.1:2381";
        assert_eq!(judge_alarms(u, &h(true), &h(true), &[]).level, Level::Ok);
        let v = judge_alarms(u, &h(false), &h(true), &["NOSPACE"]);
        assert_eq!(v.level, Level::Critical);
        assert!(v.message.contains("NOSPACE") && v.message.contains("alarm-disarm"));
        let v = judge_alarms(u, &h(false), &h(false), &[]);
        assert_eq!(v.level, Level::Critical);
        assert!(v.message.contains("cannot tell"), "{v:?}");
    }

    #[test]
    fn the_metrics_address_is_plain_http_on_loopback() {
        let a = |t: &str| metrics_address(t);
        assert_eq!(
            a("listen-metrics-urls: \"http://127.0.0.1:2381\"\n"),
            Ok(Some("127.0.0.1:2381".into()))
        );
        assert_eq!(
            a("listen-metrics-urls: http://127.4.0.2:2381,http://x:1\n"),
            Ok(Some("127.4.0.2:2381".into()))
        );
        assert_eq!(a("name: etcd0\n"), Ok(None));
        assert!(a("listen-metrics-urls: http://10.0.0.5:2381\n").is_err());
        assert!(a("listen-metrics-urls: https://127.0.0.1:2381\n").is_err());
    }

    #[test]
    fn a_listener_that_is_not_there_is_an_error() {
        // A port nobody listens on (bound, then closed).
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        drop(l);
        assert_eq!(check_health(&addr).level, Level::Critical);
        assert_eq!(check_alarms(&addr).level, Level::Critical);
    }

    /// Real etcd (3.4 from PATH; 3.5 too where ./test names it in
    /// SNAP_STANDIN_ETCD35): healthy, then a NOSPACE alarm raised by
    /// filling a tiny quota, seen through the metrics listener alone.
    #[test]
    fn real_etcd_nospace_is_seen_through_the_metrics_listener() {
        let mut bins = vec![std::path::PathBuf::from("etcd")];
        if let Some(d) = std::env::var_os("SNAP_STANDIN_ETCD35") {
            bins.push(std::path::Path::new(&d).join("etcd"));
        }
        for (i, bin) in bins.iter().enumerate() {
            // 127.78.8.0/24 is this test's alone (tests run side by side).
            nospace_on(bin, &format!("127.78.8.{}", i + 1));
        }
    }

    fn nospace_on(bin: &std::path::Path, ip: &str) {
        use std::process::{Command, Stdio};
        let tmp = tempfile::tempdir().unwrap();
        let (peer, client, metrics) = (
            format!("http://{ip}:2380"),
            format!("http://{ip}:2379"),
            format!("{ip}:2381"),
        );
        struct Kill(std::process::Child);
        impl Drop for Kill {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        let _etcd = Kill(
            Command::new(bin)
                .args(["--name", "m", "--data-dir"])
                .arg(tmp.path().join("d"))
                .args(["--quota-backend-bytes", "200000"])
                .args(["--listen-peer-urls", &peer])
                .args(["--initial-advertise-peer-urls", &peer])
                .args(["--initial-cluster", &format!("m={peer}")])
                .args(["--listen-client-urls", &client])
                .args(["--advertise-client-urls", &client])
                .args(["--listen-metrics-urls", &format!("http://{metrics}")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| {
                    panic!("{} (etcd is needed for this test): {e}", bin.display())
                }),
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        while check_health(&metrics).level != Level::Ok {
            assert!(
                std::time::Instant::now() < deadline,
                "{:?}",
                check_health(&metrics)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(check_alarms(&metrics).level, Level::Ok);
        // No keyspace on this listener.
        let (code, _) = get(&metrics, "/v3/kv/range").unwrap();
        assert_eq!(code, 404);
        let value = "x".repeat(20_000);
        for n in 0..40 {
            let put = Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args(["--endpoints", &client, "put", &format!("k{n}"), &value])
                .output()
                .expect("etcdctl is needed for this test");
            if !put.status.success() {
                break;
            }
        }
        let v = check_alarms(&metrics);
        assert_eq!(v.level, Level::Critical, "{v:?}");
        assert!(
            v.message.contains("NOSPACE") && !v.message.contains("CORRUPT"),
            "{v:?}"
        );
        let v = check_health(&metrics);
        assert_eq!(v.level, Level::Warning, "{v:?}");
    }
}
