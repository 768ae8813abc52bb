//! The nrpe-external-master interface, rendered (pure): which checks this
//! unit offers, the two files per check the nrpe subordinate and Nagios read,
//! and the `monitors` YAML in the relation. The file layout is the one the
//! Python charm (through charmhelpers' nrpe module) left on machines, so a
//! refresh overwrites its files in place and Nagios keeps its service names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where nagios-nrpe-server reads its command definitions.
pub const NRPE_DIR: &str = "/etc/nagios/nrpe.d";
/// Where the nrpe subordinate collects service definitions for Nagios.
pub const EXPORT_DIR: &str = "/var/lib/nagios/export";

/// One check: a Nagios service and the command nrpe runs for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The short name (`etcd-alarms`); the nrpe command is `check_<name>`.
    pub name: &'static str,
    pub description: &'static str,
    /// The argument of `etcd-charm nrpe-check`.
    pub kind: &'static str,
}

impl Check {
    pub fn command(&self) -> String {
        format!("check_{}", self.name)
    }
}

/// Every check name this charm may have written (also those not offered on
/// this backend), so files of ours that are no longer wanted are found.
pub const ALL_NAMES: [&str; 4] = [
    "etcd-health",
    "etcd-alarms",
    "snap.etcd.etcd",
    "etcd-cert-expiry",
];

/// The checks this unit offers, and `etcd-cert-expiry` (WARNING two weeks,
/// CRITICAL one week before a certificate runs out: expiry.rs) on a unit
/// that serves TLS.
pub fn checks_for(snap_backend: bool, tls: bool) -> Vec<Check> {
    let mut v = checks(snap_backend);
    if tls {
        v.push(Check {
            name: "etcd-cert-expiry",
            description: "the TLS certificates are not about to expire",
            kind: "cert-expiry",
        });
    }
    v
}

/// The checks every unit offers. `etcd-alarms` and `snap.etcd.etcd` keep
/// the Python charm's names.
pub fn checks(snap_backend: bool) -> Vec<Check> {
    let mut v = vec![
        Check {
            name: "etcd-health",
            description: "etcd member answers and the cluster has a leader",
            kind: "health",
        },
        Check {
            name: "etcd-alarms",
            description: "no etcd alarm is raised",
            kind: "alarms",
        },
    ];
    if snap_backend {
        v.push(Check {
            name: "snap.etcd.etcd",
            description: "systemd unit snap.etcd.etcd is active",
            kind: "systemd",
        });
    }
    v
}

/// Quotes a word for the shell nrpe runs commands through, when needed.
fn sh_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The command line nrpe runs: our own binary. `root` is passed only when
/// the unit's paths live under a root other than `/` (tests), since nrpe
/// does not pass the hook's environment on.
pub fn command_line(binary: &Path, check: &Check, root: &Path) -> String {
    let mut cmd = format!(
        "{} nrpe-check {}",
        sh_word(&binary.to_string_lossy()),
        check.kind
    );
    if root != Path::new("/") {
        cmd.push_str(&format!(" --root {}", sh_word(&root.to_string_lossy())));
    }
    cmd
}

/// `/etc/nagios/nrpe.d/check_<name>.cfg`.
pub fn nrpe_file(name: &str) -> PathBuf {
    Path::new(NRPE_DIR).join(format!("check_{name}.cfg"))
}

/// `/var/lib/nagios/export/service__<host>_check_<name>.cfg`; a host name
/// never leaves the export dir (`/` and other odd characters become `_`).
pub fn export_file(host: &str, name: &str) -> PathBuf {
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    Path::new(EXPORT_DIR).join(format!("service__{host}_check_{name}.cfg"))
}

/// Text that can stand in one line of a Nagios config file.
pub fn one_line(s: &str) -> bool {
    !s.chars().any(char::is_control)
}

/// Whether a file name in the export dir is one of ours (any host name).
pub fn is_our_export(file_name: &str) -> bool {
    file_name.starts_with("service__")
        && ALL_NAMES
            .iter()
            .any(|n| file_name.ends_with(&format!("_check_{n}.cfg")))
}

pub fn render_nrpe(check: &Check, command_line: &str, servicegroups: &str) -> String {
    format!(
        "# check {name}\n\
         # Written by the etcd charm; it rewrites this file on every change.\n\
         # servicegroups: {servicegroups}\n\
         command[{cmd}]={command_line}\n",
        name = check.name,
        cmd = check.command(),
    )
}

pub fn render_export(check: &Check, host: &str, servicegroups: &str) -> String {
    format!(
        "# Written by the etcd charm for the nrpe subordinate; do not edit.\n\
         define service {{\n\
         \x20   use                             active-service\n\
         \x20   host_name                       {host}\n\
         \x20   service_description             {host}[{name}] {description}\n\
         \x20   check_command                   check_nrpe!{cmd}\n\
         \x20   servicegroups                   {servicegroups}\n\
         }}\n",
        name = check.name,
        description = check.description,
        cmd = check.command(),
    )
}

/// `monitors: {remote: {nrpe: {<name>: {command: check_<name>}}}}` as YAML.
pub fn render_monitors(checks: &[Check]) -> String {
    type Map<V> = BTreeMap<String, V>;
    let nrpe: Map<Map<String>> = checks
        .iter()
        .map(|c| {
            let mut m = Map::new();
            m.insert("command".to_string(), c.command());
            (c.name.to_string(), m)
        })
        .collect();
    let mut remote = Map::new();
    remote.insert("nrpe".to_string(), nrpe);
    let mut monitors = Map::new();
    monitors.insert("remote".to_string(), remote);
    let mut top = Map::new();
    top.insert("monitors".to_string(), monitors);
    // A map of strings always serializes.
    serde_yaml::to_string(&top).expect("a string map serializes to YAML")
}

/// The Nagios host name: the subordinate's `nagios_hostname`, else
/// `<nagios_context>-<unit with / as ->` (`juju-etcd-0`).
pub fn host_name(remote_hostname: Option<&str>, context: &str, unit: &str) -> String {
    match remote_hostname.map(str::trim).filter(|h| !h.is_empty()) {
        Some(h) => h.to_string(),
        None => format!("{context}-{}", unit.replace('/', "-")),
    }
}

/// `nagios_servicegroups`, else `nagios_context`.
pub fn service_groups(servicegroups: &str, context: &str) -> String {
    if servicegroups.trim().is_empty() {
        context.to_string()
    } else {
        servicegroups.trim().to_string()
    }
}

/// Every file for `checks` on `host`: canonical path → text.
pub fn files(
    checks: &[Check],
    host: &str,
    servicegroups: &str,
    binary: &Path,
    root: &Path,
) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    for c in checks {
        let cmd = command_line(binary, c, root);
        out.insert(nrpe_file(c.name), render_nrpe(c, &cmd, servicegroups));
        out.insert(
            export_file(host, c.name),
            render_export(c, host, servicegroups),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nrpe_file_defines_the_command_with_its_servicegroups() {
        let c = &checks(false)[1];
        let cmd = command_line(Path::new("/charm/bin/etcd-charm"), c, Path::new("/"));
        assert_eq!(cmd, "/charm/bin/etcd-charm nrpe-check alarms");
        let text = render_nrpe(c, &cmd, "juju,k8s");
        assert!(text.contains("\n# servicegroups: juju,k8s\n"), "{text}");
        assert!(
            text.ends_with(
                "\ncommand[check_etcd-alarms]=/charm/bin/etcd-charm nrpe-check alarms\n"
            ),
            "{text}"
        );
        assert_eq!(
            nrpe_file(c.name),
            PathBuf::from("/etc/nagios/nrpe.d/check_etcd-alarms.cfg")
        );
    }

    #[test]
    fn command_names_a_test_root_and_quotes_odd_paths() {
        let c = &checks(false)[0];
        assert_eq!(
            command_line(Path::new("/a b/etcd-charm"), c, Path::new("/tmp/r")),
            "'/a b/etcd-charm' nrpe-check health --root /tmp/r"
        );
    }

    #[test]
    fn export_file_is_a_nagios_service_on_the_host() {
        let c = &checks(true)[2];
        assert_eq!(c.name, "snap.etcd.etcd");
        let text = render_export(c, "juju-etcd-0", "juju");
        for line in [
            "define service {",
            "    host_name                       juju-etcd-0",
            "    check_command                   check_nrpe!check_snap.etcd.etcd",
            "    servicegroups                   juju",
            "}",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
        }
        assert_eq!(
            export_file("juju-etcd-0", c.name),
            PathBuf::from("/var/lib/nagios/export/service__juju-etcd-0_check_snap.etcd.etcd.cfg")
        );
        assert!(is_our_export(
            "service__other-host_check_snap.etcd.etcd.cfg"
        ));
        assert!(!is_our_export("service__h_check_disk.cfg"));
    }

    #[test]
    fn monitors_yaml_lists_every_check() {
        let y = render_monitors(&checks(false));
        assert_eq!(
            y,
            "monitors:\n  remote:\n    nrpe:\n      etcd-alarms:\n        command: check_etcd-alarms\n      etcd-health:\n        command: check_etcd-health\n"
        );
        let v: serde_yaml::Value = serde_yaml::from_str(&y).unwrap();
        assert_eq!(
            v["monitors"]["remote"]["nrpe"]["etcd-health"]["command"].as_str(),
            Some("check_etcd-health")
        );
    }

    #[test]
    fn host_and_groups_fall_back_to_the_context() {
        assert_eq!(host_name(None, "juju", "etcd/3"), "juju-etcd-3");
        assert_eq!(host_name(Some(" "), "prod", "etcd/0"), "prod-etcd-0");
        assert_eq!(host_name(Some("node-1"), "juju", "etcd/0"), "node-1");
        assert_eq!(service_groups("", "juju"), "juju");
        assert_eq!(service_groups("a,b", "juju"), "a,b");
    }

    #[test]
    fn odd_host_names_stay_in_the_export_dir() {
        assert_eq!(
            export_file("../../etc/x", "etcd-health"),
            PathBuf::from("/var/lib/nagios/export/service__.._.._etc_x_check_etcd-health.cfg")
        );
        assert!(one_line("juju, k8s"));
        assert!(!one_line("juju\ncommand[x]=rm"));
    }

    #[test]
    fn a_tls_unit_offers_the_expiry_check() {
        assert_eq!(checks_for(true, false), checks(true));
        let v = checks_for(false, true);
        let c = v.last().unwrap();
        assert_eq!(c.name, "etcd-cert-expiry");
        assert!(ALL_NAMES.contains(&c.name));
        assert_eq!(
            command_line(Path::new("/c/etcd-charm"), c, Path::new("/")),
            "/c/etcd-charm nrpe-check cert-expiry"
        );
        assert!(render_monitors(&v)
            .contains("etcd-cert-expiry:\n        command: check_etcd-cert-expiry\n"));
    }

    #[test]
    fn files_are_two_per_check() {
        let f = files(
            &checks(true),
            "h",
            "g",
            Path::new("/c/bin/etcd-charm"),
            Path::new("/"),
        );
        assert_eq!(f.len(), 6);
        assert!(f.contains_key(&export_file("h", "etcd-health")));
    }
}
