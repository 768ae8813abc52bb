//! Talking to the live cluster through etcd-client: who the members are,
//! whether they are healthy, and one membership change at a time.
//!
//! etcd-client load-balances over the endpoints it is given, so anything
//! about one member (status, its own view) connects to that endpoint alone.
//!
//! About 500 lines of code (630 with docs): every etcd call the charm makes,
//! so there is one place that knows etcd-client, its TLS and its timeouts.

use etcd_client::{Certificate, Client, ConnectOptions, Identity, MemberAddOptions, TlsOptions};
use std::future::Future;
use std::time::Duration;

/// What a client shows an etcd that has `client-cert-auth: true`: the CA
/// that signed the server's certificate, and our client pair (PEM text).
/// `Debug` names no key material.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientTls {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca_pem", &format!("<{} bytes>", self.ca_pem.len()))
            .field("cert_pem", &format!("<{} bytes>", self.cert_pem.len()))
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// Whom to ask and how: the client URLs, and the client TLS to use on
/// `https://` ones. Every call takes `impl Into<Endpoints>`, so a URL
/// (`&str`, `&String`) or a list of them (`&[String]`, `&Vec<String>`)
/// still means plain http, as before TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoints {
    pub urls: Vec<String>,
    pub tls: Option<ClientTls>,
}

impl Endpoints {
    pub fn new(urls: Vec<String>, tls: Option<ClientTls>) -> Self {
        Endpoints { urls, tls }
    }

    /// The same credentials, one URL: a call about one member.
    pub fn only(&self, url: &str) -> Endpoints {
        Endpoints {
            urls: vec![url.to_string()],
            tls: self.tls.clone(),
        }
    }

    pub fn label(&self) -> String {
        self.urls.join(",")
    }
}

impl From<&str> for Endpoints {
    fn from(u: &str) -> Self {
        Endpoints::new(vec![u.to_string()], None)
    }
}
impl From<&String> for Endpoints {
    fn from(u: &String) -> Self {
        Endpoints::from(u.as_str())
    }
}
impl From<&[String]> for Endpoints {
    fn from(u: &[String]) -> Self {
        Endpoints::new(u.to_vec(), None)
    }
}
impl From<&Vec<String>> for Endpoints {
    fn from(u: &Vec<String>) -> Self {
        Endpoints::new(u.clone(), None)
    }
}
impl From<&Endpoints> for Endpoints {
    fn from(e: &Endpoints) -> Self {
        e.clone()
    }
}

/// A call to the live cluster failed: whom we asked (`endpoint`, empty when
/// there was no one to ask), what we asked, and what came back. The charm's
/// `Error` wraps it; this floor knows nothing of the charm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdError {
    pub endpoint: String,
    pub op: String,
    pub message: String,
}

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.endpoint.is_empty() {
            write!(f, "etcd {}: {}", self.op, self.message)
        } else {
            write!(f, "etcd {} at {}: {}", self.op, self.endpoint, self.message)
        }
    }
}
impl std::error::Error for EtcdError {}

pub type Result<T> = std::result::Result<T, EtcdError>;

/// How long one RPC (including connecting) may take before we call the
/// endpoint unreachable. Hooks must not hang on a dead peer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    /// Empty until the member has started for the first time.
    pub name: String,
    pub peer_urls: Vec<String>,
    pub client_urls: Vec<String>,
    pub is_learner: bool,
}

/// What one member says about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberStatus {
    pub member_id: u64,
    pub cluster_id: u64,
    /// The raft leader's member ID, 0 when there is none.
    pub leader: u64,
    pub version: String,
    pub raft_index: u64,
    pub is_learner: bool,
    pub errors: Vec<String>,
}

/// The cluster as one reachable member sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    pub endpoint: String,
    pub status: MemberStatus,
    pub members: Vec<Member>,
}

impl ClusterView {
    pub fn cluster_id(&self) -> u64 {
        self.status.cluster_id
    }

    pub fn by_peer_url(&self, url: &str) -> Option<&Member> {
        self.members
            .iter()
            .find(|m| m.peer_urls.iter().any(|u| u == url))
    }

    pub fn by_id(&self, id: u64) -> Option<&Member> {
        self.members.iter().find(|m| m.id == id)
    }

    /// The member asked is the only voter, and leads (a member started
    /// with `force-new-cluster`, charm/rebuild.rs).
    pub fn leads_alone(&self) -> bool {
        let me = self.status.member_id;
        self.status.leader == me
            && !self.status.is_learner
            && self.members.iter().filter(|m| !m.is_learner).count() == 1
            && self.members.iter().any(|m| m.id == me)
    }

    pub fn voters(&self) -> usize {
        self.members.iter().filter(|m| !m.is_learner).count()
    }

    /// `name=peerURL,…` of the started members (voters only, or learners
    /// too): leadership data's `cluster` and a joiner's `initial-cluster`.
    pub fn cluster_string(&self, with_learners: bool) -> String {
        self.members
            .iter()
            .filter(|m| !m.name.is_empty() && (with_learners || !m.is_learner))
            .map(|m| {
                format!(
                    "{}={}",
                    m.name,
                    m.peer_urls.first().map_or("", |u| u.as_str())
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn etcd_err(endpoint: &str, op: &str, e: impl std::fmt::Display) -> EtcdError {
    EtcdError {
        endpoint: endpoint.to_string(),
        op: op.to_string(),
        message: e.to_string(),
    }
}

async fn bounded<T, E: std::fmt::Display>(
    endpoint: &str,
    op: &str,
    fut: impl Future<Output = std::result::Result<T, E>>,
) -> Result<T> {
    match tokio::time::timeout(CALL_TIMEOUT, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(etcd_err(endpoint, op, e)),
        Err(_) => Err(etcd_err(
            endpoint,
            op,
            format!("no answer within {:?}", CALL_TIMEOUT),
        )),
    }
}

/// The client pair this process shows on `https://` URLs given without
/// credentials of their own: set once by observe from the files on disk,
/// so every call of a hook (observe, apply, the turn, actions, checks)
/// reaches a TLS cluster through one place.
static CLIENT_TLS: std::sync::RwLock<Option<ClientTls>> = std::sync::RwLock::new(None);

/// Sets (or clears) the process-wide client pair; see [`CLIENT_TLS`].
pub fn set_client_tls(tls: Option<ClientTls>) {
    if let Ok(mut g) = CLIENT_TLS.write() {
        *g = tls;
    }
}

/// The TLS to use on `eps`: its own, or the process-wide pair when any of
/// its URLs is https.
pub fn tls_for(eps: &Endpoints) -> Option<ClientTls> {
    if eps.tls.is_some() {
        return eps.tls.clone();
    }
    if !eps.urls.iter().any(|u| u.starts_with("https://")) {
        return None;
    }
    CLIENT_TLS.read().ok().and_then(|g| g.clone())
}

/// etcd-client options with `tls` (CA and client identity), if any.
pub fn with_tls(opts: ConnectOptions, tls: Option<&ClientTls>) -> ConnectOptions {
    match tls {
        Some(t) => opts.with_tls(
            TlsOptions::new()
                .ca_certificate(Certificate::from_pem(&t.ca_pem))
                .identity(Identity::from_pem(&t.cert_pem, &t.key_pem)),
        ),
        None => opts,
    }
}

/// A client on `eps`, each RPC bounded by `timeout`; https when `eps`
/// carries client TLS (or the process-wide pair applies, see [`tls_for`]).
pub async fn connect_with(eps: &Endpoints, timeout: Duration) -> Result<Client> {
    // A cluster moving to TLS lists http and https members; etcd-client
    // takes TLS options with https URLs only: the https members first,
    // then the plain ones.
    let https: Vec<String> = eps
        .urls
        .iter()
        .filter(|u| u.starts_with("https://"))
        .cloned()
        .collect();
    if !https.is_empty() && https.len() < eps.urls.len() {
        let tls = tls_for(eps);
        let secure = Endpoints::new(https, tls);
        match connect_one(&secure, timeout).await {
            Ok(c) => return Ok(c),
            Err(e) => tracing::debug!("{e}; trying the plain members"),
        }
        let plain: Vec<String> = eps
            .urls
            .iter()
            .filter(|u| !u.starts_with("https://"))
            .cloned()
            .collect();
        return connect_one(&Endpoints::new(plain, None), timeout).await;
    }
    connect_one(eps, timeout).await
}

async fn connect_one(eps: &Endpoints, timeout: Duration) -> Result<Client> {
    let label = eps.label();
    let opts = ConnectOptions::new()
        .with_connect_timeout(timeout)
        .with_timeout(timeout);
    let opts = with_tls(opts, tls_for(eps).as_ref());
    match tokio::time::timeout(timeout, Client::connect(eps.urls.clone(), Some(opts))).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(etcd_err(&label, "connect", e)),
        Err(_) => Err(etcd_err(
            &label,
            "connect",
            format!("no answer within {timeout:?}"),
        )),
    }
}

async fn connect(eps: &Endpoints) -> Result<Client> {
    connect_with(eps, CALL_TIMEOUT).await
}

fn member_from(m: &etcd_client::Member) -> Member {
    Member {
        id: m.id(),
        name: m.name().to_string(),
        peer_urls: m.peer_urls().to_vec(),
        client_urls: m.client_urls().to_vec(),
        is_learner: m.is_learner(),
    }
}

/// Status of the one member at `endpoint`.
pub async fn member_status(endpoint: impl Into<Endpoints>) -> Result<MemberStatus> {
    let eps = endpoint.into();
    let endpoint = &eps.label();
    let mut c = connect(&eps).await?;
    let s = bounded(endpoint, "status", c.status()).await?;
    let h = s.header();
    Ok(MemberStatus {
        member_id: h.map(|h| h.member_id()).unwrap_or(0),
        cluster_id: h.map(|h| h.cluster_id()).unwrap_or(0),
        leader: s.leader(),
        version: s.version().to_string(),
        raft_index: s.raft_index(),
        is_learner: s.is_learner(),
        errors: s.errors().to_vec(),
    })
}

/// The alarms raised in the cluster, as `endpoint` reports them: (member
/// ID, alarm name such as `Nospace` or `Corrupt`).
pub async fn alarms(endpoint: impl Into<Endpoints>) -> Result<Vec<(u64, String)>> {
    use etcd_client::{AlarmAction, AlarmType};
    let eps = endpoint.into();
    let endpoint = &eps.label();
    let mut c = connect(&eps).await?;
    let r = bounded(
        endpoint,
        "alarm list",
        c.alarm(AlarmAction::Get, AlarmType::None, None),
    )
    .await?;
    Ok(r.alarms()
        .iter()
        .map(|a| (a.member_id(), format!("{:?}", a.alarm())))
        .collect())
}

/// The member list as `endpoint` sees it, with that member's status.
pub async fn view_from(endpoint: impl Into<Endpoints>) -> Result<ClusterView> {
    let eps = endpoint.into();
    let endpoint = eps.label();
    let status = member_status(&eps).await?;
    let mut c = connect(&eps).await?;
    let list = bounded(&endpoint, "member list", c.member_list()).await?;
    Ok(ClusterView {
        endpoint,
        status,
        members: list.members().iter().map(member_from).collect(),
    })
}

/// The first endpoint that answers, tried in order. A learner cannot serve
/// member list reliably, so voters are preferred when one answers.
pub async fn view(endpoints: impl Into<Endpoints>) -> Result<ClusterView> {
    let eps = endpoints.into();
    let mut last = None;
    let mut learner_view = None;
    for ep in &eps.urls {
        match view_from(eps.only(ep)).await {
            Ok(v) if v.status.is_learner => learner_view = Some(v),
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    learner_view.ok_or_else(|| {
        last.unwrap_or_else(|| etcd_err("", "member list", "no etcd endpoints to ask"))
    })
}

/// `member add --learner`. Returns the new member's ID.
pub async fn add_learner(endpoints: impl Into<Endpoints>, peer_url: &str) -> Result<u64> {
    let eps = endpoints.into();
    let label = eps.label();
    let mut c = connect(&eps).await?;
    let r = bounded(
        &label,
        &format!("member add --learner {peer_url}"),
        c.member_add([peer_url], Some(MemberAddOptions::new().with_is_learner())),
    )
    .await?;
    r.member()
        .map(|m| m.id())
        .ok_or_else(|| etcd_err(&label, "member add", "response named no member"))
}

pub async fn promote(endpoints: impl Into<Endpoints>, id: u64) -> Result<()> {
    let eps = endpoints.into();
    let label = eps.label();
    let mut c = connect(&eps).await?;
    bounded(
        &label,
        &format!("member promote {id:x}"),
        c.member_promote(id),
    )
    .await
    .map(|_| ())
}

/// `member update`: replaces a member's peer URLs.
pub async fn update_peer_url(
    endpoints: impl Into<Endpoints>,
    id: u64,
    peer_url: &str,
) -> Result<()> {
    let eps = endpoints.into();
    let label = eps.label();
    let mut c = connect(&eps).await?;
    bounded(
        &label,
        &format!("member update {id:x} {peer_url}"),
        c.member_update(id, vec![peer_url.to_string()]),
    )
    .await
    .map(|_| ())
}

pub async fn remove(endpoints: impl Into<Endpoints>, id: u64) -> Result<()> {
    let eps = endpoints.into();
    let label = eps.label();
    let mut c = connect(&eps).await?;
    bounded(
        &label,
        &format!("member remove {id:x}"),
        c.member_remove(id),
    )
    .await
    .map(|_| ())
}

/// Asks the raft leader (which must be `leader_endpoint`) to hand over.
pub async fn move_leader(leader_endpoint: impl Into<Endpoints>, target: u64) -> Result<()> {
    let eps = leader_endpoint.into();
    let leader_endpoint = &eps.label();
    let mut c = connect(&eps).await?;
    bounded(
        leader_endpoint,
        &format!("move-leader {target:x}"),
        c.move_leader(target),
    )
    .await
    .map(|_| ())
}

/// Streams a snapshot of the keyspace from the one member at `endpoint`
/// into `dest` (written beside as `.part`, fsynced, renamed). Returns bytes.
/// The file is root-only from its creation: it holds the whole keyspace.
pub async fn snapshot_to(endpoint: impl Into<Endpoints>, dest: &std::path::Path) -> Result<u64> {
    use std::io::Write;
    let eps = endpoint.into();
    let endpoint = &eps.label();
    let mut c = connect(&eps).await?;
    let mut stream = bounded(endpoint, "snapshot", c.snapshot()).await?;
    let part = dest.with_extension("part");
    let io_err = |op: &'static str, p: &std::path::Path| {
        let what = format!("snapshot: {op} {}", p.display());
        move |e: std::io::Error| etcd_err(endpoint, &what, e)
    };
    let mut f = crate::private::create(&part).map_err(io_err("creating", &part))?;
    let mut total = 0u64;
    // Each message is bounded; a stalled stream fails the call.
    while let Some(msg) = bounded(endpoint, "snapshot stream", stream.message()).await? {
        f.write_all(msg.blob()).map_err(io_err("writing", &part))?;
        total += msg.blob().len() as u64;
    }
    f.sync_all().map_err(io_err("syncing", &part))?;
    std::fs::rename(&part, dest).map_err(io_err("renaming", dest))?;
    Ok(total)
}

/// Runs an async etcd call from synchronous hook code. Any error type that
/// can carry an [`EtcdError`] will do, so procedures built on this module
/// (rolling turns, checks) run their own futures through it too.
pub fn block_on<T, E: From<EtcdError>>(
    fut: impl Future<Output = std::result::Result<T, E>>,
) -> std::result::Result<T, E> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| etcd_err("", "call", format!("cannot start the async runtime: {e}")))?
        .block_on(fut)
}

/// Calls that rewrite a member's whole db file (defragment) or wait for a
/// compaction to be physically applied may take far longer than a status.
pub const MAINTENANCE_TIMEOUT: Duration = Duration::from_secs(300);

/// What one member says about its storage and raft progress (the health
/// and defrag actions). Separate from [`MemberStatus`], which hooks read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDetail {
    pub member_id: u64,
    pub leader: u64,
    pub version: String,
    pub raft_index: u64,
    pub raft_term: u64,
    pub raft_applied_index: u64,
    pub is_learner: bool,
    /// Bytes of the db file, and of it in use (the rest defrag gives back).
    pub db_size: i64,
    pub db_size_in_use: i64,
    /// The keyspace revision this member has applied.
    pub revision: i64,
    pub errors: Vec<String>,
}

/// A client for one slow maintenance call (compact, defragment): connected
/// within [`CALL_TIMEOUT`], the call given `timeout`; https with the
/// process-wide pair like every other call (plain, these failed on every
/// TLS cluster with a certificate error).
async fn connect_for(endpoint: &str, timeout: Duration) -> Result<Client> {
    let eps = Endpoints::from(endpoint);
    let opts = ConnectOptions::new()
        .with_connect_timeout(CALL_TIMEOUT)
        .with_timeout(timeout);
    let opts = with_tls(opts, tls_for(&eps).as_ref());
    bounded(
        endpoint,
        "connect",
        Client::connect([endpoint.to_string()], Some(opts)),
    )
    .await
}

/// Status of the one member at `endpoint`, with its db sizes.
pub async fn member_detail(endpoint: &str) -> Result<MemberDetail> {
    let mut c = connect(&Endpoints::from(endpoint)).await?;
    let s = bounded(endpoint, "status", c.status()).await?;
    let h = s.header();
    Ok(MemberDetail {
        member_id: h.map(|h| h.member_id()).unwrap_or(0),
        leader: s.leader(),
        version: s.version().to_string(),
        raft_index: s.raft_index(),
        raft_term: s.raft_term(),
        raft_applied_index: s.raft_applied_index(),
        is_learner: s.is_learner(),
        db_size: s.db_size(),
        db_size_in_use: s.raft_used_db_size(),
        revision: h.map(|h| h.revision()).unwrap_or(0),
        errors: s.errors().to_vec(),
    })
}

/// Disarms every raised alarm (what `etcdctl alarm disarm` does: each one
/// by its member and type). Returns the alarms that were disarmed.
pub async fn alarm_disarm(endpoint: &str) -> Result<Vec<(u64, String)>> {
    use etcd_client::{AlarmAction, AlarmOptions, AlarmType};
    let mut c = connect(&Endpoints::from(endpoint)).await?;
    let r = bounded(
        endpoint,
        "alarm list",
        c.alarm(AlarmAction::Get, AlarmType::None, None),
    )
    .await?;
    let mut done = Vec::new();
    for a in r.alarms() {
        let mut opts = AlarmOptions::new();
        opts.with_member(a.member_id());
        bounded(
            endpoint,
            &format!("alarm disarm {:?} of {:x}", a.alarm(), a.member_id()),
            c.alarm(AlarmAction::Deactivate, a.alarm(), Some(opts)),
        )
        .await?;
        done.push((a.member_id(), format!("{:?}", a.alarm())));
    }
    Ok(done)
}

/// Compacts the keyspace's history up to `revision` (None: the current
/// revision). With `physical`, returns only once the db no longer holds
/// the compacted revisions. Returns the revision compacted to.
pub async fn compact(endpoint: &str, revision: Option<i64>, physical: bool) -> Result<i64> {
    use etcd_client::CompactionOptions;
    let mut c = connect_for(endpoint, MAINTENANCE_TIMEOUT).await?;
    let rev = match revision {
        Some(r) => r,
        None => {
            let r = bounded(endpoint, "get (current revision)", c.get("\0", None)).await?;
            r.header().map(|h| h.revision()).unwrap_or(0)
        }
    };
    let opts = physical.then(|| CompactionOptions::new().with_physical());
    match tokio::time::timeout(MAINTENANCE_TIMEOUT, c.compact(rev, opts)).await {
        Ok(Ok(_)) => Ok(rev),
        Ok(Err(e)) => Err(etcd_err(endpoint, &format!("compact {rev}"), e)),
        Err(_) => Err(etcd_err(
            endpoint,
            &format!("compact {rev}"),
            format!("no answer within {MAINTENANCE_TIMEOUT:?}"),
        )),
    }
}

/// Defragments the one member at `endpoint` (it stops serving while its
/// db file is rewritten).
pub async fn defragment(endpoint: &str) -> Result<()> {
    let mut c = connect_for(endpoint, MAINTENANCE_TIMEOUT).await?;
    match tokio::time::timeout(MAINTENANCE_TIMEOUT, c.defragment()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(etcd_err(endpoint, "defragment", e)),
        Err(_) => Err(etcd_err(
            endpoint,
            "defragment",
            format!("no answer within {MAINTENANCE_TIMEOUT:?}"),
        )),
    }
}

/// Each of `members` with its raft index when its first client URL answers
/// a status call within `timeout`; asked all at once, in the given order.
pub async fn raft_indexes(members: &[Member], timeout: Duration) -> Vec<(Member, Option<u64>)> {
    let mut set = tokio::task::JoinSet::new();
    for (i, m) in members.iter().enumerate() {
        let url = m.client_urls.first().cloned();
        set.spawn(async move {
            let url = url?;
            let s = tokio::time::timeout(timeout, member_status(&url)).await;
            match s {
                Ok(Ok(s)) => Some((i, s.raft_index)),
                _ => None,
            }
        });
    }
    let mut out: Vec<(Member, Option<u64>)> = members.iter().map(|m| (m.clone(), None)).collect();
    while let Some(r) = set.join_next().await {
        if let Ok(Some((i, idx))) = r {
            out[i].1 = Some(idx);
        }
    }
    out
}

/// The IDs of the members in `members` whose first client URL answers a
/// status call within `timeout`, asked all at once (a dead peer costs one
/// timeout, not one per member).
pub async fn reachable(members: &[Member], timeout: Duration) -> Vec<u64> {
    let mut set = tokio::task::JoinSet::new();
    for m in members {
        let (id, url) = (m.id, m.client_urls.first().cloned());
        set.spawn(async move {
            let url = url?;
            let ok = tokio::time::timeout(timeout, member_status(&url)).await;
            matches!(ok, Ok(Ok(_))).then_some(id)
        });
    }
    let mut out = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(Some(id)) = r {
            out.push(id);
        }
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_alone_mean_plain_and_one_member_keeps_the_credentials() {
        let v = vec!["http://a:2379".to_string(), "http://b:2379".to_string()];
        assert_eq!(Endpoints::from(&v), Endpoints::new(v.clone(), None));
        assert_eq!(
            Endpoints::from(v.as_slice()).label(),
            "http://a:2379,http://b:2379"
        );
        assert_eq!(Endpoints::from("http://a:2379").urls, ["http://a:2379"]);
        let tls = ClientTls {
            ca_pem: "CA".into(),
            cert_pem: "CERT".into(),
            key_pem: "SECRET KEY TEXT".into(),
        };
        let eps = Endpoints::new(v, Some(tls.clone()));
        let one = eps.only("https://b:2379");
        assert_eq!(one.urls, ["https://b:2379"]);
        assert_eq!(one.tls, Some(tls));
        assert!(!format!("{eps:?}").contains("SECRET"));
    }
}
