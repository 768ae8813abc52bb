//! The agent's decisions: a pure function from what one check saw to what
//! it does. The loop (run.rs) observes, calls [`decide`], and carries the
//! actions out; everything that can be argued about lives here.
//!
//! # Rules
//! - No answer from the own member, or it is a learner or sees no leader:
//!   nothing but a problem report.
//! - A NOSPACE alarm anywhere: recovery mode ([`nospace_turn`]). The
//!   rolling turn cannot be taken then (etcd refuses every put and lease
//!   grant while an alarm is raised), so the members whose own alarm is
//!   raised go one at a time in a fixed order instead: by member ID, each
//!   only once every alarmed member before it answers and has room, and
//!   only while nobody holds the turn. It compacts (cluster-wide, to the
//!   current revision), defragments if its db needs room, and disarms its
//!   own alarm once it has room. Since it disarms only after its defrag,
//!   an alarm stays raised while any of these defrags runs, so no ordinary
//!   defrag can take the turn meanwhile. Members without an alarm wait;
//!   what compaction left fragmented there is defragmented afterwards,
//!   under the turn.
//! - Otherwise a scheduled snapshot when one is due (the newest scheduled
//!   snapshot plus the interval; with none yet, the agent's start plus the
//!   unit's phase, [`phase`], so the units of an application do not all
//!   snapshot at once) and only while it leaves room ([`snapshot_room`]).
//!   Scheduled snapshots are the agent's own rolling copies: after each
//!   one the oldest beyond the retention count go ([`to_prune`]); nothing
//!   else is ever deleted (operator snapshots live elsewhere). And a
//!   defrag (under the rolling turn) when the free share of
//!   the db file reaches the threshold; on the raft leader only once no
//!   other voter is past it too (the leader last, [`follower_first`]).

use std::path::PathBuf;

/// Below this many reclaimable bytes a defrag is not worth a turn (unless
/// the threshold is 0, which means every check).
pub const MIN_RECLAIM: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSeen {
    pub id: u64,
    pub db_size: u64,
    pub db_size_in_use: u64,
    pub is_learner: bool,
    pub leader: u64,
}

impl MemberSeen {
    pub fn reclaimable(&self) -> u64 {
        self.db_size.saturating_sub(self.db_size_in_use)
    }

    /// Percent of the db file that is free pages.
    pub fn fragmentation(&self) -> u8 {
        if self.db_size == 0 {
            return 0;
        }
        (self.reclaimable() * 100 / self.db_size).min(100) as u8
    }
}

/// What one check saw. Times are seconds since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub now: u64,
    pub started_at: u64,
    /// This unit's member, or why it did not answer.
    pub member: Result<MemberSeen, String>,
    /// Every member's storage, as each answered (None: no answer), for
    /// the NOSPACE order.
    pub others: Vec<(u64, Option<MemberSeen>)>,
    /// Raised alarms: (member ID, `Nospace`/`Corrupt`/…).
    pub alarms: Vec<(u64, String)>,
    /// The scheduled snapshots on disk with their times, any order.
    pub snapshots: Vec<(PathBuf, u64)>,
    /// The file system the scheduled snapshots go to, or why it could not
    /// be read.
    pub snapshot_fs: Result<SnapshotFs, String>,
    /// The rolling turn's holder, if any (the key's value).
    pub turn_holder: Option<String>,
    /// etcd's quota for this member (its default when not configured).
    pub quota: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFs {
    pub dir: PathBuf,
    /// Bytes free there now.
    pub free: u64,
    /// It is the file system of the data dir (etcd's WAL and db).
    pub holds_data: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Seconds; 0: no scheduled snapshots.
    pub snapshot_interval: u64,
    pub snapshot_retention: usize,
    pub defrag_threshold: u8,
    /// Seconds after the agent's start of the first snapshot ([`phase`]).
    pub snapshot_phase: u64,
}

/// The least the data dir's file system keeps free after a scheduled
/// snapshot: etcd's db may grow to twice its size while it compacts and
/// defragments, and below 1 GiB a busy WAL runs out first.
pub const KEEP_FREE_MIN: u64 = 1 << 30;

/// Where a unit's schedule starts within the interval: from its name
/// (FNV-1a), so it is the same at every start of the agent and differs
/// between the units of an application.
pub fn phase(unit: &str, interval: u64) -> u64 {
    let h = unit.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    h % interval.max(1)
}

/// Whether a snapshot of a `db`-byte member may be written to `fs`. On the
/// data dir's file system it must leave the larger of 2 × db and 1 GiB
/// free; elsewhere it must fit with the copy margin (space.rs).
pub fn snapshot_room(db: u64, fs: &SnapshotFs) -> Result<(), String> {
    use crate::space::human;
    if !fs.holds_data {
        return match crate::space::shortfall("a scheduled snapshot", db, &fs.dir, fs.free) {
            Some(msg) => Err(format!("scheduled snapshot skipped: {msg}")),
            None => Ok(()),
        };
    }
    let keep = db.saturating_mul(2).max(KEEP_FREE_MIN);
    let after = fs.free.saturating_sub(db);
    if fs.free >= db.saturating_add(keep) {
        return Ok(());
    }
    Err(format!(
        "scheduled snapshot skipped: it would leave {} free on the data dir's file system, and etcd \
         needs at least {} there (the larger of 2 × its {} db and 1 GiB); free space, lower \
         agent_snapshot_retention, or attach bigger storage",
        human(after),
        human(keep),
        human(db)
    ))
}

/// The scheduled snapshots to remove once a new one is written: all but
/// the newest `retention` (by time, then name), oldest first.
pub fn to_prune(snapshots: &[(PathBuf, u64)], retention: usize) -> Vec<PathBuf> {
    let mut by_age: Vec<&(PathBuf, u64)> = snapshots.iter().collect();
    by_age.sort_by(|a, b| (b.1, &b.0).cmp(&(a.1, &a.0)));
    let mut old: Vec<PathBuf> = by_age
        .into_iter()
        .skip(retention.max(1))
        .map(|(p, _)| p.clone())
        .collect();
    old.reverse();
    old
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Snapshot,
    /// Defragment this member under the rolling turn.
    Defrag {
        fragmentation: u8,
    },
    /// NOSPACE: compact, defragment this member if it needs room (one at a
    /// time, [`nospace_turn`]), disarm its alarm once it has room.
    RecoverNospace {
        defrag: bool,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    pub actions: Vec<Action>,
    /// Why nothing (more) was done, when an operator should know.
    pub waiting: Option<String>,
    pub problems: Vec<String>,
    /// A due snapshot not taken for want of room: the backups an operator
    /// counts on have stopped, so it goes to the unit's status.
    pub snapshot_skipped: Option<String>,
}

/// A db file at this percent of the quota or more needs room (a compaction
/// alone does not shrink the file; only a defrag does).
pub const ROOM_PCT: u64 = 95;

pub fn needs_room(m: &MemberSeen, quota: u64) -> bool {
    m.db_size.saturating_mul(100) >= quota.saturating_mul(ROOM_PCT)
}

pub fn has_nospace(alarms: &[(u64, String)]) -> bool {
    alarms.iter().any(|(_, a)| a == "Nospace")
}

/// In NOSPACE mode: whether this member goes now, or who it waits for.
pub fn nospace_turn(s: &Seen, me: &MemberSeen) -> Result<(), String> {
    if let Some(h) = &s.turn_holder {
        return Err(format!("the rolling turn is held ({h})"));
    }
    let mut order: Vec<&(u64, Option<MemberSeen>)> = s.others.iter().collect();
    order.sort_by_key(|(id, _)| *id);
    let alarmed = |id: u64| s.alarms.iter().any(|(m, a)| *m == id && a == "Nospace");
    for (id, m) in order.iter().filter(|(id, _)| *id < me.id && alarmed(*id)) {
        match m {
            None => {
                return Err(format!(
                    "member {id:x} does not answer (it may be defragmenting)"
                ))
            }
            Some(m) if needs_room(m, s.quota) => {
                return Err(format!("member {id:x} goes first (it needs room too)"))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

pub fn decide(s: &Seen, p: &Policy) -> Decision {
    let mut d = Decision::default();
    let me = match &s.member {
        Err(e) => {
            // Not a problem of the agent's to put in the unit's status: the
            // hook sees etcd's health itself, and fresher (a note from a
            // check made while the member restarted would outlive it).
            d.waiting = Some(format!("etcd does not answer: {e}"));
            return d;
        }
        Ok(m) => m,
    };
    if me.is_learner || me.leader == 0 {
        d.waiting = Some("this member is not a voter with a leader yet".into());
        return d;
    }
    if has_nospace(&s.alarms) {
        let alarmed = s
            .alarms
            .iter()
            .any(|(id, a)| *id == me.id && a == "Nospace");
        if !alarmed {
            d.waiting = Some("NOSPACE raised on another member; its agent clears it".into());
        } else if needs_room(me, s.quota) {
            match nospace_turn(s, me) {
                Ok(()) => d.actions.push(Action::RecoverNospace { defrag: true }),
                Err(why) => d.waiting = Some(format!("NOSPACE: waiting: {why}")),
            }
        } else {
            // Room already: compact and disarm, no defrag to order.
            d.actions.push(Action::RecoverNospace { defrag: false });
        }
        return d;
    }
    if p.snapshot_interval > 0 {
        let due = match s.snapshots.iter().map(|(_, t)| *t).max() {
            Some(newest) => newest.saturating_add(p.snapshot_interval),
            None => s.started_at.saturating_add(p.snapshot_phase),
        };
        if s.now >= due {
            match s
                .snapshot_fs
                .as_ref()
                .map_err(|e| format!("scheduled snapshot skipped: {e}"))
                .and_then(|fs| snapshot_room(me.db_size, fs))
            {
                Ok(()) => d.actions.push(Action::Snapshot),
                Err(why) => d.snapshot_skipped = Some(why),
            }
        }
    }
    let frag = me.fragmentation();
    let worth = p.defrag_threshold == 0 || me.reclaimable() >= MIN_RECLAIM;
    if p.defrag_threshold < 100 && frag >= p.defrag_threshold && worth && me.db_size > 0 {
        match follower_first(s, me, p) {
            Some(id) => {
                d.waiting = Some(format!(
                "defrag waits: the raft leader goes last (member {id:x} is past the threshold too)"
            ))
            }
            None => d.actions.push(Action::Defrag {
                fragmentation: frag,
            }),
        }
    }
    d
}

/// On the raft leader: another voter that is past the threshold with room
/// to win back (its own agent defragments it), so the leader goes last, as
/// the defrag action does it. Each agent decides for its own member only,
/// so the order comes from every leader agent waiting for the others.
fn follower_first(s: &Seen, me: &MemberSeen, p: &Policy) -> Option<u64> {
    if me.leader != me.id {
        return None;
    }
    s.others.iter().find_map(|(id, m)| {
        let m = m.as_ref()?;
        let wants = *id != me.id
            && !m.is_learner
            && m.fragmentation() >= p.defrag_threshold
            && m.reclaimable() >= MIN_RECLAIM;
        wants.then_some(*id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn member(id: u64, size: u64, in_use: u64) -> MemberSeen {
        MemberSeen {
            id,
            db_size: size,
            db_size_in_use: in_use,
            is_learner: false,
            leader: 1,
        }
    }

    fn seen(me: MemberSeen) -> Seen {
        Seen {
            now: 10_000,
            started_at: 9_990,
            others: vec![(me.id, Some(me.clone()))],
            member: Ok(me),
            alarms: vec![],
            snapshots: vec![],
            snapshot_fs: Ok(SnapshotFs {
                dir: "/b".into(),
                free: 100 << 30,
                holds_data: true,
            }),
            turn_holder: None,
            quota: 2 << 30,
        }
    }

    fn policy() -> Policy {
        Policy {
            snapshot_interval: 3600,
            snapshot_retention: 2,
            defrag_threshold: 50,
            snapshot_phase: 3600,
        }
    }

    #[test]
    fn a_quiet_member_needs_nothing() {
        let d = decide(&seen(member(1, 100 * MIB, 90 * MIB)), &policy());
        assert_eq!(d, Decision::default());
    }

    #[test]
    fn no_answer_waits_and_does_nothing_else() {
        let mut s = seen(member(1, 0, 0));
        s.member = Err("connection refused".into());
        let d = decide(&s, &policy());
        assert!(d.actions.is_empty());
        assert!(d.problems.is_empty(), "{:?}", d.problems);
        assert!(d.waiting.as_deref().unwrap().contains("connection refused"));
        let mut s = seen(member(1, 100 * MIB, 10 * MIB));
        s.member.as_mut().unwrap().is_learner = true;
        assert!(decide(&s, &policy()).actions.is_empty());
    }

    #[test]
    fn snapshots_follow_the_newest_or_the_start() {
        let mut s = seen(member(1, MIB, MIB));
        assert!(!decide(&s, &policy()).actions.contains(&Action::Snapshot));
        s.now = s.started_at + 3600;
        assert!(decide(&s, &policy()).actions.contains(&Action::Snapshot));
        // A snapshot taken before a restart of the agent still counts.
        s.snapshots = vec![("a".into(), s.now - 100)];
        assert!(!decide(&s, &policy()).actions.contains(&Action::Snapshot));
        s.snapshots = vec![("a".into(), s.now - 3600)];
        assert!(decide(&s, &policy()).actions.contains(&Action::Snapshot));
        let mut off = policy();
        off.snapshot_interval = 0;
        assert!(!decide(&s, &off).actions.contains(&Action::Snapshot));
    }

    #[test]
    fn at_the_retention_count_snapshots_go_on_and_the_oldest_go() {
        let mut s = seen(member(1, MIB, MIB));
        s.snapshots = vec![("b".into(), 20), ("a".into(), 10)];
        s.now = 1_000_000;
        let d = decide(&s, &policy());
        assert!(d.actions.contains(&Action::Snapshot), "{d:?}");
        assert_eq!(d.snapshot_skipped, None);
        // After the third, the oldest beyond 2 goes; same second: by name.
        let after = vec![
            ("b".into(), 20),
            ("c".into(), 30),
            ("a".into(), 10),
            ("a0".into(), 10),
        ];
        assert_eq!(
            to_prune(&after, 2),
            vec![PathBuf::from("a"), PathBuf::from("a0")]
        );
        assert!(to_prune(&after, 4).is_empty());
        assert_eq!(to_prune(&after, 0).len(), 3, "at least one is kept");
    }

    #[test]
    fn a_snapshot_must_leave_the_data_dir_room() {
        const GIB: u64 = 1 << 30;
        let room = |db, free, holds_data| {
            let dir = "/b".into();
            snapshot_room(
                db,
                &SnapshotFs {
                    dir,
                    free,
                    holds_data,
                },
            )
        };
        // Small db: 1 GiB must stay free after it.
        assert!(room(100 * MIB, GIB + 100 * MIB, true).is_ok());
        let e = room(100 * MIB, GIB + 99 * MIB, true).unwrap_err();
        assert!(
            e.contains("leave 1023.0 MiB free") && e.contains("at least 1.0 GiB"),
            "{e}"
        );
        // Large db: twice its size.
        assert!(room(2 * GIB, 6 * GIB, true).is_ok());
        let e = room(2 * GIB, 6 * GIB - 1, true).unwrap_err();
        assert!(e.contains("at least 4.0 GiB"), "{e}");
        // Another file system: the copy and its margin.
        assert!(room(2 * GIB, 3 * GIB, false).is_ok());
        assert!(room(2 * GIB, 2 * GIB, false).is_err());
        // In decide: skipped, said, and no snapshot.
        let mut s = seen(member(1, 100 * MIB, 100 * MIB));
        s.now = s.started_at + 3600;
        s.snapshot_fs = Ok(SnapshotFs {
            dir: "/b".into(),
            free: 500 * MIB,
            holds_data: true,
        });
        let d = decide(&s, &policy());
        assert!(!d.actions.contains(&Action::Snapshot));
        assert!(d
            .snapshot_skipped
            .unwrap()
            .starts_with("scheduled snapshot skipped"));
        s.snapshot_fs = Err("statvfs: no such file".into());
        assert!(decide(&s, &policy())
            .snapshot_skipped
            .unwrap()
            .contains("statvfs"));
    }

    #[test]
    fn the_units_phases_differ_and_stay() {
        let ps: Vec<u64> = ["etcd/0", "etcd/1", "etcd/2"]
            .iter()
            .map(|u| phase(u, 3600))
            .collect();
        assert!(ps.iter().all(|p| *p < 3600), "{ps:?}");
        assert!(ps[0] != ps[1] && ps[1] != ps[2] && ps[0] != ps[2], "{ps:?}");
        assert_eq!(phase("etcd/1", 3600), ps[1]);
        assert_eq!(phase("etcd/1", 0), 0);
    }

    #[test]
    fn the_raft_leader_defragments_last() {
        let p = policy();
        // Member 1 leads; member 2 is fragmented too: 1 waits for it.
        let mut s = seen(member(1, 100 * MIB, 40 * MIB));
        s.others.push((2, Some(member(2, 100 * MIB, 30 * MIB))));
        let d = decide(&s, &p);
        assert!(d.actions.is_empty(), "{d:?}");
        assert!(d.waiting.unwrap().contains("leader goes last (member 2"));
        // Once 2 is done (or it has too little to win back), 1 goes.
        s.others[1].1 = Some(member(2, 100 * MIB, 99 * MIB + MIB / 2));
        let d = decide(&s, &p);
        assert_eq!(d.actions, vec![Action::Defrag { fragmentation: 60 }]);
        // The follower itself never waits for the leader.
        let mut f = seen(member(2, 100 * MIB, 30 * MIB));
        f.others.push((1, Some(member(1, 100 * MIB, 40 * MIB))));
        assert_eq!(
            decide(&f, &p).actions,
            vec![Action::Defrag { fragmentation: 70 }]
        );
    }

    #[test]
    fn defrag_past_the_threshold_and_worth_it() {
        let p = policy();
        let d = decide(&seen(member(1, 100 * MIB, 40 * MIB)), &p);
        assert_eq!(d.actions, vec![Action::Defrag { fragmentation: 60 }]);
        // Too little to give back.
        assert!(decide(&seen(member(1, MIB, MIB / 4)), &p)
            .actions
            .is_empty());
        // 0: every check; 100: never.
        let mut every = p;
        every.defrag_threshold = 0;
        assert_eq!(
            decide(&seen(member(1, MIB, MIB)), &every).actions,
            vec![Action::Defrag { fragmentation: 0 }]
        );
        let mut never = p;
        never.defrag_threshold = 100;
        assert!(decide(&seen(member(1, 100 * MIB, 0)), &never)
            .actions
            .is_empty());
    }

    #[test]
    fn nospace_goes_in_member_order_without_the_turn() {
        let quota = 8 * MIB;
        let full = |id| member(id, 8 * MIB, 8 * MIB);
        let roomy = |id| member(id, MIB, MIB);
        let mut s = seen(full(2));
        s.quota = quota;
        s.alarms = vec![(1, "Nospace".into()), (2, "Nospace".into())];
        s.others = vec![(1, Some(full(1))), (2, Some(full(2))), (3, Some(full(3)))];
        // Member 1 needs room first: 2 waits, with no snapshot or defrag.
        let d = decide(&s, &policy());
        assert!(d.actions.is_empty());
        assert!(d.waiting.unwrap().contains("member 1 goes first"));
        // An alarmed member that does not answer may be defragmenting: wait.
        s.others[0].1 = None;
        assert!(decide(&s, &policy()).actions.is_empty());
        // Members without an alarm are not waited for (they do not act
        // until the alarms are gone); nor is member 3, after 2.
        s.alarms = vec![(2, "Nospace".into()), (3, "Nospace".into())];
        assert_eq!(
            decide(&s, &policy()).actions,
            vec![Action::RecoverNospace { defrag: true }]
        );
        s.alarms = vec![(1, "Nospace".into()), (2, "Nospace".into())];
        // Once 1 has room, 2 goes.
        s.others[0].1 = Some(roomy(1));
        assert_eq!(
            decide(&s, &policy()).actions,
            vec![Action::RecoverNospace { defrag: true }]
        );
        // Never while the turn is held (a defrag of the ordinary kind).
        s.turn_holder = Some("etcd/0 agent: defragment".into());
        assert!(decide(&s, &policy()).actions.is_empty());
        // A member without an alarm of its own does nothing, full or not.
        for me in [roomy(2), full(2)] {
            let mut s = seen(me);
            s.quota = quota;
            s.alarms = vec![(3, "Nospace".into())];
            let d = decide(&s, &policy());
            assert!(d.actions.is_empty());
            assert!(d.waiting.unwrap().contains("its agent clears it"));
        }
        let mut s = seen(roomy(2));
        s.quota = quota;
        // Its own alarm with room: compact and disarm, no defrag (so no
        // order to wait for, and none to overlap with).
        s.alarms = vec![(2, "Nospace".into())];
        s.others = vec![(1, Some(full(1))), (2, Some(roomy(2)))];
        assert_eq!(
            decide(&s, &policy()).actions,
            vec![Action::RecoverNospace { defrag: false }]
        );
    }
}
