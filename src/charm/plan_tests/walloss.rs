//! A `member/` without its WAL is never restarted as its old voter.

use super::*;

/// etcd/2 at 10.0.0.3: `member/` is there, its WAL is not; etcd is down.
/// The cluster (seen through peers) still lists etcd2 as a started voter.
fn lost_wal() -> Observed {
    let mut o = fresh(false);
    o.unit = "etcd/2".into();
    o.member_name = "etcd2".into();
    o.address = "10.0.0.3".into();
    o.client_address = "10.0.0.3".into();
    o.leader.app = bag(&[
        ("token", "ABC123"),
        ("cluster-id", "cc"),
        (
            "join-etcd2",
            "b2 etcd0=http://10.0.0.1:2380,etcd2=http://10.0.0.3:2380",
        ),
    ]);
    o.own_bag = bag(&[("member-id", "b2"), ("peer-url", "http://10.0.0.3:2380")]);
    let mut loc = canonical(None);
    loc.exists = true;
    loc.facts.member_dir = true;
    o.disk.locations = vec![loc];
    o.cluster = Some(view(
        0xcc,
        0xaa,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xb2, "etcd2", "10.0.0.3", false),
        ],
    ));
    o
}

#[test]
fn it_is_set_aside_and_never_started_as_its_old_voter() {
    let o = lost_wal();
    let p = plan(&o, &paths(), None);
    assert!(has(
        &p,
        |s| matches!(s, Step::MoveDataAside { reason, .. } if reason.contains("no readable WAL"))
    ));
    assert!(!has(&p, |s| matches!(
        s,
        Step::StartEtcd | Step::WriteConfig { .. }
    )));
    assert!(has(&p, |s| matches!(s, Step::Publish(d)
        if d.get("stale-member").map(String::as_str) == Some("b2")
        && d.get("member-id").map(String::as_str) == Some(""))));
    let (k, m) = status(&p).unwrap();
    assert_eq!(k, StatusKind::Waiting);
    assert!(m.contains("b2"), "{m}");
}

#[test]
fn once_set_aside_it_still_waits_for_the_old_voter_to_go() {
    let mut o = lost_wal();
    o.disk.locations[0].facts.member_dir = false;
    o.own_bag.insert("stale-member".into(), "b2".into());
    let p = plan(&o, &paths(), None);
    assert!(!has(&p, |s| matches!(
        s,
        Step::StartEtcd | Step::MoveDataAside { .. }
    )));
}

#[test]
fn the_leader_removes_the_old_voter_then_adds_the_unit_as_a_learner() {
    let mut o = healthy_leader();
    o.peers.insert(
        "etcd/2".into(),
        bag(&[
            ("peer-url", "http://10.0.0.3:2380"),
            ("client-url", "http://10.0.0.3:2379"),
            ("stale-member", "b2"),
        ]),
    );
    sees(
        &mut o,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xb2, "etcd2", "10.0.0.3", false),
        ],
    );
    let p = plan(&o, &paths(), None);
    assert!(p.steps.contains(&Step::RemoveMember {
        name: "etcd2".into(),
        id: 0xb2
    }));
    // Once it is gone, the unit is a plain joiner.
    sees(&mut o, vec![member(0xaa, "etcd0", "10.0.0.1", false)]);
    let p = plan(&o, &paths(), None);
    assert!(p.steps.contains(&Step::AddMember {
        name: "etcd2".into(),
        peer_url: "http://10.0.0.3:2380".into()
    }));
}

#[test]
fn a_stale_claim_for_a_member_at_another_url_is_ignored() {
    let mut o = healthy_leader();
    o.peers.insert(
        "etcd/2".into(),
        bag(&[("peer-url", "http://10.0.0.9:2380"), ("stale-member", "aa")]),
    );
    let p = plan(&o, &paths(), None);
    assert!(!has(&p, |s| matches!(s, Step::RemoveMember { .. })));
}

#[test]
fn a_failed_joins_leftovers_are_set_aside_and_the_join_goes_on() {
    // The learner was added but never started: no voter to replace.
    let mut o = lost_wal();
    o.cluster = Some(view(
        0xcc,
        0xaa,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xb2, "", "10.0.0.3", true),
        ],
    ));
    let p = plan(&o, &paths(), None);
    let i = |f: &dyn Fn(&Step) -> bool| p.steps.iter().position(f).unwrap();
    assert!(
        i(&|s| matches!(s, Step::MoveDataAside { .. })) < i(&|s| *s == Step::StartEtcd),
        "{:?}",
        p.steps
    );
}
