//! open-port, close-port, opened-ports. Port changes are staged and land
//! only when the hook exits 0.

use super::args::{self, option, switch, usage, FORMAT};
use super::format::render;
use super::unit::no_positional;
use super::Call;
use crate::sim::error::Result;

/// `2379`, `2379/tcp`, `8000-8100/udp`, `icmp` → the canonical form.
fn port_spec(raw: &str) -> Result<String> {
    if raw == "icmp" {
        return Ok(raw.into());
    }
    let (range, proto) = raw.split_once('/').unwrap_or((raw, "tcp"));
    if !matches!(proto, "tcp" | "udp") {
        return Err(usage(format!(
            "invalid protocol {proto:?}: expected tcp or udp"
        )));
    }
    let (from, to) = range.split_once('-').unwrap_or((range, range));
    let parse = |s: &str| s.parse::<u16>().ok().filter(|p| *p > 0);
    match (parse(from), parse(to)) {
        (Some(a), Some(b)) if a == b => Ok(format!("{a}/{proto}")),
        (Some(a), Some(b)) if a < b => Ok(format!("{a}-{b}/{proto}")),
        _ => Err(usage(format!("invalid port or range {raw:?}"))),
    }
}

fn port_call(call: &mut Call, argv: &[String], open: bool) -> Result<String> {
    let p = args::parse(argv, &[FORMAT, option(&["endpoints"])])?;
    let [raw] = p.positional.as_slice() else {
        return Err(usage(
            "usage: open-port|close-port <port>[/<protocol>] or <from>-<to>[/<protocol>] or icmp",
        ));
    };
    let spec = port_spec(raw)?;
    call.context_mut().staged.ports.push((open, spec));
    Ok(String::new())
}

pub fn open_port(call: &mut Call, argv: &[String]) -> Result<String> {
    port_call(call, argv, true)
}

pub fn close_port(call: &mut Call, argv: &[String]) -> Result<String> {
    port_call(call, argv, false)
}

pub fn opened_ports(call: &mut Call, argv: &[String]) -> Result<String> {
    let p = args::parse(argv, &[FORMAT, switch(&["endpoints"])])?;
    no_positional(&p)?;
    let mut ports = call.model.unit(&call.unit)?.ports.clone();
    for (open, port) in &call.context().staged.ports {
        if *open {
            ports.insert(port.clone());
        } else {
            ports.remove(port);
        }
    }
    render(&serde_json::to_value(ports)?, p.format())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports() {
        assert_eq!(port_spec("2379").unwrap(), "2379/tcp");
        assert_eq!(port_spec("53/udp").unwrap(), "53/udp");
        assert_eq!(port_spec("8000-8100/tcp").unwrap(), "8000-8100/tcp");
        assert_eq!(port_spec("icmp").unwrap(), "icmp");
        assert!(port_spec("0").is_err());
        assert!(port_spec("80/sctp").is_err());
        assert!(port_spec("9-3").is_err());
    }
}
