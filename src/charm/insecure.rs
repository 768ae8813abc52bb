//! Secure by default (rule 7): without TLS, etcd is not started on any
//! address other than loopback unless the operator asks for it with
//! `allow_insecure_listeners`. Plain http has no client-certificate auth:
//! anyone who reaches the port reads and writes every key (for Kubernetes,
//! every secret). Pure; hooked into `plan::plan` after the steps are known.
//!
//! # Decisions
//! - Judged on what etcd would listen on (the wanted etcd.conf.yml's
//!   `listen-peer-urls` and `listen-client-urls`): a plain `http://` URL
//!   whose host is not loopback (127.0.0.0/8, ::1, `localhost`) is exposed.
//!   `0.0.0.0` (`bind_to_all_interfaces`, the default) is exposed; the
//!   Python charm's `bind_with_insecure_http` listener (127.0.0.1:4001) is
//!   not.
//! - Nothing exposed yet: the steps that would write that config or start
//!   etcd on it are dropped; every other step stays (the `certificates`
//!   requests, membership, leadership data), so TLS can still arrive. The
//!   status says what is missing, in the Python charm's words ("Missing
//!   relation to certificate authority"), and both ways out. While
//!   `certificates` is related but has not issued yet, it waits instead.
//! - A member of an existing plain cluster (its data dir holds a WAL: a
//!   cluster of an earlier revision of this charm) is never stopped or
//!   held down for this: an operator refreshing a working cluster expects
//!   it to keep working, and members down cost quorum for no gain (its
//!   data was served plain already). It keeps every step (restarts through
//!   the rolling turns included), and its active status says, first, what
//!   is missing and both ways out, until TLS is related or the option is
//!   set. Not blocked: blocked would say it is not working, stop a hook's
//!   further passes, and make the upgrade dry run refuse a refresh that
//!   keeps the cluster serving.
//! - The option set: plain http is served and the active status says so.

use super::desired::desired_config;
use super::observed::Observed;
use super::steps::{Plan, Step};
use crate::context::Event;
use crate::hooktools::StatusKind;
use crate::paths::Paths;
use crate::render::{ClusterState, EtcdConfig};

pub const OPTION: &str = "allow_insecure_listeners";
/// The Python charm's status without `certificates`.
pub const MISSING_CA: &str = "Missing relation to certificate authority";

/// Whether a URL host is loopback: 127.0.0.0/8, ::1 or `localhost`.
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `host:port` of a URL (IPv6 kept in brackets), and its scheme.
fn split(url: &str) -> (&str, &str) {
    let (scheme, rest) = url.trim().split_once("://").unwrap_or(("", url.trim()));
    (scheme, rest.split('/').next().unwrap_or(rest))
}

fn host_of(hostport: &str) -> &str {
    match hostport.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => hostport.rsplit_once(':').map_or(hostport, |(h, _)| h),
    }
}

/// `host:port` of each plain-http URL whose host is not loopback.
pub fn exposed<'a>(urls: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = urls
        .into_iter()
        .flat_map(|u| u.split(','))
        .map(split)
        .filter(|(scheme, hp)| {
            scheme.eq_ignore_ascii_case("http") && !hp.is_empty() && !is_loopback_host(host_of(hp))
        })
        .map(|(_, hp)| hp.to_string())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// What a rendered config would serve in the clear off loopback.
fn exposed_by(c: &EtcdConfig) -> Vec<String> {
    exposed(
        c.listen_peer_urls
            .iter()
            .chain(&c.listen_client_urls)
            .chain(&c.listen_metrics_urls)
            .map(String::as_str),
    )
}

/// Steps that would bring etcd up on an exposed config (or make the
/// cluster expect it there).
fn brings_up(s: &Step) -> bool {
    match s {
        Step::WriteConfig { config, .. } => !exposed_by(config).is_empty(),
        Step::StartEtcd
        | Step::RestartEtcd
        | Step::WaitMember
        | Step::VerifyMember(_)
        | Step::RecordCluster
        | Step::UpdatePeerUrl { .. } => true,
        _ => false,
    }
}

/// Applies the policy to a plan (see the module's decisions).
pub fn guard(o: &Observed, paths: &Paths, p: &mut Plan) {
    let Ok(c) = &o.config else { return };
    if matches!(o.event, Event::Stop | Event::Remove) || o.is_leaving() {
        return;
    }
    let want = desired_config(o, c, paths, "", ClusterState::Existing, Vec::new());
    let open = exposed_by(&want);
    if open.is_empty() {
        return;
    }
    let list = open.join(", ");
    if c.allow_insecure_listeners {
        p.notes.push(format!(
            "plain http without client-certificate auth on {list} ({OPTION}=true)"
        ));
        return;
    }
    let member = o
        .disk
        .locations
        .iter()
        .any(|l| matches!(l.member, Ok(Some(_))));
    if member {
        p.notes.insert(
            0,
            format!(
                "{MISSING_CA}: etcd keeps serving plain http without client-certificate auth on {list} \
                 (an existing member, not stopped): relate certificates for TLS, or set {OPTION}=true to accept it"
            ),
        );
        return;
    }
    // A port stays open only for a member that runs already.
    let dropped = |s: &Step| brings_up(s) || (!o.active && matches!(s, Step::OpenPort(_)));
    p.steps.retain(|s| !dropped(s));
    if o.endpoints.certificates {
        p.wait(format!(
            "Waiting for the certificate authority to issue this unit's certificates; \
             etcd starts only with TLS on {list}"
        ));
    } else {
        p.status.push((
            StatusKind::Blocked,
            format!(
                "{MISSING_CA}: etcd is not started on {list} without TLS (plain http, no client-certificate auth): \
                 relate certificates, or set {OPTION}=true"
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charm::config::CharmConfig;
    use crate::charm::plan::plan;
    use crate::charm::plan_tests::{fresh, member, sees};
    use crate::wal::WalIds;

    fn paths() -> Paths {
        Paths::new("/r")
    }

    fn config(f: impl FnOnce(&mut CharmConfig)) -> Result<CharmConfig, String> {
        let mut c = CharmConfig::default();
        f(&mut c);
        Ok(c)
    }

    fn starts(p: &Plan) -> bool {
        p.steps
            .iter()
            .any(|s| matches!(s, Step::StartEtcd | Step::RestartEtcd))
    }

    fn blocked(p: &Plan) -> Option<&str> {
        p.status
            .iter()
            .find(|(k, _)| *k == StatusKind::Blocked)
            .map(|(_, m)| m.as_str())
    }

    /// The leader, decided to bootstrap: the plan would write and start.
    fn bootstrapping(addr: &str) -> Observed {
        let mut o = fresh(true);
        o.address = addr.into();
        o.client_address = addr.into();
        o.leader.legacy.insert("token".into(), "T0KEN0".into());
        o.leader
            .legacy
            .insert("bootstrap-member".into(), "etcd0".into());
        o
    }

    #[test]
    fn loopback_hosts() {
        for h in ["127.0.0.1", "127.82.0.9", "::1", "[::1]", "localhost"] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "0.0.0.0",
            "10.0.0.1",
            "::",
            "fd00::1",
            "etcd-0",
            "unknown-address",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
        assert_eq!(
            exposed([
                "http://0.0.0.0:2379,http://127.0.0.1:4001",
                "https://10.0.0.1:2380",
                "http://[fd00::1]:2380",
                "http://[::1]:2380",
            ]),
            ["0.0.0.0:2379", "[fd00::1]:2380"]
        );
    }

    #[test]
    fn a_new_member_off_loopback_without_tls_is_not_started() {
        let mut o = bootstrapping("10.0.0.1");
        o.config = config(|_| {});
        let p = plan(&o, &paths(), None);
        assert!(!starts(&p), "{:?}", p.steps);
        assert!(
            !p.steps
                .iter()
                .any(|s| matches!(s, Step::WriteConfig { .. })),
            "{:?}",
            p.steps
        );
        let msg = blocked(&p).expect("blocked");
        assert!(msg.starts_with(MISSING_CA), "{msg}");
        assert!(msg.contains("0.0.0.0:2379, 0.0.0.0:2380"), "{msg}");
        assert!(
            msg.contains("relate certificates") && msg.contains(OPTION),
            "{msg}"
        );
        // Bound to its own address only: still exposed.
        o.config = config(|c| c.bind_to_all_interfaces = false);
        let p = plan(&o, &paths(), None);
        assert!(!starts(&p));
        assert!(blocked(&p).unwrap().contains("10.0.0.1:2379"));
    }

    #[test]
    fn certificates_related_waits_for_the_ca_instead() {
        let mut o = bootstrapping("10.0.0.1");
        o.config = config(|_| {});
        o.endpoints.certificates = true;
        let p = plan(&o, &paths(), None);
        assert!(!starts(&p));
        assert_eq!(blocked(&p), None, "{:?}", p.status);
        assert!(
            p.status
                .iter()
                .any(|(k, m)| *k == StatusKind::Waiting && m.contains("certificate authority")),
            "{:?}",
            p.status
        );
    }

    #[test]
    fn loopback_or_the_option_starts_plain() {
        let mut o = bootstrapping("127.82.0.1");
        o.config = config(|c| c.bind_to_all_interfaces = false);
        let p = plan(&o, &paths(), None);
        assert!(starts(&p), "{:?} {:?}", p.steps, p.status);
        assert_eq!(blocked(&p), None);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
        // The Python charm's loopback listener is no exposure either.
        o.config = config(|c| {
            c.bind_to_all_interfaces = false;
            c.bind_with_insecure_http = true;
        });
        assert!(starts(&plan(&o, &paths(), None)));

        let mut o = bootstrapping("10.0.0.1");
        o.config = config(|c| c.allow_insecure_listeners = true);
        let p = plan(&o, &paths(), None);
        assert!(starts(&p));
        assert_eq!(blocked(&p), None);
        assert_eq!(
            p.notes,
            ["plain http without client-certificate auth on 0.0.0.0:2379, 0.0.0.0:2380 (allow_insecure_listeners=true)"]
        );
    }

    #[test]
    fn a_plain_member_off_loopback_keeps_serving_and_says_so() {
        let mut o = fresh(true);
        o.config = config(|_| {});
        let ids = WalIds {
            member_id: 0xaa,
            cluster_id: 0xcc,
        };
        o.disk.locations[0].exists = true;
        o.disk.locations[0].member = Ok(Some(ids));
        o.leader.legacy.insert("token".into(), "T0KEN0".into());
        o.leader.legacy.insert("cluster-id".into(), "cc".into());
        o.active = true;
        sees(&mut o, vec![member(0xaa, "etcd0", "10.0.0.1", false)]);
        // An old config whose runtime part differs: a restart is planned.
        o.config_text = Some("name: etcd0\nheartbeat-interval: 50\n".into());
        let p = plan(&o, &paths(), None);
        assert!(
            !p.steps.iter().any(|s| matches!(s, Step::StopEtcd)),
            "{:?}",
            p.steps
        );
        assert!(starts(&p), "kept, restart in its turn: {:?}", p.steps);
        assert_eq!(blocked(&p), None, "{:?}", p.status);
        let note = &p.notes[0];
        assert!(note.starts_with(MISSING_CA), "{note}");
        assert!(
            note.contains("keeps serving plain http") && note.contains("0.0.0.0:2379"),
            "{note}"
        );
        assert!(note.contains(OPTION), "{note}");

        // Stopped (a crash, a reboot): started again, a member of a
        // working cluster, still saying so.
        o.active = false;
        o.local = None;
        o.cluster = None;
        o.event = Event::Start;
        let p = plan(&o, &paths(), None);
        assert!(starts(&p), "{:?}", p.steps);
        assert!(p.notes[0].starts_with(MISSING_CA), "{:?}", p.notes);

        // Without a WAL it is a new member: not started.
        o.disk.locations[0].member = Ok(None);
        let p = plan(&o, &paths(), None);
        assert!(!starts(&p), "{:?}", p.steps);
        assert!(blocked(&p).unwrap().contains("is not started"));
    }
}
