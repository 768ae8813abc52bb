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
}
