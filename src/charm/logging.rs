//! Logs go through `tracing`; inside a hook each event is forwarded to
//! `juju-log` at its level, so `juju debug-log` shows the charm's reasoning.

use crate::hooktools::HookTools;
use std::io::Write;
use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

struct JujuLog {
    tools: HookTools,
}

/// Collects one formatted event and hands it to juju-log when dropped.
pub struct LineWriter {
    tools: HookTools,
    level: &'static str,
    buf: Vec<u8>,
}

impl Write for LineWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        let line = String::from_utf8_lossy(&self.buf);
        let line = line.trim_end();
        if !line.is_empty() && self.tools.juju_log(self.level, line).is_err() {
            // juju-log unavailable: stderr still reaches Juju's log at WARNING.
            eprintln!("{line}");
        }
    }
}

fn level_name(l: &Level) -> &'static str {
    match *l {
        Level::ERROR => "ERROR",
        Level::WARN => "WARNING",
        Level::INFO => "INFO",
        _ => "DEBUG",
    }
}

impl<'a> MakeWriter<'a> for JujuLog {
    type Writer = LineWriter;
    fn make_writer(&'a self) -> LineWriter {
        LineWriter {
            tools: self.tools.clone(),
            level: "INFO",
            buf: Vec::new(),
        }
    }
    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> LineWriter {
        LineWriter {
            tools: self.tools.clone(),
            level: level_name(meta.level()),
            buf: Vec::new(),
        }
    }
}

/// Installs the juju-log subscriber (INFO and above). Idempotent.
pub fn init(tools: &HookTools) {
    let sub = tracing_subscriber::fmt()
        .with_writer(JujuLog {
            tools: tools.clone(),
        })
        .with_max_level(Level::INFO)
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .with_level(false)
        .finish();
    let _ = tracing::subscriber::set_global_default(sub);
}

/// Outside hooks: plain stderr.
pub fn init_cli() {
    let sub = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(Level::INFO)
        .with_ansi(false)
        .with_target(false)
        .finish();
    let _ = tracing::subscriber::set_global_default(sub);
}
