//! Plan, for the `db` relation: what every unit publishes to client
//! applications. Pure, like the rest of plan.

use super::config::CharmConfig;
use super::observe::Observed;
use super::plan::{client_url, Plan, Step};
use crate::hooktools::Databag;

/// Client applications on `db` (the etcd interface: `connection_string`,
/// `version`) get every member's client URL from every unit.
pub(super) fn plan_clients(o: &Observed, c: &CharmConfig, p: &mut Plan) {
    let mut urls: Vec<String> = o
        .peers
        .values()
        .filter(|b| b.get("member-id").is_some_and(|v| !v.is_empty()))
        .filter_map(|b| b.get("client-url").cloned())
        .collect();
    if o.local_ids().is_some() {
        urls.push(client_url(o, c));
    }
    urls.sort();
    let mut want = Databag::new();
    want.insert("connection_string".into(), urls.join(","));
    if let Some(v) = &o.etcd_version {
        want.insert("version".into(), v.clone());
    }
    // Over TLS, clients need the client pair and the CA (the same files on
    // every unit, so every unit publishes the same text).
    if let Some(t) = &o.tls {
        want.insert("client_cert".into(), t.cert_pem.clone());
        want.insert("client_key".into(), t.key_pem.clone());
        want.insert("client_ca".into(), t.ca_pem.clone());
    }
    for (rel, have) in &o.clients {
        let changed: Databag = want
            .iter()
            .filter(|(k, v)| have.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !changed.is_empty() && !urls.is_empty() {
            p.steps.push(Step::PublishClient {
                relation: rel.clone(),
                data: changed,
            });
        }
    }
}
