//! Plan: a pure function from what was observed to the steps that bring this
//! unit toward the model, and the status those steps leave it in.
//!
//! # The bootstrap decision
//! "Does my data dir hold a member (a WAL)?" × "does a cluster exist?":
//! - WAL: always start on it (etcd ignores every `initial-*` setting then);
//!   if the live cluster no longer lists that member, or is another cluster,
//!   move the data aside and join afresh.
//! - No WAL, a cluster exists (recorded in leadership data, reachable, or a
//!   peer reports a member): join — publish our peer URL, let the leader add
//!   us as a learner, start with state `existing`; never bootstrap.
//! - No WAL, no cluster anywhere: the leader commits who bootstraps, then
//!   that unit alone starts a one-member cluster (two phases, bootstrap.rs);
//!   everyone else waits.
//! - A `member/` without a readable WAL is set aside, never restarted as its
//!   old voter; the leader replaces that voter (stale-member).
//!
//! # Guarantees
//! - The token is read back when any record of it exists (rule 1).
//! - One membership change in flight at a time; adds look the member up by
//!   peer URL first, so a lost add response is found, not repeated.

use super::certificates as certs;
use super::config::CharmConfig;
pub use super::desired::{
    client_url, desired_config, format_join, parse_join, peer_url, scheme, stale_own_member,
};
use super::desired::{cluster_exists, recorded_cluster};
use super::leader::{plan_leader, plan_stop};
use super::observed::{LeaderData, Observed};
pub use super::observed::{CLUSTER, CLUSTER_ID, JOIN_PREFIX, TOKEN};
pub use super::steps::{Plan, Step};
use super::token;
use crate::context::Event;
use crate::hooktools::{Databag, StatusKind};
use crate::layout::Role;
use crate::migrate::{self, Migration};
use crate::paths::Paths;
use crate::wal::WalIds;

/// `tls_cipher_suites` on a unit that serves TLS must leave the server's
/// key a suite to use (ECDHE_RSA-only suites on an ECDSA key fail every
/// handshake); why not, as a blocked status.
fn tls_cipher_suites_misfit(o: &Observed, c: &CharmConfig) -> Option<String> {
    if o.tls.is_none() || c.tls_cipher_suites.is_empty() {
        return None;
    }
    let key = o.server_key.as_ref()?;
    crate::tls::ciphers::usable_for(&c.tls_cipher_suites, key)
        .err()
        .map(|e| format!("config {e}"))
}

/// Keys held in one home of leadership data but not the other (e.g. written
/// by leader-set before the peer relation existed): copied across, app
/// databag first, so Juju 4 and older Juju read the same data.
fn mirror_leader_data(o: &Observed) -> Databag {
    let LeaderData { app, legacy } = &o.leader;
    let mut keys: Vec<&String> = app.keys().chain(legacy.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| k.as_str() != TOKEN) // checked and written by the token logic
        .filter_map(|k| {
            let v = o.leader.get(k)?;
            let app_missing =
                o.peer_relation.is_some() && app.get(k).map(|s| s.as_str()) != Some(v);
            let legacy_missing = o.has_leader_tools && legacy.get(k).map(|s| s.as_str()) != Some(v);
            (app_missing || legacy_missing).then(|| (k.clone(), v.to_string()))
        })
        .collect()
}

/// A member serving TLS is kept on TLS with the certificate files beside
/// its config (observe reads them into `o.tls`). Without them, rewriting
/// its config with plain URLs would cut it off from its peers and clients:
/// refuse, before anything is touched.
fn tls_in_use(o: &Observed) -> Option<String> {
    if o.tls.is_some() {
        return None;
    }
    let found = o.disk.found_config()?;
    let tls: Vec<&str> = super::observed::URL_KEYS
        .into_iter()
        .filter(|k| found.raw.get(*k).is_some_and(|v| v.contains("https://")))
        .collect();
    (!tls.is_empty()).then(|| {
        format!(
            "etcd.conf.yml serves TLS ({} use https) but the certificates in /var/snap/etcd/common (ca.crt, server.crt, server.key, client.crt, client.key) are missing or do not match: restore them, or keep the previous charm",
            tls.join(", ")
        )
    })
}

/// This unit's running member belongs to a cluster other than the recorded
/// one (a second cluster was bootstrapped): say so, naming both.
fn foreign_cluster(o: &Observed) -> Option<String> {
    let recorded = recorded_cluster(o)?;
    let live = o.local.as_ref()?.status.cluster_id;
    (live != recorded).then(|| {
        format!(
            "this unit's etcd is a member of cluster {live:x}, not the recorded cluster {recorded:x}; \
             it serves no clients until an operator moves its data aside or re-records the cluster"
        )
    })
}

/// What observe would see once the migration's steps have run: the member
/// in the canonical dir, nothing elsewhere, etcd stopped if it was stopped.
pub fn after_migration(o: &Observed, paths: &Paths, ids: WalIds, stopped: bool) -> Observed {
    let mut after = o.clone();
    for l in &mut after.disk.locations {
        if l.role == Role::Canonical {
            l.exists = true;
            l.member = Ok(Some(ids));
            l.facts.member_dir = true;
        } else {
            l.member = Ok(None);
            l.facts.member_dir = false;
        }
    }
    if !after
        .disk
        .locations
        .iter()
        .any(|l| l.role == Role::Canonical)
    {
        after.disk.locations.insert(
            0,
            crate::layout::Location {
                path: paths.data_dir(),
                role: Role::Canonical,
                exists: true,
                member: Ok(Some(ids)),
                facts: Default::default(),
            },
        );
    }
    after.disk.migration.incoming = None;
    after.disk.migration.verified = None;
    if stopped {
        after.active = false;
        after.local = None;
    }
    after
}

/// The plan, with a rolling turn around any step that takes this unit's
/// started member down (charm/turn.rs).
pub fn plan(o: &Observed, paths: &Paths, dropin: Option<String>) -> Plan {
    // A restore replaces the whole cluster: no rolling turn (restore.rs).
    if let Some(p) = super::restore::plan(o, paths) {
        return p;
    }
    let mut p = plan_steps(o, paths, dropin);
    super::insecure::guard(o, paths, &mut p);
    super::expiry::plan(o, &mut p);
    // The stop hook leaves the cluster (quorum permitting) and stops etcd
    // whatever else blocked the plan (bad config, TLS, a conflict): the
    // unit is going away either way; never stopped as a voter still listed.
    if o.event == Event::Stop && !p.steps.contains(&Step::StopEtcd) {
        let mut leave = Plan::default();
        plan_stop(o, &mut leave);
        for s in leave.steps {
            if !p.steps.contains(&s) {
                p.steps.push(s);
            }
        }
    }
    super::running::plan(o, &mut p);
    let mut p = super::turn::gate(o, p);
    p.steps.extend(super::agent::plan(o, paths, &p));
    p
}

fn plan_steps(o: &Observed, paths: &Paths, dropin: Option<String>) -> Plan {
    let mut p = Plan::default();
    if matches!(o.event, Event::Remove) {
        if dropin.is_some() && o.dropin_text.is_some() {
            p.steps.push(Step::RemoveDropIn);
        }
        return p;
    }
    if !o.open_backups.is_empty() {
        let paths = o.open_backups.iter().map(|(p, _)| p.clone()).collect();
        p.steps.push(Step::TightenBackups(paths));
    }
    if super::volume::plan_volume(o, &mut p) {
        return p;
    }
    let c = match &o.config {
        Ok(c) => c.clone(),
        Err(e) => return p.block(e.clone()),
    };
    if o.etcd_version.is_none() {
        p.steps.push(Step::InstallEtcd);
    }
    p.steps
        .extend(super::options::snapd_refresh_step(o, &c, dropin.is_some()));
    if let Some(d) = dropin {
        if o.dropin_text.as_deref() != Some(d.as_str()) {
            p.steps.push(Step::WriteDropIn);
        }
    }
    if let Some(Err(e)) = &o.disk.config {
        // Only fatal if we would need it: a WAL-less unit rewrites it anyway.
        if o.disk
            .locations
            .iter()
            .any(|l| !matches!(l.member, Ok(None)))
        {
            return p.block(format!(
                "{}: {e}",
                paths.unhost(paths.config_file()).display()
            ));
        }
    }
    if let Some(msg) = tls_in_use(o) {
        return p.block(msg);
    }
    if let Some(msg) = tls_cipher_suites_misfit(o, &c) {
        return p.block(msg);
    }
    // Rule 2: a member outside the canonical data dir is moved into it
    // before anything else; the rest is planned as if it were there already.
    let projected;
    // A member that answers is snapshotted online before it is stopped.
    let live = o
        .local
        .as_ref()
        .filter(|_| o.active)
        .map(|v| (v.endpoint.as_str(), v.status.member_id));
    let o = match migrate::plan_migration_live(&o.disk, paths, &o.member_name, live) {
        Migration::Nothing => o,
        Migration::Conflict { message } => return p.block(message),
        Migration::Migrate {
            ids,
            stop_etcd,
            steps,
            ..
        } => {
            let stop = stop_etcd && o.active;
            let (before, after): (Vec<_>, Vec<_>) =
                steps.into_iter().partition(|s| s.before_stop());
            p.steps.extend(before.into_iter().map(Step::Migrate));
            if stop {
                p.steps.push(Step::StopEtcd);
            }
            p.steps.extend(after.into_iter().map(Step::Migrate));
            projected = after_migration(o, paths, ids, stop);
            &projected
        }
    };

    // A token is created only with the bootstrap decision (bootstrap.rs).
    let undecided = super::bootstrap::decision(o) == super::bootstrap::Decision::Undecided;
    let token = match token::choose_token(o, paths, !cluster_exists(o) && undecided) {
        Err(e) => return p.block(e),
        Ok(t) => t,
    };
    if o.is_leader {
        let mut set = mirror_leader_data(o);
        if let Some((t, _)) = &token {
            let app_differs = o.peer_relation.is_some() && o.leader.app.get(TOKEN) != Some(t);
            let legacy_differs = o.has_leader_tools && o.leader.legacy.get(TOKEN) != Some(t);
            if app_differs || legacy_differs {
                set.insert(TOKEN.into(), t.clone());
            }
        }
        if !set.is_empty() {
            p.steps.push(Step::SetLeaderData(set));
        }
    }
    p.token = token.clone();

    // Publish who we are, so the leader can add us and peers can reach us.
    let mut bag = Databag::new();
    bag.insert("peer-url".into(), peer_url(o, &c));
    bag.insert("client-url".into(), client_url(o, &c));
    bag.insert("member-name".into(), o.member_name.clone());
    if let Some(ids) = o.local_ids() {
        bag.insert("member-id".into(), format!("{:x}", ids.member_id));
    }
    let changed: Databag = bag
        .into_iter()
        .filter(|(k, v)| o.own_bag.get(k) != Some(v))
        .collect();
    // A WAL gone (moved aside) must withdraw the member-id we published.
    let mut changed = changed;
    if o.local_ids().is_none() && o.own_bag.get("member-id").is_some_and(|v| !v.is_empty()) {
        changed.insert("member-id".into(), String::new());
    }
    // A member that lost its log asks the leader to replace it (leader.rs).
    let stale = o
        .local_ids()
        .is_none()
        .then(|| stale_own_member(o, &c))
        .flatten();
    let want_stale = stale.map(|id| format!("{id:x}")).unwrap_or_default();
    if o.own_bag.get("stale-member").map_or("", |v| v.as_str()) != want_stale {
        changed.insert("stale-member".into(), want_stale);
    }
    if o.peer_relation.is_some() && !changed.is_empty() {
        p.steps.push(Step::Publish(changed));
    }

    super::monitoring::plan(o, paths, &mut p);
    super::s3_handoff::plan(o, &mut p);
    if o.event == Event::Stop {
        plan_stop(o, &mut p);
        return p;
    }
    if o.is_leaving() {
        // This unit is being removed: the leader removes its member, or its
        // own stop hook does. Never restart or rejoin on the way out.
        p.status
            .push((StatusKind::Maintenance, "Leaving the cluster".into()));
        return p;
    }

    // A rebuild killed part-way (rebuild.rs): finished before anything else.
    if super::desired::continues_rebuild(o) {
        let stamp = crate::stamp::utc_stamp(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(o.certs.now.max(0) as u64),
        );
        match super::rebuild::continuation(o, paths, &stamp) {
            Ok(steps) => {
                p.steps.extend(steps);
                p.status.push((
                    StatusKind::Maintenance,
                    "Rebuilding the cluster from this member (force-new-cluster)".into(),
                ));
            }
            Err(e) => p
                .status
                .push((StatusKind::Blocked, format!("rebuild-cluster: {e}"))),
        }
        return p;
    }
    if let Some(msg) = foreign_cluster(o) {
        // Nothing to clients, no membership step: which cluster is the
        // real one is the operator's call.
        return p.block(msg);
    }
    match o.local_ids() {
        Some(ids) => super::with_wal::plan_with_wal(
            o,
            &c,
            paths,
            token.as_ref().map(|t| t.0.as_str()),
            ids,
            &mut p,
        ),
        None => super::join::plan_without_wal(
            o,
            &c,
            paths,
            token.as_ref().map(|t| t.0.as_str()),
            &mut p,
        ),
    }
    super::snap_upgrade::plan(o, &c, paths, &mut p);
    if o.is_leader {
        if let Some(view) = o.member_view() {
            plan_leader(o, &c, view, &mut p);
        }
    }
    // After the leader's "waiting for a leader": the loss says more.
    super::majority::plan(o, &mut p);
    certs::plan(o, &c, &mut p);
    if !p.status.iter().any(|(k, _)| *k == StatusKind::Blocked) {
        super::clients::plan_clients(o, &c, &mut p);
        super::endpoints::plan(o, &mut p);
    }
    // Ports and the version change only with these events or a (re)start;
    // each is a call to the Juju agent, so update-status does neither.
    let settling = matches!(
        o.event,
        Event::Start | Event::UpgradeCharm | Event::ConfigChanged | Event::Install
    ) || p.steps.contains(&Step::StartEtcd);
    if (o.active || p.steps.contains(&Step::StartEtcd)) && settling {
        // A changed `port`: the one etcd.conf.yml still advertises is
        // closed (it is known without asking the agent for opened-ports).
        if let Some(old) = advertised_port(o).filter(|p| *p != c.port) {
            p.steps.push(Step::ClosePort(old));
        }
        p.steps.push(Step::OpenPort(c.port));
        if let Some(v) = &o.etcd_version {
            p.steps.push(Step::SetVersion(v.clone()));
        }
    }
    p
}

/// The port of the first client URL the etcd.conf.yml on disk advertises.
fn advertised_port(o: &Observed) -> Option<u16> {
    let urls = o.disk.found_config()?.advertise_client_urls.as_deref()?;
    let first = urls.split(',').next()?.trim();
    first.rsplit_once(':')?.1.trim_end_matches('/').parse().ok()
}
