//! The bases the charm declares and the base of the machine it is on, so
//! the dry run refuses what `juju refresh` would: a charm must list the
//! machine's base (focal estates of the Python charm among them).

use serde::Deserialize;

/// The manifest `packaging/pack` ships (it appends only the build stamp).
pub const MANIFEST: &str = include_str!("../../packaging/manifest.yaml");

#[derive(Deserialize)]
struct Manifest {
    bases: Vec<Base>,
}

#[derive(Deserialize)]
struct Base {
    name: String,
    channel: String,
}

/// `ubuntu@22.04`, … as Juju names them.
pub fn ours() -> Vec<String> {
    let m: Manifest = serde_yaml::from_str(MANIFEST).expect("packaging/manifest.yaml parses");
    m.bases
        .iter()
        .map(|b| format!("{}@{}", b.name, b.channel))
        .collect()
}

/// The machine's base from its os-release, as Juju names it; None when
/// the file does not say (a hand-made root, a development machine).
pub fn machine_base(os_release: &str) -> Option<String> {
    let field = |key: &str| {
        os_release.lines().find_map(|l| {
            let v = l.trim().strip_prefix(key)?.strip_prefix('=')?;
            Some(v.trim().trim_matches(['"', '\'']).to_string())
        })
    };
    let (id, version) = (field("ID")?, field("VERSION_ID")?);
    (!id.is_empty() && !version.is_empty()).then(|| format!("{id}@{version}"))
}

/// Juju's refusal for a machine whose base the charm does not list. Only
/// Ubuntu machines are judged: Juju deploys this charm on nothing else,
/// and a development machine's Debian says nothing about a refresh.
pub fn refusal(machine: Option<&str>, bases: &[String]) -> Option<String> {
    let m = machine?;
    (m.starts_with("ubuntu@") && !bases.iter().any(|b| b == m)).then(|| {
        format!(
            "base {m:?} not supported by charm, the charm supported bases are: {}",
            bases.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_charm_declares_focal_jammy_and_noble() {
        assert_eq!(ours(), ["ubuntu@20.04", "ubuntu@22.04", "ubuntu@24.04"]);
    }

    #[test]
    fn the_machine_base_is_read_from_os_release() {
        let focal = "NAME=\"Ubuntu\"\nVERSION_ID=\"20.04\"\nID=ubuntu\nID_LIKE=debian\n";
        assert_eq!(machine_base(focal).as_deref(), Some("ubuntu@20.04"));
        assert_eq!(machine_base("ID=ubuntu\n"), None);
        assert_eq!(machine_base(""), None);
    }

    #[test]
    fn a_base_the_charm_does_not_list_is_refused_as_juju_says_it() {
        let ours = ours();
        assert_eq!(refusal(Some("ubuntu@20.04"), &ours), None);
        assert_eq!(refusal(None, &ours), None);
        assert_eq!(refusal(Some("debian@12"), &ours), None);
        let r = refusal(Some("ubuntu@18.04"), &ours).unwrap();
        assert_eq!(
            r,
            "base \"ubuntu@18.04\" not supported by charm, the charm supported bases are: \
             ubuntu@20.04, ubuntu@22.04, ubuntu@24.04"
        );
    }
}
