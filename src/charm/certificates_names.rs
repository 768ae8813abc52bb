//! The names our server certificate asks for: the db and cluster ingress
//! addresses, the bind addresses of both endpoints (what etcd listens on
//! when `bind_to_all_interfaces` is false, and the address a peer may dial
//! from), the hostname and loopback (`tls::sans`).

use super::observed::{tolerate, Mode, Observed, CLIENT_ENDPOINT, PEER_ENDPOINT};
use crate::error::Result;
use crate::hooktools::{HookTools, Invocation};
use crate::tls;

/// Every `bind-addresses[].addresses[].value` of a `network-get` answer
/// (Juju 2.x's `address` too). What does not parse gives none: the
/// ingress address, read strictly elsewhere, is always in the SANs.
pub fn parse_bind_addresses(out: &str) -> Vec<String> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(out) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for b in v["bind-addresses"].as_array().into_iter().flatten() {
        for a in b["addresses"].as_array().into_iter().flatten() {
            let text = a["value"].as_str().or_else(|| a["address"].as_str());
            if let Some(t) = text.filter(|t| !t.is_empty()) {
                found.push(t.to_string());
            }
        }
    }
    found
}

/// The bind addresses of the cluster and db endpoints.
pub(super) fn observe_binds(
    tools: &HookTools,
    mode: Mode,
    unread: &mut Vec<String>,
) -> Result<Vec<String>> {
    let mut all = Vec::new();
    for ep in [PEER_ENDPOINT, CLIENT_ENDPOINT] {
        let out = tolerate(
            mode,
            unread,
            &format!("the bind addresses of {ep} (network-get {ep})"),
            || tools.run(&Invocation::network_get(ep)),
            String::new,
        )?;
        all.extend(parse_bind_addresses(&out));
    }
    all.sort();
    all.dedup();
    Ok(all)
}

/// The common name and SANs our server certificate must carry: the
/// cluster's peer CN (certificates_peer.rs) once the token is known, the
/// unit's address before (as the Python charm asked).
pub(super) fn names(o: &Observed, token: Option<&str>) -> (String, Vec<String>) {
    let sans = tls::sans::unit_sans(
        [o.address.as_str(), o.client_address.as_str()]
            .into_iter()
            .chain(o.certs.binds.iter().map(String::as_str)),
        &o.certs.hostname,
    );
    let cn = match token {
        Some(t) => super::certificates_peer::for_token(t),
        None => tls::sans::common_name(&o.client_address, &sans),
    };
    (cn, sans)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_of_both_generations_and_nothing_from_junk() {
        let out = r#"{"bind-addresses":[{"interface-name":"eth0","addresses":[
            {"value":"10.0.0.5","cidr":"10.0.0.0/24"},{"address":"fe80::1"}]},
            {"interface-name":"eth1","addresses":[{"value":""}]}],
            "ingress-addresses":["203.0.113.9"]}"#;
        assert_eq!(parse_bind_addresses(out), vec!["10.0.0.5", "fe80::1"]);
        assert!(parse_bind_addresses("not json").is_empty());
        assert!(parse_bind_addresses(r#"{"ingress-addresses":["1.2.3.4"]}"#).is_empty());
    }

    #[test]
    fn server_sans_carry_the_bind_addresses_beside_the_ingress_ones() {
        let mut o = crate::charm::plan_tests::fresh(false);
        o.address = "203.0.113.9".into();
        o.client_address = "203.0.113.10".into();
        o.certs.hostname = "juju-abc-0".into();
        o.certs.binds = vec!["10.0.0.5".into(), "0.0.0.0".into(), "[fd00::5]".into()];
        let (cn, sans) = names(&o, None);
        assert_eq!(cn, "203.0.113.10", "before the token is known");
        assert_eq!(
            names(&o, Some("TOKEN1")).0,
            crate::charm::certificates_peer::for_token("TOKEN1")
        );
        for want in [
            "10.0.0.5",
            "fd00::5",
            "203.0.113.9",
            "203.0.113.10",
            "juju-abc-0",
            "127.0.0.1",
            "::1",
        ] {
            assert!(
                sans.contains(&want.to_string()),
                "{want} missing from {sans:?}"
            );
        }
        assert!(
            !sans.contains(&"0.0.0.0".to_string()),
            "the wildcard is no name"
        );
    }
}
