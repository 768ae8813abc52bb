//! The Nagios plugins behind the nrpe-external-master checks
//! (`etcd-charm nrpe-check health|alarms|systemd`). Plugin conventions: one
//! line on stdout, exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN. They run
//! outside any hook, so they find this unit's member through etcd.conf.yml.
//! nrpe runs them as `nagios`: health and alarms ask etcd's loopback
//! metrics listener (checks_metrics.rs), which needs no key; only a config
//! written before that listener existed sends them to the client URL.

pub use super::verdict::{Level, Verdict};
use crate::cli::NrpeCheck;
use crate::etcd;
use crate::paths::Paths;
use std::process::ExitCode;
use std::time::Duration;

/// check_nrpe gives up after 10 s by default: answer before it does.
const CHECK_TIMEOUT: Duration = Duration::from_secs(8);
const SNAP_UNIT: &str = "snap.etcd.etcd.service";

impl Level {
    fn label(self) -> &'static str {
        match self {
            Level::Ok => "OK",
            Level::Warning => "WARNING",
            Level::Critical => "CRITICAL",
            Level::Unknown => "UNKNOWN",
        }
    }
}

impl Verdict {
    fn new(level: Level, message: impl Into<String>) -> Verdict {
        Verdict {
            level,
            message: message.into(),
        }
    }

    /// `ETCD CRITICAL: …`, on one line.
    pub fn line(&self) -> String {
        let one: String = self
            .message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        format!("ETCD {}: {one}", self.level.label())
    }
}

/// The client URL etcd.conf.yml advertises first (comma list or YAML list).
pub fn endpoint_from_config(text: &str) -> Result<String, String> {
    let v: serde_yaml::Value =
        serde_yaml::from_str(text).map_err(|e| format!("etcd.conf.yml is not YAML: {e}"))?;
    let urls = match &v["advertise-client-urls"] {
        serde_yaml::Value::String(s) => s.split(',').map(|u| u.trim().to_string()).collect(),
        serde_yaml::Value::Sequence(s) => s
            .iter()
            .filter_map(|u| u.as_str().map(|u| u.trim().to_string()))
            .collect(),
        _ => Vec::new(),
    };
    urls.into_iter()
        .find(|u| !u.is_empty())
        .ok_or_else(|| "etcd.conf.yml has no advertise-client-urls".to_string())
}

/// Where a health or alarm check asks: etcd's loopback metrics listener,
/// or (a config from before it) the client URL.
enum Target {
    Metrics(String),
    Client(String),
}

fn target(paths: &Paths) -> Result<Target, Verdict> {
    let file = paths.config_file();
    let text = std::fs::read_to_string(&file).map_err(|e| {
        Verdict::new(
            Level::Unknown,
            format!("cannot read {}: {e}", paths.unhost(&file).display()),
        )
    })?;
    match super::checks_metrics::metrics_address(&text) {
        Ok(Some(addr)) => return Ok(Target::Metrics(addr)),
        Ok(None) => {}
        Err(e) => return Err(Verdict::new(Level::Unknown, e)),
    }
    let ep = endpoint_from_config(&text).map_err(|e| Verdict::new(Level::Unknown, e))?;
    // Over https, connect with the client pair from /var/snap/etcd/common.
    if ep.starts_with("https://") && crate::charm::observe::local_tls(paths).is_none() {
        return Err(Verdict::new(
            Level::Unknown,
            format!(
                "{ep} is https and the client certificate files in /var/snap/etcd/common are missing, \
                 do not match or are not readable (etcd.conf.yml has no listen-metrics-urls yet: \
                 the charm writes it on its next hook)"
            ),
        ));
    }
    Ok(Target::Client(ep))
}

fn bounded<T>(fut: impl std::future::Future<Output = etcd::Result<T>>) -> etcd::Result<T> {
    etcd::block_on(async {
        match tokio::time::timeout(CHECK_TIMEOUT, fut).await {
            Ok(r) => r,
            Err(_) => Err(etcd::EtcdError {
                endpoint: String::new(),
                op: "nrpe check".into(),
                message: format!("no answer within {CHECK_TIMEOUT:?}"),
            }),
        }
    })
}

/// Judges a member's status (pure).
pub fn judge_health(ep: &str, s: &etcd::MemberStatus) -> Verdict {
    if s.leader == 0 {
        return Verdict::new(
            Level::Critical,
            format!("member {:x} at {ep} sees no raft leader", s.member_id),
        );
    }
    if !s.errors.is_empty() {
        return Verdict::new(
            Level::Warning,
            format!(
                "member {:x} at {ep} reports errors: {}",
                s.member_id,
                s.errors.join("; ")
            ),
        );
    }
    if s.is_learner {
        return Verdict::new(
            Level::Warning,
            format!(
                "member {:x} at {ep} is a learner (not yet promoted)",
                s.member_id
            ),
        );
    }
    Verdict::new(
        Level::Ok,
        format!(
            "member {:x} at {ep} is healthy; leader {:x}, raft index {}, etcd {}",
            s.member_id, s.leader, s.raft_index, s.version
        ),
    )
}

/// Judges an alarm list (pure).
pub fn judge_alarms(ep: &str, alarms: &[(u64, String)]) -> Verdict {
    if alarms.is_empty() {
        return Verdict::new(Level::Ok, format!("no alarm raised (asked {ep})"));
    }
    let list: Vec<String> = alarms
        .iter()
        .map(|(m, a)| format!("{} on member {m:x}", a.to_uppercase()))
        .collect();
    Verdict::new(
        Level::Critical,
        format!(
            "alarm raised: {}; fix the cause, then run the alarm-disarm action",
            list.join(", ")
        ),
    )
}

/// Judges `systemctl is-active` output (pure).
pub fn judge_systemd(state: &str) -> Verdict {
    let unit = SNAP_UNIT;
    match state.trim() {
        "active" => Verdict::new(Level::Ok, format!("{unit} is active")),
        s @ ("activating" | "reloading" | "deactivating") => {
            Verdict::new(Level::Warning, format!("{unit} is {s}"))
        }
        "" => Verdict::new(
            Level::Unknown,
            format!("systemctl said nothing about {unit}"),
        ),
        s => Verdict::new(Level::Critical, format!("{unit} is {s}")),
    }
}

pub fn check(which: NrpeCheck, paths: &Paths) -> Verdict {
    match which {
        NrpeCheck::Health => {
            let ep = match target(paths) {
                Ok(Target::Metrics(addr)) => return super::checks_metrics::check_health(&addr),
                Ok(Target::Client(ep)) => ep,
                Err(v) => return v,
            };
            match bounded(etcd::member_status(&ep)) {
                Ok(s) => judge_health(&ep, &s),
                Err(e) => Verdict::new(Level::Critical, format!("etcd does not answer: {e}")),
            }
        }
        NrpeCheck::Alarms => {
            let ep = match target(paths) {
                Ok(Target::Metrics(addr)) => return super::checks_metrics::check_alarms(&addr),
                Ok(Target::Client(ep)) => ep,
                Err(v) => return v,
            };
            match bounded(etcd::alarms(&ep)) {
                Ok(a) => judge_alarms(&ep, &a),
                // A member that does not answer cannot say it is fine.
                Err(e) => Verdict::new(
                    Level::Critical,
                    format!("cannot read the alarms, etcd does not answer: {e}"),
                ),
            }
        }
        NrpeCheck::Systemd => {
            let unit = SNAP_UNIT;
            match std::process::Command::new("systemctl")
                .args(["is-active", unit])
                .stdin(std::process::Stdio::null())
                .output()
            {
                Ok(out) => judge_systemd(&String::from_utf8_lossy(&out.stdout)),
                Err(e) => Verdict::new(Level::Unknown, format!("cannot run systemctl: {e}")),
            }
        }
        NrpeCheck::CertExpiry => super::expiry::check(paths),
    }
}

/// Prints the verdict's line and exits with its level.
pub fn run(which: NrpeCheck, paths: &Paths) -> ExitCode {
    let v = check(which, paths);
    println!("{}", v.line());
    ExitCode::from(v.level as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(leader: u64) -> etcd::MemberStatus {
        etcd::MemberStatus {
            member_id: 0xaa,
            cluster_id: 0xcc,
            leader,
            version: "3.4.23".into(),
            raft_index: 7,
            is_learner: false,
            errors: vec![],
        }
    }

    #[test]
    fn health_needs_a_leader() {
        let ep = "http://10.0.0.1:2379";
        assert_eq!(judge_health(ep, &status(0xbb)).level, Level::Ok);
        let v = judge_health(ep, &status(0));
        assert_eq!(v.level, Level::Critical);
        assert_eq!(
            v.line(),
            "ETCD CRITICAL: member aa at http://10.0.0.1:2379 sees no raft leader"
        );
        let mut s = status(0xbb);
        s.errors = vec!["NOSPACE\nalarm".into()];
        let v = judge_health(ep, &s);
        assert_eq!(v.level, Level::Warning);
        assert!(!v.line().contains('\n'), "one line: {}", v.line());
    }

    #[test]
    fn any_alarm_is_critical() {
        assert_eq!(judge_alarms("e", &[]).level, Level::Ok);
        let v = judge_alarms("e", &[(0xaa, "Nospace".into())]);
        assert_eq!(v.level, Level::Critical);
        assert!(v.message.contains("NOSPACE on member aa"), "{}", v.message);
    }

    #[test]
    fn systemd_states() {
        assert_eq!(judge_systemd("active\n").level, Level::Ok);
        assert_eq!(judge_systemd("activating").level, Level::Warning);
        assert_eq!(judge_systemd("failed").level, Level::Critical);
        assert_eq!(judge_systemd("inactive").level, Level::Critical);
        assert_eq!(judge_systemd("").level, Level::Unknown);
    }

    #[test]
    fn endpoint_is_the_first_advertised_client_url() {
        assert_eq!(
            endpoint_from_config("advertise-client-urls: http://10.0.0.1:2379,http://x:1\n")
                .unwrap(),
            "http://10.0.0.1:2379"
        );
        assert_eq!(
            endpoint_from_config("advertise-client-urls:\n- http://[fd00::1]:2379\n").unwrap(),
            "http://[fd00::1]:2379"
        );
        assert!(endpoint_from_config("name: etcd0\n").is_err());
    }

    #[test]
    fn a_missing_config_is_unknown() {
        let d = tempfile::tempdir().unwrap();
        let v = check(NrpeCheck::Health, &Paths::new(d.path()));
        assert_eq!(v.level, Level::Unknown, "{}", v.line());
        assert!(v.message.contains("/var/snap/etcd/common/etcd.conf.yml"));
    }
}
