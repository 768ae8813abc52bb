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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_hosts_are_bracketed() {
        assert_eq!(http("fd00::1", 2379), "http://[fd00::1]:2379");
        assert_eq!(http("[fd00::1]", 2379), "http://[fd00::1]:2379");
        assert_eq!(http("10.0.0.5", 2380), "http://10.0.0.5:2380");
        assert_eq!(url("https", "::1", 1), "https://[::1]:1");
        assert_eq!(http("etcd.example", 2379), "http://etcd.example:2379");
    }
}
