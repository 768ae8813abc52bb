//! CA rotation on a running TLS cluster: the provider's CA changed. Pure,
//! like the rest of plan; its record is the Juju model (our peer databag's
//! `tls-ca`) and the files (ca.crt holds one CA or old + new).
//!
//! etcd 3.4 builds its trusted CA pool at start (checked: a client of a CA
//! added to ca.crt is refused until the restart), while it reads the leaf
//! on each handshake. So, for a new CA N (`<turn>:<fingerprint of N>`):
//! 1. `both`: ca.crt becomes old + N; etcd restarts in its rolling turn;
//!    then the unit says `both`. The leaf is still the old CA's.
//! 2. `leaf`: once every member says `both` (or further), the new leaf and
//!    client pair are written with the bundle kept (files only); the unit
//!    says `leaf` once its db and proxy data carry the new pair.
//! 3. `new`: once every member says `leaf` (or `new`), ca.crt becomes N
//!    alone; etcd restarts in its turn; then the unit says `new`.
//!
//! A member always trusts the CA of every leaf it meets: in 1 all leaves
//! are old and every pool holds the old CA; in 2 every pool holds both; in
//! 3 every leaf is new. Clients get the bundle as `client_ca` from step 1
//! (ca.crt's text) and the new pair in step 2, before any member drops the
//! old CA. A crash between a write and the restart leaves ca.crt ahead of
//! the label: the next hook restarts again (in a turn) and then says so.

use super::observed::Observed;
use super::steps::TlsStep;
use super::steps::{Plan, Step};
use crate::tls::{self, files::Material};

/// Our peer databag key for the rotation's turn.
pub const CA_KEY: &str = "tls-ca";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Turn {
    Both,
    Leaf,
    New,
}

impl Turn {
    fn word(self) -> &'static str {
        match self {
            Turn::Both => "both",
            Turn::Leaf => "leaf",
            Turn::New => "new",
        }
    }
}

/// A short fingerprint of a CA (sha256 of its first certificate's DER).
pub fn fingerprint(ca_pem: &str) -> String {
    use sha2::{Digest, Sha256};
    let der = tls::cert::ders(ca_pem)
        .ok()
        .and_then(|d| d.into_iter().next())
        .unwrap_or_else(|| ca_pem.trim().as_bytes().to_vec());
    let h = Sha256::digest(der);
    h.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A `tls-ca` value's turn, when it is about the CA of `fp`.
pub fn parse_label(v: Option<&String>, fp: &str) -> Option<Turn> {
    let (word, of) = v?.split_once(':')?;
    if of != fp {
        return None;
    }
    match word {
        "both" => Some(Turn::Both),
        "leaf" => Some(Turn::Leaf),
        "new" => Some(Turn::New),
        _ => None,
    }
}

pub fn label(t: Turn, fp: &str) -> String {
    format!("{}:{fp}", t.word())
}

/// The PEM blocks of a CA file, each with its END line.
fn blocks(pem: &str) -> Vec<String> {
    const END: &str = "-----END CERTIFICATE-----";
    let v: Vec<String> = pem
        .split_inclusive(END)
        .map(str::trim)
        .filter(|b| b.ends_with(END))
        .map(str::to_string)
        .collect();
    // Text that is no PEM (a stand-in) is one CA as it stands.
    if v.is_empty() && !pem.trim().is_empty() {
        return vec![pem.trim().to_string()];
    }
    v
}

fn same_cert(a: &str, b: &str) -> bool {
    match (tls::cert::ders(a), tls::cert::ders(b)) {
        (Ok(x), Ok(y)) if !x.is_empty() && !y.is_empty() => x.first() == y.first(),
        _ => a.trim() == b.trim(),
    }
}

/// ca.crt as the old CAs (every block that is not `new`) and whether it
/// holds `new`.
fn split(disk: &str, new: &str) -> (Vec<String>, bool) {
    let all = blocks(disk);
    let has_new = all.iter().any(|b| same_cert(b, new));
    let olds = all.into_iter().filter(|b| !same_cert(b, new)).collect();
    (olds, has_new)
}

fn bundle(olds: &[String], new: &str) -> String {
    let mut s: String = olds.iter().map(|b| format!("{b}\n")).collect();
    s.push_str(new.trim());
    s.push('\n');
    s
}

/// ca.crt holds more than one CA: a rotation is under way, whose turns
/// need the peers' labels (observe reads their databags then).
pub fn needs_peers(paths: &crate::paths::Paths) -> bool {
    std::fs::read_to_string(tls::files::TlsPaths::new(paths).ca)
        .ok()
        .and_then(|t| tls::cert::ders(&t).ok())
        .is_some_and(|d| d.len() > 1)
}

/// Whether the rotation plans this unit's files (else the plain write or
/// renewal does): ca.crt is not the provider's CA alone, or it is but the
/// restart that dropped the old one is still to do.
pub fn handles(o: &Observed, m: &Material) -> bool {
    let Some(disk) = o.certs.disk.ca.as_deref() else {
        return false;
    };
    let (olds, has_new) = split(disk, &m.ca);
    if !olds.is_empty() || !has_new {
        return true;
    }
    let own = parse_label(o.own_bag.get(CA_KEY), &fingerprint(&m.ca));
    matches!(own, Some(Turn::Both | Turn::Leaf))
}

/// Every member of the cluster (by its unit's peer databag, this unit's
/// own) has reached `at` for the CA of `fp`.
fn all_at(o: &Observed, fp: &str, at: Turn) -> bool {
    let view = o.member_view();
    view.is_some_and(|v| {
        !v.members.is_empty()
            && v.members.iter().all(|m| {
                let bag = if m.name == o.member_name {
                    Some(&o.own_bag)
                } else {
                    o.peers
                        .iter()
                        .find(|(u, _)| u.replace('/', "") == m.name)
                        .map(|(_, b)| b)
                };
                bag.and_then(|b| parse_label(b.get(CA_KEY), fp))
                    .is_some_and(|t| t >= at)
            })
    })
}

/// What this unit published to its db and proxy clients carries the new
/// CA's client pair and the new CA (a bundle is fine).
fn clients_carry(o: &Observed, new: &str) -> bool {
    o.clients
        .iter()
        .chain(o.endpoints.proxies.iter())
        .all(
            |(_, b)| match b.get("client_cert").filter(|c| !c.is_empty()) {
                None => true,
                Some(cert) => {
                    tls::cert::signed_by(cert, new).unwrap_or(false)
                        && b.get("client_ca")
                            .is_some_and(|ca| blocks(ca).iter().any(|x| same_cert(x, new)))
                }
            },
        )
}

/// The disk leaf and client certificate are the offer's.
fn leaves_written(o: &Observed, m: &Material) -> bool {
    let same =
        |have: &Option<String>, want: &str| have.as_deref().map(str::trim) == Some(want.trim());
    same(&o.certs.disk.server, &m.server.cert) && same(&o.certs.disk.client, &m.client.cert)
}

/// A unit on the new CA alone, without a label of its own for it (it got
/// its files after the rotation began, or its label was lost), says `new`
/// while its peers rotate: their turns wait for every member.
pub fn settled(o: &Observed, m: &Material, p: &mut Plan) {
    let fp = fingerprint(&m.ca);
    let on_new_alone = o.certs.disk.ca.as_deref().is_some_and(|d| {
        let (olds, has_new) = split(d, &m.ca);
        olds.is_empty() && has_new
    });
    let peers_rotate = o
        .peers
        .values()
        .any(|b| parse_label(b.get(CA_KEY), &fp).is_some());
    if on_new_alone
        && peers_rotate
        && o.peer_relation.is_some()
        && o.local_ids().is_some()
        && parse_label(o.own_bag.get(CA_KEY), &fp).is_none()
    {
        p.steps.push(Step::Publish(
            [(CA_KEY.to_string(), label(Turn::New, &fp))].into(),
        ));
    }
}

/// The rotation's steps for this unit (only when [`handles`]).
pub fn plan(o: &Observed, m: &Material, p: &mut Plan) {
    let Some(disk) = o.certs.disk.ca.as_deref() else {
        return;
    };
    let fp = fingerprint(&m.ca);
    let own = parse_label(o.own_bag.get(CA_KEY), &fp);
    let (olds, has_new) = split(disk, &m.ca);
    let publish = |p: &mut Plan, t: Turn| {
        if o.peer_relation.is_some() {
            p.steps
                .push(Step::Publish([(CA_KEY.to_string(), label(t, &fp))].into()));
        }
    };
    match own {
        // 1: trust old + new, restart in the turn.
        None => {
            let ca = (!has_new).then(|| bundle(&olds, &m.ca));
            restart(o, p, ca, "trust the old and the new CA (CA rotation, 1/3)");
            publish(p, Turn::Both);
            p.notes
                .push("CA rotation (1/3): trusting the old and the new CA".into());
        }
        // 2: new leaves, once every member trusts both.
        Some(Turn::Both) if !olds.is_empty() || !has_new => {
            if !all_at(o, &fp, Turn::Both) {
                p.notes
                    .push("CA rotation (1/3): waiting for every member to trust the new CA".into());
            } else if !leaves_written(o, m) {
                p.steps
                    .push(Step::Tls(TlsStep::WriteFiles(Box::new(Material {
                        ca: bundle(&olds, &m.ca),
                        server: m.server.clone(),
                        client: m.client.clone(),
                    }))));
                p.notes
                    .push("CA rotation (2/3): installing the new CA's certificates".into());
            } else if clients_carry(o, &m.ca) {
                publish(p, Turn::Leaf);
            } else {
                p.notes
                    .push("CA rotation (2/3): giving clients the new CA's client pair".into());
            }
        }
        // 3: drop the old CA, once every member serves a new leaf.
        Some(_) => {
            if !olds.is_empty() && !all_at(o, &fp, Turn::Leaf) {
                p.notes.push(
                    "CA rotation (2/3): waiting for every member to serve the new CA's certificates"
                        .into(),
                );
                return;
            }
            let ca = (!olds.is_empty() || !has_new).then(|| format!("{}\n", m.ca.trim()));
            restart(o, p, ca, "trust the new CA only (CA rotation, 3/3)");
            publish(p, Turn::New);
            p.notes
                .push("CA rotation (3/3): dropping the old CA".into());
        }
    }
}

/// ca.crt (when given) and a restart of the running member, which the
/// turn gate wraps in this unit's rolling turn; a restart the plan holds
/// already (a new etcd.conf.yml) serves.
fn restart(o: &Observed, p: &mut Plan, ca: Option<String>, why: &str) {
    let planned = p
        .steps
        .iter()
        .position(|s| matches!(s, Step::RestartEtcd | Step::StartEtcd | Step::StopEtcd));
    let write = ca.map(|pem| {
        Step::Tls(TlsStep::WriteCa {
            pem,
            why: why.to_string(),
        })
    });
    match planned {
        Some(at) => {
            if let Some(w) = write {
                p.steps.insert(at, w);
            }
        }
        None => {
            let Some(ids) = o.local_ids().filter(|_| o.active) else {
                p.steps.extend(write);
                return;
            };
            p.steps.extend(write);
            // Raft leadership off this member first: no election gap.
            if let Some(v) = o
                .local
                .as_ref()
                .filter(|v| v.status.leader == v.status.member_id)
            {
                let to = v
                    .members
                    .iter()
                    .find(|m| m.id != v.status.member_id && !m.is_learner && !m.name.is_empty());
                if let Some(to) = to {
                    p.steps.push(Step::Tls(TlsStep::MoveLeader {
                        from_endpoint: v.endpoint.clone(),
                        to: to.id,
                    }));
                }
            }
            p.steps.push(Step::RestartEtcd);
            p.steps.push(Step::WaitMember);
            p.steps.push(Step::VerifyMember(ids));
        }
    }
}

#[cfg(test)]
#[path = "certificates_rotation_tests.rs"]
mod tests;
