//! What the unit's status says about space: a raised alarm (NOSPACE,
//! CORRUPT) blocks it naming the member, its db size against the quota and
//! the way out; a quota larger than the data dir's file system blocks it
//! too. And which members count as healthy peers. Observe reads (one alarm
//! call where the hook already talks to etcd); the judging here is pure.

use super::observed::Observed;
use crate::etcd::{self, ClusterView};
use crate::hooktools::StatusKind;
use crate::space::human;
use std::path::Path;
use std::time::Duration;

pub use super::observed::AlarmSeen;

/// etcd's quota when none is configured.
pub const DEFAULT_QUOTA: u64 = 2 << 30;
/// How long the final status waits for a peer's answer.
const PEER_PROBE: Duration = Duration::from_secs(2);

/// The raised alarms as `endpoint` reports them: one call, and one status
/// call per alarmed member only when there is an alarm.
pub fn observe(endpoint: &str, view: Option<&ClusterView>) -> Vec<AlarmSeen> {
    let Ok(list) = etcd::block_on(etcd::alarms(endpoint)) else {
        return Vec::new();
    };
    list.into_iter()
        .map(|(member, name)| {
            let url = view
                .and_then(|v| v.by_id(member))
                .and_then(|m| m.client_urls.first().cloned());
            let db_size = url
                .and_then(|u| etcd::block_on(etcd::member_detail(&u)).ok())
                .map(|d| d.db_size);
            AlarmSeen {
                member,
                name,
                db_size,
            }
        })
        .collect()
}

/// Total bytes of the file system holding `path` (or its nearest existing
/// ancestor).
pub fn fs_size(path: &Path) -> Option<u64> {
    let existing = path.ancestors().find(|a| a.exists())?;
    let st = nix::sys::statvfs::statvfs(existing).ok()?;
    Some((st.blocks() as u64).saturating_mul(st.fragment_size() as u64))
}

fn member_name(view: Option<&ClusterView>, id: u64) -> String {
    view.and_then(|v| v.by_id(id))
        .filter(|m| !m.name.is_empty())
        .map_or_else(|| format!("member {id:x}"), |m| m.name.clone())
}

/// Blocked statuses for raised alarms and an impossible quota.
pub fn statuses(o: &Observed) -> Vec<(StatusKind, String)> {
    let quota = o
        .config
        .as_ref()
        .map(|c| c.quota_backend_bytes)
        .unwrap_or(0);
    judge(
        &o.alarms,
        o.cluster.as_ref().or(o.local.as_ref()),
        quota,
        o.data_fs_bytes,
    )
}

/// [`statuses`] from its pieces (pure): `quota` 0 is etcd's default.
pub fn judge(
    alarms: &[AlarmSeen],
    view: Option<&ClusterView>,
    quota: u64,
    data_fs_bytes: Option<u64>,
) -> Vec<(StatusKind, String)> {
    let mut out = Vec::new();
    let effective = if quota == 0 { DEFAULT_QUOTA } else { quota };
    for a in alarms {
        let name = member_name(view, a.member);
        let size = a.db_size.map_or_else(
            || "db size unknown".to_string(),
            |s| format!("db {}", human(s.max(0) as u64)),
        );
        let msg = match a.name.as_str() {
            "Nospace" => format!(
                "NOSPACE alarm on {name} ({size} of a {} quota): etcd refuses writes; run the compact action, then defrag, then alarm-disarm (or raise quota_backend_bytes)",
                human(effective)
            ),
            "Corrupt" => format!(
                "CORRUPT alarm on {name} ({size}): its data differs from the others; replace that unit (remove it, add a new one), then run alarm-disarm"
            ),
            other => format!(
                "{} alarm on {name} ({size}): run the alarm-list action, fix the cause, then alarm-disarm",
                other.to_ascii_uppercase()
            ),
        };
        out.push((StatusKind::Blocked, msg));
    }
    if let Some(fs) = data_fs_bytes {
        if quota > fs {
            out.push((
                StatusKind::Blocked,
                format!(
                    "config quota_backend_bytes={quota} ({}) is larger than the file system holding the data dir ({}): the disk would fill before etcd's quota; lower it or attach bigger storage",
                    human(quota),
                    human(fs)
                ),
            ));
        }
    }
    out
}

/// Members that count as healthy peers: started, voters, and answering.
pub fn count_healthy(v: &ClusterView, reachable: &[u64]) -> usize {
    v.members
        .iter()
        .filter(|m| !m.name.is_empty() && !m.is_learner && reachable.contains(&m.id))
        .count()
}

/// How many healthy peers the final status names, if the member that
/// answered is a voter with a leader. Asks every started voter at once.
pub fn healthy_peers(v: &ClusterView) -> Option<usize> {
    if v.status.is_learner || v.status.leader == 0 {
        return None;
    }
    let voters: Vec<etcd::Member> = v
        .members
        .iter()
        .filter(|m| !m.name.is_empty() && !m.is_learner)
        .cloned()
        .collect();
    let up = etcd::block_on(async {
        Ok::<_, etcd::EtcdError>(etcd::reachable(&voters, PEER_PROBE).await)
    })
    .unwrap_or_default();
    Some(count_healthy(v, &up))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd::{Member, MemberStatus};

    fn m(id: u64, name: &str, learner: bool) -> Member {
        Member {
            id,
            name: name.into(),
            peer_urls: vec![],
            client_urls: vec![format!("http://10.0.0.{id}:2379")],
            is_learner: learner,
        }
    }

    fn view() -> ClusterView {
        ClusterView {
            endpoint: "http://10.0.0.1:2379".into(),
            status: MemberStatus {
                member_id: 1,
                cluster_id: 9,
                leader: 1,
                version: "3.4.23".into(),
                raft_index: 1,
                is_learner: false,
                errors: vec![],
            },
            members: vec![
                m(1, "etcd0", false),
                m(2, "etcd1", false),
                m(3, "etcd2", true),
                m(4, "", false),
                m(5, "etcd4", false),
            ],
        }
    }

    #[test]
    fn learners_unstarted_and_unreachable_are_not_healthy_peers() {
        // 5 is down; 3 is a learner; 4 never started.
        assert_eq!(count_healthy(&view(), &[1, 2, 3, 4]), 2);
        assert_eq!(count_healthy(&view(), &[1, 2, 5]), 3);
    }

    #[test]
    fn an_alarm_blocks_naming_the_member_size_quota_and_way_out() {
        let v = view();
        let alarms = vec![AlarmSeen {
            member: 2,
            name: "Nospace".into(),
            db_size: Some(4 << 20),
        }];
        let s = judge(&alarms, Some(&v), 4 << 20, None);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].0, StatusKind::Blocked);
        for needle in [
            "NOSPACE",
            "etcd1",
            "4.0 MiB of a 4.0 MiB quota",
            "compact",
            "defrag",
            "alarm-disarm",
        ] {
            assert!(s[0].1.contains(needle), "{needle}: {}", s[0].1);
        }
        assert!(judge(&[], Some(&v), 4 << 20, Some(1 << 30)).is_empty());
        let s = judge(&[], Some(&v), 4 << 20, Some(1 << 20));
        assert!(s[0].1.contains("quota_backend_bytes=4194304"), "{s:?}");
        // The default quota (0) is never larger than the disk.
        assert!(judge(&[], Some(&v), 0, Some(1 << 20)).is_empty());
        let c = judge(
            &[AlarmSeen {
                member: 9,
                name: "Corrupt".into(),
                db_size: None,
            }],
            Some(&v),
            0,
            None,
        );
        assert!(c[0].1.contains("CORRUPT alarm on member 9"), "{c:?}");
    }
}
