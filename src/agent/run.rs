//! The `agent` subcommand's loop: every check it observes its member
//! (one status and one alarm list; the other members only in NOSPACE
//! mode), asks [`decide`](super::decide::decide) what to do, and does it.
//! tokio runs the loop and the HTTP endpoint; each check runs on the
//! blocking pool, since the rolling turn and the etcd calls it shares with
//! the hooks are synchronous. Every call is bounded; a failure is logged,
//! kept in the state, and tried again at a later check. SIGTERM ends the
//! loop after the current check.

use super::decide::{self, Action, MemberSeen, Policy, Seen};
use super::options::parse_duration;
use super::state::{AgentState, DefragRecord, SnapshotRecord};
use crate::etcd::{self, Endpoints};
use crate::paths::Paths;
use crate::rolling::{self, Request, Taken};
use nix::sys::signal::{self, SaFlags, SigAction, SigHandler, SigSet, Signal};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tracing::{info, warn};

/// How long a defrag waits for the rolling turn within one check.
const TURN_WAIT: Duration = Duration::from_secs(20);
/// Checks in a row without an answer before it counts as a problem (a
/// rolling restart takes one or two).
const UNANSWERED_CHECKS: u32 = 3;

static TERMINATE: AtomicBool = AtomicBool::new(false);

extern "C" fn on_terminate(_: nix::libc::c_int) {
    TERMINATE.store(true, Ordering::SeqCst);
}

/// The agent's command line (see options.rs for the charm options).
#[derive(Debug, Clone)]
pub struct Args {
    pub unit: String,
    pub listen: String,
    pub snapshot_interval: String,
    pub snapshot_retention: usize,
    pub defrag_threshold: u8,
    pub check_interval: String,
    /// The scrape listener (`/metrics` only), if the charm wants one.
    pub metrics_listen: Option<String>,
    /// Its TLS files' dir; none: plain http (the operator's leave).
    pub metrics_tls: Option<PathBuf>,
}

/// Where scheduled snapshots go: beside the actions' backups.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The scheduled snapshots on disk (`etcd-snapshot-*.db`) and their times.
pub fn list_snapshots(dir: &Path) -> Vec<(PathBuf, u64)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("etcd-snapshot-") && n.ends_with(".db")
        })
        .filter_map(|e| {
            let t = e.metadata().ok()?.modified().ok()?;
            let secs = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
            Some((e.path(), secs))
        })
        .collect()
}

/// The file system the scheduled snapshots go to: its free bytes, and
/// whether the data dir is on it.
fn snapshot_fs(paths: &Paths) -> Result<decide::SnapshotFs, String> {
    let dir = paths.scheduled_snapshot_dir();
    let shown = paths.unhost(&dir).display().to_string();
    let free = crate::space::free_bytes(&dir).map_err(|e| format!("free space of {shown}: {e}"))?;
    let holds_data = crate::space::same_fs(&dir, &paths.data_dir())
        .map_err(|e| format!("file system of {shown}: {e}"))?;
    Ok(decide::SnapshotFs {
        dir: paths.unhost(&dir),
        free,
        holds_data,
    })
}

/// This unit's client URL and quota, from etcd.conf.yml (as the nrpe checks
/// find them); installs the client pair when it serves https.
fn local_member(paths: &Paths) -> Result<(String, u64), String> {
    let found = match crate::layout::read_found_config(paths) {
        None => return Err("etcd.conf.yml does not exist yet".into()),
        Some(Err(e)) => return Err(format!("etcd.conf.yml: {e}")),
        Some(Ok(f)) => f,
    };
    let url = found
        .advertise_client_urls
        .as_deref()
        .and_then(|u| u.split(',').next())
        .map(|u| u.trim().to_string())
        .filter(|u| !u.is_empty())
        .ok_or("etcd.conf.yml has no advertise-client-urls")?;
    if url.starts_with("https://") {
        etcd::set_client_tls(crate::tls::files::client_tls(paths));
    }
    let quota = found
        .raw
        .get("quota-backend-bytes")
        .and_then(|q| q.trim().parse::<u64>().ok())
        .filter(|q| *q > 0)
        .unwrap_or(crate::charm::alarms::DEFAULT_QUOTA);
    Ok((url, quota))
}

fn member_seen(ep: &str) -> Result<MemberSeen, String> {
    let d = etcd::block_on(etcd::member_detail(ep)).map_err(|e| e.to_string())?;
    Ok(MemberSeen {
        id: d.member_id,
        db_size: d.db_size.max(0) as u64,
        db_size_in_use: d.db_size_in_use.max(0) as u64,
        is_learner: d.is_learner,
        leader: d.leader,
    })
}

async fn turn_holder(ep: &str) -> etcd::Result<Option<String>> {
    let mut c = etcd::connect_with(&Endpoints::from(ep), etcd::CALL_TIMEOUT).await?;
    let r = c
        .get(rolling::TURN_KEY, None)
        .await
        .map_err(|e| etcd::EtcdError {
            endpoint: ep.to_string(),
            op: "read the rolling turn".into(),
            message: e.to_string(),
        })?;
    Ok(r.kvs()
        .first()
        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()))
}

/// Disarms this member's NOSPACE alarm only (others disarm their own).
async fn disarm_own_nospace(ep: &str, member: u64) -> etcd::Result<()> {
    use etcd_client::{AlarmAction, AlarmOptions, AlarmType};
    let mut c = etcd::connect_with(&Endpoints::from(ep), etcd::CALL_TIMEOUT).await?;
    let mut opts = AlarmOptions::new();
    opts.with_member(member);
    c.alarm(AlarmAction::Deactivate, AlarmType::Nospace, Some(opts))
        .await
        .map(|_| ())
        .map_err(|e| etcd::EtcdError {
            endpoint: ep.to_string(),
            op: format!("alarm disarm NOSPACE of {member:x}"),
            message: e.to_string(),
        })
}

fn rpc_err(ep: &str, op: &str, e: impl std::fmt::Display) -> etcd::EtcdError {
    etcd::EtcdError {
        endpoint: ep.to_string(),
        op: op.to_string(),
        message: e.to_string(),
    }
}

/// Defragments the member at `ep` (over https with the client pair when it
/// serves TLS; etcd.rs's maintenance calls are plain http for now).
async fn defragment(ep: &str) -> etcd::Result<()> {
    let mut c = etcd::connect_with(&Endpoints::from(ep), etcd::MAINTENANCE_TIMEOUT).await?;
    c.defragment()
        .await
        .map(|_| ())
        .map_err(|e| rpc_err(ep, "defragment", e))
}

/// Compacts the keyspace to its current revision, physically.
async fn compact_now(ep: &str) -> etcd::Result<i64> {
    use etcd_client::CompactionOptions;
    let mut c = etcd::connect_with(&Endpoints::from(ep), etcd::MAINTENANCE_TIMEOUT).await?;
    let r = c
        .get("\0", None)
        .await
        .map_err(|e| rpc_err(ep, "get (current revision)", e))?;
    let rev = r.header().map_or(0, |h| h.revision());
    c.compact(rev, Some(CompactionOptions::new().with_physical()))
        .await
        .map(|_| rev)
        .map_err(|e| rpc_err(ep, &format!("compact {rev}"), e))
}

/// What the loop carries from one check to the next.
struct Memory {
    started_at: u64,
    unanswered: u32,
    /// Kind → problem; each kind is cleared by its next success.
    problems: BTreeMap<&'static str, String>,
}

struct Agent {
    args: Args,
    policy: Policy,
    paths: Paths,
    state: Arc<Mutex<AgentState>>,
}

impl Agent {
    fn with_state(&self, f: impl FnOnce(&mut AgentState)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
    }

    fn observe(&self, mem: &Memory) -> Result<(String, Seen), String> {
        let (ep, quota) = local_member(&self.paths)?;
        let member = member_seen(&ep);
        let alarms = if member.is_ok() {
            etcd::block_on(etcd::alarms(&ep)).unwrap_or_default()
        } else {
            Vec::new()
        };
        let mut others = Vec::new();
        let mut turn = None;
        if decide::has_nospace(&alarms) {
            if let Ok(v) = etcd::block_on(etcd::view_from(&ep)) {
                for m in &v.members {
                    let seen = m.client_urls.first().and_then(|u| member_seen(u).ok());
                    others.push((m.id, seen));
                }
            }
            turn = etcd::block_on(turn_holder(&ep)).ok().flatten();
        }
        let seen = Seen {
            now: now_ms() / 1000,
            started_at: mem.started_at,
            member,
            others,
            alarms,
            snapshots: list_snapshots(&self.paths.scheduled_snapshot_dir()),
            snapshot_fs: snapshot_fs(&self.paths),
            turn_holder: turn,
            quota,
        };
        Ok((ep, seen))
    }

    /// One check: observe, decide, act, and write it all into the state.
    fn check(&self, mem: &mut Memory) {
        let (ep, seen) = match self.observe(mem) {
            Ok(x) => x,
            Err(e) => {
                self.with_state(|s| {
                    s.checks += 1;
                    s.last_check_ms = now_ms();
                    s.waiting = Some(e);
                });
                return;
            }
        };
        let d = decide::decide(&seen, &self.policy);
        match &seen.member {
            Ok(_) => {
                mem.unanswered = 0;
                mem.problems.remove("etcd");
            }
            Err(_) => mem.unanswered += 1,
        }
        if mem.unanswered >= UNANSWERED_CHECKS {
            if let Some(p) = d.problems.first() {
                mem.problems.insert("etcd", p.clone());
            }
        }
        if !decide::has_nospace(&seen.alarms) {
            mem.problems.remove("nospace");
        }
        match &d.snapshot_skipped {
            Some(why) => mem.problems.insert("snapshot-room", why.clone()),
            None => mem.problems.remove("snapshot-room"),
        };
        self.with_state(|s| {
            s.checks += 1;
            s.last_check_ms = now_ms();
            s.waiting = d.waiting.clone();
            s.alarms = seen
                .alarms
                .iter()
                .map(|(m, a)| format!("{} on {m:x}", a.to_ascii_uppercase()))
                .collect();
            if let Ok(m) = &seen.member {
                s.member_id = format!("{:x}", m.id);
                s.db_size = m.db_size;
                s.db_size_in_use = m.db_size_in_use;
            }
            s.snapshots_kept = seen.snapshots.len();
        });
        let me = seen.member.as_ref().ok();
        for a in &d.actions {
            if TERMINATE.load(Ordering::SeqCst) {
                break;
            }
            match (a, me) {
                (Action::Snapshot, _) => self.snapshot(&ep, me, mem),
                (Action::Defrag { fragmentation }, Some(m)) => self.defrag(
                    &ep,
                    m,
                    &format!("{fragmentation}% of the db is free pages"),
                    mem,
                ),
                (Action::RecoverNospace { defrag }, Some(m)) => {
                    self.recover_nospace(&ep, m, *defrag, seen.quota, mem)
                }
                _ => {}
            }
        }
        let problems: Vec<String> = mem.problems.values().cloned().collect();
        self.with_state(|s| s.problems = problems);
    }

    fn fail(&self, mem: &mut Memory, kind: &'static str, msg: String) {
        warn!("{msg}");
        mem.problems.insert(kind, msg.clone());
        self.with_state(|s| s.error(msg));
    }

    fn snapshot(&self, ep: &str, me: Option<&decide::MemberSeen>, mem: &mut Memory) {
        match self.take_snapshot(ep) {
            Ok(r) => {
                info!("scheduled snapshot {} ({} bytes)", r.path, r.size);
                mem.problems.remove("snapshot");
                match super::upload::after_snapshot(&self.paths, &r.path, me) {
                    None => {}
                    Some(Ok(id)) => {
                        info!("scheduled snapshot uploaded as backup {id}");
                        mem.problems.remove("upload");
                        self.with_state(|s| {
                            s.uploads_total += 1;
                            s.last_upload = Some(id);
                        });
                    }
                    Some(Err(e)) => {
                        self.with_state(|s| s.upload_failures += 1);
                        self.fail(mem, "upload", e);
                    }
                }
                self.prune();
                self.with_state(|s| {
                    s.snapshots_total += 1;
                    s.last_snapshot = Some(r);
                });
            }
            Err(e) => {
                self.with_state(|s| s.snapshot_failures += 1);
                self.fail(mem, "snapshot", format!("scheduled snapshot failed: {e}"));
            }
        }
    }

    /// The agent's rolling copies: all but the newest `retention` go, each
    /// with its `.sha256`. A removal that fails is tried after the next.
    fn prune(&self) {
        let dir = self.paths.scheduled_snapshot_dir();
        let old = decide::to_prune(&list_snapshots(&dir), self.policy.snapshot_retention);
        for p in old {
            let sha = PathBuf::from(format!("{}.sha256", p.display()));
            match std::fs::remove_file(&p) {
                Ok(()) => {
                    let _ = std::fs::remove_file(&sha);
                    info!(
                        "removed the scheduled snapshot {} (agent_snapshot_retention={})",
                        self.paths.unhost(&p).display(),
                        self.policy.snapshot_retention
                    );
                }
                Err(e) => warn!("cannot remove {}: {e}", p.display()),
            }
        }
        let kept = list_snapshots(&dir).len();
        self.with_state(|s| s.snapshots_kept = kept);
    }

    fn take_snapshot(&self, ep: &str) -> Result<SnapshotRecord, String> {
        let dir = self.paths.scheduled_snapshot_dir();
        crate::private::dir(&dir)
            .map_err(|e| format!("creating {}: {e}", self.paths.unhost(&dir).display()))?;
        let stamp = crate::stamp::utc_stamp(SystemTime::now());
        let mut file = dir.join(format!("etcd-snapshot-{stamp}.db"));
        for n in 1.. {
            if !file.exists() {
                break;
            }
            file = dir.join(format!("etcd-snapshot-{stamp}-{n}.db"));
        }
        let size = etcd::block_on(etcd::snapshot_to(ep, &file)).map_err(|e| {
            let _ = std::fs::remove_file(file.with_extension("part"));
            e.to_string()
        })?;
        let sum = crate::charm::actions::sha256_file(&file).map_err(|e| e.to_string())?;
        let name = file.file_name().unwrap_or_default().to_string_lossy();
        let sha_file = PathBuf::from(format!("{}.sha256", file.display()));
        crate::durable::write_atomic(&sha_file, format!("{sum}  {name}\n").as_bytes())
            .map_err(|e| format!("writing {}: {e}", sha_file.display()))?;
        Ok(SnapshotRecord {
            path: self.paths.unhost(&file).display().to_string(),
            at_ms: now_ms(),
            size,
            sha256: sum,
        })
    }

    /// Runs `defrag` of this member, timed, into a record.
    fn timed_defrag(&self, ep: &str, reason: &str, before: u64) -> DefragRecord {
        let start_ms = now_ms();
        let r = etcd::block_on(defragment(ep));
        let end_ms = now_ms();
        let after = member_seen(ep).map_or(before, |m| m.db_size);
        DefragRecord {
            start_ms,
            end_ms,
            reason: reason.to_string(),
            ok: r.is_ok(),
            db_size_before: before,
            db_size_after: after,
            error: r.err().map(|e| e.to_string()).unwrap_or_default(),
        }
    }

    fn defrag(&self, ep: &str, me: &MemberSeen, why: &str, mem: &mut Memory) {
        let holder = format!("{} agent", self.args.unit);
        let req = Request {
            unit: &holder,
            reason: "defragment (maintenance agent)",
            own_endpoint: ep,
            fallback: &[],
            member_id: me.id,
            wait: TURN_WAIT,
        };
        let turn = match rolling::take(&req) {
            Ok(Taken::Held(t)) => Some(t),
            Ok(Taken::NotNeeded) => None,
            Ok(Taken::Busy { why }) => {
                self.with_state(|s| s.waiting = Some(format!("defrag waits for the turn: {why}")));
                return;
            }
            Err(e) => {
                self.with_state(|s| s.error(format!("taking the rolling turn: {e}")));
                return;
            }
        };
        let rec = self.timed_defrag(ep, why, me.db_size);
        info!(
            "defragmented ({why}): {} -> {} bytes, ok={}",
            rec.db_size_before, rec.db_size_after, rec.ok
        );
        let err = (!rec.ok).then(|| rec.error.clone());
        self.with_state(|s| s.record_defrag(rec));
        if let Some(t) = turn {
            if let Some(w) = t.release(ep, me.id) {
                warn!("gave the turn back with the cluster unhealthy: {w}");
            }
        }
        match err {
            None => {
                mem.problems.remove("defrag");
            }
            Some(e) => self.fail(mem, "defrag", format!("defragmentation failed: {e}")),
        }
    }

    fn recover_nospace(
        &self,
        ep: &str,
        me: &MemberSeen,
        defrag: bool,
        quota: u64,
        mem: &mut Memory,
    ) {
        info!(
            "NOSPACE: compacting, defragmenting {:x}, then disarming",
            me.id
        );
        match etcd::block_on(compact_now(ep)) {
            Ok(rev) => info!("compacted to revision {rev}"),
            // Another agent compacted to this revision already.
            Err(e) if e.to_string().contains("compacted") => {}
            Err(e) => return self.fail(mem, "nospace", format!("NOSPACE: compaction failed: {e}")),
        }
        let mut after = me.db_size;
        if defrag {
            let rec = self.timed_defrag(ep, "NOSPACE", me.db_size);
            let (ok, error) = (rec.ok, rec.error.clone());
            after = rec.db_size_after;
            self.with_state(|s| s.record_defrag(rec));
            if !ok {
                return self.fail(
                    mem,
                    "nospace",
                    format!("NOSPACE: defragmentation failed: {error}"),
                );
            }
        }
        let room = MemberSeen {
            db_size: after,
            ..me.clone()
        };
        if decide::needs_room(&room, quota) {
            return self.fail(
                mem,
                "nospace",
                format!(
                    "NOSPACE: the db is still {} of a {} quota after compaction and defragmentation; delete keys or raise quota_backend_bytes",
                    crate::space::human(after),
                    crate::space::human(quota)
                ),
            );
        }
        match etcd::block_on(disarm_own_nospace(ep, me.id)) {
            Ok(()) => {
                info!("NOSPACE cleared on {:x} (db {after} bytes)", me.id);
                mem.problems.remove("nospace");
                self.with_state(|s| s.nospace_recoveries += 1);
            }
            Err(e) => self.fail(mem, "nospace", format!("NOSPACE: disarming failed: {e}")),
        }
    }
}

fn install_signals() -> Result<(), String> {
    let on_term = SigAction::new(
        SigHandler::Handler(on_terminate),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { signal::sigaction(sig, &on_term) }.map_err(|e| format!("{sig}: {e}"))?;
    }
    Ok(())
}

/// The `agent` subcommand.
pub fn run(paths: Paths, args: Args) -> ExitCode {
    let fail = |msg: String| {
        eprintln!("etcd-charm agent: {msg}");
        ExitCode::FAILURE
    };
    let interval = match parse_duration(&args.snapshot_interval) {
        Ok(d) => d,
        Err(e) => return fail(format!("--snapshot-interval: {e}")),
    };
    let check = match parse_duration(&args.check_interval) {
        Ok(d) if d >= Duration::from_secs(1) => d,
        Ok(_) => return fail("--check-interval must be at least 1s".into()),
        Err(e) => return fail(format!("--check-interval: {e}")),
    };
    if let Err(e) = install_signals() {
        return fail(format!("cannot handle signals: {e}"));
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(format!("no async runtime: {e}")),
    };
    let started = now_ms();
    let state = Arc::new(Mutex::new(AgentState {
        unit: args.unit.clone(),
        exe: super::state::exe_id(Path::new("/proc/self/exe")).unwrap_or_default(),
        started_ms: started,
        ..Default::default()
    }));
    let agent = Arc::new(Agent {
        policy: Policy {
            snapshot_interval: interval.as_secs(),
            snapshot_retention: args.snapshot_retention.max(1),
            defrag_threshold: args.defrag_threshold,
            snapshot_phase: decide::phase(&args.unit, interval.as_secs()),
        },
        args,
        paths,
        state: state.clone(),
    });
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(&agent.args.listen).await {
            Ok(l) => l,
            Err(e) => return fail(format!("cannot listen on {}: {e}", agent.args.listen)),
        };
        info!(
            "maintenance agent for {} on http://{} (check every {check:?})",
            agent.args.unit, agent.args.listen
        );
        tokio::spawn(super::http::serve(listener, state.clone()));
        if let Some(addr) = agent.args.metrics_listen.clone() {
            let tls = agent.args.metrics_tls.clone();
            if let Some(dir) = &tls {
                // Checked once at start: a unit without its files says so.
                if let Err(e) = super::scrape::server_config(dir) {
                    return fail(format!("--metrics-tls {}: {e}", dir.display()));
                }
            }
            let listener = match tokio::net::TcpListener::bind(&addr).await {
                Ok(l) => l,
                Err(e) => return fail(format!("cannot listen on {addr}: {e}")),
            };
            let scheme = if tls.is_some() { "https" } else { "http" };
            info!("maintenance agent metrics on {scheme}://{addr}/metrics");
            tokio::spawn(super::scrape::serve(listener, state, tls));
        }
        let mut mem = Memory {
            started_at: started / 1000,
            unanswered: 0,
            problems: BTreeMap::new(),
        };
        while !TERMINATE.load(Ordering::SeqCst) {
            let a = agent.clone();
            mem = match tokio::task::spawn_blocking(move || {
                a.check(&mut mem);
                mem
            })
            .await
            {
                Ok(m) => m,
                Err(e) => return fail(format!("a check panicked: {e}")),
            };
            let until = tokio::time::Instant::now() + check;
            while tokio::time::Instant::now() < until && !TERMINATE.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        info!("maintenance agent stopping (signal)");
        ExitCode::SUCCESS
    })
}
