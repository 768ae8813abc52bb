//! Crash points for tests: with `ETCD_CHARM_FAILPOINT=after:<step>` the
//! process dies at once (as if killed) right after that step, so a test can
//! prove that running the hook again converges. Unset in production.

/// Kills the process when `name` is the armed failpoint. With
/// `ETCD_CHARM_FAILPOINT_ONCE=<path>` it fires only while that file does not
/// exist, and creates it first, so a retried hook gets past it.
/// `ETCD_CHARM_FAILPOINT_FILE=<path>` arms the name that file holds
/// instead (a test re-arms between hooks of one model).
pub fn hit(name: &str) {
    let from_file = std::env::var_os("ETCD_CHARM_FAILPOINT_FILE")
        .and_then(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string());
    if let Some(armed) = from_file.or_else(|| std::env::var("ETCD_CHARM_FAILPOINT").ok()) {
        if armed == name {
            if let Some(marker) = std::env::var_os("ETCD_CHARM_FAILPOINT_ONCE") {
                if std::path::Path::new(&marker).exists() || std::fs::write(&marker, name).is_err()
                {
                    return;
                }
            }
            eprintln!("failpoint {name}: exiting as if killed");
            // SIGKILL-like: no destructors, no flush of anything pending.
            std::process::exit(137);
        }
    }
}
