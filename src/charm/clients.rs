//! Plan, for the `db` relation: what every unit publishes to client
//! applications. Pure, like the rest of plan.

use super::config::CharmConfig;
use super::desired::client_url;
use super::observed::Observed;
use super::steps::{Plan, Step};
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
    // Beside the client pair, https only: a peer still on http while the
    // cluster moves to TLS is left out until it serves https (clients such
    // as kube-apiserver use the list verbatim).
    if o.tls.is_some() {
        urls.retain(|u| u.starts_with("https://"));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charm::plan_tests::{healthy_leader, member, sees};
    use crate::etcd::ClientTls;

    fn bag(kv: &[(&str, &str)]) -> Databag {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Unit `unit` at `ip` of a three-unit TLS cluster (one member on
    /// IPv6), its peers' databags as they published them.
    fn unit(unit: &str, ip: &str) -> Observed {
        let all = [
            ("etcd/0", "10.0.0.10", "aa"),
            ("etcd/1", "fd00::2", "bb"),
            ("etcd/2", "10.0.0.9", "cc"),
        ];
        let mut o = healthy_leader();
        o.unit = unit.into();
        o.client_address = ip.into();
        o.address = ip.into();
        o.tls = Some(ClientTls {
            ca_pem: "CA PEM".into(),
            cert_pem: "CLIENT CERT PEM".into(),
            key_pem: "CLIENT KEY PEM".into(),
        });
        for (u, addr, id) in all.iter().filter(|(u, ..)| *u != unit) {
            let url = crate::addr::url("https", addr, 2379);
            o.peers.insert(
                u.to_string(),
                bag(&[("client-url", &url), ("member-id", id)]),
            );
        }
        // Its etcd.conf.yml serves https: the unit is on TLS.
        let mut found = crate::layout::FoundConfig::default();
        let own = crate::addr::url("https", ip, 2379);
        found.raw.insert("advertise-client-urls".into(), own);
        o.disk.config = Some(Ok(found));
        sees(&mut o, vec![member(0xaa, "etcd0", "10.0.0.10", false)]);
        o.clients = vec![("db:3".into(), Databag::new())];
        o
    }

    fn published(o: &Observed) -> Databag {
        let mut p = Plan::default();
        plan_clients(o, &CharmConfig::default(), &mut p);
        match &p.steps[..] {
            [Step::PublishClient { relation, data }] if relation == "db:3" => data.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_unit_publishes_the_same_sorted_https_connection_string_and_pair() {
        let bags: Vec<Databag> = [
            ("etcd/0", "10.0.0.10"),
            ("etcd/1", "fd00::2"),
            ("etcd/2", "10.0.0.9"),
        ]
        .iter()
        .map(|(u, ip)| published(&unit(u, ip)))
        .collect();
        assert!(bags.windows(2).all(|w| w[0] == w[1]), "{bags:#?}");
        let b = &bags[0];
        assert_eq!(
            b["connection_string"],
            "https://10.0.0.10:2379,https://10.0.0.9:2379,https://[fd00::2]:2379"
        );
        assert_eq!(b["version"], "3.4.23");
        assert_eq!(b["client_cert"], "CLIENT CERT PEM");
        assert_eq!(b["client_key"], "CLIENT KEY PEM");
        assert_eq!(b["client_ca"], "CA PEM");
    }

    #[test]
    fn over_tls_a_peer_still_on_http_is_left_out_until_it_serves_https() {
        let mut o = unit("etcd/0", "10.0.0.10");
        o.peers
            .get_mut("etcd/2")
            .unwrap()
            .insert("client-url".into(), "http://10.0.0.9:2379".into());
        assert_eq!(
            published(&o)["connection_string"],
            "https://10.0.0.10:2379,https://[fd00::2]:2379"
        );
        // Without TLS nothing is filtered (and no pair is published).
        o.tls = None;
        let b = published(&o);
        assert!(
            b["connection_string"].contains("http://10.0.0.9:2379"),
            "{b:?}"
        );
        assert!(!b.contains_key("client_key"), "{b:?}");
    }

    #[test]
    fn a_published_databag_is_left_alone_and_the_step_shows_no_key() {
        let mut o = unit("etcd/0", "10.0.0.10");
        let want = published(&o);
        let mut p = Plan::default();
        plan_clients(&o, &CharmConfig::default(), &mut p);
        let shown = p.steps[0].to_string();
        assert!(!shown.contains("PEM"), "{shown}");
        o.clients[0].1 = want;
        let mut p = Plan::default();
        plan_clients(&o, &CharmConfig::default(), &mut p);
        assert!(p.steps.is_empty(), "{:?}", p.steps);
    }
}
