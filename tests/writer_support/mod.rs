//! A client history while the cluster is disturbed (Jepsen's idea, in its
//! smallest useful form), and a monitor of how many members are down.
//!
//! - [`Writer`]: a thread putting `writer/<seq>` continuously, each put with
//!   a short budget, against one member at a time; a put a member refuses
//!   or drops is tried on the next member within the same budget (as a
//!   client with several endpoints does), so failed means the cluster took
//!   no write for that long. Every
//!   write's invocation time and outcome is recorded. [`Writer::finish`]
//!   then reads the keys back from EVERY member: an acknowledged write that
//!   any member lacks is lost.
//! - A monitor thread per member (part of the writer) asks that member for
//!   its status every [`POLL_EVERY`], each on a fresh connection (a kept
//!   channel's reconnect backoff would report a member down after it is
//!   back). A member is down from the start of a poll it did not answer to
//!   the start of the next poll it answered; two members are down at once
//!   when those intervals overlap, computed exactly from the intervals, not
//!   from instants that happen to be sampled. An etcd restart keeps its
//!   member from answering for ≥ 0.4 s (stop, start, raft catch-up) while
//!   one poll round is ≤ 50 ms plus its answer, so an overlap of two
//!   restarts cannot fall between samples; members polled on their own do
//!   not wait for each other's slow answers.
//! - [`Report::assert_available`] holds a scenario to a [`Bound`]: no
//!   acknowledged write lost, never two members down, the longest gap
//!   between acknowledged writes and the failed writes bounded, and writes
//!   acknowledged inside the disturbance window the test marks.
//!
//! Every thread stops when the writer is finished or dropped (also on panic).
#![allow(dead_code)]

use etcd_client::{Client, ConnectOptions, GetOptions};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One put's budget, over every member it is tried on (connecting included).
pub const PUT_TIMEOUT: Duration = Duration::from_millis(800);
/// Pause between puts: continuous, but leaving the shared CPUs some room.
pub const PUT_EVERY: Duration = Duration::from_millis(20);
pub const POLL_EVERY: Duration = Duration::from_millis(50);
/// A stopped or restarting member refuses at once on loopback, so this bound
/// only decides when a slow answer counts as down: 700 ms saw all three
/// members of a healthy cluster "down" together once the suite ran four
/// tests side by side (a debug build's TLS handshake on 2 busy cores).
const POLL_TIMEOUT: Duration = Duration::from_millis(2000);

#[derive(Debug, Clone)]
struct Op {
    seq: u64,
    invoked: Instant,
    acked: bool,
    /// Failed by running out of PUT_TIMEOUT (not by every member refusing).
    timed_out: bool,
}

/// One member's polls: how many, how many unanswered, and its down
/// intervals (start, end; end None while still down), since the start.
#[derive(Debug, Default, Clone)]
pub struct Polled {
    pub polls: u64,
    pub unanswered: u64,
    pub down: Vec<(Duration, Option<Duration>)>,
}

/// What a scenario may cost a client. The writer tries each put for
/// [`PUT_TIMEOUT`] (800 ms) across the members; a member that stops in its
/// turn refuses at once, so its puts move on within that budget.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// Longest gap between two acknowledged writes.
    pub gap: Duration,
    /// Failed writes over the whole run.
    pub failed: usize,
}

/// A member restarted in its rolling turn (leadership moved off first):
/// on a quiet machine 0.04-0.09 s and no failed write (README,
/// Benchmarks). The suite runs three tests side by side on 2 cores with a
/// debug build, where one put, or the TLS handshake of a reconnect, can
/// take most of a second: the bound allows three put budgets in a row
/// (2.4 s) and one failed put per member restarted plus two.
pub const ROLLING: Bound = Bound {
    gap: Duration::from_millis(2400),
    failed: 5,
};

/// The raft leader killed: an election is due before the next write, and
/// etcd's election timeout bounds it (1000 ms, randomised up to 2x, here
/// with the charm's defaults), plus the writer's reconnect: 2 s of election
/// and two put budgets on loaded cores.
pub const LEADER_KILLED: Bound = Bound {
    gap: Duration::from_millis(3600),
    failed: 5,
};

/// What a finished writer measured.
#[derive(Debug)]
pub struct Report {
    pub acked: usize,
    pub failed: usize,
    /// Failed writes that ran out of PUT_TIMEOUT (the rest were refused).
    pub timeouts: usize,
    /// Acknowledged keys some member does not have.
    pub lost: usize,
    pub lost_keys: Vec<String>,
    pub longest_gap: Duration,
    pub ran_for: Duration,
    pub max_down: usize,
    pub max_down_at: Option<(Duration, Vec<String>)>,
    pub polls: u64,
    /// (endpoint, polls it did not answer).
    pub down_polls: Vec<(String, u64)>,
    /// The disturbance window the test marked (since the writer's start),
    /// and the writes acknowledged inside it.
    pub window: Option<(Duration, Duration)>,
    pub acked_in_window: usize,
}

impl Report {
    /// One line per figure, for the issue note.
    /// The `BENCH-AVAIL {json}` line bench/availability.py reads back:
    /// `took` is the operation's own wall time (start to healthy again).
    pub fn bench_line(&self, row: &str, kind: &str, took: Duration) -> String {
        format!(
            "BENCH-AVAIL {}",
            serde_json::json!({
                "row": row,
                "kind": kind,
                "gap_s": self.longest_gap.as_secs_f64(),
                "acked": self.acked,
                "failed": self.failed,
                "timeouts": self.timeouts,
                "lost": self.lost,
                "max_down": self.max_down,
                "took_s": took.as_secs_f64(),
                "ran_s": self.ran_for.as_secs_f64(),
                "put_timeout_ms": PUT_TIMEOUT.as_millis() as u64,
                "put_every_ms": PUT_EVERY.as_millis() as u64,
            })
        )
    }

    /// Every availability bound of a scenario, each failing with the
    /// report: nothing lost, never two members down, the gap and the
    /// failed writes within `bound`, and at least one write acknowledged
    /// per second of the disturbance window (the writer tries ~30).
    pub fn assert_available(&self, what: &str, bound: Bound) {
        self.print(what);
        let fail = |why: String| -> ! { panic!("{what}: {why}\n{self:#?}") };
        if self.lost > 0 {
            fail(format!("acknowledged writes lost: {:?}", self.lost_keys));
        }
        if self.max_down > 1 {
            fail(format!(
                "{} members were down at once ({:?})",
                self.max_down, self.max_down_at
            ));
        }
        if self.longest_gap > bound.gap {
            fail(format!(
                "the longest gap between acknowledged writes was {:.3} s, bound {:.3} s",
                self.longest_gap.as_secs_f64(),
                bound.gap.as_secs_f64()
            ));
        }
        if self.failed > bound.failed {
            fail(format!(
                "{} writes failed ({} ran out of time), bound {}",
                self.failed, self.timeouts, bound.failed
            ));
        }
        let Some((from, to)) = self.window else {
            fail("no disturbance window was marked".into());
        };
        let want = ((to - from).as_secs_f64().floor() as usize).max(1);
        if self.acked_in_window < want {
            fail(format!(
                "{} writes acknowledged in the {:.1} s of the disturbance, fewer than one a second",
                self.acked_in_window,
                (to - from).as_secs_f64()
            ));
        }
    }

    pub fn print(&self, what: &str) {
        eprintln!("--- {what} ---");
        eprintln!(
            "writes: {} acknowledged, {} failed, {} lost; longest gap between acknowledged writes {:.3} s; ran {:.1} s",
            self.acked,
            self.failed,
            self.lost,
            self.longest_gap.as_secs_f64(),
            self.ran_for.as_secs_f64()
        );
        if let Some((from, to)) = self.window {
            eprintln!(
                "disturbance {:.1}..{:.1} s: {} writes acknowledged in it",
                from.as_secs_f64(),
                to.as_secs_f64(),
                self.acked_in_window
            );
        }
        eprintln!(
            "members down at once: at most {} ({} polls{}); polls without an answer per member: {:?}",
            self.max_down,
            self.polls,
            match &self.max_down_at {
                Some((t, who)) if self.max_down > 0 => format!(", first at {:.1} s: {who:?}", t.as_secs_f64()),
                _ => String::new(),
            },
            self.down_polls
        );
    }
}

pub struct Writer {
    endpoints: Vec<String>,
    stop: Arc<AtomicBool>,
    started: Instant,
    ops: Arc<Mutex<Vec<Op>>>,
    polled: Vec<Arc<Mutex<Polled>>>,
    threads: Vec<JoinHandle<()>>,
    window: (Option<Instant>, Option<Instant>),
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The client pair (CA, cert, key PEM) shown on https endpoints; set once
/// by a test whose cluster serves TLS.
static TLS: std::sync::RwLock<Option<(String, String, String)>> = std::sync::RwLock::new(None);

fn tls() -> Option<(String, String, String)> {
    TLS.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Every writer of this test process presents this client pair.
pub fn use_tls(ca: &str, cert: &str, key: &str) {
    let mut t = TLS.write().unwrap_or_else(|e| e.into_inner());
    if t.is_none() {
        *t = Some((ca.into(), cert.into(), key.into()));
    }
}

/// Replaces the pair (a CA rotation hands clients new credentials, as
/// kube-apiserver rereads its db data): new connections present it.
pub fn rotate_tls(ca: &str, cert: &str, key: &str) {
    *TLS.write().unwrap_or_else(|e| e.into_inner()) = Some((ca.into(), cert.into(), key.into()));
}

/// Forgets the pair: the next cluster of this test process starts plain.
pub fn forget_tls() {
    *TLS.write().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Set by a test whose cluster moves from http to https while it writes:
/// an `http://` endpoint is then tried over https first (with the pair of
/// [`use_tls`]), and over plain http while that fails.
static FOLLOW_HTTPS: AtomicBool = AtomicBool::new(false);

/// See [`FOLLOW_HTTPS`].
pub fn follow_https() {
    FOLLOW_HTTPS.store(true, Ordering::SeqCst);
}

async fn connect(endpoint: &str, timeout: Duration) -> Option<Client> {
    if let (true, Some(_), Some(rest)) = (
        FOLLOW_HTTPS.load(Ordering::SeqCst),
        tls(),
        endpoint.strip_prefix("http://"),
    ) {
        let secure = format!("https://{rest}");
        if let Some(mut c) = connect_as(&secure, timeout, true).await {
            if matches!(tokio::time::timeout(timeout, c.status()).await, Ok(Ok(_))) {
                return Some(c);
            }
        }
        return connect_as(endpoint, timeout, false).await;
    }
    connect_as(endpoint, timeout, true).await
}

async fn connect_as(endpoint: &str, timeout: Duration, with_tls: bool) -> Option<Client> {
    let mut opts = ConnectOptions::new()
        .with_connect_timeout(timeout)
        .with_timeout(timeout);
    if let Some((ca, cert, key)) = tls().filter(|_| with_tls) {
        use etcd_client::{Certificate, Identity, TlsOptions};
        opts = opts.with_tls(
            TlsOptions::new()
                .ca_certificate(Certificate::from_pem(&ca))
                .identity(Identity::from_pem(&cert, &key)),
        );
    }
    tokio::time::timeout(timeout, Client::connect([endpoint], Some(opts)))
        .await
        .ok()?
        .ok()
}

async fn answers(endpoint: &str) -> bool {
    let fut = async {
        let mut c = connect(endpoint, POLL_TIMEOUT).await?;
        c.status().await.ok()
    };
    matches!(tokio::time::timeout(POLL_TIMEOUT, fut).await, Ok(Some(_)))
}

impl Writer {
    /// Starts writing to, and watching, `endpoints` (client URLs).
    pub fn start(endpoints: &[String]) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let ops = Arc::new(Mutex::new(Vec::new()));
        let mut threads = vec![{
            let (eps, stop, ops) = (endpoints.to_vec(), stop.clone(), ops.clone());
            std::thread::spawn(move || write_loop(&eps, &stop, &ops))
        }];
        let mut polled = Vec::new();
        for ep in endpoints {
            let p = Arc::new(Mutex::new(Polled::default()));
            let (ep, stop, mine) = (ep.clone(), stop.clone(), p.clone());
            threads.push(std::thread::spawn(move || {
                poll_loop(&ep, &stop, &mine, started)
            }));
            polled.push(p);
        }
        Writer {
            endpoints: endpoints.to_vec(),
            stop,
            started,
            ops,
            polled,
            threads,
            window: (None, None),
        }
    }

    /// The disturbance starts now (the operation under test is begun).
    pub fn disturbance_begins(&mut self) {
        self.window.0 = Some(Instant::now());
    }

    /// The disturbance is over now (the operation has settled).
    pub fn disturbance_ends(&mut self) {
        self.window.1 = Some(Instant::now());
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Stops both threads, reads every acknowledged key back from every
    /// member (each must answer within `read_limit`), and reports.
    pub fn finish(mut self, read_limit: Duration) -> Report {
        self.halt();
        let ran_for = self.started.elapsed();
        let ops = self.ops.lock().unwrap().clone();
        let acked: Vec<&Op> = ops.iter().filter(|o| o.acked).collect();
        let longest_gap = acked
            .windows(2)
            .map(|w| w[1].invoked - w[0].invoked)
            .max()
            .unwrap_or_default();
        let rt = runtime();
        let mut lost_keys = Vec::new();
        for ep in &self.endpoints {
            let have = rt.block_on(read_all(ep, read_limit));
            let have = have.unwrap_or_else(|e| panic!("reading the writer's keys from {ep}: {e}"));
            for o in &acked {
                let k = key(o.seq);
                if !have.contains(&k) {
                    lost_keys.push(format!("{k} (missing at {ep})"));
                }
            }
        }
        let lost = {
            let mut seqs: Vec<&str> = lost_keys
                .iter()
                .map(|k| k.split(' ').next().unwrap())
                .collect();
            seqs.sort();
            seqs.dedup();
            seqs.len()
        };
        let polled: Vec<Polled> = self
            .polled
            .iter()
            .map(|p| p.lock().unwrap().clone())
            .collect();
        let (max_down, max_down_at) = most_down_at_once(&self.endpoints, &polled, ran_for);
        let window = match self.window {
            (Some(a), b) => Some((
                a - self.started,
                b.unwrap_or_else(Instant::now).min(Instant::now()) - self.started,
            )),
            _ => None,
        };
        let acked_in_window = window.map_or(0, |(from, to)| {
            acked
                .iter()
                .filter(|o| {
                    let at = o.invoked - self.started;
                    at >= from && at <= to
                })
                .count()
        });
        Report {
            acked: acked.len(),
            failed: ops.len() - acked.len(),
            timeouts: ops.iter().filter(|o| o.timed_out).count(),
            lost,
            lost_keys,
            longest_gap,
            ran_for,
            max_down,
            max_down_at,
            polls: polled.iter().map(|p| p.polls).sum(),
            down_polls: self
                .endpoints
                .iter()
                .cloned()
                .zip(polled.iter().map(|p| p.unanswered))
                .collect(),
            window,
            acked_in_window,
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.halt();
    }
}

fn key(seq: u64) -> String {
    format!("writer/{seq:08}")
}

async fn read_all(
    endpoint: &str,
    limit: Duration,
) -> Result<std::collections::HashSet<String>, String> {
    let start = Instant::now();
    loop {
        let attempt = async {
            let mut c = connect(endpoint, Duration::from_secs(3))
                .await
                .ok_or("no connection")?;
            let r = c
                .get(
                    "writer/",
                    Some(GetOptions::new().with_prefix().with_keys_only()),
                )
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(
                r.kvs()
                    .iter()
                    .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
                    .collect(),
            )
        };
        match tokio::time::timeout(Duration::from_secs(5), attempt).await {
            Ok(Ok(keys)) => return Ok(keys),
            Ok(Err(e)) if start.elapsed() > limit => return Err(e),
            Err(_) if start.elapsed() > limit => return Err("no answer".into()),
            _ => tokio::time::sleep(Duration::from_millis(300)).await,
        }
    }
}

fn write_loop(endpoints: &[String], stop: &AtomicBool, ops: &Mutex<Vec<Op>>) {
    let rt = runtime();
    let mut clients: Vec<Option<Client>> = endpoints.iter().map(|_| None).collect();
    let mut at = 0usize;
    let mut seq = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let invoked = Instant::now();
        // As an etcd client's balancer does: a put that a member refuses or
        // drops (it is stopping) is tried on the next one, all within the
        // one PUT_TIMEOUT; failed means no member took it in that time.
        let deadline = invoked + PUT_TIMEOUT;
        let mut acked = false;
        for _ in 0..endpoints.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let ep = &endpoints[at];
            let slot = &mut clients[at];
            acked = rt.block_on(async {
                let put = async {
                    if slot.is_none() {
                        *slot = connect(ep, left).await;
                    }
                    let c = slot.as_mut()?;
                    c.put(key(seq), seq.to_string(), None).await.ok()
                };
                matches!(tokio::time::timeout(left, put).await, Ok(Some(_)))
            });
            if acked {
                break;
            }
            // A fresh connection next time, and the next member now.
            clients[at] = None;
            at = (at + 1) % endpoints.len();
        }
        // Connecting has the same bound, so a slow connect counts too.
        let timed_out = !acked && invoked.elapsed() >= PUT_TIMEOUT * 9 / 10;
        ops.lock().unwrap().push(Op {
            seq,
            invoked,
            acked,
            timed_out,
        });
        seq += 1;
        std::thread::sleep(PUT_EVERY);
    }
}

/// Polls one member every [`POLL_EVERY`], recording its down intervals.
fn poll_loop(endpoint: &str, stop: &AtomicBool, mine: &Mutex<Polled>, started: Instant) {
    let rt = runtime();
    while !stop.load(Ordering::SeqCst) {
        let t = Instant::now();
        let up = rt.block_on(answers(endpoint));
        {
            let mut p = mine.lock().unwrap();
            p.polls += 1;
            let at = t - started;
            let open = p.down.last().is_some_and(|(_, end)| end.is_none());
            match (up, open) {
                (false, false) => p.down.push((at, None)),
                (true, true) => p.down.last_mut().unwrap().1 = Some(at),
                _ => {}
            }
            if !up {
                p.unanswered += 1;
            }
        }
        std::thread::sleep(POLL_EVERY.saturating_sub(t.elapsed()));
    }
}

/// The most down intervals that overlap, and where that first happens
/// (an interval still open at the end runs to `end`): a sweep over every
/// member's starts and ends.
pub fn most_down_at_once(
    endpoints: &[String],
    polled: &[Polled],
    end: Duration,
) -> (usize, Option<(Duration, Vec<String>)>) {
    // (time, +1 start / -1 end, member); ends sort before starts at a tie.
    let mut events: Vec<(Duration, i32, usize)> = Vec::new();
    for (i, p) in polled.iter().enumerate() {
        for (a, b) in &p.down {
            events.push((*a, 1, i));
            events.push((b.unwrap_or(end), -1, i));
        }
    }
    events.sort();
    let mut down: Vec<usize> = Vec::new();
    let (mut most, mut at) = (0, None);
    for (t, kind, i) in events {
        if kind < 0 {
            down.retain(|m| *m != i);
            continue;
        }
        down.push(i);
        if down.len() > most {
            most = down.len();
            at = Some((t, down.iter().map(|m| endpoints[*m].clone()).collect()));
        }
    }
    (most, at)
}
