//! The Python charm's `proxy` and `certificates` endpoints, until this charm
//! manages TLS: they exist so `juju refresh` keeps their relations, and they
//! say what they wait for.
//!
//! - `proxy` (etcd-proxy): every unit publishes `cluster` (`name=peerURL,…`
//!   of the started voters), as the Python charm did; `client_cert`,
//!   `client_key` and `client_ca` follow once TLS is managed.
//! - `certificates` (tls-certificates): only whether it is related; the
//!   relation itself is certificates.rs's.
//!
//! Which endpoints have relations comes from the goal-state the monitoring
//! endpoints read anyway, so these cost no call in a hook without them.

use super::observed::{tolerate, Mode, Observed};
use super::steps::{Plan, Step};
use crate::context::HookContext;
use crate::error::Result;
use crate::hooktools::{Databag, HookTools};
use std::collections::BTreeSet;

pub use super::observed::Endpoints;

pub const PROXY: &str = "proxy";
pub const CERTIFICATES: &str = "certificates";

/// Reads the proxy relations' own databags, only where goal-state says
/// there are relations on those endpoints.
pub fn observe(
    ctx: &HookContext,
    tools: &HookTools,
    mode: Mode,
    unread: &mut Vec<String>,
    related: &BTreeSet<String>,
) -> Result<Endpoints> {
    let mut e = Endpoints {
        certificates: related.contains(CERTIFICATES),
        ..Default::default()
    };
    if !related.contains(PROXY) {
        return Ok(e);
    }
    let ids = tolerate(
        mode,
        unread,
        "the proxy relations (relation-ids proxy)",
        || tools.relation_ids(PROXY),
        Vec::new,
    )?;
    for id in ids {
        let bag = tolerate(
            mode,
            unread,
            &format!("this unit's databag in {id} (relation-get)"),
            || tools.relation_get(&id, &ctx.unit_name),
            Databag::new,
        )?;
        e.proxies.push((id, bag));
    }
    Ok(e)
}

/// `cluster` on every proxy relation where it changed.
pub fn plan(o: &Observed, p: &mut Plan) {
    let Some(view) = o.cluster.as_ref().filter(|v| v.status.leader != 0) else {
        return;
    };
    // Sorted by name: every unit publishes the same text, whatever order
    // its member answered the member list in.
    let mut pairs: Vec<&str> = Vec::new();
    let all = view.cluster_string(false);
    pairs.extend(all.split(',').filter(|p| !p.is_empty()));
    pairs.sort_unstable();
    let cluster = pairs.join(",");
    if cluster.is_empty() {
        return;
    }
    // Over TLS also the client pair and CA (the same files on every unit);
    // only the keys that changed are set.
    let mut want = Databag::new();
    want.insert("cluster".into(), cluster);
    if let Some(t) = &o.tls {
        want.insert("client_cert".into(), t.cert_pem.clone());
        want.insert("client_key".into(), t.key_pem.clone());
        want.insert("client_ca".into(), t.ca_pem.clone());
    }
    for (rel, have) in &o.endpoints.proxies {
        let data: Databag = want
            .iter()
            .filter(|(k, v)| have.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !data.is_empty() {
            p.steps.push(Step::PublishClient {
                relation: rel.clone(),
                data,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charm::plan_tests::{self, fresh, member};
    use crate::etcd::ClusterView;

    /// Two voters, listed in the order a member may answer the list in.
    fn view() -> ClusterView {
        plan_tests::view(
            9,
            1,
            vec![
                member(2, "etcd1", "10.0.0.2", false),
                member(1, "etcd0", "10.0.0.1", false),
            ],
        )
    }

    #[test]
    fn proxy_gets_the_started_voters_and_only_when_it_changed() {
        let mut o = fresh(false);
        o.cluster = Some(view());
        o.endpoints.proxies = vec![("proxy:7".into(), Databag::new())];
        let mut p = Plan::default();
        plan(&o, &mut p);
        let want = "etcd0=http://10.0.0.1:2380,etcd1=http://10.0.0.2:2380";
        assert_eq!(
            p.steps,
            vec![Step::PublishClient {
                relation: "proxy:7".into(),
                data: [("cluster".to_string(), want.to_string())].into(),
            }]
        );
        o.endpoints.proxies[0]
            .1
            .insert("cluster".into(), want.into());
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert!(p.steps.is_empty(), "{:?}", p.steps);
    }

    fn pair() -> crate::etcd::ClientTls {
        crate::etcd::ClientTls {
            ca_pem: "CA PEM".into(),
            cert_pem: "CLIENT CERT PEM".into(),
            key_pem: "CLIENT KEY PEM".into(),
        }
    }

    /// The https view of the two voters, from the member `first` answering.
    fn tls_view(first: u64) -> ClusterView {
        let mut v = view();
        for m in &mut v.members {
            for u in m.peer_urls.iter_mut().chain(m.client_urls.iter_mut()) {
                *u = u.replace("http://", "https://");
            }
        }
        v.members.sort_by_key(|m| m.id != first);
        v.status.member_id = first;
        v
    }

    fn published(o: &Observed) -> Vec<Step> {
        let mut p = Plan::default();
        plan(o, &mut p);
        p.steps
    }

    #[test]
    fn over_tls_every_unit_gives_proxy_the_same_cluster_pair_and_ca() {
        let mut units = Vec::new();
        for (unit, first) in [("etcd/0", 1), ("etcd/1", 2)] {
            let mut o = fresh(false);
            o.unit = unit.into();
            o.cluster = Some(tls_view(first));
            o.tls = Some(pair());
            o.endpoints.proxies = vec![("proxy:7".into(), Databag::new())];
            units.push(o);
        }
        let want: Databag = [
            (
                "cluster",
                "etcd0=https://10.0.0.1:2380,etcd1=https://10.0.0.2:2380",
            ),
            ("client_cert", "CLIENT CERT PEM"),
            ("client_key", "CLIENT KEY PEM"),
            ("client_ca", "CA PEM"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for o in &units {
            let steps = published(o);
            assert_eq!(
                steps,
                vec![Step::PublishClient {
                    relation: "proxy:7".into(),
                    data: want.clone(),
                }],
                "{}",
                o.unit
            );
            // What the log and the dry run print names keys, never values.
            let shown = steps[0].to_string();
            assert!(!shown.contains("PEM"), "{shown}");
        }
        // Published already: nothing; a renewed pair: only what changed.
        let mut o = units.remove(0);
        o.endpoints.proxies[0].1 = want.clone();
        assert!(published(&o).is_empty());
        o.tls.as_mut().unwrap().cert_pem = "RENEWED CERT PEM".into();
        o.tls.as_mut().unwrap().key_pem = "RENEWED KEY PEM".into();
        let steps = published(&o);
        match &steps[..] {
            [Step::PublishClient { data, .. }] => {
                let keys: Vec<&str> = data.keys().map(String::as_str).collect();
                assert_eq!(keys, ["client_cert", "client_key"]);
                assert_eq!(data["client_cert"], "RENEWED CERT PEM");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn without_tls_proxy_gets_no_credentials() {
        let mut o = fresh(false);
        o.cluster = Some(view());
        o.endpoints.proxies = vec![("proxy:7".into(), Databag::new())];
        match &published(&o)[..] {
            [Step::PublishClient { data, .. }] => {
                assert_eq!(data.keys().collect::<Vec<_>>(), ["cluster"]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nothing_is_published_without_a_cluster_with_a_leader() {
        let mut o = fresh(false);
        o.endpoints.proxies = vec![("proxy:7".into(), Databag::new())];
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert!(p.steps.is_empty());
        let mut v = view();
        v.status.leader = 0;
        o.cluster = Some(v);
        plan(&o, &mut p);
        assert!(p.steps.is_empty());
    }

    #[test]
    fn certificates_related_adds_no_note_of_its_own() {
        // certificates.rs says what TLS waits for now.
        let mut o = fresh(false);
        o.endpoints.certificates = true;
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert!(p.notes.is_empty());
    }
}
