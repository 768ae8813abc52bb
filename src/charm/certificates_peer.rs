//! Who may speak raft to our members. `client-cert-auth` on the peer port
//! accepts any certificate of the CA (with easyrsa, every kubelet's); etcd
//! can also demand one common name (`--peer-cert-allowed-cn`: one name in
//! 3.4 and 3.5), so every member's certificate carries the same one, made
//! from the cluster token (rule 1: one per cluster, never regenerated). Two
//! clusters on one CA (one vault for two models) refuse each other too.
//!
//! Every request this charm sends asks for that CN once the token is
//! known. etcd is told to demand it only once every started member's unit
//! says the certificate it serves carries it (peer databag `peer-cn`), so
//! no member is cut off; once demanded it stays so until a member says its
//! certificate does not (a provider that ignored the CN asked for). Either
//! change is a change of etcd.conf.yml: each member restarts in its turn.

use super::observed::Observed;
use crate::etcd::Member;
use sha2::{Digest, Sha256};

/// This unit's peer databag key: the CN of the certificate it serves.
pub const PEER_CN_KEY: &str = "peer-cn";

/// The peer CN of the cluster whose token is `token`.
pub fn for_token(token: &str) -> String {
    let d = Sha256::digest(format!("etcd-charm peer CN:{token}").as_bytes());
    let hex: String = d.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("etcd-peer-{hex}")
}

/// Whether observe must read the peers' databags for this concern: a
/// member serving https whose etcd.conf.yml does not demand a peer CN yet
/// (a settled voter reads them no more otherwise).
pub fn needs_peers(serves_https: bool, config_text: Option<&str>) -> bool {
    serves_https && !config_text.is_some_and(|t| t.contains("\nPeerTLSInfo:"))
}

/// The subject CN of a PEM certificate, if it parses and has one.
pub fn cn_of(pem: &str) -> Option<String> {
    crate::tls::cert::parse(pem).ok()?.subject_cn
}

/// What etcd.conf.yml demands of peers now, if anything.
fn demanded_now(o: &Observed) -> Option<String> {
    let text = o.config_text.as_deref()?;
    crate::render::parse_etcd_config(text)
        .ok()?
        .tls?
        .peer_allowed_cn
}

/// The CN a started member's unit says it serves with; `own` for ours.
fn said<'a>(o: &'a Observed, m: &Member, own: Option<&'a str>) -> Option<&'a str> {
    if m.name == o.member_name {
        return own;
    }
    o.peers
        .iter()
        .find(|(u, _)| u.replace('/', "") == m.name)
        .and_then(|(_, b)| b.get(PEER_CN_KEY))
        .map(String::as_str)
        .filter(|s| !s.is_empty())
}

/// The CN etcd.conf.yml should demand of peers: `own` is the CN of the
/// certificate this unit serves once the plan's writes are done.
pub fn allowed(o: &Observed, token: &str, own: Option<&str>) -> Option<String> {
    let want = for_token(token);
    let now = demanded_now(o).is_some_and(|cn| cn == want);
    let Some(view) = o.member_view() else {
        // Nobody to ask: keep what runs.
        return now.then_some(want);
    };
    let started: Vec<&Member> = view.members.iter().filter(|m| !m.name.is_empty()).collect();
    let all = !started.is_empty()
        && started
            .iter()
            .all(|m| said(o, m, own) == Some(want.as_str()));
    let other = started
        .iter()
        .any(|m| said(o, m, own).is_some_and(|cn| cn != want));
    (all || (now && !other)).then_some(want)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charm::plan_tests::{fresh, member, sees};

    const TOKEN: &str = "ABCDEF0123456789";

    fn with_peers(cns: &[(&str, Option<&str>)]) -> Observed {
        let mut o = fresh(true);
        let mut members = vec![member(0xa0, "etcd0", "10.0.0.1", false)];
        for (i, (u, _)) in cns.iter().enumerate() {
            members.push(member(
                0xa1 + i as u64,
                u,
                &format!("10.0.0.{}", i + 2),
                false,
            ));
        }
        // A learner not started yet has no name: it has nothing to say.
        members.push(member(0xb0, "", "10.0.0.9", true));
        sees(&mut o, members);
        for (u, cn) in cns {
            let unit = format!("etcd/{}", &u[4..]);
            let mut bag = crate::hooktools::Databag::new();
            if let Some(cn) = cn {
                bag.insert(PEER_CN_KEY.into(), cn.to_string());
            }
            o.peers.insert(unit, bag);
        }
        o
    }

    #[test]
    fn the_cn_is_the_clusters_own_and_fits_a_certificate() {
        let a = for_token(TOKEN);
        assert_eq!(a, for_token(TOKEN), "the same every time");
        assert_ne!(
            a,
            for_token("ANOTHERTOKEN0000"),
            "another cluster, another CN"
        );
        assert!(a.starts_with("etcd-peer-") && a.len() <= 64, "{a}");
        assert!(!a.contains(TOKEN), "the token does not show: {a}");
    }

    #[test]
    fn demanded_only_once_every_started_member_serves_it() {
        let want = for_token(TOKEN);
        let o = with_peers(&[("etcd1", Some(&want)), ("etcd2", None)]);
        assert_eq!(allowed(&o, TOKEN, Some(&want)), None, "etcd2 has not said");
        let o = with_peers(&[("etcd1", Some(&want)), ("etcd2", Some("10.0.0.3"))]);
        assert_eq!(
            allowed(&o, TOKEN, Some(&want)),
            None,
            "etcd2 serves another CN"
        );
        let o = with_peers(&[("etcd1", Some(&want)), ("etcd2", Some(&want))]);
        assert_eq!(
            allowed(&o, TOKEN, Some("10.0.0.1")),
            None,
            "ours is not it yet"
        );
        assert_eq!(allowed(&o, TOKEN, Some(&want)), Some(want.clone()));
        // No member list: nothing new is demanded.
        let mut o = o;
        (o.local, o.cluster) = (None, None);
        assert_eq!(allowed(&o, TOKEN, Some(&want)), None);
    }

    #[test]
    fn once_demanded_it_stays_unless_a_member_serves_another_cn() {
        let want = for_token(TOKEN);
        let mut cfg = crate::render::tests::three_members_tls();
        cfg.tls.as_mut().unwrap().peer_allowed_cn = Some(want.clone());
        let text = crate::render::render_etcd_config(&cfg);
        // A unit that has not said yet (a new one) does not lift it.
        let mut o = with_peers(&[("etcd1", Some(&want)), ("etcd2", None)]);
        o.config_text = Some(text.clone());
        assert_eq!(allowed(&o, TOKEN, Some(&want)), Some(want.clone()));
        (o.local, o.cluster) = (None, None);
        assert_eq!(
            allowed(&o, TOKEN, Some(&want)),
            Some(want.clone()),
            "kept without a view"
        );
        // A member serving another CN would be cut off: lifted.
        let mut o = with_peers(&[("etcd1", Some(&want)), ("etcd2", Some("10.0.0.3"))]);
        o.config_text = Some(text);
        assert_eq!(allowed(&o, TOKEN, Some(&want)), None);
    }
}
