//! A restore's apply half (its plan is restore.rs): the snapshot restored
//! into the data dir, and the restored cluster recorded.

use super::observed::{CLUSTER, CLUSTER_ID};
use super::restore::{can_bump, short_sha, snapshot_tool, DONE};
use super::steps::RestoreStep;
use crate::error::{io, Error, Result};
use crate::hooktools::{Databag, StatusKind};
use tracing::info;

impl super::apply::Applier<'_> {
    pub(super) fn restore_step(&self, s: &RestoreStep) -> Result<Option<(StatusKind, String)>> {
        match s {
            RestoreStep::Snapshot {
                id,
                file,
                sha256,
                name,
                peer_url,
                token,
                data_dir,
                bump,
            } => {
                self.tools.status_set(
                    StatusKind::Maintenance,
                    &format!("Restoring snapshot {}", short_sha(sha256)),
                )?;
                let have = super::action_support::sha256_file(file)?;
                if have != *sha256 {
                    return Ok(Some((
                        StatusKind::Blocked,
                        format!(
                            "restore {id}: {} has sha256 {have}, not the checked {sha256}; run the restore action again",
                            file.display()
                        ),
                    )));
                }
                let Some(tool) = snapshot_tool(self.service, bump.is_some()) else {
                    return Ok(Some((
                        StatusKind::Blocked,
                        format!(
                            "restore {id}: no {} beside etcd to restore with",
                            if bump.is_some() { "etcdutl" } else { "etcdctl" }
                        ),
                    )));
                };
                let scratch = data_dir.join(format!("restore-{id}.tmp"));
                // Our own partial output from a killed hook: the snapshot it
                // came from is still there, so it is made again.
                if scratch.exists() {
                    std::fs::remove_dir_all(&scratch).map_err(io("removing", &scratch))?;
                }
                let mut cmd = std::process::Command::new(&tool);
                cmd.env("ETCDCTL_API", "3")
                    .args(["snapshot", "restore"])
                    .arg(file)
                    .args(["--name", name])
                    .args(["--initial-cluster", &format!("{name}={peer_url}")])
                    .args(["--initial-cluster-token", token])
                    .args(["--initial-advertise-peer-urls", peer_url])
                    .arg("--data-dir")
                    .arg(&scratch);
                match bump {
                    Some(n) if can_bump(&tool) => {
                        cmd.args(["--bump-revision", &n.to_string(), "--mark-compacted"]);
                    }
                    Some(_) => tracing::warn!(
                        "restore {id}: {} has no --bump-revision (etcd before 3.5.10?): revisions go back to the snapshot's; restart kube-apiserver and other watchers",
                        tool.display()
                    ),
                    None => {}
                }
                let out = cmd.output().map_err(io("running", &tool))?;
                if !out.status.success() {
                    return Err(Error::Other(format!(
                        "restore {id}: {} snapshot restore failed: {}",
                        tool.display(),
                        String::from_utf8_lossy(&out.stderr).trim()
                    )));
                }
                crate::failpoint::hit("during:restore-snapshot");
                let member = data_dir.join("member");
                std::fs::rename(scratch.join("member"), &member)
                    .map_err(io("moving the restored member into", &member))?;
                crate::durable::sync_dir(data_dir).map_err(io("syncing", data_dir))?;
                let _ = std::fs::remove_dir(&scratch);
                info!(
                    "restore {id}: {} restored into {}",
                    file.display(),
                    member.display()
                );
                Ok(None)
            }
            RestoreStep::Record { id, old_cluster } => self.restore_record(id, *old_cluster),
        }
    }

    fn restore_record(&self, id: &str, old: u64) -> Result<Option<(StatusKind, String)>> {
        let o = self.observed;
        let c = o.config.as_ref().map_err(|e| Error::Config(e.clone()))?;
        let ep = super::desired::client_url(o, c);
        let v = crate::etcd::block_on(crate::etcd::view_from(&ep))?;
        let alone = v.members.len() == 1 && v.members[0].id == v.status.member_id;
        if !alone || v.cluster_id() == old || v.status.leader != v.status.member_id {
            return Ok(Some((
                StatusKind::Blocked,
                format!(
                    "restore {id}: the member at {ep} is not the restored cluster alone (cluster {:x}, {} member(s), leader {:x}); see the debug action",
                    v.cluster_id(),
                    v.members.len(),
                    v.status.leader
                ),
            )));
        }
        if !self.tools.is_leader()? {
            return Ok(Some((
                StatusKind::Waiting,
                format!("restore {id}: restored; waiting for leadership to record its cluster"),
            )));
        }
        let mut d = Databag::new();
        d.insert(CLUSTER_ID.into(), format!("{:x}", v.cluster_id()));
        d.insert(CLUSTER.into(), v.cluster_string(false));
        d.insert("leader_address".into(), ep);
        d.insert(DONE.into(), id.to_string());
        self.set_leader_data(&d)?;
        info!(
            "restore {id}: cluster {:x} replaces {old:x}; the other units rejoin it",
            v.cluster_id()
        );
        Ok(None)
    }
}
