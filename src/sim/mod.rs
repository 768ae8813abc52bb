//! jujusim: a local, generic Juju model for machine charms.
//!
//! HELPER TASK (jujusim helper): everything under src/sim/.

/// Entry point of the `jujusim` binary (also the multi-call hook tools).
pub fn main() -> std::process::ExitCode {
    std::process::ExitCode::SUCCESS
}
