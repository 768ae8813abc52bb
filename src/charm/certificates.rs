//! The `certificates` relation (tls-certificates, both generations) and the
//! move of a running cluster from plain http to TLS.
//!
//! Observe reads what the provider published, parsed at once (keys only in
//! redacting types), and what is on disk. The plan (pure) publishes our
//! request, writes the issued files and decides this unit's [`Stage`]; the
//! rest of the plan renders etcd.conf.yml from the stage, and the rolling
//! turns take each member down alone.
//!
//! # Expected flow (a plain running cluster gets `certificates`)
//! 1. Every unit publishes a legacy request (one server certificate, SANs
//!    from `tls::sans`) and, while the protocol is unknown, a v4 CSR for its
//!    own RSA 2048 key (kept in SNAP_COMMON, 0600).
//! 2. Issued: the five files are written (keys 0600). Nothing restarts.
//! 3. [`Stage::Bridge`], one member at a time (turn): etcd restarts with
//!    both transport sections and every URL still http: its peer client now
//!    dials https peers with our certificate. The unit then says `tls:
//!    bridge` in its peer databag. (Serving https and http on one client
//!    port is no bridge in etcd 3.4: its gRPC server for plain connections
//!    is the TLS one — a captured variable — and handshakes hang at random.)
//! 4. Once every member is bridged (peer databags) or on https peers,
//!    [`Stage::Full`], one member at a time (turn): raft leadership off it,
//!    `member update` of its peer URL to https, restart with https only.
//!
//! # Guarantees
//! - A peer always reaches every other one: a bridged member dials http and
//!   https peers; no member serves https peers before all are bridged.
//! - Renewal (a new leaf from the same CA) is files only: etcd reads the
//!   pair on each handshake. Under v4 the unit asks for it with a new CSR
//!   once its certificate is due (certificates_renewal.rs); the leader
//!   likewise for the client pair.
//! - The client pair is one pair for every unit: the legacy provider's
//!   shared `client.cert`/`client.key`; under v4, a client certificate of
//!   its own that the leader asks for (certificates_client.rs), shared in
//!   leadership data as the Python charm shared its client pair. No unit's
//!   server key leaves that unit.
//!
//! - A new CA on a unit that serves https is rotated in three rolling
//!   stages (certificates_rotation.rs).
//!
//! # Caveats
//! - A new CA on a unit still bridging to TLS is not written (the running
//!   CA pool would refuse new leaves): the status says so.

use super::config::CharmConfig;
use super::observed::{tolerate, Mode, Observed};
use super::steps::{Plan, Step};
use crate::context::HookContext;
use crate::error::Result;
use crate::hooktools::{Databag, HookTools, StatusKind};
use crate::paths::Paths;
use crate::tls::{self, legacy, v4, Pair, Protocol};
use std::collections::BTreeSet;
use tracing::info;

pub use super::certificates_stage::{
    bridging, client_scheme, peer_scheme, stage, Stage, STAGE_KEY,
};
use super::certificates_stage::{current, label};
pub use super::observed::{Certs, Offer, OnDiskPems, Pending, Secret};
pub use super::steps::TlsStep;

pub const ENDPOINT: &str = "certificates";
/// `certificate_name` of our legacy request.
const CERT_NAME: &str = "etcd";
/// The legacy client certificate request's common name.
const CLIENT_CN: &str = "etcd-client";
/// Our v4 key and CSR, in SNAP_COMMON beside the certificates.
pub(super) const V4_KEY: &str = "etcd-charm-request.key";
pub(super) const V4_CSR: &str = "etcd-charm-request.csr";

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<redacted>")
    }
}

pub(super) fn read(p: std::path::PathBuf) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .filter(|t| !t.trim().is_empty())
}

/// The files alone (no hook tool): for setting the process-wide client
/// pair before observe reaches any https member.
pub fn files_client_tls(paths: &Paths) -> Option<crate::etcd::ClientTls> {
    tls::files::client_tls(paths)
}

/// Reads the relation (only when goal-state says it exists) and the files.
pub fn observe(
    ctx: &HookContext,
    tools: &HookTools,
    paths: &Paths,
    mode: Mode,
    unread: &mut Vec<String>,
    related: &BTreeSet<String>,
    is_leader: bool,
) -> Result<Certs> {
    let f = tls::files::TlsPaths::new(paths);
    let mut c = Certs {
        disk: OnDiskPems {
            ca: read(f.ca.clone()),
            server: read(f.server_cert.clone()),
            client: read(f.client_cert.clone()),
        },
        files_complete: tls::files::read(paths).complete(),
        hostname: read("/proc/sys/kernel/hostname".into())
            .map(|h| h.trim().to_string())
            .unwrap_or_default(),
        now: super::expiry::now_unix(),
        ..Default::default()
    };
    let common = paths.common_dir();
    if let (Some(csr), Some(key)) = (read(common.join(V4_CSR)), read(common.join(V4_KEY))) {
        c.pending = Some(Pending {
            csr,
            key: Secret(key),
        });
    }
    // update-status asks no goal-state (monitoring.rs), so `related` is
    // empty there: a full update-status (not the quiet path, e.g. a
    // certificate due for renewal) asks relation-ids itself.
    if ctx.event != crate::context::Event::UpdateStatus && !related.contains(ENDPOINT) {
        return Ok(c);
    }
    let ids = tolerate(
        mode,
        unread,
        "the certificates relations (relation-ids certificates)",
        || tools.relation_ids(ENDPOINT),
        Vec::new,
    )?;
    let Some(rel) = ids.into_iter().next() else {
        return Ok(c);
    };
    c.binds = super::certificates_names::observe_binds(tools, mode, unread)?;
    c.own = tolerate(
        mode,
        unread,
        &format!("this unit's databag in {rel} (relation-get)"),
        || tools.relation_get(&rel, &ctx.unit_name),
        Databag::new,
    )?;
    let units = tolerate(
        mode,
        unread,
        &format!("the provider units of {rel} (relation-list)"),
        || tools.relation_list(&rel),
        Vec::new,
    )?;
    let mut bags = Vec::new();
    for u in &units {
        bags.push(tolerate(
            mode,
            unread,
            &format!("{u}'s databag in {rel} (relation-get)"),
            || tools.relation_get(&rel, u),
            Databag::new,
        )?);
    }
    let app_name = units
        .first()
        .and_then(|u| u.split('/').next())
        .map(str::to_string);
    let app = match &app_name {
        Some(a) => tolerate(
            mode,
            unread,
            &format!("{a}'s app databag in {rel} (relation-get --app)"),
            || tools.relation_get_app(&rel, a),
            Databag::new,
        )?,
        None => Databag::new(),
    };
    if is_leader {
        c.own_app = tolerate(
            mode,
            unread,
            &format!("our app databag in {rel} (relation-get --app)"),
            || tools.relation_get_app(&rel, ctx.app_name()),
            Databag::new,
        )?;
    }
    c.protocol = tls::protocol_of(&app, &bags);
    match c.protocol {
        Some(Protocol::Legacy) => {
            info!(
                "certificates: {} speaks the legacy (reactive) protocol",
                app_name.as_deref().unwrap_or("the provider")
            );
            // The unit that answered for us (easyrsa has one unit).
            for b in &bags {
                match legacy::parse_provider(&ctx.unit_name, b) {
                    Ok(i) if i.ca.is_some() => {
                        c.offer = Offer {
                            ca: i.ca,
                            server: i.server,
                            client: i.client,
                        };
                        break;
                    }
                    Ok(_) => {}
                    Err(e) => c.problem = Some(e.to_string()),
                }
            }
        }
        Some(Protocol::V4) => {
            info!(
                "certificates: {} speaks the v4 library's protocol",
                app_name.as_deref().unwrap_or("the provider")
            );
            match v4::parse_certificates(&app) {
                Ok(all) => {
                    if let Some(p) = &c.pending {
                        if let Some(a) = v4::answer_for(&all, &p.csr).filter(|a| !a.is_revoked()) {
                            c.offer.ca = Some(a.ca.clone());
                            c.offer.server = Some(Pair {
                                cert: a.certificate.clone(),
                                key: p.key.0.clone(),
                            });
                        }
                    }
                    c.v4_answers = all;
                }
                Err(e) => c.problem = Some(e.to_string()),
            }
        }
        None => info!(
            "certificates: the provider has published nothing yet; requesting in both protocols"
        ),
    }
    c.relation = Some(rel);
    c.provider = app_name;
    Ok(c)
}

impl std::fmt::Display for TlsStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsStep::NewCsr { common_name, sans } => write!(
                f,
                "make this unit's v4 certificate request (CN {common_name}, {} SANs; key kept in SNAP_COMMON)",
                sans.len()
            ),
            TlsStep::WriteFiles(_) => {
                write!(f, "write ca.crt, server.crt/.key, client.crt/.key as issued")
            }
            TlsStep::WriteCa { why, .. } => write!(f, "write ca.crt: {why}"),
            TlsStep::MoveLeader { to, .. } => {
                write!(f, "move raft leadership to member {to:x} before the TLS restart")
            }
            TlsStep::NewClientCsr { relation, key } => write!(
                f,
                "make the shared client certificate's request ({}; kept in leadership data) and ask for it on {relation}",
                if key.is_some() { "the same key" } else { "a key of its own" }
            ),
            TlsStep::PublishApp { relation, data } => {
                let keys: Vec<&str> = data.keys().map(|k| k.as_str()).collect();
                write!(f, "publish {} in this application's databag on {relation}", keys.join(", "))
            }
        }
    }
}

/// The request, the files, the leadership move; notes for the status.
pub fn plan(o: &Observed, _c: &CharmConfig, p: &mut Plan) {
    let certs = &o.certs;
    let Some(rel) = &certs.relation else {
        return;
    };
    let token = p.token.as_ref().map(|(t, _)| t.clone());
    let (cn, sans) = super::certificates_names::names(o, token.as_deref());
    let mut want = Databag::new();
    if certs.protocol != Some(Protocol::V4) {
        want.extend(
            legacy::Request {
                unit_name: o.unit.clone(),
                common_name: cn.clone(),
                sans: sans.clone(),
                certificate_name: CERT_NAME.into(),
                cert_requests: Default::default(),
                client_cert_requests: [(CLIENT_CN.to_string(), Vec::new())].into(),
            }
            .to_databag(),
        );
    }
    if certs.protocol != Some(Protocol::Legacy) {
        match &certs.pending {
            // Renewal: a new CSR for the same key (apply) once the
            // answer to this one is due (certificates_renewal.rs).
            Some(pd) if csr_fits(&pd.csr, &cn, &sans) && !server_due(certs) => {
                want.insert(
                    "certificate_signing_requests".into(),
                    v4::requests_value(std::slice::from_ref(&pd.csr)),
                );
            }
            _ => p.steps.push(Step::Tls(TlsStep::NewCsr {
                common_name: cn.clone(),
                sans: sans.clone(),
            })),
        }
    }
    let changed: Databag = want
        .into_iter()
        .filter(|(k, v)| certs.own.get(k) != Some(v))
        .collect();
    if !changed.is_empty() {
        p.steps.push(Step::PublishClient {
            relation: rel.clone(),
            data: changed,
        });
    }
    if let Some(e) = &certs.problem {
        p.status.push((
            StatusKind::Blocked,
            format!("certificates: the provider's data is not understood: {e}"),
        ));
        return;
    }
    let stage = stage(o);
    super::certificates_client::plan(o, p);
    match material(o) {
        None => p.notes.push(waiting_note(o)),
        Some(m) if current(o) == Stage::Full && super::certificates_rotation::handles(o, &m) => {
            super::certificates_rotation::plan(o, &m, p);
        }
        Some(m) if differs(&certs.disk, &m) => {
            let new_ca = certs
                .disk
                .ca
                .as_deref()
                .is_some_and(|ca| ca.trim() != m.ca.trim());
            if new_ca && current(o) != Stage::Plain {
                p.status.push((
                    StatusKind::Blocked,
                    "certificates: the provider's CA changed while this member moves to TLS; it is rotated once the member serves https (the old certificates stay in use)".into(),
                ));
            } else {
                p.steps.push(Step::Tls(TlsStep::WriteFiles(Box::new(m))));
            }
        }
        Some(m) => super::certificates_rotation::settled(o, &m, p),
    }
    if stage == Stage::Bridge {
        p.notes
            .push("moving to TLS: waiting for every member to be ready for https peers".into());
    }
    // Peers learn how far this member is once it runs that config, and
    // the CN of the certificate it serves (certificates_peer.rs).
    let now = label(current(o));
    if o.local.is_some()
        && o.peer_relation.is_some()
        && o.own_bag.get(STAGE_KEY).map_or("", |s| s) != now
    {
        p.steps.push(Step::Publish(
            [(STAGE_KEY.to_string(), now.to_string())].into(),
        ));
    }
    let serves = served_cn(o).unwrap_or_default();
    if o.peer_relation.is_some()
        && o.own_bag
            .get(super::certificates_peer::PEER_CN_KEY)
            .map_or("", |s| s)
            != serves
    {
        p.steps.push(Step::Publish(
            [(super::certificates_peer::PEER_CN_KEY.to_string(), serves)].into(),
        ));
    }
    move_leader_first(o, stage, p);
}

/// The CN of the server certificate this unit serves once this hook's
/// writes are done: the one the plan writes (the provider's new issue),
/// else the one on disk. A new CA (rotation, or one met while bridging) is
/// rolled in stages; the certificate on disk stays the one served then.
pub fn served_cn(o: &Observed) -> Option<String> {
    let writes = material(o).filter(|m| {
        let new_ca = o
            .certs
            .disk
            .ca
            .as_deref()
            .is_some_and(|ca| ca.trim() != m.ca.trim());
        differs(&o.certs.disk, m) && !new_ca
    });
    let pem = match &writes {
        Some(m) => Some(m.server.cert.as_str()),
        None => o.certs.disk.server.as_deref(),
    }?;
    super::certificates_peer::cn_of(pem)
}

/// The provider's answer to our pending CSR is due for renewal.
fn server_due(certs: &Certs) -> bool {
    certs
        .offer
        .server
        .as_ref()
        .is_some_and(|s| super::certificates_renewal::pem_due(&s.cert, certs.now))
}

/// A CSR asks for exactly these names.
fn csr_fits(csr: &str, cn: &str, sans: &[String]) -> bool {
    match tls::key::csr_names(csr) {
        Ok((got_cn, mut got)) => {
            got.sort();
            let mut want = sans.to_vec();
            want.sort();
            got_cn.as_deref() == Some(cn) && got == want
        }
        Err(_) => false,
    }
}

fn waiting_note(o: &Observed) -> String {
    let who = o.certs.provider.as_deref().unwrap_or("the provider");
    match o.certs.protocol {
        Some(Protocol::V4) if o.certs.offer.server.is_some() => {
            format!("TLS: {who} (v4) issued; waiting for the leader's shared client pair")
        }
        Some(p) => format!("TLS: requested from {who} ({p:?}), waiting for certificates"),
        None => format!("TLS: requested from {who}, waiting for it to answer"),
    }
}

pub use super::certificates_client::{CLIENT_CERT_KEY, CLIENT_KEY_KEY};

/// Everything the files need, when the provider has issued all of it.
fn material(o: &Observed) -> Option<tls::files::Material> {
    let off = &o.certs.offer;
    let ca = off.ca.clone()?;
    let client = match o.certs.protocol {
        Some(Protocol::V4) => super::certificates_client::shared(o, &ca)?,
        _ => off.client.clone()?,
    };
    Some(tls::files::Material {
        ca,
        server: off.server.clone()?,
        client,
    })
}

fn differs(d: &OnDiskPems, m: &tls::files::Material) -> bool {
    let same =
        |have: &Option<String>, want: &str| have.as_deref().map(str::trim) == Some(want.trim());
    !(same(&d.ca, &m.ca) && same(&d.server, &m.server.cert) && same(&d.client, &m.client.cert))
}

/// Before this member's peer URL moves to https (Bridge → Full), raft
/// leadership goes to another started voter; inside the turn.
fn move_leader_first(o: &Observed, stage: Stage, p: &mut Plan) {
    if stage != Stage::Full || current(o) != Stage::Bridge {
        return;
    }
    let Some(at) = p
        .steps
        .iter()
        .position(|s| matches!(s, Step::UpdatePeerUrl { .. }))
    else {
        return;
    };
    let Some(v) = o.local.as_ref() else {
        return;
    };
    if v.status.leader != v.status.member_id {
        return;
    }
    let to = v
        .members
        .iter()
        .find(|m| m.id != v.status.member_id && !m.is_learner && !m.name.is_empty());
    if let Some(to) = to {
        p.steps.insert(
            at,
            Step::Tls(TlsStep::MoveLeader {
                from_endpoint: v.endpoint.clone(),
                to: to.id,
            }),
        );
    }
}

#[cfg(test)]
#[path = "certificates_tests.rs"]
mod tests;
