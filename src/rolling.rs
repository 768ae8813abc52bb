//! Rolling turns: a cluster-wide lock, kept in etcd itself, that a unit
//! holds while its started member is down, so that never two members are
//! down at once although Juju runs units' hooks concurrently.
//!
//! # Expected flow
//! 1. [`take`]: grant a lease (TTL [`LEASE_TTL`]) and, in one transaction,
//!    create [`TURN_KEY`] under it only if the key does not exist
//!    (create-revision 0). Its value is `<unit>: <reason>`, so
//!    `etcdctl get --prefix etcd-charm/` shows who holds the turn and why.
//! 2. With the key held, every other voter must answer status and have a
//!    raft leader; else the turn is given back and taken again later. This
//!    is what stops a second restart after a failed one: a member that did
//!    not come back leaves the cluster unhealthy, so nobody takes a turn.
//! 3. If this member is the raft leader, leadership moves to a healthy
//!    voter before it goes down.
//! 4. The caller stops/restarts its member; [`Turn::release`] waits until
//!    this member is a healthy voter again and every voter is healthy, then
//!    revokes the lease (which deletes the key).
//!
//! # Guarantees
//! - Every call about the turn (grant, transaction, keep-alive, revoke) goes
//!   to the OTHER voters' endpoints, one at a time: our own member is about
//!   to go down.
//! - A keep-alive thread renews the lease every [`KEEP_ALIVE_EVERY`] while
//!   the turn is held. A hook killed with the turn held (or a machine gone)
//!   stops renewing it: the lease expires within [`LEASE_TTL`] and the key
//!   goes with it.
//! - Dropping a [`Turn`] (a later step failed) gives it back.
//! - A key held under this unit's own name is left over from an earlier
//!   hook of ours (Juju runs one hook at a time per unit): it is taken over.
//!
//! # Caveats
//! - Waiting is bounded ([`wait_limit`]); a unit that runs out of time says
//!   who holds the turn and tries again in a later hook.

use crate::error::{Error, Result};
use crate::etcd::{self, ClusterView};
use etcd_client::{Client, Compare, CompareOp, ConnectOptions, PutOptions, Txn, TxnOp};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// The one key that is the turn.
pub const TURN_KEY: &str = "etcd-charm/turn";
/// The lease's TTL: how long a turn held by a vanished unit blocks others.
pub const LEASE_TTL: Duration = Duration::from_secs(30);
pub const KEEP_ALIVE_EVERY: Duration = Duration::from_secs(5);
/// Waiting for a turn is bounded within a hook; this variable (seconds)
/// shortens or lengthens it.
pub const WAIT_ENV: &str = "ETCD_CHARM_TURN_WAIT";
pub const DEFAULT_WAIT: Duration = Duration::from_secs(240);
/// How long after the restart the cluster may take to be healthy again
/// before the turn is given back anyway.
pub const HEALTHY_AGAIN: Duration = Duration::from_secs(60);
/// Between attempts to take a busy turn.
const RETRY_EVERY: Duration = Duration::from_millis(700);
/// One call about the turn; short, so a dead endpoint is passed quickly.
const TURN_CALL: Duration = Duration::from_secs(2);

/// The bound on waiting for a turn ([`WAIT_ENV`], else [`DEFAULT_WAIT`]).
pub fn wait_limit() -> Duration {
    crate::settable::seconds(WAIT_ENV, DEFAULT_WAIT)
}

/// Who wants the turn, for what, and how to reach its own member.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub unit: &'a str,
    pub reason: &'a str,
    /// This unit's client URL.
    pub own_endpoint: &'a str,
    /// Other endpoints to ask for the member list if ours does not answer.
    pub fallback: &'a [String],
    /// This unit's member ID.
    pub member_id: u64,
    pub wait: Duration,
}

/// What [`take`] came back with.
pub enum Taken {
    Held(Turn),
    /// The cluster has no other voter (any more): no turn is needed.
    NotNeeded,
    /// The wait ran out; `why` says what was in the way ("held by etcd/1").
    Busy {
        why: String,
    },
}

/// A held turn. Dropping it gives it back.
pub struct Turn {
    lease: i64,
    /// The other voters' client URLs, where the lease lives.
    endpoints: Vec<String>,
    keep_alive: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

/// `<unit>: <reason>`, the turn key's value.
pub fn turn_value(unit: &str, reason: &str) -> String {
    format!("{unit}: {reason}")
}

/// The unit a turn value names.
pub fn holder_of(value: &str) -> &str {
    value.split_once(": ").map_or(value, |(u, _)| u)
}

fn err(endpoint: &str, op: &str, e: impl std::fmt::Display) -> Error {
    Error::Etcd(etcd::EtcdError {
        endpoint: endpoint.to_string(),
        op: op.to_string(),
        message: e.to_string(),
    })
}

async fn call<T, E: std::fmt::Display>(
    endpoint: &str,
    op: &str,
    fut: impl std::future::Future<Output = std::result::Result<T, E>>,
) -> Result<T> {
    match tokio::time::timeout(TURN_CALL, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(err(endpoint, op, e)),
        Err(_) => Err(err(endpoint, op, format!("no answer within {TURN_CALL:?}"))),
    }
}

async fn connect(endpoint: &str) -> Result<Client> {
    let opts = ConnectOptions::new()
        .with_connect_timeout(TURN_CALL)
        .with_timeout(TURN_CALL);
    let tls = etcd::tls_for(&etcd::Endpoints::from(endpoint));
    let opts = etcd::with_tls(opts, tls.as_ref());
    call(endpoint, "connect", Client::connect([endpoint], Some(opts))).await
}

/// Runs `f` against each endpoint in turn until one answers.
async fn on_any<T, F, Fut>(endpoints: &[String], mut f: F) -> Result<T>
where
    F: FnMut(Client, String) -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut last = Error::Other("no other voter to ask about the rolling turn".into());
    for ep in endpoints {
        match connect(ep).await {
            Ok(c) => match f(c, ep.clone()).await {
                Ok(v) => return Ok(v),
                Err(e) => last = e,
            },
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// One attempt: Ok(Ok(lease)) holds the key; Ok(Err(value)) another holds it.
async fn try_lock(
    endpoints: &[String],
    unit: &str,
    value: &str,
) -> Result<std::result::Result<i64, String>> {
    on_any(endpoints, |mut c, ep| async move {
        // A read first: a busy turn costs waiters no raft proposal (grant,
        // transaction, revoke) per attempt.
        let now = call(&ep, "read the rolling turn", c.get(TURN_KEY, None)).await?;
        if let Some(kv) = now.kvs().first() {
            let v = String::from_utf8_lossy(kv.value()).into_owned();
            if holder_of(&v) != unit {
                return Ok(Err(v));
            }
        }
        let lease = call(
            &ep,
            "lease grant",
            c.lease_grant(LEASE_TTL.as_secs() as i64, None),
        )
        .await?
        .id();
        let put = TxnOp::put(TURN_KEY, value, Some(PutOptions::new().with_lease(lease)));
        let txn = Txn::new()
            .when([Compare::create_revision(TURN_KEY, CompareOp::Equal, 0)])
            .and_then([put.clone()])
            .or_else([TxnOp::get(TURN_KEY, None)]);
        let r = call(&ep, "take the rolling turn", c.txn(txn)).await?;
        if r.succeeded() {
            return Ok(Ok(lease));
        }
        let held = r.op_responses().into_iter().find_map(|op| match op {
            etcd_client::TxnOpResponse::Get(g) => g.kvs().first().cloned(),
            _ => None,
        });
        let (held_value, mod_rev) = match &held {
            Some(kv) => (
                String::from_utf8_lossy(kv.value()).into_owned(),
                kv.mod_revision(),
            ),
            // Deleted between the compare and the get: try again.
            None => (String::new(), 0),
        };
        // Left by an earlier hook of ours: take it over, unless it changed.
        if held.is_some() && holder_of(&held_value) == unit {
            let txn = Txn::new()
                .when([Compare::mod_revision(TURN_KEY, CompareOp::Equal, mod_rev)])
                .and_then([put]);
            if call(&ep, "take over our own rolling turn", c.txn(txn))
                .await?
                .succeeded()
            {
                warn!("took over the rolling turn an earlier hook of {unit} left: {held_value}");
                return Ok(Ok(lease));
            }
        }
        let _ = call(&ep, "lease revoke", c.lease_revoke(lease)).await;
        Ok(Err(held_value))
    })
    .await
}

async fn revoke(endpoints: &[String], lease: i64) -> Result<()> {
    on_any(endpoints, |mut c, ep| async move {
        call(&ep, "lease revoke", c.lease_revoke(lease))
            .await
            .map(|_| ())
    })
    .await
}

async fn keep_alive_once(endpoints: &[String], lease: i64) -> Result<i64> {
    on_any(endpoints, |mut c, ep| async move {
        let (mut keeper, mut stream) =
            call(&ep, "lease keep-alive", c.lease_keep_alive(lease)).await?;
        call(&ep, "lease keep-alive", keeper.keep_alive()).await?;
        match call(&ep, "lease keep-alive", stream.message()).await? {
            Some(r) if r.ttl() > 0 => Ok(r.ttl()),
            _ => Err(err(&ep, "lease keep-alive", "the lease has expired")),
        }
    })
    .await
}

fn spawn_keep_alive(
    endpoints: Vec<String>,
    lease: i64,
) -> Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)> {
    let (tx, rx) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("turn-keep-alive".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                warn!("no runtime for the rolling turn's keep-alive");
                return;
            };
            // Any message, or the sender dropped, ends the loop.
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(KEEP_ALIVE_EVERY) {
                if let Err(e) = rt.block_on(keep_alive_once(&endpoints, lease)) {
                    warn!("keeping the rolling turn's lease {lease:x} alive: {e}");
                }
            }
        })
        .ok()?;
    Some((tx, thread))
}

impl Turn {
    /// Waits (bounded by [`HEALTHY_AGAIN`]) until this member is a healthy
    /// voter and every voter is healthy, then gives the turn back. Returns
    /// what was still unhealthy, if the wait ran out.
    pub fn release(self, own_endpoint: &str, member_id: u64) -> Option<String> {
        let start = Instant::now();
        let unhealthy = loop {
            let why = match etcd::block_on(etcd::view_from(own_endpoint)) {
                Ok(v) if v.status.member_id != member_id => Some(format!(
                    "{own_endpoint} answers as member {:x}",
                    v.status.member_id
                )),
                Ok(v) if v.status.is_learner || v.status.leader == 0 => Some(format!(
                    "this member ({member_id:x}) is not a voter with a leader yet"
                )),
                Ok(v) => unhealthy_voter(&v, None),
                Err(e) => Some(format!("this member does not answer: {e}")),
            };
            match why {
                None => break None,
                Some(w) if start.elapsed() > HEALTHY_AGAIN => break Some(w),
                Some(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        };
        match &unhealthy {
            None => info!("every voter is healthy again; giving back the rolling turn"),
            Some(w) => warn!("giving back the rolling turn with the cluster unhealthy: {w}"),
        }
        drop(self);
        unhealthy
    }

    fn give_back(&mut self) {
        if let Some((tx, thread)) = self.keep_alive.take() {
            let _ = tx.send(());
            let _ = thread.join();
        }
        if let Err(e) = etcd::block_on(revoke(&self.endpoints, self.lease)) {
            warn!(
                "giving back the rolling turn (lease {:x}): {e}; it lapses within {LEASE_TTL:?}",
                self.lease
            );
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.give_back();
    }
}

/// The voters that answer status with a raft leader, by ID (the `restart`
/// action's quorum check).
pub fn healthy_voters(v: &ClusterView) -> Vec<u64> {
    v.members
        .iter()
        .filter(|m| !m.is_learner)
        .filter(|m| {
            m.client_urls.first().is_some_and(|url| {
                etcd::block_on(etcd::member_status(url)).is_ok_and(|s| s.leader != 0)
            })
        })
        .map(|m| m.id)
        .collect()
}

/// The first voter (other than `except`) that does not answer status with
/// a leader, described; None when all do.
fn unhealthy_voter(v: &ClusterView, except: Option<u64>) -> Option<String> {
    v.members
        .iter()
        .filter(|m| !m.is_learner && Some(m.id) != except)
        .find_map(|m| {
            let who = if m.name.is_empty() {
                format!("member {:x}", m.id)
            } else {
                m.name.clone()
            };
            let Some(url) = m.client_urls.first() else {
                return Some(format!("{who} has not started"));
            };
            match etcd::block_on(etcd::member_status(url)) {
                Ok(s) if s.leader != 0 => None,
                Ok(_) => Some(format!("{who} has no raft leader")),
                Err(_) => Some(format!("{who} is not healthy")),
            }
        })
}

fn live_view(req: &Request) -> Result<ClusterView> {
    match etcd::block_on(etcd::view_from(req.own_endpoint)) {
        Ok(v) if !v.status.is_learner => Ok(v),
        _ => etcd::block_on(etcd::view(req.fallback)).map_err(Into::into),
    }
}

/// Takes the turn, waiting (bounded by `req.wait`) while another unit holds
/// it or another voter is unhealthy; moves raft leadership off this member.
pub fn take(req: &Request) -> Result<Taken> {
    let start = Instant::now();
    let value = turn_value(req.unit, req.reason);
    let mut logged = String::new();
    loop {
        let why = match live_view(req) {
            Err(e) => format!("no voter answers: {e}"),
            Ok(v) => {
                let others: Vec<String> = v
                    .members
                    .iter()
                    .filter(|m| !m.is_learner && m.id != req.member_id)
                    .filter_map(|m| m.client_urls.first().cloned())
                    .collect();
                if v.voters() <= 1 || v.by_id(req.member_id).is_none_or(|m| m.is_learner) {
                    return Ok(Taken::NotNeeded);
                }
                match etcd::block_on(try_lock(&others, req.unit, &value)) {
                    Err(e) => format!("the turn could not be asked for: {e}"),
                    Ok(Err(held)) => format!("held by {}", holder_of(&held)),
                    Ok(Ok(lease)) => {
                        let turn = Turn {
                            lease,
                            keep_alive: spawn_keep_alive(others.clone(), lease),
                            endpoints: others,
                        };
                        match unhealthy_voter(&v, Some(req.member_id)) {
                            // Given back (dropped): nobody restarts while
                            // a member is down.
                            Some(w) => {
                                drop(turn);
                                w
                            }
                            None => {
                                info!("took the rolling turn ({value}, lease {lease:x})");
                                if let Err(e) = hand_over_leadership(&v, req) {
                                    warn!("raft leadership stays here (an election follows): {e}");
                                }
                                return Ok(Taken::Held(turn));
                            }
                        }
                    }
                }
            }
        };
        if start.elapsed() >= req.wait {
            return Ok(Taken::Busy { why });
        }
        if why != logged {
            info!("waiting for the rolling turn: {why}");
            logged = why;
        }
        std::thread::sleep(RETRY_EVERY);
    }
}

/// If this member leads raft, leadership goes to a healthy voter first, so
/// the cluster does not sit through an election while it is down.
fn hand_over_leadership(v: &ClusterView, req: &Request) -> Result<()> {
    let leader = match etcd::block_on(etcd::member_status(req.own_endpoint)) {
        Ok(s) => s.leader,
        Err(_) => return Ok(()),
    };
    if leader != req.member_id {
        return Ok(());
    }
    let Some(to) = v
        .members
        .iter()
        .find(|m| !m.is_learner && m.id != req.member_id && !m.client_urls.is_empty())
    else {
        return Ok(());
    };
    info!("moving raft leadership to {} before going down", to.name);
    etcd::block_on(etcd::move_leader(req.own_endpoint, to.id)).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_names_the_holder() {
        let v = turn_value("etcd/1", "restart etcd: a new etcd.conf.yml");
        assert_eq!(v, "etcd/1: restart etcd: a new etcd.conf.yml");
        assert_eq!(holder_of(&v), "etcd/1");
        assert_eq!(holder_of("odd"), "odd");
    }
}
