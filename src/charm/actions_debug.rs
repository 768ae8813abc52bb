//! The `debug` action: one tarball an operator can attach to a bug report —
//! etcd.conf.yml with its secrets removed, the workload log's tail, the
//! member list, each member's status, versions and the unit's status.
//! Every file is scrubbed of the cluster token before it is written.

use super::action_support::ActionCtx;
use super::actions_ops as ops;
use crate::error::{io, Error, Result};
use crate::etcd;
use crate::hooktools::Databag;
use crate::service::Service;
use std::path::Path;
use std::time::SystemTime;

const REDACTED: &str = "\"<redacted>\"";
/// Keys of etcd.conf.yml whose values are secrets (or name key files).
const SECRET_KEYS: [&str; 4] = ["initial-cluster-token", "key-file", "password", "token"];
const LOG_LINES: usize = 1000;

/// etcd.conf.yml with the value of every secret key replaced. Pure.
pub fn redact_config(text: &str) -> String {
    text.lines()
        .map(|line| match line.split_once(':') {
            Some((k, _)) if SECRET_KEYS.iter().any(|s| k.trim().ends_with(s)) => {
                format!("{k}: {REDACTED}")
            }
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The values of the secret keys in `text` (to scrub from other files).
pub fn secrets_of(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .filter(|(k, _)| SECRET_KEYS.iter().any(|s| k.trim().ends_with(s)))
        .map(|(_, v)| v.trim().trim_matches(['"', '\'']).to_string())
        .filter(|v| v.len() >= 4)
        .collect()
}

/// `text` with every occurrence of a secret replaced. Pure.
pub fn scrub(text: &str, secrets: &[String]) -> String {
    secrets
        .iter()
        .fold(text.to_string(), |t, s| t.replace(s.as_str(), "<redacted>"))
}

pub fn debug(ctx: &ActionCtx) -> Result<Databag> {
    let paths = ctx.paths;
    let service = Service::from_env(paths.clone(), "auto");
    let stamp = crate::stamp::utc_stamp(SystemTime::now());
    let name = format!("etcd-debug-{}-{stamp}", ctx.unit.replace('/', "-"));
    // Staged in the root-only backups dir: a predictable name in the shared
    // /tmp could be a link another account planted (issue 19.14).
    let out_dir = paths.backup_dir();
    crate::private::dir(&out_dir).map_err(io("creating", &out_dir))?;
    let staging = out_dir.join(format!(".{name}.{}.staging", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    let dir = staging.join(&name);
    crate::private::dir(&dir).map_err(io("creating", &dir))?;
    let conf = std::fs::read_to_string(paths.config_file()).unwrap_or_default();
    let secrets = secrets_of(&conf);
    let write = |file: &str, text: &str| -> Result<()> {
        let p = dir.join(file);
        std::fs::write(&p, scrub(text, &secrets)).map_err(io("writing", &p))
    };
    write(
        "etcd.conf.yml",
        &if conf.is_empty() {
            format!("({} is missing)\n", paths.config_file().display())
        } else {
            redact_config(&conf)
        },
    )?;
    write("etcd.log", &service.log_tail(LOG_LINES))?;
    let (members, status) = match ctx.view() {
        Ok(v) => {
            let alarms = etcd::block_on(etcd::alarms(&v.endpoint))
                .map(|a| ops::alarm_lines(&a))
                .unwrap_or_else(|e| format!("alarms unreadable: {e}"));
            let details: Vec<_> = v
                .members
                .iter()
                .filter_map(|m| {
                    let url = m.client_urls.first()?;
                    Some((
                        m.id,
                        etcd::block_on(etcd::member_detail(url)).map_err(|e| e.message),
                    ))
                })
                .collect();
            (
                ops::member_list_results(&v)["output"].clone(),
                format!(
                    "{}\nalarms:\n{alarms}\n",
                    ops::health_results(&v, &details, &[])["output"]
                ),
            )
        }
        Err(e) => (e.to_string(), e.to_string()),
    };
    write("member-list.txt", &members)?;
    write("endpoint-status.txt", &status)?;
    write(
        "versions.txt",
        &format!(
            "etcd: {}\netcd-charm: {}\njuju: {}\n",
            service.version().unwrap_or_else(|| "not installed".into()),
            env!("CARGO_PKG_VERSION"),
            std::env::var("JUJU_VERSION").unwrap_or_default()
        ),
    )?;
    let unit_status = match ctx.tools.status_get() {
        Ok((status, message)) => {
            serde_json::to_string_pretty(&serde_json::json!({"status": status, "message": message}))
                .unwrap_or_default()
        }
        Err(e) => format!("status-get failed: {e}"),
    };
    write("unit-status.json", &unit_status)?;
    let tarball = out_dir.join(format!("{name}.tar.gz"));
    let result = tar(&staging, &name, &tarball);
    let _ = std::fs::remove_dir_all(&staging);
    result?;
    crate::private::tighten(&tarball, crate::private::FILE_MODE)
        .map_err(io("securing", &tarball))?;
    let mut out = Databag::new();
    out.insert("path".into(), tarball.display().to_string());
    out.insert(
        "output".into(),
        format!(
            "debug data written to {}; copy it with: {}",
            tarball.display(),
            super::action_support::copy_cmd(&ctx.unit, &tarball)
        ),
    );
    Ok(out)
}

fn tar(staging: &Path, name: &str, dest: &Path) -> Result<()> {
    let part = dest.with_extension("part");
    let out = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&part)
        .arg("-C")
        .arg(staging)
        .arg(name)
        .output()
        .map_err(io("running tar for", &part))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&part);
        return Err(Error::Other(format!(
            "tar -czf {} failed: {}",
            part.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    std::fs::rename(&part, dest).map_err(io("renaming", dest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONF: &str =
        "name: \"etcd0\"\ninitial-cluster-token: \"Q7XK2P\"\nheartbeat-interval: 100\n";

    #[test]
    fn the_token_is_redacted_everywhere() {
        let r = redact_config(CONF);
        assert!(!r.contains("Q7XK2P"), "{r}");
        assert!(r.contains("initial-cluster-token: \"<redacted>\""), "{r}");
        assert!(r.contains("heartbeat-interval: 100"), "{r}");
        let s = secrets_of(CONF);
        assert_eq!(s, ["Q7XK2P"]);
        let log = "started with initial-cluster-token=Q7XK2P ok";
        assert_eq!(
            scrub(log, &s),
            "started with initial-cluster-token=<redacted> ok"
        );
    }
}
