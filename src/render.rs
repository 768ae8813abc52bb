//! etcd.conf.yml and the systemd drop-in, rendered from templates/ (pulled in
//! with `include_str!`) and fed by typed structs.
//!
//! Templates use `{{placeholder}}` substitution and nothing else: a
//! placeholder whose value is absent removes its whole line (that is how
//! `snapshot-count` is left out when unset). Every string value is emitted
//! as a double-quoted YAML scalar with escapes, so no config value can inject
//! YAML; numbers and booleans come from typed fields and are written plain,
//! because etcd refuses a quoted number ("cannot unmarshal string into ...").

use crate::restart::RESTART_POLICY;
use serde::Deserialize;
use std::path::{Path, PathBuf};

const ETCD_CONFIG_TEMPLATE: &str = include_str!("../templates/etcd.conf.yml");
const DROPIN_TEMPLATE: &str = include_str!("../templates/snap.etcd.etcd.service.d.conf");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterState {
    New,
    Existing,
}

impl ClusterState {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterState::New => "new",
            ClusterState::Existing => "existing",
        }
    }

    /// The inverse of [`ClusterState::as_str`].
    pub fn parse(s: &str) -> Option<ClusterState> {
        match s {
            "new" => Some(ClusterState::New),
            "existing" => Some(ClusterState::Existing),
            _ => None,
        }
    }
}

/// What etcd reads from `--config-file`. Field order is the file's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    pub name: String,
    /// As etcd sees it (a host path, not under ETCD_CHARM_ROOT's prefix
    /// unless the root is `/`); callers decide.
    pub data_dir: String,
    pub listen_peer_urls: Vec<String>,
    pub listen_client_urls: Vec<String>,
    /// `listen-metrics-urls`: plain http on loopback serving `/health` and
    /// `/metrics` only (charm/loopback_metrics.rs). Written when non-empty.
    pub listen_metrics_urls: Vec<String>,
    pub initial_advertise_peer_urls: Vec<String>,
    pub advertise_client_urls: Vec<String>,
    /// `name=peerURL` pairs.
    pub initial_cluster: Vec<(String, String)>,
    pub initial_cluster_token: String,
    pub initial_cluster_state: ClusterState,
    /// Written only when Some; etcd's default (100000) applies otherwise.
    pub snapshot_count: Option<u64>,
    pub heartbeat_interval: u64,
    pub election_timeout: u64,
    pub strict_reconfig_check: bool,
    /// etcd's v2 API (`enable-v2`): written only when true, for a cluster
    /// taken over from the Python charm, whose config enabled it.
    pub enable_v2: bool,
    /// The v3 JSON gateway (`/v3/...` over HTTP): etcd reading a config
    /// file serves it only when the file says so. Written only when true.
    pub grpc_gateway: bool,
    /// The backend quota and auto-compaction; each written only when set.
    pub storage: StorageOptions,
    /// `force-new-cluster`: the member starts as a cluster of itself alone
    /// (the `rebuild-cluster` action, charm/rebuild.rs). Written only when
    /// true, and only until the member answers alone.
    pub force_new_cluster: bool,
    /// https on both listeners with client-cert auth; None renders the
    /// plain config exactly as before TLS.
    pub tls: Option<EtcdTls>,
}

/// etcd's space options. None: the line is not written and etcd's default
/// applies (a 2 GiB quota, no auto-compaction).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageOptions {
    pub quota_backend_bytes: Option<u64>,
    /// `periodic` or `revision`; written with a retention only.
    pub auto_compaction_mode: Option<String>,
    pub auto_compaction_retention: Option<String>,
}

/// The TLS parts of etcd.conf.yml. One server certificate serves the
/// client and the peer listener (as the Python charm did), and both
/// demand a client certificate signed by `trusted_ca_file`. Paths as etcd
/// sees them, like `data_dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdTls {
    pub cert_file: String,
    pub key_file: String,
    pub trusted_ca_file: String,
    /// `cipher-suites`, written only when non-empty (Go's defaults
    /// otherwise); see `tls::ciphers` for keeping it in step with the key.
    pub cipher_suites: Vec<String>,
    /// The one common name a peer's certificate must carry (etcd's
    /// `--peer-cert-allowed-cn`); None: any certificate of the CA passes.
    pub peer_allowed_cn: Option<String>,
}

impl EtcdTls {
    /// etcd 3.4 and 3.5 have no `peer-transport-security` key for the
    /// allowed CN: with `--config-file` the one way in is the struct field
    /// behind `--peer-cert-allowed-cn`, which their YAML reader fills by
    /// its Go name (checked against both: a certificate of the same CA
    /// with another CN is refused at the handshake, tests/tls_real_etcd.rs).
    fn peer_tls_info(&self) -> Option<String> {
        self.peer_allowed_cn
            .as_ref()
            .map(|cn| format!("\n  AllowedCN: {}", yaml_quote(cn)))
    }

    fn transport_block(&self) -> String {
        format!(
            "\n  cert-file: {}\n  key-file: {}\n  trusted-ca-file: {}\n  client-cert-auth: true",
            yaml_quote(&self.cert_file),
            yaml_quote(&self.key_file),
            yaml_quote(&self.trusted_ca_file)
        )
    }
}

impl EtcdConfig {
    /// Checks what rendering alone cannot guarantee: that list values
    /// survive etcd's comma-splitting (and so [`parse_etcd_config`]).
    /// Rendering never injects YAML whatever this says; a config that fails
    /// here would be read back by etcd as different URLs or members.
    pub fn validate(&self) -> Result<(), RenderError> {
        let lists = [
            ("listen-peer-urls", &self.listen_peer_urls),
            ("listen-client-urls", &self.listen_client_urls),
            ("listen-metrics-urls", &self.listen_metrics_urls),
            (
                "initial-advertise-peer-urls",
                &self.initial_advertise_peer_urls,
            ),
            ("advertise-client-urls", &self.advertise_client_urls),
        ];
        for (key, urls) in lists {
            for url in urls {
                if url.is_empty() || url.contains(',') {
                    return Err(RenderError {
                        what: key.to_string(),
                        problem: format!("{url:?} is empty or holds a comma"),
                    });
                }
            }
        }
        // etcd reads initial-cluster as a URL query string (',' becomes
        // '&'), so '&', ';', '+' and '%' in a name would be split or decoded.
        for (name, url) in &self.initial_cluster {
            if name.is_empty()
                || name.contains([',', '=', '&', ';', '+', '%'])
                || url.is_empty()
                || url.contains(',')
            {
                return Err(RenderError {
                    what: "initial-cluster".to_string(),
                    problem: format!(
                        "{name:?}={url:?}: a name may hold none of , = & ; + %, a URL no ',', \
                         and neither may be empty"
                    ),
                });
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderError {
    pub what: String,
    pub problem: String,
}

impl std::fmt::Display for RenderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.problem)
    }
}
impl std::error::Error for RenderError {}

/// Renders templates/etcd.conf.yml. Total: any value renders safely; see
/// [`EtcdConfig::validate`] for what would not mean the same to etcd.
pub fn render_etcd_config(cfg: &EtcdConfig) -> String {
    let cluster: Vec<String> = cfg
        .initial_cluster
        .iter()
        .map(|(name, url)| format!("{name}={url}"))
        .collect();
    fill(
        ETCD_CONFIG_TEMPLATE,
        &[
            ("name", Some(yaml_quote(&cfg.name))),
            ("data_dir", Some(yaml_quote(&cfg.data_dir))),
            ("listen_peer_urls", Some(yaml_list(&cfg.listen_peer_urls))),
            (
                "listen_client_urls",
                Some(yaml_list(&cfg.listen_client_urls)),
            ),
            (
                "listen_metrics_urls",
                (!cfg.listen_metrics_urls.is_empty()).then(|| yaml_list(&cfg.listen_metrics_urls)),
            ),
            (
                "initial_advertise_peer_urls",
                Some(yaml_list(&cfg.initial_advertise_peer_urls)),
            ),
            (
                "advertise_client_urls",
                Some(yaml_list(&cfg.advertise_client_urls)),
            ),
            ("initial_cluster", Some(yaml_list(&cluster))),
            (
                "initial_cluster_token",
                Some(yaml_quote(&cfg.initial_cluster_token)),
            ),
            (
                "initial_cluster_state",
                Some(yaml_quote(cfg.initial_cluster_state.as_str())),
            ),
            ("snapshot_count", cfg.snapshot_count.map(|n| n.to_string())),
            (
                "heartbeat_interval",
                Some(cfg.heartbeat_interval.to_string()),
            ),
            ("election_timeout", Some(cfg.election_timeout.to_string())),
            (
                "strict_reconfig_check",
                Some(cfg.strict_reconfig_check.to_string()),
            ),
            ("enable_v2", cfg.enable_v2.then(|| "true".to_string())),
            (
                "enable_grpc_gateway",
                cfg.grpc_gateway.then(|| "true".to_string()),
            ),
            (
                "force_new_cluster",
                cfg.force_new_cluster.then(|| "true".to_string()),
            ),
            (
                "quota_backend_bytes",
                cfg.storage.quota_backend_bytes.map(|n| n.to_string()),
            ),
            (
                "auto_compaction_mode",
                cfg.storage.auto_compaction_mode.as_deref().map(yaml_quote),
            ),
            (
                "auto_compaction_retention",
                cfg.storage
                    .auto_compaction_retention
                    .as_deref()
                    .map(yaml_quote),
            ),
            (
                "client_transport_security",
                cfg.tls.as_ref().map(EtcdTls::transport_block),
            ),
            (
                "peer_transport_security",
                cfg.tls.as_ref().map(EtcdTls::transport_block),
            ),
            (
                "peer_tls_info",
                cfg.tls.as_ref().and_then(EtcdTls::peer_tls_info),
            ),
            (
                "cipher_suites",
                cfg.tls
                    .as_ref()
                    .filter(|t| !t.cipher_suites.is_empty())
                    .map(|t| {
                        let q: Vec<String> =
                            t.cipher_suites.iter().map(|c| yaml_quote(c)).collect();
                        format!("[{}]", q.join(", "))
                    }),
            ),
        ],
    )
}

/// The file's shape as serde sees it; private so the public struct keeps
/// typed lists.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RawConfig {
    name: String,
    data_dir: String,
    listen_peer_urls: String,
    listen_client_urls: String,
    #[serde(default)]
    listen_metrics_urls: Option<String>,
    initial_advertise_peer_urls: String,
    advertise_client_urls: String,
    initial_cluster: String,
    initial_cluster_token: String,
    initial_cluster_state: String,
    #[serde(default)]
    snapshot_count: Option<u64>,
    heartbeat_interval: u64,
    election_timeout: u64,
    strict_reconfig_check: bool,
    #[serde(default)]
    enable_v2: Option<bool>,
    #[serde(default)]
    enable_grpc_gateway: Option<bool>,
    #[serde(default)]
    force_new_cluster: Option<bool>,
    #[serde(default)]
    quota_backend_bytes: Option<u64>,
    #[serde(default)]
    auto_compaction_mode: Option<String>,
    #[serde(default)]
    auto_compaction_retention: Option<String>,
    #[serde(default)]
    client_transport_security: Option<RawTransport>,
    #[serde(default)]
    peer_transport_security: Option<RawTransport>,
    #[serde(default)]
    cipher_suites: Option<Vec<String>>,
    #[serde(default, rename = "PeerTLSInfo")]
    peer_tls_info: Option<RawPeerTlsInfo>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPeerTlsInfo {
    #[serde(rename = "AllowedCN")]
    allowed_cn: String,
}

#[derive(Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
struct RawTransport {
    cert_file: String,
    key_file: String,
    trusted_ca_file: String,
    client_cert_auth: bool,
}

/// Parses a file we rendered back into the struct (strict: every key we
/// write must be there with the right type, and no other key may be).
/// A missing `snapshot-count` is None.
pub fn parse_etcd_config(text: &str) -> Result<EtcdConfig, RenderError> {
    let err = |problem: String| RenderError {
        what: "etcd.conf.yml".to_string(),
        problem,
    };
    let raw: RawConfig = serde_yaml::from_str(text).map_err(|e| err(e.to_string()))?;
    let initial_cluster_state =
        ClusterState::parse(&raw.initial_cluster_state).ok_or_else(|| {
            err(format!(
                "initial-cluster-state is {:?}, not \"new\" or \"existing\"",
                raw.initial_cluster_state
            ))
        })?;
    let initial_cluster = split_list(&raw.initial_cluster)
        .into_iter()
        .map(|pair| match pair.split_once('=') {
            Some((name, url)) => Ok((name.to_string(), url.to_string())),
            None => Err(err(format!(
                "initial-cluster entry {pair:?} is not name=URL"
            ))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let tls = match (raw.client_transport_security, raw.peer_transport_security) {
        (None, None) if raw.cipher_suites.is_none() && raw.peer_tls_info.is_none() => None,
        (Some(c), Some(p)) if c == p && c.client_cert_auth => Some(EtcdTls {
            cert_file: c.cert_file,
            key_file: c.key_file,
            trusted_ca_file: c.trusted_ca_file,
            cipher_suites: raw.cipher_suites.unwrap_or_default(),
            peer_allowed_cn: raw.peer_tls_info.map(|p| p.allowed_cn),
        }),
        _ => {
            return Err(err(
                "client- and peer-transport-security are not the same files with \
                 client-cert-auth (this charm writes them so)"
                    .to_string(),
            ))
        }
    };
    Ok(EtcdConfig {
        name: raw.name,
        data_dir: raw.data_dir,
        listen_peer_urls: split_list(&raw.listen_peer_urls),
        listen_client_urls: split_list(&raw.listen_client_urls),
        listen_metrics_urls: raw
            .listen_metrics_urls
            .as_deref()
            .map(split_list)
            .unwrap_or_default(),
        initial_advertise_peer_urls: split_list(&raw.initial_advertise_peer_urls),
        advertise_client_urls: split_list(&raw.advertise_client_urls),
        initial_cluster,
        initial_cluster_token: raw.initial_cluster_token,
        initial_cluster_state,
        snapshot_count: raw.snapshot_count,
        heartbeat_interval: raw.heartbeat_interval,
        election_timeout: raw.election_timeout,
        strict_reconfig_check: raw.strict_reconfig_check,
        enable_v2: raw.enable_v2.unwrap_or(false),
        grpc_gateway: raw.enable_grpc_gateway.unwrap_or(false),
        force_new_cluster: raw.force_new_cluster.unwrap_or(false),
        storage: StorageOptions {
            quota_backend_bytes: raw.quota_backend_bytes,
            auto_compaction_mode: raw.auto_compaction_mode,
            auto_compaction_retention: raw.auto_compaction_retention,
        },
        tls,
    })
}

/// What the drop-in for `snap.etcd.etcd.service` needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropIn {
    /// The charm binary, run as `ExecStartPre=<bin> guard` (the start guard).
    pub charm_binary: PathBuf,
    /// `ETCD_CHARM_ROOT` the guard must use (`/` in production).
    pub root: PathBuf,
    /// The data volume's mount point, when etcd's data dir is on it: etcd
    /// then starts only after it is mounted (`RequiresMountsFor=`; fstab's
    /// `nofail` alone orders nothing).
    pub requires_mounts_for: Option<PathBuf>,
}

impl DropIn {
    /// What systemd would refuse even when quoted: a relative executable,
    /// or one whose path holds quotes, backslashes or control characters
    /// (systemd ignores such an ExecStartPre= line with "Executable name
    /// contains special characters"), or a path that is not UTF-8.
    pub fn validate(&self) -> Result<(), RenderError> {
        let err = |what: &str, p: &Path, problem: &str| RenderError {
            what: format!("{what} {}", p.display()),
            problem: problem.to_string(),
        };
        let bin = &self.charm_binary;
        let Some(bin_s) = bin.to_str() else {
            return Err(err("charm binary", bin, "is not UTF-8"));
        };
        if !bin.is_absolute() {
            return Err(err("charm binary", bin, "is not an absolute path"));
        }
        if bin_s
            .chars()
            .any(|c| c.is_control() || matches!(c, '"' | '\'' | '\\'))
        {
            return Err(err(
                "charm binary",
                bin,
                "holds a quote, backslash or control character, which systemd refuses",
            ));
        }
        let Some(root_s) = self.root.to_str() else {
            return Err(err("root", &self.root, "is not UTF-8"));
        };
        if root_s.chars().any(char::is_control) {
            return Err(err("root", &self.root, "holds a control character"));
        }
        if let Some(mp) = &self.requires_mounts_for {
            let ok = mp.is_absolute()
                && mp
                    .to_str()
                    .is_some_and(|s| !s.chars().any(char::is_control));
            if !ok {
                return Err(err(
                    "mount point",
                    mp,
                    "is not an absolute UTF-8 path without control characters",
                ));
            }
        }
        Ok(())
    }
}

/// Renders templates/snap.etcd.etcd.service.d.conf, with the restart policy
/// of [`crate::restart::RESTART_POLICY`]. Paths are double-quoted with `\`,
/// `"` and `%` escaped per systemd's rules; see [`DropIn::validate`] for the
/// paths systemd refuses however they are quoted.
pub fn render_dropin(d: &DropIn) -> String {
    let p = RESTART_POLICY;
    let root = format!("ETCD_CHARM_ROOT={}", d.root.to_string_lossy());
    let bin = d.charm_binary.to_string_lossy();
    fill(
        DROPIN_TEMPLATE,
        &[
            (
                "start_limit_interval",
                Some(format!("{}s", p.interval.as_secs())),
            ),
            ("start_limit_burst", Some(p.burst.to_string())),
            ("restart_sec", Some(format!("{}s", p.delay.as_secs()))),
            ("environment", Some(systemd_quote(&root))),
            (
                "guard_command",
                Some(format!("{} guard", systemd_quote(&bin))),
            ),
            (
                "requires_mounts_for",
                d.requires_mounts_for
                    .as_ref()
                    .map(|p| systemd_quote(&p.to_string_lossy())),
            ),
        ],
    )
}

/// Substitutes `{{key}}` placeholders line by line. A line naming a key whose
/// value is None is dropped whole. Templates are compile-time constants, so
/// an unknown or unclosed placeholder is a bug and panics (the tests render
/// every template).
fn fill(template: &str, values: &[(&str, Option<String>)]) -> String {
    let mut out = String::with_capacity(template.len() + 256);
    'lines: for line in template.split_inclusive('\n') {
        let mut rendered = String::with_capacity(line.len());
        let mut rest = line;
        while let Some(open) = rest.find("{{") {
            let close = rest[open..]
                .find("}}")
                .unwrap_or_else(|| panic!("unclosed placeholder in template line {line:?}"));
            let key = &rest[open + 2..open + close];
            let value = values
                .iter()
                .find(|(k, _)| *k == key)
                .unwrap_or_else(|| panic!("template names unknown placeholder {key:?}"));
            match &value.1 {
                Some(v) => {
                    rendered.push_str(&rest[..open]);
                    rendered.push_str(v);
                }
                None => continue 'lines,
            }
            rest = &rest[open + close + 2..];
        }
        rendered.push_str(rest);
        out.push_str(&rendered);
    }
    out
}

/// A YAML double-quoted scalar. Escapes `\` and `"`, and writes as escapes
/// every character a YAML 1.1 or 1.2 reader (etcd's Go yaml, serde_yaml)
/// could take for a line break or refuse as non-printable: C0 and C1
/// controls, DEL, U+2028/U+2029, the BOM and the U+FFFE/U+FFFF
/// noncharacters. Everything else, including other Unicode, stays as is.
pub fn yaml_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02X}", c as u32));
            }
            c if ('\u{80}'..='\u{9f}').contains(&c)
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// etcd's list keys are single comma-joined strings.
fn yaml_list(items: &[String]) -> String {
    yaml_quote(&items.join(","))
}

fn split_list(s: &str) -> Vec<String> {
    if s.is_empty() {
        Vec::new()
    } else {
        s.split(',').map(str::to_string).collect()
    }
}

/// One word of a systemd unit setting: double-quoted, with `\` and `"`
/// C-escaped and `%` doubled so no specifier is expanded. Control characters
/// are C-escaped too (systemd unescapes them inside quotes). `$` is left
/// alone: Environment= does not expand it, and in an ExecStartPre= path
/// systemd takes it literally.
pub fn systemd_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_ascii_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    fn urls(u: &[&str]) -> Vec<String> {
        u.iter().map(|s| s.to_string()).collect()
    }

    pub(crate) fn three_members() -> EtcdConfig {
        EtcdConfig {
            name: "etcd0".into(),
            data_dir: "/var/snap/etcd/current".into(),
            listen_peer_urls: urls(&["http://0.0.0.0:2380"]),
            listen_client_urls: urls(&["http://0.0.0.0:2379"]),
            listen_metrics_urls: urls(&["http://127.0.0.1:2381"]),
            initial_advertise_peer_urls: urls(&["http://10.0.0.5:2380"]),
            advertise_client_urls: urls(&["http://10.0.0.5:2379"]),
            initial_cluster: vec![
                ("etcd0".into(), "http://10.0.0.5:2380".into()),
                ("etcd1".into(), "http://10.0.0.6:2380".into()),
                ("etcd2".into(), "http://10.0.0.7:2380".into()),
            ],
            initial_cluster_token: "K3X9QZ".into(),
            initial_cluster_state: ClusterState::New,
            snapshot_count: Some(10000),
            heartbeat_interval: 100,
            election_timeout: 1000,
            strict_reconfig_check: true,
            enable_v2: false,
            grpc_gateway: true,
            force_new_cluster: false,
            storage: Default::default(),
            tls: None,
        }
    }

    /// Values a careless template would turn into other keys, comments or
    /// broken YAML.
    fn hostile() -> EtcdConfig {
        EtcdConfig {
            name: "etcd0\nstrict-reconfig-check: false".into(),
            data_dir: "/data: # not a comment 'single' \"double\" \\ back".into(),
            listen_peer_urls: urls(&["http://[::1]:2380", "  spaced  ", "- dash"]),
            listen_client_urls: urls(&["{flow: map}", "[flow; seq]", "&anchor *alias !tag"]),
            listen_metrics_urls: urls(&["#not: a comment", "'q' \"qq\""]),
            initial_advertise_peer_urls: urls(&["%percent @at `tick` |pipe >fold"]),
            advertise_client_urls: urls(&["ünïcødé ✓ 🦀", "\u{85}nel\u{2028}ls\u{2029}ps"]),
            initial_cluster: vec![
                ("tab\there".into(), "cr\rlf\r\n".into()),
                (
                    "nul\0bell\u{7}del\u{7f}".into(),
                    "bom\u{feff}x\u{fffe}\u{ffff}".into(),
                ),
            ],
            initial_cluster_token: "'; --\n---\n...\n".into(),
            initial_cluster_state: ClusterState::Existing,
            snapshot_count: None,
            heartbeat_interval: 0,
            election_timeout: u64::MAX,
            strict_reconfig_check: false,
            enable_v2: true,
            grpc_gateway: true,
            force_new_cluster: false,
            storage: Default::default(),
            tls: None,
        }
    }

    fn empties() -> EtcdConfig {
        EtcdConfig {
            name: String::new(),
            data_dir: String::new(),
            listen_peer_urls: vec![],
            listen_client_urls: vec![],
            listen_metrics_urls: vec![],
            initial_advertise_peer_urls: vec![],
            advertise_client_urls: vec![],
            initial_cluster: vec![],
            initial_cluster_token: String::new(),
            initial_cluster_state: ClusterState::New,
            snapshot_count: Some(0),
            heartbeat_interval: 1,
            election_timeout: 2,
            strict_reconfig_check: false,
            enable_v2: false,
            grpc_gateway: false,
            force_new_cluster: false,
            storage: Default::default(),
            tls: None,
        }
    }

    const KEYS: [&str; 16] = [
        "name",
        "data-dir",
        "listen-peer-urls",
        "listen-client-urls",
        "listen-metrics-urls",
        "initial-advertise-peer-urls",
        "advertise-client-urls",
        "initial-cluster",
        "initial-cluster-token",
        "initial-cluster-state",
        "snapshot-count",
        "heartbeat-interval",
        "election-timeout",
        "strict-reconfig-check",
        "enable-v2",
        "enable-grpc-gateway",
    ];

    #[test]
    fn round_trips() {
        let mut without_snapshot = three_members();
        without_snapshot.snapshot_count = None;
        for cfg in [three_members(), without_snapshot, hostile(), empties()] {
            let text = render_etcd_config(&cfg);
            assert_eq!(parse_etcd_config(&text), Ok(cfg.clone()), "{text}");
        }
    }

    #[test]
    fn hostile_values_stay_values() {
        let cfg = hostile();
        let text = render_etcd_config(&cfg);
        // Exactly our keys, in order, one line each, every value where we put it.
        let map: serde_yaml::Mapping = serde_yaml::from_str(&text).unwrap();
        let keys: Vec<&str> = map.keys().map(|k| k.as_str().unwrap()).collect();
        let expected: Vec<&str> = KEYS
            .iter()
            .copied()
            .filter(|k| *k != "snapshot-count")
            .collect();
        assert_eq!(keys, expected);
        assert_eq!(map["name"].as_str(), Some(cfg.name.as_str()));
        assert_eq!(map["strict-reconfig-check"].as_bool(), Some(false));
        let body: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(body.len(), expected.len(), "{text}");
    }

    #[test]
    fn strings_are_quoted_and_numbers_are_not() {
        let text = render_etcd_config(&three_members());
        assert!(text.contains("\nname: \"etcd0\"\n"), "{text}");
        assert!(text.contains(
            "\ninitial-cluster: \"etcd0=http://10.0.0.5:2380,etcd1=http://10.0.0.6:2380,etcd2=http://10.0.0.7:2380\"\n"
        ));
        assert!(text.contains("\ninitial-cluster-state: \"new\"\n"));
        assert!(text.contains("\nsnapshot-count: 10000\n"));
        assert!(text.contains("\nelection-timeout: 1000\n"));
        assert!(text.contains("\nstrict-reconfig-check: true\n"));
        assert!(text.starts_with("# Managed by the etcd-charm Juju charm"));
        assert!(!text.contains("{{"), "{text}");
    }

    #[test]
    fn space_options_only_when_set_and_read_back() {
        let text = render_etcd_config(&three_members());
        for key in [
            "quota-backend-bytes",
            "auto-compaction-mode",
            "auto-compaction-retention",
        ] {
            assert!(!text.contains(key), "{key} written unset: {text}");
        }
        let mut cfg = three_members();
        cfg.storage = StorageOptions {
            quota_backend_bytes: Some(4 << 20),
            auto_compaction_mode: Some("periodic".into()),
            auto_compaction_retention: Some("1h".into()),
        };
        let text = render_etcd_config(&cfg);
        assert!(text.contains("\nquota-backend-bytes: 4194304\n"), "{text}");
        assert!(
            text.contains("\nauto-compaction-mode: \"periodic\"\n"),
            "{text}"
        );
        assert!(
            text.contains("\nauto-compaction-retention: \"1h\"\n"),
            "{text}"
        );
        assert_eq!(parse_etcd_config(&text).unwrap(), cfg);
    }

    #[test]
    fn snapshot_count_only_when_set() {
        let mut cfg = three_members();
        cfg.snapshot_count = None;
        let text = render_etcd_config(&cfg);
        assert!(!text.contains("\nsnapshot-count:"), "{text}");
        assert_eq!(parse_etcd_config(&text).unwrap().snapshot_count, None);
    }

    #[test]
    fn quoting() {
        assert_eq!(yaml_quote("plain"), "\"plain\"");
        assert_eq!(yaml_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(yaml_quote("x\ny"), "\"x\\ny\"");
        assert_eq!(yaml_quote("\u{1}\u{7f}"), "\"\\x01\\x7F\"");
        assert_eq!(yaml_quote("\u{85}\u{2028}"), "\"\\u0085\\u2028\"");
        assert_eq!(yaml_quote("ü✓"), "\"ü✓\"");
        assert_eq!(systemd_quote("/a b/%n/$X\"\\"), "\"/a b/%%n/$X\\\"\\\\\"");
    }

    #[test]
    fn parse_is_strict() {
        let good = render_etcd_config(&three_members());
        let cases = [
            (
                good.replace("name: \"etcd0\"\n", ""),
                "missing field `name`",
            ),
            (good.clone() + "wal-dir: ''\n", "unknown field `wal-dir`"),
            (
                good.replace("\"new\"", "\"fresh\""),
                "initial-cluster-state is \"fresh\"",
            ),
            (
                good.replace("election-timeout: 1000", "election-timeout: \"1000\""),
                "election-timeout",
            ),
            (
                good.replace("etcd1=http", "etcd1http"),
                "\"etcd1http://10.0.0.6:2380\" is not name=URL",
            ),
            ("- a list\n".to_string(), ""),
        ];
        for (text, needle) in cases {
            let e = parse_etcd_config(&text).expect_err(&text);
            assert_eq!(e.what, "etcd.conf.yml");
            assert!(e.problem.contains(needle), "{needle:?} not in {e}");
        }
    }

    #[test]
    fn validate_refuses_what_etcd_would_split() {
        assert_eq!(three_members().validate(), Ok(()));
        let mut c = three_members();
        c.listen_client_urls.push("http://a,http://b".into());
        assert_eq!(c.validate().unwrap_err().what, "listen-client-urls");
        for bad in ["a=b", "a&b", "a+b", "a%20", ""] {
            let mut c = three_members();
            c.initial_cluster[0].0 = bad.into();
            assert_eq!(c.validate().unwrap_err().what, "initial-cluster", "{bad}");
        }
    }

    #[test]
    fn fill_drops_lines_of_absent_values() {
        let t = "a: {{a}}\nb: {{b}} and {{a}}\nc\n";
        let out = fill(t, &[("a", Some("1".into())), ("b", None)]);
        assert_eq!(out, "a: 1\nc\n");
        let out = fill(t, &[("a", Some("{{b}}".into())), ("b", Some("2".into()))]);
        assert_eq!(
            out, "a: {{b}}\nb: 2 and {{b}}\nc\n",
            "values are not re-expanded"
        );
    }

    fn golden(name: &str, actual: &str) {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name);
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(&path, actual).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; UPDATE_GOLDEN=1 cargo test --lib render writes it",
                path.display()
            )
        });
        assert!(
            actual == expected,
            "rendering differs from {}; if that is intended, rerun with UPDATE_GOLDEN=1 and \
             review the diff.\n--- rendered:\n{actual}",
            path.display()
        );
    }

    #[test]
    fn golden_etcd_config() {
        golden("etcd.conf.yml", &render_etcd_config(&three_members()));
        golden("etcd.conf.hostile.yml", &render_etcd_config(&hostile()));
        // bind_with_insecure_http: the loopback http listener beside the main one.
        let mut insecure = three_members();
        insecure
            .listen_client_urls
            .push("http://127.0.0.1:4001".into());
        let text = render_etcd_config(&insecure);
        golden("etcd.conf.insecure-http.yml", &text);
        assert_eq!(
            parse_etcd_config(&text).unwrap().listen_client_urls,
            ["http://0.0.0.0:2379", "http://127.0.0.1:4001"]
        );
    }

    fn production_dropin() -> DropIn {
        DropIn {
            charm_binary: "/var/lib/juju/agents/unit-etcd-0/charm/etcd-charm".into(),
            root: "/".into(),
            requires_mounts_for: None,
        }
    }

    /// three_members over https: both listeners with client-cert auth.
    pub(crate) fn three_members_tls() -> EtcdConfig {
        let https = |v: &[String]| {
            v.iter()
                .map(|u| u.replacen("http://", "https://", 1))
                .collect()
        };
        let mut c = three_members();
        c.listen_peer_urls = https(&c.listen_peer_urls);
        c.listen_client_urls = https(&c.listen_client_urls);
        c.initial_advertise_peer_urls = https(&c.initial_advertise_peer_urls);
        c.advertise_client_urls = https(&c.advertise_client_urls);
        c.initial_cluster = c
            .initial_cluster
            .iter()
            .map(|(n, u)| (n.clone(), u.replacen("http://", "https://", 1)))
            .collect();
        c.tls = Some(EtcdTls {
            cert_file: "/var/snap/etcd/common/server.crt".into(),
            key_file: "/var/snap/etcd/common/server.key".into(),
            trusted_ca_file: "/var/snap/etcd/common/ca.crt".into(),
            cipher_suites: vec![
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into(),
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384".into(),
            ],
            peer_allowed_cn: Some("etcd-peer.etcd.2f6ab9c4".into()),
        });
        c
    }

    #[test]
    fn golden_etcd_config_tls() {
        let c = three_members_tls();
        let text = render_etcd_config(&c);
        golden("etcd.conf.tls.yml", &text);
        assert_eq!(parse_etcd_config(&text).unwrap(), c);
        // Without suites: no cipher-suites line, and it still reads back.
        let mut plain_suites = c.clone();
        plain_suites.tls.as_mut().unwrap().cipher_suites.clear();
        let text = render_etcd_config(&plain_suites);
        assert!(!text.contains("cipher-suites"), "{text}");
        assert_eq!(parse_etcd_config(&text).unwrap(), plain_suites);
        // Without the peer CN (not every member's certificate carries it
        // yet): no PeerTLSInfo block, and it still reads back.
        let mut any_peer = c.clone();
        any_peer.tls.as_mut().unwrap().peer_allowed_cn = None;
        let text = render_etcd_config(&any_peer);
        assert!(!text.contains("\nPeerTLSInfo:"), "{text}");
        assert_eq!(parse_etcd_config(&text).unwrap(), any_peer);
        // A hand-edited file with only one transport section is refused.
        let one = text.split("peer-transport-security").next().unwrap();
        assert!(parse_etcd_config(one).is_err());
        let plain = render_etcd_config(&three_members());
        assert!(!plain.contains("transport-security"));
    }

    #[test]
    fn golden_dropin() {
        let text = render_dropin(&production_dropin());
        golden("10-etcd-charm.conf", &text);
        for line in [
            "\nRestart=on-failure\n",
            "\nRestartSec=2s\n",
            "\nStartLimitBurst=5\n",
            "\nStartLimitIntervalSec=60s\n",
            "\nEnvironment=\"ETCD_CHARM_ROOT=/\"\n",
            "\nExecStartPre=\"/var/lib/juju/agents/unit-etcd-0/charm/etcd-charm\" guard\n",
        ] {
            assert!(text.contains(line), "{line:?} not in\n{text}");
        }
    }

    /// Issue 19.7: etcd's data dir on the data volume orders etcd after
    /// its mount (and requires it); elsewhere the line is left out.
    #[test]
    fn golden_dropin_on_the_data_volume() {
        let d = DropIn {
            requires_mounts_for: Some("/media/etcd".into()),
            ..production_dropin()
        };
        let text = render_dropin(&d);
        golden("10-etcd-charm.volume.conf", &text);
        assert!(
            text.contains("\nRequiresMountsFor=\"/media/etcd\"\n"),
            "{text}"
        );
        assert!(!render_dropin(&production_dropin()).contains("\nRequiresMountsFor="));
    }

    #[test]
    fn dropin_validation() {
        assert_eq!(production_dropin().validate(), Ok(()));
        for bin in ["etcd-charm", "/a\"b/etcd-charm", "/a\\b", "/a'b", "/a\nb"] {
            let d = DropIn {
                charm_binary: bin.into(),
                ..production_dropin()
            };
            assert!(d.validate().is_err(), "{bin:?}");
        }
        let d = DropIn {
            root: "/a\nb".into(),
            ..production_dropin()
        };
        assert!(d.validate().is_err());
    }

    fn executable(path: &Path) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// A unit dir holding the snap's unit (as snapd writes it, with the
    /// mount unit it requires) and our drop-in; returns verify's exit status
    /// and its output.
    fn verify_with_dropin(dir: &Path, d: &DropIn) -> (bool, String) {
        let units = dir.join("units");
        let snap_bin = dir.join("usr/bin/snap");
        executable(&snap_bin);
        std::fs::create_dir_all(units.join("snap.etcd.etcd.service.d")).unwrap();
        std::fs::write(
            units.join("snap-etcd-230.mount"),
            "[Unit]\n\
             Description=Mount unit for etcd, revision 230\n\
             After=snapd.mounts-pre.target\n\
             Before=snapd.mounts.target local-fs.target\n\n\
             [Mount]\n\
             What=/var/lib/snapd/snaps/etcd_230.snap\n\
             Where=/snap/etcd/230\n\
             Type=squashfs\n\
             Options=nodev,ro,x-gdu.hide,x-gvfs-hide\n\
             LazyUnmount=yes\n\n\
             [Install]\n\
             WantedBy=snapd.mounts.target multi-user.target\n",
        )
        .unwrap();
        std::fs::write(
            units.join("snap.etcd.etcd.service"),
            format!(
                "[Unit]\n\
                 # Auto-generated, DO NOT EDIT\n\
                 Description=Service for snap application etcd.etcd\n\
                 Requires=snap-etcd-230.mount\n\
                 Wants=network.target\n\
                 After=snap-etcd-230.mount network.target snapd.apparmor.service\n\
                 X-Snappy=yes\n\n\
                 [Service]\n\
                 EnvironmentFile=-/etc/environment\n\
                 ExecStart={} run etcd\n\
                 SyslogIdentifier=etcd.etcd\n\
                 Restart=on-failure\n\
                 WorkingDirectory=/var/snap/etcd/230\n\
                 TimeoutStopSec=30\n\
                 Type=simple\n\n\
                 [Install]\n\
                 WantedBy=multi-user.target\n",
                snap_bin.display()
            ),
        )
        .unwrap();
        std::fs::write(
            units.join("snap.etcd.etcd.service.d/10-etcd-charm.conf"),
            render_dropin(d),
        )
        .unwrap();
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(units.join("snap.etcd.etcd.service"))
            .output()
            .unwrap_or_else(|e| {
                panic!("systemd-analyze (from systemd) is needed for this test: {e}")
            });
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    #[test]
    fn systemd_accepts_the_dropin() {
        let tmp = tempfile::tempdir().unwrap();
        // Spaces, a specifier and a dollar: each would change the path if
        // quoted wrongly, and verify checks that ExecStartPre= exists.
        let charm_binary = tmp.path().join("charm dir %n $HOME ;/etcd-charm");
        executable(&charm_binary);
        let d = DropIn {
            charm_binary: charm_binary.clone(),
            root: tmp.path().join("root with \"quotes\" %i $X"),
            // The data volume's mount point under that root: quoted too.
            requires_mounts_for: Some(tmp.path().join("root with \"quotes\" %i $X/media/etcd")),
        };
        d.validate().unwrap();
        let (ok, out) = verify_with_dropin(tmp.path(), &d);
        assert!(ok, "systemd-analyze verify failed:\n{out}");
        assert!(
            !out.contains("10-etcd-charm.conf") && !out.contains("etcd-charm"),
            "systemd-analyze warned about our drop-in:\n{out}"
        );

        // The control: verify does read the drop-in.
        let missing = DropIn {
            charm_binary: tmp.path().join("no such dir/etcd-charm"),
            ..d
        };
        let (ok, out) = verify_with_dropin(tmp.path(), &missing);
        assert!(!ok && out.contains("no such dir/etcd-charm"), "{out}");
    }

    /// Kills etcd when the test ends, passed or not.
    struct Etcd(Child);
    impl Drop for Etcd {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn etcd_accepts_the_rendered_file() {
        let tmp = tempfile::tempdir().unwrap();
        let (peer, client) = ("http://127.78.1.1:2380", "http://127.78.1.1:2379");
        let metrics = "127.78.1.1:2381";
        let cfg = EtcdConfig {
            name: "render-check".into(),
            data_dir: tmp.path().join("data dir").to_str().unwrap().into(),
            listen_peer_urls: urls(&[peer]),
            listen_client_urls: urls(&[client]),
            listen_metrics_urls: vec![format!("http://{metrics}")],
            initial_advertise_peer_urls: urls(&[peer]),
            advertise_client_urls: urls(&[client]),
            initial_cluster: vec![("render-check".into(), peer.into())],
            // Quotes, a comment sign and ": " reach etcd as one token.
            initial_cluster_token: "tok'en \"x\" #1: y".into(),
            initial_cluster_state: ClusterState::New,
            snapshot_count: Some(5000),
            heartbeat_interval: 100,
            election_timeout: 1000,
            strict_reconfig_check: true,
            enable_v2: true,
            grpc_gateway: true,
            force_new_cluster: false,
            storage: Default::default(),
            tls: None,
        };
        cfg.validate().unwrap();
        let file = tmp.path().join("etcd.conf.yml");
        std::fs::write(&file, render_etcd_config(&cfg)).unwrap();
        let log_path = tmp.path().join("etcd.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let _etcd = Etcd(
            Command::new("etcd")
                .arg("--config-file")
                .arg(&file)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .expect("etcd (Debian's etcd-server) is needed for this test"),
        );
        let etcdctl = |args: &[&str]| {
            Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args([
                    "--endpoints",
                    client,
                    "--dial-timeout=1s",
                    "--command-timeout=2s",
                ])
                .args(args)
                .output()
                .expect("etcdctl is needed for this test")
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if etcdctl(&["endpoint", "health"]).status.success() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not become healthy:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let members = etcdctl(&["member", "list"]);
        let members = String::from_utf8_lossy(&members.stdout);
        assert!(
            members.contains("render-check") && members.contains(peer),
            "{members}"
        );
        assert!(tmp.path().join("data dir/member/wal").is_dir());
        // The metrics listener answers /health without credentials.
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(metrics).unwrap();
        write!(s, "GET /health HTTP/1.0\r\nHost: {metrics}\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(
            out.starts_with("HTTP/1.0 200") && out.contains(r#"{"health":"true"#),
            "{out}"
        );
    }
}
