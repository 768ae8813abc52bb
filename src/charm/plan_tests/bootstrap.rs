//! Every case of the bootstrap decision: who decides, who starts, who waits.

use super::*;

fn juju4(mut o: Observed) -> Observed {
    o.has_leader_tools = false;
    o
}

fn starts(p: &Plan) -> bool {
    has(p, |s| matches!(s, Step::StartEtcd))
}

fn decided(name: &str) -> Databag {
    bag(&[("token", "ABC123"), ("bootstrap-member", name)])
}

#[test]
fn under_juju_4_phase_1_ends_the_hook_before_anything_starts() {
    let p = plan(&juju4(fresh(true)), &paths(), None);
    assert!(p.commit_first, "the app databag commits only at exit 0");
    assert!(p.steps.contains(&Step::SetLeaderData(bag(&[
        ("bootstrap-member", "etcd0"),
        ("token", "FRESH0TOKEN00001")
    ]))));
    assert!(!starts(&p));
    assert!(!has(&p, |s| matches!(s, Step::WriteConfig { .. })));
}

#[test]
fn under_juju_4_without_the_peer_relation_nothing_is_decided() {
    let mut o = juju4(fresh(true));
    o.peer_relation = None;
    let p = plan(&o, &paths(), None);
    assert!(!has(&p, |s| matches!(s, Step::SetLeaderData(_))));
    assert!(!starts(&p));
    assert_eq!(status(&p).unwrap().0, StatusKind::Waiting);
}

#[test]
fn under_juju_4_the_committed_decision_starts_etcd_in_the_next_hook() {
    let mut o = juju4(fresh(true));
    o.leader.app = decided("etcd0");
    let p = plan(&o, &paths(), None);
    assert!(!p.commit_first);
    assert!(starts(&p));
    assert!(p.steps.contains(&Step::RecordCluster));
}

#[test]
fn a_later_leader_honours_a_decision_naming_another_unit() {
    for juju4_ in [false, true] {
        let mut o = fresh(true);
        o.has_leader_tools = !juju4_;
        o.unit = "etcd/1".into();
        o.member_name = "etcd1".into();
        o.leader.app = decided("etcd0");
        o.peers.insert(
            "etcd/0".into(),
            bag(&[
                ("peer-url", "http://10.0.0.1:2380"),
                ("member-name", "etcd0"),
            ]),
        );
        let p = plan(&o, &paths(), None);
        assert!(!starts(&p), "{:?}", p.steps);
        // (Mirrored into the other home at most, never changed.)
        assert!(!has(&p, |s| matches!(s, Step::SetLeaderData(d)
            if d.get("bootstrap-member").is_some_and(|v| v != "etcd0"))));
        let (k, m) = status(&p).unwrap();
        assert_eq!(k, StatusKind::Waiting);
        assert_eq!(m, "Waiting for etcd0 to bootstrap the cluster");
    }
}

#[test]
fn a_decision_naming_a_unit_gone_from_the_relation_still_waits_and_says_how_to_clear_it() {
    let mut o = fresh(true);
    o.unit = "etcd/1".into();
    o.member_name = "etcd1".into();
    o.leader.legacy = decided("etcd0");
    let p = plan(&o, &paths(), None);
    assert!(!starts(&p));
    let (k, m) = status(&p).unwrap();
    assert_eq!(k, StatusKind::Waiting);
    assert!(
        m.contains("etcd0") && m.contains("clear bootstrap-member"),
        "{m}"
    );
}

#[test]
fn the_named_unit_bootstraps_even_after_losing_leadership() {
    let mut o = fresh(false);
    o.leader.app = decided("etcd0");
    let p = plan(&o, &paths(), None);
    assert!(starts(&p));
    assert!(
        !p.steps.contains(&Step::RecordCluster),
        "the leader records"
    );
    assert!(!has(&p, |s| matches!(s, Step::SetLeaderData(_))));
}

#[test]
fn a_decision_without_a_token_blocks_instead_of_inventing_one() {
    let mut o = fresh(true);
    o.leader.app = bag(&[("bootstrap-member", "etcd0")]);
    let p = plan(&o, &paths(), None);
    assert!(!starts(&p));
    assert!(!has(
        &p,
        |s| matches!(s, Step::SetLeaderData(d) if d.contains_key("token"))
    ));
    assert_eq!(status(&p).unwrap().0, StatusKind::Blocked);
}

#[test]
fn a_non_leader_never_decides() {
    let p = plan(&fresh(false), &paths(), None);
    assert!(!has(&p, |s| matches!(s, Step::SetLeaderData(_))));
    assert!(!starts(&p));
}

#[test]
fn once_a_cluster_exists_the_decision_is_moot() {
    // The decided unit lost its data after the cluster was recorded: join.
    let mut o = fresh(true);
    o.leader.app = decided("etcd0");
    o.leader.app.insert("cluster-id".into(), "cc".into());
    let p = plan(&o, &paths(), None);
    assert!(!has(
        &p,
        |s| matches!(s, Step::WriteConfig { text, .. } if text.contains("new"))
    ));
    assert!(!starts(&p));
}

#[test]
fn a_running_member_of_another_cluster_is_blocked_and_serves_no_clients() {
    let mut o = fresh(false);
    o.leader.app = bag(&[("token", "ABC123"), ("cluster-id", "cc")]);
    o.disk.locations = vec![canonical(Some(WalIds {
        member_id: 0xaa,
        cluster_id: 0xdd,
    }))];
    o.active = true;
    let v = view(0xdd, 0xaa, vec![member(0xaa, "etcd0", "10.0.0.1", false)]);
    o.local = Some(v.clone());
    o.cluster = Some(v);
    o.clients = vec![("db:5".into(), Databag::new())];
    let p = plan(&o, &paths(), None);
    let (k, m) = status(&p).unwrap();
    assert_eq!(k, StatusKind::Blocked);
    assert!(m.contains("dd") && m.contains("cc"), "{m}");
    assert!(!has(&p, |s| matches!(s, Step::PublishClient { .. })));
    // The leader too takes no membership step then.
    o.is_leader = true;
    let p = plan(&o, &paths(), None);
    assert!(!has(&p, |s| matches!(
        s,
        Step::PublishClient { .. } | Step::RecordCluster | Step::AddMember { .. }
    )));
    assert_eq!(status(&p).unwrap().0, StatusKind::Blocked);
}

#[test]
fn a_stopped_member_of_another_cluster_is_not_started() {
    let mut o = fresh(false);
    o.leader.app = bag(&[("token", "ABC123"), ("cluster-id", "cc")]);
    o.disk.locations = vec![canonical(Some(WalIds {
        member_id: 0xaa,
        cluster_id: 0xdd,
    }))];
    let p = plan(&o, &paths(), None);
    assert!(!starts(&p));
    let (k, m) = status(&p).unwrap();
    assert_eq!(k, StatusKind::Blocked);
    assert!(m.contains("dd") && m.contains("cc"), "{m}");
}

#[test]
fn ipv6_addresses_are_bracketed_in_every_published_url() {
    let mut o = fresh(true);
    o.address = "fd00::1".into();
    o.client_address = "fd00::1".into();
    o.leader.app = decided("etcd0");
    let p = plan(&o, &paths(), None);
    assert!(p.steps.iter().any(|s| matches!(s, Step::Publish(d)
        if d.get("peer-url").map(String::as_str) == Some("http://[fd00::1]:2380")
        && d.get("client-url").map(String::as_str) == Some("http://[fd00::1]:2379"))));
    assert!(has(&p, |s| matches!(s, Step::WriteConfig { config, .. }
        if config.initial_cluster == [("etcd0".to_string(), "http://[fd00::1]:2380".to_string())])));
}
