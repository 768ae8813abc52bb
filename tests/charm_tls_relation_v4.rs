//! Issue 11, items 1–2 with the v4 stand-in CA (tests/charms/v4-ca): each
//! unit's own RSA key and CSR, the leader's leaf shared as the one client
//! pair; the same plain → TLS move under a writer
//! (tests/tls_relation_support).

mod tls_relation_support;
mod upgrade_support;
mod writer_support;
use tls_relation_support::*;

#[test]
fn a_plain_cluster_related_to_a_v4_ca_moves_to_tls_one_member_at_a_time() {
    let (m, units, f0, _eps) = move_to_tls("v4-ca");
    // Each unit's server key is its own; the client pair is one.
    let key = |u: &str| std::fs::read_to_string(tls_paths(&m, u).server_key).unwrap();
    assert_ne!(
        key(&units[0]),
        key(&units[1]),
        "two units share a server key"
    );
    assert!(f0.client_cert.exists());
}
