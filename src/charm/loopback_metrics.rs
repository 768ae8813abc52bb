//! etcd's loopback metrics listener (`listen-metrics-urls`): plain http
//! serving `/health` and `/metrics` only (never the keyspace), without
//! credentials, as kubeadm's probes use it. The nrpe checks (checks.rs)
//! read it, so they work as the `nagios` user, who cannot read the
//! root-only client key (issue 19.9). Pure.
//!
//! # Decisions
//! - The host is the unit's own loopback address ([`own_loopback`]):
//!   127.0.0.1 on a real machine, the unit's 127.x.y.z where units share a
//!   host (tests). Never off loopback (rule 7): it has no client auth.
//! - The port is kubeadm's 2381, or the next one up that none of the
//!   charm's other listeners (`port`, `management_port`, 4001 with
//!   `bind_with_insecure_http`, `agent_port`, `agent_metrics_port`) uses: no
//!   setting can make it collide, and no setting is refused for it.

use super::config::{CharmConfig, INSECURE_HTTP_PORT};
use crate::addr::own_loopback;

/// kubeadm's `--listen-metrics-urls=http://127.0.0.1:2381`.
pub const METRICS_PORT: u16 = 2381;

/// The metrics port for these options (see the decisions above).
pub fn port(c: &CharmConfig) -> u16 {
    let mut taken = vec![
        c.port,
        c.management_port,
        c.agent.port,
        c.agent.metrics_port,
    ];
    if c.bind_with_insecure_http {
        taken.push(INSECURE_HTTP_PORT);
    }
    (METRICS_PORT..=u16::MAX)
        .chain(1024..METRICS_PORT)
        .find(|p| !taken.contains(p))
        .unwrap_or(METRICS_PORT)
}

/// `http://<own loopback>:<port>`, the one `listen-metrics-urls` entry.
pub fn url(client_address: &str, c: &CharmConfig) -> String {
    crate::addr::http(&own_loopback(client_address), port(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeadms_port_on_loopback_unless_taken() {
        let mut c = CharmConfig::default();
        assert_eq!(url("10.0.0.5", &c), "http://127.0.0.1:2381");
        assert_eq!(url("127.0.4.2", &c), "http://127.0.4.2:2381");
        assert_eq!(url("fd00::5", &c), "http://127.0.0.1:2381");
        c.port = 2381;
        assert_eq!(port(&c), 2382);
        c.management_port = 2382;
        c.agent.port = 2383;
        assert_eq!(port(&c), 2384);
        c.agent.metrics_port = 2384;
        assert_eq!(port(&c), 2385);
    }

    #[test]
    fn the_insecure_listener_counts_only_when_on() {
        let mut c = CharmConfig {
            port: 2381,
            management_port: 2382,
            ..Default::default()
        };
        c.agent.port = 2383;
        c.agent.metrics_port = 2384;
        // 4001 is not in the way of 2385.
        c.bind_with_insecure_http = true;
        assert_eq!(port(&c), 2385);
    }
}
