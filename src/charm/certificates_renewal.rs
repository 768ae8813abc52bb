//! When a certificate is renewed (issue 19.2). Pure: the dates come from
//! the certificate, the clock from observe (`Certs::now`).
//!
//! A certificate is due once it has passed 2/3 of its lifetime or is within
//! [`BEFORE_END`] (14 days) of its end, whichever comes first, but never
//! before half its lifetime: a certificate issued for less than four weeks
//! would else be due the moment it is issued and be asked for again in
//! every hook. Under v4 the renewal is a new CSR for the same key (a new
//! unique identifier in the subject makes it a new request), as the v4
//! library's requirer does; the provider answers it, and the new leaf from
//! the same CA is written as files only (etcd reads the pair on each
//! handshake: no restart, so no turn). The legacy (easyrsa) protocol has no
//! renewal: its request is the unit's names, and easyrsa answers it once.

use crate::tls;

/// Renewed at the latest this long before the end.
pub const BEFORE_END: i64 = 14 * 86_400;

/// The time (seconds since the epoch) from which a certificate valid from
/// `not_before` to `not_after` is due for renewal.
pub fn renew_at(not_before: i64, not_after: i64) -> i64 {
    let life = (not_after - not_before).max(0);
    let two_thirds = not_before + life * 2 / 3;
    let two_weeks = not_after - BEFORE_END;
    two_thirds.min(two_weeks).max(not_before + life / 2)
}

pub fn due(not_before: i64, not_after: i64, now: i64) -> bool {
    now >= renew_at(not_before, not_after)
}

/// A certificate in PEM that is due at `now`; one that does not parse is
/// not (the expiry status names it).
pub fn pem_due(pem: &str, now: i64) -> bool {
    tls::cert::parse(pem).is_ok_and(|i| due(i.not_before, i.not_after, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    const DAY: i64 = 86_400;

    #[test]
    fn a_long_certificate_is_renewed_at_two_thirds() {
        // 90 days: 2/3 is day 60, 14 days before the end day 76.
        assert_eq!(renew_at(0, 90 * DAY), 60 * DAY);
        assert!(!due(0, 90 * DAY, 60 * DAY - 1));
        assert!(due(0, 90 * DAY, 60 * DAY));
        // A year: day 243 and a third.
        assert_eq!(renew_at(0, 365 * DAY), 365 * DAY * 2 / 3);
    }

    #[test]
    fn a_month_long_certificate_is_renewed_fourteen_days_before_its_end() {
        // 30 days: 2/3 is day 20, the 14 days come first (day 16).
        assert_eq!(renew_at(0, 30 * DAY), 16 * DAY);
        assert!(!due(0, 30 * DAY, 16 * DAY - 1));
        assert!(due(0, 30 * DAY, 16 * DAY));
    }

    #[test]
    fn a_short_certificate_waits_half_its_lifetime() {
        // 20 days: 14 days before the end is day 6, before half (day 10).
        assert_eq!(renew_at(0, 20 * DAY), 10 * DAY);
        // Minutes: never due at once.
        let t0 = 1_700_000_000;
        assert_eq!(renew_at(t0, t0 + 240), t0 + 120);
        assert!(!due(t0, t0 + 240, t0 + 1));
        assert!(due(t0, t0 + 240, t0 + 200));
    }

    #[test]
    fn an_expired_certificate_is_due() {
        assert!(due(0, 90 * DAY, 91 * DAY));
        // Dates the wrong way round: due at its start.
        assert!(due(10, 0, 10));
    }

    #[test]
    fn unreadable_pem_is_not_due() {
        assert!(!pem_due("not a certificate", i64::MAX));
    }
}
