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

use super::observe::{tolerate, Mode, Observed};
use super::plan::{Plan, Step};
use crate::context::HookContext;
use crate::error::Result;
use crate::hooktools::{Databag, HookTools};
use std::collections::BTreeSet;

pub const PROXY: &str = "proxy";
pub const CERTIFICATES: &str = "certificates";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// Each `proxy` relation and this unit's databag in it.
    pub proxies: Vec<(String, Databag)>,
    pub certificates: bool,
}

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
    for (rel, have) in &o.endpoints.proxies {
        if have.get("cluster") != Some(&cluster) {
            let mut data = Databag::new();
            data.insert("cluster".into(), cluster.clone());
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
