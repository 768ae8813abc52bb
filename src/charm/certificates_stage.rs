//! How far this unit is on the way to TLS, and the schemes that follow
//! from it: read by the URLs (desired.rs) and the certificates plan, so
//! below both.

use super::observed::{serves_https, Observed};

/// How far this unit is on the way to TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Plain,
    /// Both transport sections; every URL still http.
    Bridge,
    /// https only.
    Full,
}

/// What etcd.conf.yml on disk serves now.
pub(super) fn current(o: &Observed) -> Stage {
    let Some(found) = o.disk.found_config() else {
        return Stage::Plain;
    };
    if serves_https(found) {
        Stage::Full
    } else if bridging(Some(found)) {
        Stage::Bridge
    } else {
        Stage::Plain
    }
}

/// etcd.conf.yml carries the peer transport section with plain URLs: a
/// bridged member (observe then reads the peers' databags for theirs).
pub fn bridging(found: Option<&crate::layout::FoundConfig>) -> bool {
    found.is_some_and(|f| {
        f.raw
            .get("peer-transport-security")
            .is_some_and(|v| v.contains("cert-file"))
            && !serves_https(f)
    })
}

/// This unit's peer databag key saying how far its running member is.
pub const STAGE_KEY: &str = "tls";

pub(super) fn label(s: Stage) -> &'static str {
    match s {
        Stage::Plain => "",
        Stage::Bridge => "bridge",
        Stage::Full => "full",
    }
}

/// Every member of the cluster this unit sees is bridged or on https
/// peers: its unit says so, or its peer URL does.
fn all_bridged(o: &Observed) -> bool {
    let view = o.member_view();
    view.is_some_and(|v| {
        !v.members.is_empty()
            && v.members.iter().all(|m| {
                m.peer_urls.iter().any(|u| u.starts_with("https://"))
                    || (m.name == o.member_name && current(o) == Stage::Bridge)
                    || o.peers.iter().any(|(u, b)| {
                        u.replace('/', "") == m.name
                            && b.get(STAGE_KEY)
                                .is_some_and(|s| s == "bridge" || s == "full")
                    })
            })
    })
}

/// No member of a cluster this unit could join serves http peers. A member
/// added but never started serves nothing: its URL is only what a joining
/// unit asked for before it had its certificates (this unit's own, say),
/// and the leader replaces it once that unit asks for https (leader.rs).
fn no_plain_peer(o: &Observed) -> bool {
    match &o.cluster {
        Some(v) => v
            .members
            .iter()
            .filter(|m| !m.name.is_empty())
            .all(|m| m.peer_urls.iter().all(|u| u.starts_with("https://"))),
        None => !o
            .peers
            .values()
            .any(|b| b.get("peer-url").is_some_and(|u| u.starts_with("http://"))),
    }
}

/// This unit's stage, from the files, etcd.conf.yml and the member list.
pub fn stage(o: &Observed) -> Stage {
    if o.tls.is_none() && !o.certs.files_complete {
        return Stage::Plain;
    }
    match current(o) {
        Stage::Full => Stage::Full,
        Stage::Bridge if all_bridged(o) => Stage::Full,
        Stage::Bridge => Stage::Bridge,
        Stage::Plain if o.local_ids().is_some() => Stage::Bridge,
        Stage::Plain if no_plain_peer(o) => Stage::Full,
        Stage::Plain => Stage::Plain,
    }
}

pub fn peer_scheme(o: &Observed) -> &'static str {
    if stage(o) == Stage::Full {
        "https"
    } else {
        "http"
    }
}

/// Clients follow the peers: https only once the member is.
pub fn client_scheme(o: &Observed) -> &'static str {
    peer_scheme(o)
}
