//! How long this unit may act as leader without asking again. Juju
//! guarantees leadership for ~30 s after `is-leader` answered true; a
//! leader-only membership step (add, promote, remove, record) that starts
//! later than [`RECHECK_AFTER`] after that answer asks again first, so a
//! unit that lost the lease mid-hook leaves the change to the new leader.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Safely inside Juju's ~30 s lease, leaving room for the step itself.
pub const RECHECK_AFTER: Duration = Duration::from_secs(20);

pub struct Lease {
    /// When is-leader last answered true (taken just before the call).
    confirmed: Cell<Option<Instant>>,
    clock: Box<dyn Fn() -> Instant>,
}

impl Lease {
    pub fn new(confirmed: Option<Instant>) -> Lease {
        Lease::with_clock(confirmed, Box::new(Instant::now))
    }

    /// For tests: time comes from `clock`.
    pub fn with_clock(confirmed: Option<Instant>, clock: Box<dyn Fn() -> Instant>) -> Lease {
        Lease {
            confirmed: Cell::new(confirmed),
            clock,
        }
    }

    /// True when the last confirmation is too old to act on.
    pub fn needs_check(&self) -> bool {
        match self.confirmed.get() {
            None => true,
            Some(t) => (self.clock)().saturating_duration_since(t) > RECHECK_AFTER,
        }
    }

    /// Still leader? Asks `is_leader` only when [`Lease::needs_check`];
    /// a true answer renews the lease from the moment of asking.
    pub fn still_leader<E>(&self, is_leader: impl FnOnce() -> Result<bool, E>) -> Result<bool, E> {
        if !self.needs_check() {
            return Ok(true);
        }
        let asked = (self.clock)();
        let yes = is_leader()?;
        if yes {
            self.confirmed.set(Some(asked));
        }
        Ok(yes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    fn clocked(start: Instant) -> (Lease, Rc<Cell<Instant>>) {
        let now = Rc::new(Cell::new(start));
        let n = now.clone();
        (
            Lease::with_clock(Some(start), Box::new(move || n.get())),
            now,
        )
    }

    #[test]
    fn within_20_seconds_no_call_is_made() {
        let t0 = Instant::now();
        let (lease, now) = clocked(t0);
        now.set(t0 + Duration::from_secs(19));
        let ok: Result<bool, ()> = lease.still_leader(|| panic!("no is-leader call"));
        assert_eq!(ok, Ok(true));
    }

    #[test]
    fn after_20_seconds_it_asks_and_a_yes_renews_the_lease() {
        let t0 = Instant::now();
        let (lease, now) = clocked(t0);
        now.set(t0 + Duration::from_secs(21));
        assert!(lease.needs_check());
        let calls = Cell::new(0);
        let ask = || -> Result<bool, ()> {
            calls.set(calls.get() + 1);
            Ok(true)
        };
        assert_eq!(lease.still_leader(ask), Ok(true));
        assert_eq!(calls.get(), 1);
        now.set(t0 + Duration::from_secs(35));
        assert!(!lease.needs_check(), "renewed at 21 s");
        now.set(t0 + Duration::from_secs(42));
        assert!(lease.needs_check());
    }

    #[test]
    fn a_lost_lease_says_so_and_is_asked_again_next_time() {
        let t0 = Instant::now();
        let (lease, now) = clocked(t0);
        now.set(t0 + Duration::from_secs(25));
        assert_eq!(lease.still_leader(|| Ok::<_, ()>(false)), Ok(false));
        assert!(lease.needs_check());
        assert_eq!(
            lease.still_leader(|| Err::<bool, _>("tool failed")),
            Err("tool failed")
        );
    }

    #[test]
    fn never_confirmed_always_asks() {
        let lease = Lease::with_clock(None, Box::new(Instant::now));
        assert!(lease.needs_check());
    }
}
