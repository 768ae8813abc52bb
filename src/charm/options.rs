//! What the options the Python etcd charm had, and this charm took over for
//! `juju refresh`, do here: the loopback http listener
//! (`bind_with_insecure_http`) and snapd's refresh policy (`snapd_refresh`).
//! `tls_cipher_suites` and the nagios options are only parsed for now
//! (config.rs): TLS and the nrpe checks use them.

use super::config::{CharmConfig, SnapdRefresh};
pub use super::config::{INSECURE_HTTP_PORT, INSECURE_HTTP_URL};
use super::observed::Observed;
use super::steps::Step;
use crate::context::Event;

/// etcd's client listeners: the configured one, plus the loopback http one
/// when `bind_with_insecure_http` asks for it.
pub fn listen_client_urls(c: &CharmConfig, listen_client: String) -> Vec<String> {
    let mut urls = vec![listen_client];
    if c.bind_with_insecure_http && !urls.iter().any(|u| u == INSECURE_HTTP_URL) {
        urls.push(INSECURE_HTTP_URL.to_string());
    }
    urls
}

/// The snapd refresh policy, set only by the hooks that can change it
/// (install, config-changed, upgrade-charm): each `snap` call costs time,
/// and update-status runs every few minutes. Snap backend only.
pub fn snapd_refresh_step(o: &Observed, c: &CharmConfig, snap_backend: bool) -> Option<Step> {
    let settles = matches!(
        o.event,
        Event::Install | Event::ConfigChanged | Event::UpgradeCharm
    );
    (snap_backend && settles).then(|| Step::SnapdRefresh(c.snapd_refresh.clone()))
}

impl std::fmt::Display for SnapdRefresh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapdRefresh::Hold => write!(f, "hold etcd's automatic snap refreshes"),
            SnapdRefresh::Timer(t) => {
                write!(f, "let snapd refresh etcd on the timer {t} (not held)")
            }
            SnapdRefresh::SnapdDefault => {
                write!(f, "let snapd refresh etcd on its default timer (not held)")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_insecure_listener_is_added_once() {
        let mut c = CharmConfig::default();
        assert_eq!(
            listen_client_urls(&c, "http://10.0.0.5:2379".into()),
            ["http://10.0.0.5:2379"]
        );
        c.bind_with_insecure_http = true;
        assert_eq!(
            listen_client_urls(&c, "http://10.0.0.5:2379".into()),
            ["http://10.0.0.5:2379", INSECURE_HTTP_URL]
        );
        let c = CharmConfig::parse(
            json!({"bind_with_insecure_http": true})
                .as_object()
                .unwrap(),
        )
        .unwrap();
        assert!(c.bind_with_insecure_http);
    }
}
