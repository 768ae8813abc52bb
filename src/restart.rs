//! When a crashed etcd is started again: one policy, so the systemd drop-in
//! (`render`) and the direct supervisor (`service`) behave alike. It lives
//! below both, so neither has to import the other for it.

use std::time::Duration;

/// systemd's `Restart=on-failure`, `RestartSec=`, `StartLimitBurst=` and
/// `StartLimitIntervalSec=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Pause between a failure and the next start.
    pub delay: Duration,
    /// At most this many starts within `interval`; then give up.
    pub burst: u32,
    pub interval: Duration,
}

/// Only failures restart: a member removed from its cluster exits 0 and
/// must stay down.
pub const RESTART_POLICY: RestartPolicy = RestartPolicy {
    delay: Duration::from_secs(2),
    burst: 5,
    interval: Duration::from_secs(60),
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_policy_can_trip_its_start_limit() {
        // With the limit wider than burst × delay a crash loop ends in
        // "giving up" instead of restarting forever.
        let p = RESTART_POLICY;
        assert!(p.delay * p.burst < p.interval);
    }
}
