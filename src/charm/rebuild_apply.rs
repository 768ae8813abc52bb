//! The `rebuild-cluster` action's apply half (its plan is rebuild.rs): the
//! snapshot before anything changes, the copy of `member/` beside it, and
//! the wait until the member answers alone.

use super::steps::RebuildStep;
use crate::error::{io, Error, Result};
use crate::etcd;
use crate::hooktools::StatusKind;
use std::time::{Duration, Instant};
use tracing::info;

/// How long a member started with `force-new-cluster` may take to lead
/// alone (it replays its WAL first).
const ALONE_WITHIN: Duration = Duration::from_secs(120);

impl super::apply::Applier<'_> {
    pub(super) fn rebuild_step(&self, s: &RebuildStep) -> Result<Option<(StatusKind, String)>> {
        match s {
            RebuildStep::Snapshot { endpoint, file } => {
                let dir = file.parent().unwrap_or(file);
                super::backups::prepare_dir(self.paths, dir).map_err(io("creating", dir))?;
                let size = etcd::block_on(etcd::member_detail(endpoint))
                    .map(|d| u64::try_from(d.db_size).unwrap_or(0))
                    .unwrap_or(0);
                if let Some(msg) = crate::space::check("the snapshot before the rebuild", size, dir)
                {
                    return Ok(Some((StatusKind::Blocked, msg)));
                }
                let bytes = etcd::block_on(etcd::snapshot_to(endpoint.as_str(), file))
                    .inspect_err(|_| {
                        let _ = std::fs::remove_file(file.with_extension("part"));
                    })?;
                info!(
                    "snapshot before the rebuild: {} ({bytes} bytes)",
                    self.paths.unhost(file).display()
                );
            }
            RebuildStep::CopyAside { data_dir, stamp } => {
                let from = data_dir.join("member");
                let to = crate::aside::free_name(data_dir, "member.pre-rebuild", stamp);
                self.tools.status_set(
                    StatusKind::Maintenance,
                    "Rebuilding: copying the old member aside",
                )?;
                if let Some(msg) = crate::migrate::copy_aside(&from, &to)? {
                    return Ok(Some((StatusKind::Blocked, msg)));
                }
                let _ = std::fs::write(
                    to.join("WHY"),
                    "rebuild-cluster: this member's data before force-new-cluster rewrote its membership\n",
                );
                info!("copied {} to {}", from.display(), to.display());
            }
            RebuildStep::WaitAlone { member_id } => {
                let ep = self.own_endpoint()?;
                let start = Instant::now();
                loop {
                    match etcd::block_on(etcd::view_from(ep.as_str())) {
                        Ok(v) if v.leads_alone() && v.status.member_id == *member_id => {
                            info!("member {member_id:x} answers alone, leading");
                            return Ok(None);
                        }
                        Ok(v) if start.elapsed() > ALONE_WITHIN => {
                            return Err(Error::Other(format!(
                                "member {member_id:x} did not come up alone within {ALONE_WITHIN:?}: it answers as {:x} with {} member(s), leader {:x}",
                                v.status.member_id,
                                v.members.len(),
                                v.status.leader
                            )));
                        }
                        Err(e) if start.elapsed() > ALONE_WITHIN => {
                            return Err(Error::Other(format!(
                                "member {member_id:x} did not answer within {ALONE_WITHIN:?}: {e}; log tail: {}",
                                self.service.log_tail(5)
                            )));
                        }
                        _ => std::thread::sleep(Duration::from_millis(300)),
                    }
                }
            }
        }
        Ok(None)
    }
}
