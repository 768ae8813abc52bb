//! `etcd-charm`: a Juju hook when Juju runs it, a CLI when a person does.

use clap::Parser;
use etcd_charm::cli::{Cli, Command, OutputFormat};
use etcd_charm::context::HookContext;
use etcd_charm::paths::Paths;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let argv0 = args.first().cloned().unwrap_or_default();
    // Juju never passes arguments to a hook: arguments mean a person (or
    // jujusim's dry run) is asking for a subcommand.
    if args.len() <= 1 {
        let env = etcd_charm::context::env_map(std::env::vars_os());
        match HookContext::from_env(&env, &argv0) {
            Ok(Some(ctx)) => return etcd_charm::charm::run_hook(&ctx),
            Ok(None) => {}
            Err(e) => {
                eprintln!("etcd-charm: incomplete Juju hook environment: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let cli = Cli::parse();
    etcd_charm::charm::logging::init_cli();
    let paths = Paths::from_env();
    match cli.command {
        Command::Guard => match etcd_charm::layout::start_guard(&paths) {
            Ok(()) => ExitCode::SUCCESS,
            Err(msg) => {
                eprintln!("etcd-charm guard: {msg}");
                ExitCode::FAILURE
            }
        },
        Command::UpgradeCharm {
            dry_run,
            format,
            unit,
        } => {
            if !dry_run {
                eprintln!(
                    "etcd-charm upgrade-charm: by hand only --dry-run is offered; Juju runs the upgrade itself (juju refresh)"
                );
                return ExitCode::from(64);
            }
            let format = match format {
                OutputFormat::Text => etcd_charm::charm::dryrun::Format::Text,
                OutputFormat::Json => etcd_charm::charm::dryrun::Format::Json,
            };
            etcd_charm::charm::dryrun::run(unit.as_deref(), format)
        }
        Command::Supervise => {
            let bin = std::env::var_os("ETCD_BIN")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| "etcd".into());
            etcd_charm::service::supervise(&paths, &bin)
        }
        Command::Agent {
            unit,
            listen,
            snapshot_interval,
            snapshot_retention,
            defrag_threshold,
            check_interval,
            metrics_listen,
            metrics_tls,
        } => etcd_charm::agent::run::run(
            paths,
            etcd_charm::agent::run::Args {
                unit,
                listen,
                snapshot_interval,
                snapshot_retention,
                defrag_threshold,
                check_interval,
                metrics_listen,
                metrics_tls,
            },
        ),
        Command::NrpeCheck { check, root } => {
            let paths = root.map(Paths::new).unwrap_or(paths);
            etcd_charm::charm::checks::run(check, &paths)
        }
    }
}
