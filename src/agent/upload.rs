//! Scheduled snapshots off the machine: while the charm has handed the
//! agent the s3-parameters bucket (charm/s3_handoff.rs), each scheduled
//! snapshot of the member that is raft leader is also uploaded there as a
//! backup (`<path>/<backup-id>` and its `.sha256`), so `list-backups` and
//! `restore backup-id=` see it. One uploader per cluster: every agent
//! snapshots on the same schedule, and the leader's copy is the freshest.
//! The bucket keeps what it is given; its lifecycle rules prune it.

use super::decide::MemberSeen;
use crate::charm::s3_params::S3Params;
use std::path::Path;

/// Whether this snapshot goes to the bucket (pure).
pub fn wanted(bucket: Option<&S3Params>, me: Option<&MemberSeen>) -> bool {
    bucket.is_some() && me.is_some_and(|m| !m.is_learner && m.id != 0 && m.leader == m.id)
}

/// After a scheduled snapshot at `path` (as the machine sees it): None
/// when it stays local, else the upload's backup id or why it failed.
pub fn after_snapshot(
    paths: &crate::paths::Paths,
    path: &str,
    me: Option<&MemberSeen>,
) -> Option<Result<String, String>> {
    let bucket = crate::charm::s3_handoff::read(paths);
    let p = bucket.as_ref().filter(|_| wanted(bucket.as_ref(), me))?;
    Some(upload(p, &paths.host(path)))
}

/// Uploads `file`: the backup id, or why not.
pub fn upload(p: &S3Params, file: &Path) -> Result<String, String> {
    let b = crate::s3::Bucket::new(p).map_err(|e| e.to_string())?;
    let id = crate::s3::block_on(b.free_id()).map_err(|e| e.to_string())?;
    crate::s3::block_on(b.upload(&id, file))
        .map(|_| id.clone())
        .map_err(|e| format!("backup {id} not uploaded: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_raft_leader_uploads_and_only_while_a_bucket_is_related() {
        let bag = [("bucket", "b"), ("access-key", "a"), ("secret-key", "s")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let p = crate::charm::s3_params::parse(&bag).unwrap();
        let m = |id, leader, is_learner| MemberSeen {
            id,
            db_size: 0,
            db_size_in_use: 0,
            is_learner,
            leader,
        };
        assert!(wanted(Some(&p), Some(&m(1, 1, false))));
        assert!(!wanted(None, Some(&m(1, 1, false))));
        assert!(!wanted(Some(&p), Some(&m(1, 2, false))));
        assert!(!wanted(Some(&p), Some(&m(1, 1, true))));
        assert!(!wanted(Some(&p), Some(&m(0, 0, false))));
        assert!(!wanted(Some(&p), None));
    }
}
