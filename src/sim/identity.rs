//! Names and addresses derived from the model directory's canonical path, so
//! two models on one machine never share a unit address.

use std::path::Path;

/// FNV-1a: small, stable across builds and platforms.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `X.Y` with X in 100..=250 (clear of 127.0.0.x and the 127.77–127.99 range
/// other tests use) and Y in 0..=255.
pub fn address_prefix(model_root: &Path) -> String {
    let h = fnv1a(model_root.as_os_str().as_encoded_bytes());
    let x = 100 + (h % 151);
    let y = (h >> 16) % 256;
    format!("{x}.{y}")
}

/// The `X.Y` of a range given as `127.X.Y.0/24` (or `127.X.Y`): a test
/// runner hands each model a range no concurrent model holds, where a hash
/// of the directory could collide.
pub fn range_prefix(range: &str) -> crate::sim::error::Result<String> {
    let bare = range.strip_suffix(".0/24").unwrap_or(range);
    let parts: Vec<&str> = bare.split('.').collect();
    match parts.as_slice() {
        ["127", x, y] if [x, y].iter().all(|p| p.parse::<u8>().is_ok()) => Ok(format!("{x}.{y}")),
        _ => crate::sim::error::bail!("--address-range {range:?}: a loopback /24, as 127.X.Y.0/24"),
    }
}

/// 127.X.Y.N with N = machine number + 1.
pub fn unit_address(prefix: &str, number: u32) -> Option<String> {
    (number < 254).then(|| format!("127.{prefix}.{}", number + 1))
}

/// A UUID-shaped identifier for the model.
pub fn model_uuid(model_root: &Path) -> String {
    let a = fnv1a(model_root.as_os_str().as_encoded_bytes());
    let b = fnv1a(&a.to_le_bytes());
    let hex = format!("{a:016x}{b:016x}");
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

/// The model name: the directory's name, as Juju would accept it.
pub fn model_name(model_root: &Path) -> String {
    let base = model_root
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let name: String = base
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let name = name.trim_matches('-').to_string();
    if name.is_empty() {
        "jujusim".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_range_is_a_loopback_24() {
        assert_eq!(range_prefix("127.120.7.0/24").unwrap(), "120.7");
        assert_eq!(range_prefix("127.120.7").unwrap(), "120.7");
        for bad in [
            "10.1.2.0/24",
            "127.300.1.0/24",
            "127.1.0/24",
            "127.1.2.0/16",
            "",
        ] {
            assert!(range_prefix(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn prefix_stays_in_range() {
        for i in 0..500 {
            let p = address_prefix(Path::new(&format!("/tmp/model-{i}")));
            let x: u32 = p.split('.').next().unwrap().parse().unwrap();
            assert!((100..=250).contains(&x), "{p}");
        }
    }

    #[test]
    fn distinct_models_distinct_prefixes() {
        assert_ne!(
            address_prefix(Path::new("/tmp/a")),
            address_prefix(Path::new("/tmp/b"))
        );
    }

    #[test]
    fn unit_numbers_map_to_host_octet() {
        assert_eq!(unit_address("120.7", 0).as_deref(), Some("127.120.7.1"));
        assert_eq!(unit_address("120.7", 254), None);
    }

    #[test]
    fn uuid_shape() {
        let u = model_uuid(Path::new("/tmp/x"));
        assert_eq!(u.len(), 36);
        assert_eq!(u.matches('-').count(), 4);
    }
}
