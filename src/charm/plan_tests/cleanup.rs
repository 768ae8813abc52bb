//! Members without a unit are removed by later hooks; stop always stops.

use super::*;

/// Leader etcd0 with peers etcd1 and etcd2 in the relation; the live list
/// also holds etcd3, whose unit is `goal` (None: goal-state not read).
fn with_etcd3(goal: Option<&[(&str, &str)]>) -> Observed {
    let mut o = healthy_leader();
    o.event = Event::UpdateStatus;
    for (u, ip) in [("etcd/1", "10.0.0.2"), ("etcd/2", "10.0.0.3")] {
        o.peers.insert(
            u.into(),
            bag(&[
                ("peer-url", &format!("http://{ip}:2380")),
                ("client-url", &format!("http://{ip}:2379")),
                ("member-id", "1"),
            ]),
        );
    }
    sees(
        &mut o,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xb1, "etcd1", "10.0.0.2", false),
            member(0xb2, "etcd2", "10.0.0.3", false),
            member(0xb3, "etcd3", "10.0.0.4", false),
        ],
    );
    o.goal_units = goal.map(|g| {
        g.iter()
            .map(|(u, s)| (u.to_string(), s.to_string()))
            .collect()
    });
    o
}

const ALIVE3: &[(&str, &str)] = &[
    ("etcd/0", "active"),
    ("etcd/1", "active"),
    ("etcd/2", "active"),
];

fn removes(p: &Plan, id: u64) -> bool {
    has(
        p,
        |s| matches!(s, Step::RemoveMember { id: i, .. } if *i == id),
    )
}

#[test]
fn a_member_whose_unit_is_gone_is_removed_by_update_status() {
    let p = plan(&with_etcd3(Some(ALIVE3)), &paths(), None);
    assert!(p.steps.contains(&Step::RemoveMember {
        name: "etcd3".into(),
        id: 0xb3
    }));
    assert!(!removes(&p, 0xb1) && !removes(&p, 0xb2) && !removes(&p, 0xaa));
}

#[test]
fn a_dying_unit_is_unitless_too() {
    let mut goal = ALIVE3.to_vec();
    goal.push(("etcd/3", "dying"));
    assert!(removes(
        &plan(&with_etcd3(Some(&goal)), &paths(), None),
        0xb3
    ));
}

#[test]
fn without_goal_state_nothing_is_removed() {
    // relation-joined may simply not have run yet for etcd/3.
    let p = plan(&with_etcd3(None), &paths(), None);
    assert!(!has(&p, |s| matches!(s, Step::RemoveMember { .. })));
}

#[test]
fn a_unit_the_model_still_expects_is_not_removed() {
    let mut goal = ALIVE3.to_vec();
    goal.push(("etcd/3", "active"));
    let p = plan(&with_etcd3(Some(&goal)), &paths(), None);
    assert!(!has(&p, |s| matches!(s, Step::RemoveMember { .. })));
}

#[test]
fn a_pending_joiner_under_another_name_is_not_removed() {
    // etcd/7's peer URL is the member's: it is that unit's, whatever its name.
    let mut o = with_etcd3(Some(&[
        ("etcd/0", "active"),
        ("etcd/1", "active"),
        ("etcd/2", "active"),
        ("etcd/7", "active"),
    ]));
    o.peers.insert(
        "etcd/7".into(),
        bag(&[("peer-url", "http://10.0.0.4:2380")]),
    );
    assert!(!removes(&plan(&o, &paths(), None), 0xb3));
}

#[test]
fn the_leader_never_removes_itself_as_unitless() {
    let mut o = with_etcd3(Some(&[("etcd/1", "active"), ("etcd/2", "active")]));
    o.goal_units.as_mut().unwrap().remove("etcd/0");
    assert!(!removes(&plan(&o, &paths(), None), 0xaa));
}

#[test]
fn stop_stops_etcd_even_when_the_plan_is_blocked() {
    let mut o = healthy_leader();
    o.event = Event::Stop;
    o.config = Err("config port=1 is bad".into());
    let p = plan(&o, &paths(), None);
    assert_eq!(status(&p).unwrap().0, StatusKind::Blocked);
    assert_eq!(p.steps.last(), Some(&Step::StopEtcd));
}
