//! URLs from an address and a port. An IPv6 address goes in brackets
//! (`http://[fd00::1]:2379`); a bare `fd00::1:2379` means nothing to etcd.

/// `scheme://host:port`, bracketing an IPv6 host (one already bracketed
/// is left as it is).
pub fn url(scheme: &str, host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("{scheme}://[{host}]:{port}")
    } else {
        format!("{scheme}://{host}:{port}")
    }
}

/// The plain-HTTP URL every etcd endpoint of this charm uses today.
pub fn http(host: &str, port: u16) -> String {
    url("http", host, port)
}

/// A listener's host that stays on this machine: the unit's own address
/// when it is an IPv4 loopback one (units sharing a host in tests each have
/// their own), else 127.0.0.1. Never a routable address.
pub fn own_loopback(unit_address: &str) -> String {
    match unit_address.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_loopback() && ip.is_ipv4() => ip.to_string(),
        _ => "127.0.0.1".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_loopback_is_never_routable() {
        assert_eq!(own_loopback("127.0.3.4"), "127.0.3.4");
        assert_eq!(own_loopback("10.0.0.5"), "127.0.0.1");
        assert_eq!(own_loopback("::1"), "127.0.0.1");
        assert_eq!(own_loopback("etcd-0.local"), "127.0.0.1");
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        assert_eq!(http("fd00::1", 2379), "http://[fd00::1]:2379");
        assert_eq!(http("[fd00::1]", 2379), "http://[fd00::1]:2379");
        assert_eq!(http("10.0.0.5", 2380), "http://10.0.0.5:2380");
        assert_eq!(url("https", "::1", 1), "https://[::1]:1");
        assert_eq!(http("etcd.example", 2379), "http://etcd.example:2379");
    }
}
