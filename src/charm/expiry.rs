//! Certificates that run out, and a `certificates` relation that is gone:
//! what the status and the `etcd-cert-expiry` nrpe check say. Observe reads
//! the dates (and the clock) into [`CertDates`]; the rest is pure.
//!
//! # Thresholds
//! - Within [`WARN_DAYS`] (14) of its notAfter a certificate is named in
//!   the active status and the nrpe check is WARNING: a working
//!   `certificates` relation renews long before that (easyrsa and vault
//!   issue for months or years, the tls-certificates libraries renew at a
//!   fraction of the validity left), so a certificate this close means
//!   renewal is stuck, and two weeks leave an operator two weekly change
//!   windows to fix it.
//! - Within [`CRITICAL_DAYS`] (7), the nrpe check is CRITICAL: the
//!   libraries' last "expiring" notice has passed unanswered.
//! - Expired: the unit is blocked. etcd refuses a peer or client whose
//!   certificate is out of date, so its members soon cannot talk.
//!
//! # `certificates` removed
//! Nothing is torn down: the certificates on disk stay, etcd keeps serving
//! TLS with them (falling back to plain http would cut every member off
//! from its peers and every client off from etcd). The active status says
//! the relation is gone and that nothing renews them, with the date the
//! first one runs out.

use super::observed::Observed;
use super::steps::Plan;
use super::verdict::{Level, Verdict};
use crate::context::{Event, RelationKind};
use crate::hooktools::StatusKind;
use crate::paths::Paths;
use crate::tls::files::{self, Found};

pub use super::observed::CertDates;

pub const WARN_DAYS: i64 = 14;
pub const CRITICAL_DAYS: i64 = 7;
const DAY: i64 = 86_400;

pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Reads the three certificates in /var/snap/etcd/common (no key is read).
pub fn observe(paths: &Paths) -> CertDates {
    observe_at(paths, now_unix())
}

pub fn observe_at(paths: &Paths, now: i64) -> CertDates {
    let on_disk = files::read(paths);
    let mut d = CertDates {
        now,
        ..Default::default()
    };
    for (what, found) in [
        ("server certificate", &on_disk.server),
        ("client certificate", &on_disk.client),
        ("CA certificate", &on_disk.ca),
    ] {
        match found {
            Found::Cert(i) => d.certs.push((what.into(), i.not_after)),
            Found::Absent => d.unreadable.push((what.into(), "missing".into())),
            Found::Unreadable(e) => d.unreadable.push((what.into(), e.clone())),
        }
    }
    d
}

/// `2026-12-06` for a time in seconds since the epoch.
pub fn date(unix: i64) -> String {
    let (y, m, d) = crate::stamp::civil_date(unix.div_euclid(DAY));
    format!("{y:04}-{m:02}-{d:02}")
}

/// Whole days left (rounded down); negative once past.
fn days_left(now: i64, not_after: i64) -> i64 {
    (not_after - now).div_euclid(DAY)
}

fn left(what: &str, now: i64, not_after: i64) -> String {
    match days_left(now, not_after) {
        _ if not_after < now => format!("{what} expired on {}", date(not_after)),
        0 => format!("{what} expires today ({})", date(not_after)),
        1 => format!("{what} expires in 1 day ({})", date(not_after)),
        d => format!("{what} expires in {d} days ({})", date(not_after)),
    }
}

/// Whether this hook's event is the `certificates` relation going away.
fn certificates_broken(o: &Observed) -> bool {
    matches!(&o.event, Event::Relation { endpoint, kind: RelationKind::Broken }
        if endpoint == super::endpoints::CERTIFICATES)
}

/// Notes for the active status (expiring soon, relation gone) and a
/// blocked status for an expired certificate. Pure.
pub fn plan(o: &Observed, p: &mut Plan) {
    let Some(d) = &o.cert_dates else { return };
    let mut expired = Vec::new();
    for (what, not_after) in &d.certs {
        if *not_after < d.now {
            expired.push(left(what, d.now, *not_after));
        } else if days_left(d.now, *not_after) < WARN_DAYS {
            p.notes.push(left(what, d.now, *not_after));
        }
    }
    if !expired.is_empty() {
        p.status.push((
            StatusKind::Blocked,
            format!(
                "{}: etcd refuses peers and clients with it; have the certificate authority renew it (certificates relation)",
                expired.join("; ")
            ),
        ));
    }
    // update-status reads no goal-state (so `endpoints` knows no relation
    // then), but the certificates observer asks relation-ids itself.
    let related = o.endpoints.certificates || o.certs.relation.is_some();
    if !related || certificates_broken(o) {
        let first = d.certs.iter().map(|(_, t)| *t).min();
        p.notes.push(match first {
            Some(t) => format!(
                "certificates not related: TLS kept with the certificates on disk, which nothing renews (the first runs out on {}); relate certificates to have them renewed",
                date(t)
            ),
            None => "certificates not related: TLS kept with the certificates on disk, which nothing renews; relate certificates to have them renewed".into(),
        });
    }
}

/// The nrpe check's verdict on what observe would read (pure).
pub fn judge(d: &CertDates) -> Verdict {
    let verdict = |level, message: String| Verdict { level, message };
    if !d.unreadable.is_empty() {
        let list: Vec<String> = d
            .unreadable
            .iter()
            .map(|(w, e)| format!("{w} {e}"))
            .collect();
        return verdict(Level::Critical, list.join("; "));
    }
    let Some((what, t)) = d.certs.iter().min_by_key(|(_, t)| *t) else {
        return verdict(Level::Unknown, "no certificate found".into());
    };
    let days = days_left(d.now, *t);
    let level = if *t < d.now || days < CRITICAL_DAYS {
        Level::Critical
    } else if days < WARN_DAYS {
        Level::Warning
    } else {
        Level::Ok
    };
    let mut msg = left(what, d.now, *t);
    if level != Level::Ok {
        msg.push_str(&format!(
            " (WARNING under {WARN_DAYS} days, CRITICAL under {CRITICAL_DAYS})"
        ));
    }
    verdict(level, msg)
}

/// `etcd-charm nrpe-check cert-expiry`: the certificates of a unit whose
/// etcd.conf.yml serves https.
pub fn check(paths: &Paths) -> Verdict {
    let https = matches!(crate::layout::read_found_config(paths),
        Some(Ok(c)) if super::observed::serves_https(&c));
    if !https {
        return Verdict {
            level: Level::Ok,
            message: "etcd.conf.yml serves no https: no certificate in use".into(),
        };
    }
    judge(&observe(paths))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charm::plan_tests::fresh;

    /// 2026-12-01T11:00:00Z.
    const NOW: i64 = 1_796_122_800;

    fn dates(certs: &[(&str, i64)]) -> CertDates {
        CertDates {
            now: NOW,
            certs: certs.iter().map(|(w, t)| (w.to_string(), *t)).collect(),
            unreadable: vec![],
        }
    }

    fn tls_unit(d: CertDates) -> Observed {
        let mut o = fresh(false);
        o.endpoints.certificates = true;
        o.cert_dates = Some(d);
        o
    }

    #[test]
    fn dates_read_as_days() {
        assert_eq!(date(NOW), "2026-12-01");
        assert_eq!(
            left("x", NOW, NOW + 5 * DAY + 3600),
            "x expires in 5 days (2026-12-06)"
        );
        assert_eq!(left("x", NOW, NOW + DAY), "x expires in 1 day (2026-12-02)");
        assert_eq!(left("x", NOW, NOW + 60), "x expires today (2026-12-01)");
        assert_eq!(left("x", NOW, NOW - 60), "x expired on 2026-12-01");
    }

    #[test]
    fn a_certificate_close_to_its_end_is_in_the_active_status() {
        let mut p = Plan::default();
        plan(
            &tls_unit(dates(&[("server certificate", NOW + 300 * DAY)])),
            &mut p,
        );
        assert!(p.notes.is_empty() && p.status.is_empty(), "{p:?}");
        let o = tls_unit(dates(&[
            ("server certificate", NOW + 5 * DAY + 10),
            ("client certificate", NOW + 200 * DAY),
        ]));
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert_eq!(
            p.notes,
            ["server certificate expires in 5 days (2026-12-06)"]
        );
        assert!(p.status.is_empty());
    }

    #[test]
    fn an_expired_certificate_blocks() {
        let o = tls_unit(dates(&[("client certificate", NOW - 2 * DAY)]));
        let mut p = Plan::default();
        plan(&o, &mut p);
        let (k, m) = &p.status[0];
        assert_eq!(*k, StatusKind::Blocked);
        assert!(
            m.starts_with("client certificate expired on 2026-11-29"),
            "{m}"
        );
    }

    #[test]
    fn update_status_knows_the_relation_without_goal_state() {
        // update-status reads no goal-state: `endpoints` says nothing is
        // related, the certificates observer found the relation itself.
        let mut o = tls_unit(dates(&[("server certificate", NOW + 300 * DAY)]));
        o.event = Event::UpdateStatus;
        o.endpoints.certificates = false;
        o.certs.relation = Some("certificates:7".into());
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }

    #[test]
    fn certificates_gone_keeps_tls_and_says_nothing_renews() {
        let mut o = tls_unit(dates(&[
            ("server certificate", NOW + 300 * DAY),
            ("CA certificate", NOW + 900 * DAY),
        ]));
        o.endpoints.certificates = false;
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
        assert!(
            p.notes[0].starts_with("certificates not related: TLS kept"),
            "{:?}",
            p.notes
        );
        assert!(p.notes[0].contains("2027-09-27"), "{:?}", p.notes);
        assert!(p.status.is_empty());
        // Its broken hook, while goal-state may still list it.
        o.endpoints.certificates = true;
        o.event = Event::Relation {
            endpoint: "certificates".into(),
            kind: RelationKind::Broken,
        };
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert!(p.notes[0].contains("not related"), "{:?}", p.notes);
        // A plain unit has no certificate to speak of.
        let mut p = Plan::default();
        plan(&fresh(false), &mut p);
        assert!(p.notes.is_empty());
    }

    #[test]
    fn the_nrpe_verdict_by_days_left() {
        let v = judge(&dates(&[("server certificate", NOW + 100 * DAY)]));
        assert_eq!(v.level, Level::Ok);
        assert_eq!(
            v.line(),
            "ETCD OK: server certificate expires in 100 days (2027-03-11)"
        );
        let v = judge(&dates(&[
            ("server certificate", NOW + 100 * DAY),
            ("client certificate", NOW + 10 * DAY),
        ]));
        assert_eq!(v.level, Level::Warning);
        assert_eq!(
            v.line(),
            "ETCD WARNING: client certificate expires in 10 days (2026-12-11) (WARNING under 14 days, CRITICAL under 7)"
        );
        assert_eq!(
            judge(&dates(&[("s", NOW + 3 * DAY)])).level,
            Level::Critical
        );
        assert_eq!(judge(&dates(&[("s", NOW - DAY)])).level, Level::Critical);
        let mut d = dates(&[]);
        assert_eq!(judge(&d).level, Level::Unknown);
        d.unreadable
            .push(("server certificate".into(), "missing".into()));
        assert_eq!(
            judge(&d).line(),
            "ETCD CRITICAL: server certificate missing"
        );
    }

    /// Certificates made with rcgen, written where the Python charm kept
    /// them, read back through observe and judged.
    #[test]
    fn dates_are_read_from_the_files() {
        use rcgen::{CertificateParams, KeyPair};
        let cert = |y, m, d| {
            let mut p = CertificateParams::new(vec!["etcd".to_string()]).unwrap();
            p.not_after = rcgen::date_time_ymd(y, m, d);
            p.self_signed(&KeyPair::generate().unwrap()).unwrap().pem()
        };
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::new(dir.path());
        let f = files::TlsPaths::new(&paths);
        std::fs::create_dir_all(f.ca.parent().unwrap()).unwrap();
        std::fs::write(&f.ca, cert(2030, 1, 1)).unwrap();
        std::fs::write(&f.server_cert, cert(2026, 12, 10)).unwrap();
        let d = observe_at(&paths, NOW);
        assert_eq!(d.certs.len(), 2, "{d:?}");
        assert_eq!(
            d.unreadable,
            [("client certificate".to_string(), "missing".to_string())]
        );
        assert_eq!(judge(&d).level, Level::Critical);
        std::fs::write(&f.client_cert, cert(2027, 6, 1)).unwrap();
        let v = judge(&observe_at(&paths, NOW));
        assert_eq!(v.level, Level::Warning, "{}", v.line());
        assert!(v
            .message
            .starts_with("server certificate expires in 8 days (2026-12-10)"));
        let v = judge(&observe_at(&paths, NOW - 10 * DAY));
        assert_eq!(v.level, Level::Ok, "{}", v.line());
    }
}
