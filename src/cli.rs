//! What a person gets when running the binary outside a hook: `--help`,
//! `--version`, and the operator's subcommands.

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "etcd-charm",
    version,
    about = "A Juju machine charm for etcd. Juju runs this binary for every hook; run by hand it offers the commands below."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Refuse to start etcd on an empty data dir while a member lives elsewhere
    /// (run by systemd as ExecStartPre, and by the direct service backend).
    Guard,
    /// Run etcd as a supervised process (the direct backend's stand-in for systemd).
    #[command(hide = true)]
    Supervise,
    /// The maintenance agent: scheduled snapshots, defragmentation under the
    /// rolling turn, NOSPACE recovery, and a loopback endpoint (JSON at /,
    /// Prometheus text at /metrics). The charm runs it; see README.
    Agent {
        /// This unit (e.g. etcd/0): the rolling turn's holder is "<unit> agent".
        #[arg(long)]
        unit: String,
        /// host:port on loopback.
        #[arg(long, default_value = "127.0.0.1:9379")]
        listen: String,
        /// Between scheduled snapshots (90s, 10m, 6h); 0 for none.
        #[arg(long, default_value = "6h")]
        snapshot_interval: String,
        /// Scheduled snapshots kept (the newest).
        #[arg(long, default_value_t = 4)]
        snapshot_retention: usize,
        /// Defragment when this percent of the db file is free pages (0: every check, 100: never).
        #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
        defrag_threshold: u8,
        /// How often the member is checked.
        #[arg(long, default_value = "1m")]
        check_interval: String,
        /// ip:port of a second listener serving GET /metrics only (for a
        /// related Prometheus); plain http unless --metrics-tls is given.
        #[arg(long)]
        metrics_listen: Option<String>,
        /// The dir of server.crt, server.key and ca.crt: the metrics
        /// listener serves https and asks a client certificate of that CA.
        #[arg(long, requires = "metrics_listen")]
        metrics_tls: Option<std::path::PathBuf>,
    },
    /// With --dry-run: show what upgrading to this charm would do on this
    /// unit (migration, token, etcd.conf.yml diff) and change nothing. Exit 0
    /// when the upgrade would proceed, 2 when it would block. (Juju runs the
    /// upgrade-charm hook itself, without arguments.)
    UpgradeCharm {
        /// Plan only; required, since by hand nothing else is offered.
        #[arg(long)]
        dry_run: bool,
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
        /// This unit (e.g. etcd/0) when neither JUJU_UNIT_NAME nor the
        /// member name on disk says.
        #[arg(long)]
        unit: Option<String>,
    },
    /// A Nagios plugin, as nagios-nrpe-server runs it for the
    /// nrpe-external-master checks: one line of output, exit 0 OK,
    /// 1 WARNING, 2 CRITICAL, 3 UNKNOWN. Reads etcd.conf.yml for the endpoint.
    NrpeCheck {
        #[arg(value_enum)]
        check: NrpeCheck,
        /// The root the unit's paths live under (ETCD_CHARM_ROOT; default /).
        #[arg(long)]
        root: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum NrpeCheck {
    /// This member answers and the cluster has a leader.
    Health,
    /// No alarm (NOSPACE, CORRUPT) is raised.
    Alarms,
    /// The systemd unit snap.etcd.etcd is active (snap backend).
    Systemd,
    /// The TLS certificates are not about to expire (charm/expiry.rs).
    CertExpiry,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
}
