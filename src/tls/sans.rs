//! The names a unit's server certificate must carry: every address it
//! serves on (db and cluster ingress, bind addresses), its hostname and
//! the loopback addresses etcdctl and the charm use locally. etcd checks
//! a peer's certificate against the peer's IP, so a missing address is a
//! refused peer, not a warning.

use std::net::IpAddr;

/// One canonical SAN: IPs in their canonical text (brackets and a zone
/// stripped), names lower-cased. None for what is no name at all.
fn canonical(s: &str) -> Option<String> {
    let s = s.trim();
    let s = s
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    match s.parse::<IpAddr>() {
        Ok(ip) if ip.is_unspecified() => None,
        Ok(ip) => Some(ip.to_string()),
        Err(_) if s.contains(['/', ' ', ',', '%']) => None,
        Err(_) => Some(s.to_ascii_lowercase()),
    }
}

/// The SAN list for a unit: `addresses` (ingress and bind addresses of
/// every endpoint it serves on; IPv4, IPv6, or names), `hostname`, and
/// 127.0.0.1 and ::1. Deduplicated and sorted, so the same unit always
/// asks for the same names (a changed list means a new request). The
/// wildcard bind address 0.0.0.0/:: is no name and is left out.
pub fn unit_sans<'a>(
    addresses: impl IntoIterator<Item = &'a str>,
    hostname: &'a str,
) -> Vec<String> {
    let mut out: Vec<String> = addresses
        .into_iter()
        .chain([hostname, "127.0.0.1", "::1"])
        .filter_map(canonical)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The common name the Python charm used: the unit's public address.
/// X.509 caps a CN at 64 characters; a longer address (a long DNS name)
/// falls back to the first SAN that fits, which is also in the SANs.
pub fn common_name(public_address: &str, sans: &[String]) -> String {
    let cn = canonical(public_address).unwrap_or_default();
    if !cn.is_empty() && cn.len() <= 64 {
        return cn;
    }
    sans.iter()
        .find(|s| s.len() <= 64)
        .cloned()
        .unwrap_or_else(|| "127.0.0.1".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_address_once_sorted_with_loopback() {
        let got = unit_sans(
            [
                "10.0.0.5",
                "10.0.0.5",
                "[fd00::0:5]",
                "fd00::5",
                "0.0.0.0",
                "::",
                "",
                "192.168.1.9",
            ],
            "Etcd-0",
        );
        assert_eq!(
            got,
            [
                "10.0.0.5",
                "127.0.0.1",
                "192.168.1.9",
                "::1",
                "etcd-0",
                "fd00::5"
            ]
        );
    }

    #[test]
    fn common_name_is_the_public_address_when_it_fits() {
        let sans = unit_sans(["10.0.0.5"], "h");
        assert_eq!(common_name("10.0.0.5", &sans), "10.0.0.5");
        assert_eq!(common_name("[fd00::1]", &sans), "fd00::1");
        let long = format!("{}.example", "a".repeat(70));
        assert_eq!(common_name(&long, &sans), "10.0.0.5");
    }
}
