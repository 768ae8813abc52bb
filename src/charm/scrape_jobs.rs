//! What the two scrape jobs of the `prometheus` endpoint point at, and with
//! which client pair (pure). Both the monitoring requests and the agent's
//! listener follow these, so the job and the listener always agree.

use super::observed::Observed;
use crate::etcd::ClientTls;

/// `host:port` of every started member's client URL, sorted.
pub fn etcd_targets(o: &Observed) -> Option<Vec<String>> {
    let view = o.cluster.as_ref()?;
    let mut t: Vec<String> = view
        .members
        .iter()
        .filter(|m| !m.name.is_empty())
        .filter_map(|m| m.client_urls.first())
        .map(|u| {
            let rest = u.split_once("://").map_or(u.as_str(), |(_, r)| r);
            rest.split('/').next().unwrap_or(rest).to_string()
        })
        .collect();
    t.sort();
    t.dedup();
    (!t.is_empty()).then_some(t)
}

/// The client pair for the scrape job, when the members serve https.
pub fn scrape_tls(o: &Observed) -> Option<&ClientTls> {
    let view = o.cluster.as_ref()?;
    let https = view
        .members
        .iter()
        .filter(|m| !m.name.is_empty())
        .filter_map(|m| m.client_urls.first())
        .all(|u| u.starts_with("https://"));
    o.tls.as_ref().filter(|_| https)
}

/// The `etcd-charm-agent` scrape job's targets: every started member's
/// host at `agent_metrics_port` (its agent listens there while prometheus
/// is related). None when no agent listens: the agent or its listener is
/// off, or the members serve plain http and the operator did not allow
/// plain listeners.
pub fn agent_targets(o: &Observed) -> Option<Vec<String>> {
    let c = o.config.as_ref().ok()?;
    let port = c.agent.metrics_port;
    if !c.agent.enabled || port == 0 || !(scrape_tls(o).is_some() || c.allow_insecure_listeners) {
        return None;
    }
    let etcd = etcd_targets(o)?;
    let mut t: Vec<String> = etcd
        .iter()
        .map(|t| t.rsplit_once(':').map_or(t.as_str(), |(host, _)| host))
        .map(|host| format!("{host}:{port}"))
        .collect();
    t.dedup();
    Some(t)
}
