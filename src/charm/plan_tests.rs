//! Table-like tests of the plan: a frozen Observed in, steps and status out.

use super::config::CharmConfig;
use super::observe::{LeaderData, Observed};
use super::plan::*;
use super::token::TokenSource;
use crate::context::{Event, RelationKind};
use crate::etcd::{ClusterView, Member, MemberStatus};
use crate::hooktools::{Databag, StatusKind};
use crate::layout::{DiskLayout, FoundConfig, Location, Role};
use crate::paths::Paths;
use crate::wal::WalIds;
use std::path::PathBuf;

const ROOT: &str = "/r";

fn paths() -> Paths {
    Paths::new(ROOT)
}

fn bag(kv: &[(&str, &str)]) -> Databag {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub(super) fn canonical(ids: Option<WalIds>) -> Location {
    Location {
        path: paths().data_dir(),
        role: Role::Canonical,
        exists: ids.is_some(),
        member: Ok(ids),
        facts: Default::default(),
    }
}

/// A fresh leader unit etcd/0 at 10.0.0.1, peer relation present: the one
/// Observed every test module of the charm starts from (`..fresh(l)`).
pub(crate) fn fresh(leader: bool) -> Observed {
    Observed {
        storage: Default::default(),
        event: Event::ConfigChanged,
        unit: "etcd/0".into(),
        member_name: "etcd0".into(),
        departing_unit: None,
        is_leader: leader,
        has_leader_tools: true,
        // Off loopback without TLS: the plan tests exercise the rest of
        // the plan; insecure.rs tests the default of this option.
        config: Ok(CharmConfig {
            allow_insecure_listeners: true,
            ..Default::default()
        }),
        leader: LeaderData::default(),
        peer_relation: Some("cluster:0".into()),
        clients: vec![],
        own_bag: Databag::new(),
        peers: Default::default(),
        address: "10.0.0.1".into(),
        client_address: "10.0.0.1".into(),
        disk: DiskLayout {
            config: None,
            env_configs: vec![],
            locations: vec![canonical(None)],
            migration: Default::default(),
        },
        config_text: None,
        dropin_text: None,
        etcd_version: Some("3.4.23".into()),
        active: false,
        local: None,
        cluster: None,
        monitoring: Default::default(),
        s3: Default::default(),
        fresh_token: Ok("FRESH0TOKEN00001".into()),
        leader_seen: None,
        goal_units: None,
        endpoints: Default::default(),
        server_key: None,
        snap: None,
        certs: Default::default(),
        open_backups: Vec::new(),
        quorum: None,
        rebuild_copied: false,
        alarms: Vec::new(),
        data_fs_bytes: None,
        tls: None,
        cert_dates: None,
        agent: None,
    }
}

pub(super) const IDS: WalIds = WalIds {
    member_id: 0xaa,
    cluster_id: 0xcc,
};

pub(super) fn member(id: u64, name: &str, ip: &str, learner: bool) -> Member {
    Member {
        id,
        name: name.into(),
        peer_urls: vec![format!("http://{ip}:2380")],
        client_urls: if name.is_empty() {
            vec![]
        } else {
            vec![format!("http://{ip}:2379")]
        },
        is_learner: learner,
    }
}

pub(super) fn view(cluster_id: u64, leader: u64, members: Vec<Member>) -> ClusterView {
    ClusterView {
        endpoint: "http://10.0.0.1:2379".into(),
        status: MemberStatus {
            member_id: members[0].id,
            cluster_id,
            leader,
            version: "3.4.23".into(),
            raft_index: 10,
            is_learner: false,
            errors: vec![],
        },
        members,
    }
}

/// The leader's own member (0xaa, the raft leader) answers with these.
pub(super) fn sees(o: &mut Observed, members: Vec<Member>) {
    let v = view(0xcc, 0xaa, members);
    o.local = Some(v.clone());
    o.cluster = Some(v);
}

fn has(p: &Plan, f: impl Fn(&Step) -> bool) -> bool {
    p.steps.iter().any(f)
}

fn status(p: &Plan) -> Option<(StatusKind, String)> {
    p.status.iter().max_by_key(|(k, _)| *k).cloned()
}

#[test]
fn fresh_leader_decides_the_bootstrap_with_a_generated_token_before_starting() {
    let p = plan(&fresh(true), &paths(), None);
    assert!(matches!(p.token, Some((_, TokenSource::Generated))));
    let token = p.token.clone().unwrap().0;
    // The plan is pure: the token is the one observe read at random.
    assert_eq!(token, "FRESH0TOKEN00001");
    assert_eq!(plan(&fresh(true), &paths(), None), p);
    // Phase 1: token and decision in one write, and nothing started.
    assert!(p.steps.contains(&Step::SetLeaderData(bag(&[
        ("bootstrap-member", "etcd0"),
        ("token", &token)
    ]))));
    assert!(!has(&p, |s| matches!(
        s,
        Step::WriteConfig { .. } | Step::StartEtcd
    )));
    // leader-set is durable at once: the next pass may start.
    assert!(!p.commit_first);
}

#[test]
fn the_decided_leader_bootstraps_with_the_recorded_token() {
    let mut o = fresh(true);
    o.leader.legacy = bag(&[("token", "ABC123"), ("bootstrap-member", "etcd0")]);
    o.leader.app = o.leader.legacy.clone();
    let p = plan(&o, &paths(), None);
    assert_eq!(p.token, Some(("ABC123".into(), TokenSource::AppDatabag)));
    let cfg = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::WriteConfig { text, .. } => Some(text.clone()),
            _ => None,
        })
        .expect("a config is written");
    assert!(cfg.contains("'new'") || cfg.contains("\"new\""), "{cfg}");
    assert!(cfg.contains("ABC123"));
    assert!(!has(&p, |s| matches!(s, Step::SetLeaderData(_))));
    let i = |s: &Step| p.steps.iter().position(|x| x == s).unwrap();
    assert!(i(&Step::StartEtcd) < i(&Step::WaitMember));
    assert!(i(&Step::WaitMember) < i(&Step::RecordCluster));
}

#[test]
fn non_leader_without_token_waits() {
    let p = plan(&fresh(false), &paths(), None);
    assert!(!has(&p, |s| matches!(
        s,
        Step::WriteConfig { .. } | Step::StartEtcd
    )));
    assert_eq!(
        status(&p).unwrap(),
        (
            StatusKind::Waiting,
            "Waiting for the leader to create the cluster token".into()
        )
    );
}

#[test]
fn token_from_leader_get_is_kept_and_written_to_the_app_databag() {
    let mut o = fresh(true);
    o.leader.legacy = bag(&[("token", "ABC123")]);
    let p = plan(&o, &paths(), None);
    assert_eq!(p.token, Some(("ABC123".into(), TokenSource::LeaderGet)));
    assert!(p.steps.contains(&Step::SetLeaderData(bag(&[
        ("bootstrap-member", "etcd0"),
        ("token", "ABC123")
    ]))));
}

#[test]
fn token_recovered_from_the_config_file_is_never_regenerated() {
    let mut o = fresh(true);
    o.disk.config = Some(Ok(FoundConfig {
        initial_cluster_token: Some("OLD999".into()),
        ..Default::default()
    }));
    o.disk.locations = vec![canonical(Some(IDS))];
    let p = plan(&o, &paths(), None);
    assert_eq!(p.token.as_ref().unwrap().0, "OLD999");
    assert!(matches!(p.token, Some((_, TokenSource::ConfigFile(_)))));
}

#[test]
fn existing_cluster_without_token_anywhere_is_not_given_a_new_one() {
    let mut o = fresh(true);
    o.leader.app = bag(&[("cluster-id", "cc")]);
    let p = plan(&o, &paths(), None);
    assert_eq!(p.token, None);
    assert!(!has(
        &p,
        |s| matches!(s, Step::SetLeaderData(d) if d.contains_key("token"))
    ));
}

#[test]
fn malformed_leadership_token_blocks() {
    let mut o = fresh(true);
    o.leader.app = bag(&[("token", "two words")]);
    let p = plan(&o, &paths(), None);
    let (k, m) = status(&p).unwrap();
    assert_eq!(k, StatusKind::Blocked);
    assert!(m.contains("two words"), "{m}");
    assert!(p.steps.is_empty());
}

#[test]
fn a_new_leader_never_bootstraps_when_a_cluster_is_recorded() {
    let mut o = fresh(true);
    o.leader.app = bag(&[("token", "ABC123"), ("cluster-id", "cc")]);
    let p = plan(&o, &paths(), None);
    assert!(!has(&p, |s| matches!(
        s,
        Step::WriteConfig { .. } | Step::StartEtcd
    )));
    assert_eq!(status(&p).unwrap().0, StatusKind::Waiting);
}

#[test]
fn a_member_on_disk_is_started_with_state_existing() {
    let mut o = fresh(false);
    o.leader.app = bag(&[("token", "ABC123"), ("cluster-id", "cc")]);
    o.disk.locations = vec![canonical(Some(IDS))];
    let p = plan(&o, &paths(), None);
    assert!(has(
        &p,
        |s| matches!(s, Step::WriteConfig { text, .. } if text.contains("existing"))
    ));
    assert!(p.steps.contains(&Step::StartEtcd));
    assert!(p.steps.contains(&Step::Publish(bag(&[
        ("client-url", "http://10.0.0.1:2379"),
        ("member-id", "aa"),
        ("member-name", "etcd0"),
        ("peer-url", "http://10.0.0.1:2380"),
    ]))));
}

#[test]
fn update_status_reports_a_stopped_etcd_without_starting_it() {
    let mut o = fresh(false);
    o.event = Event::UpdateStatus;
    o.leader.app = bag(&[("token", "ABC123"), ("cluster-id", "cc")]);
    o.disk.locations = vec![canonical(Some(IDS))];
    let p = plan(&o, &paths(), None);
    assert!(!p.steps.contains(&Step::StartEtcd));
    let (k, m) = status(&p).unwrap();
    assert_eq!(k, StatusKind::Blocked);
    assert!(m.contains("not running"), "{m}");
}

#[test]
fn a_removed_member_moves_its_data_aside() {
    let mut o = fresh(false);
    o.leader.app = bag(&[("token", "ABC123"), ("cluster-id", "cc")]);
    o.disk.locations = vec![canonical(Some(IDS))];
    o.cluster = Some(view(
        0xcc,
        0xbb,
        vec![member(0xbb, "etcd1", "10.0.0.2", false)],
    ));
    let p = plan(&o, &paths(), None);
    assert!(has(
        &p,
        |s| matches!(s, Step::MoveDataAside { reason, .. } if reason.contains("removed"))
    ));
    assert!(!p.steps.contains(&Step::StartEtcd));
}

#[test]
fn another_clusters_view_does_not_move_data() {
    let mut o = fresh(false);
    o.disk.locations = vec![canonical(Some(IDS))];
    // A reachable cluster dd that lists no member aa.
    o.cluster = Some(view(
        0xdd,
        0xbb,
        vec![member(0xbb, "etcd1", "10.0.0.2", false)],
    ));
    // Recorded cluster cc: dd is another cluster, not evidence that our
    // member was removed. The unit starts on its own data and checks it.
    o.leader.app = bag(&[("token", "ABC123"), ("cluster-id", "cc")]);
    let p = plan(&o, &paths(), None);
    assert!(
        !has(&p, |s| matches!(s, Step::MoveDataAside { .. })),
        "{:?}",
        p.steps
    );
    let start = p.steps.iter().position(|s| *s == Step::StartEtcd);
    assert!(start.is_some(), "{:?}", p.steps);
    assert_eq!(
        p.steps[start.unwrap()..][..3],
        [Step::StartEtcd, Step::WaitMember, Step::VerifyMember(IDS)]
    );
    // The same view when dd IS the recorded cluster: the data goes aside.
    o.leader.app = bag(&[("token", "ABC123"), ("cluster-id", "dd")]);
    let p = plan(&o, &paths(), None);
    assert!(
        has(
            &p,
            |s| matches!(s, Step::MoveDataAside { reason, .. } if reason.contains("belongs to cluster cc, not dd"))
        ),
        "{:?}",
        p.steps
    );
    assert!(!p.steps.contains(&Step::StartEtcd), "{:?}", p.steps);
}

#[test]
fn joining_unit_starts_on_its_join_record() {
    let mut o = fresh(false);
    o.unit = "etcd/1".into();
    o.member_name = "etcd1".into();
    o.address = "10.0.0.2".into();
    o.client_address = "10.0.0.2".into();
    o.leader.app = bag(&[
        ("token", "ABC123"),
        ("cluster-id", "cc"),
        (
            "join-etcd1",
            "bb etcd0=http://10.0.0.1:2380,etcd1=http://10.0.0.2:2380",
        ),
    ]);
    o.cluster = Some(view(
        0xcc,
        0xaa,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xbb, "", "10.0.0.2", true),
        ],
    ));
    let p = plan(&o, &paths(), None);
    let text = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::WriteConfig { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        text.contains("existing") && text.contains("etcd0=http://10.0.0.1:2380"),
        "{text}"
    );
    assert!(p.steps.contains(&Step::StartEtcd));
}

#[test]
fn a_stale_join_record_is_not_used() {
    let mut o = fresh(false);
    o.leader.app = bag(&[
        ("token", "ABC123"),
        ("cluster-id", "cc"),
        (
            "join-etcd0",
            "bb etcd1=http://10.0.0.2:2380,etcd0=http://10.0.0.1:2380",
        ),
    ]);
    o.cluster = Some(view(
        0xcc,
        0x11,
        vec![member(0x11, "etcd1", "10.0.0.2", false)],
    ));
    let p = plan(&o, &paths(), None);
    assert!(!p.steps.contains(&Step::StartEtcd));
    assert_eq!(
        status(&p).unwrap(),
        (
            StatusKind::Waiting,
            "Waiting for the leader to add this member".into()
        )
    );
}

pub(super) fn healthy_leader() -> Observed {
    let mut o = fresh(true);
    o.leader.app = bag(&[
        ("token", "ABC123"),
        ("cluster-id", "cc"),
        ("cluster", "etcd0=http://10.0.0.1:2380"),
    ]);
    o.own_bag = bag(&[
        ("client-url", "http://10.0.0.1:2379"),
        ("member-id", "aa"),
        ("member-name", "etcd0"),
        ("peer-url", "http://10.0.0.1:2380"),
    ]);
    o.leader.legacy = o.leader.app.clone();
    o.disk.locations = vec![canonical(Some(IDS))];
    o.active = true;
    sees(&mut o, vec![member(0xaa, "etcd0", "10.0.0.1", false)]);
    o
}

#[test]
fn a_healthy_leader_with_nothing_to_do_plans_nothing() {
    let mut o = healthy_leader();
    o.event = Event::UpdateStatus;
    o.config_text = Some(crate::render::render_etcd_config(&desired_config(
        &o,
        &CharmConfig::default(),
        &paths(),
        "ABC123",
        crate::render::ClusterState::Existing,
        vec![("etcd0".into(), "http://10.0.0.1:2380".into())],
    )));
    // Its peers were told once that it runs this config (running.rs).
    let hash = super::running::config_hash(o.config_text.as_deref().unwrap());
    o.own_bag.insert(super::running::KEY.into(), hash);
    o.own_bag
        .insert(super::running::VERSION_KEY.into(), "3.4.23".into());
    let p = plan(&o, &paths(), None);
    assert_eq!(p.steps, vec![]);
    assert!(p.status.is_empty());
    o.event = Event::ConfigChanged;
    let p = plan(&o, &paths(), None);
    assert_eq!(
        p.steps,
        vec![Step::OpenPort(2379), Step::SetVersion("3.4.23".into())]
    );
}

#[test]
fn leader_adds_one_joiner_at_a_time_in_unit_order() {
    let mut o = healthy_leader();
    for (u, ip) in [("etcd/2", "10.0.0.3"), ("etcd/1", "10.0.0.2")] {
        o.peers
            .insert(u.into(), bag(&[("peer-url", &format!("http://{ip}:2380"))]));
    }
    let p = plan(&o, &paths(), None);
    let adds: Vec<_> = p
        .steps
        .iter()
        .filter(|s| matches!(s, Step::AddMember { .. }))
        .collect();
    assert_eq!(
        adds,
        vec![&Step::AddMember {
            name: "etcd1".into(),
            peer_url: "http://10.0.0.2:2380".into()
        }]
    );
}

#[test]
fn leader_promotes_a_started_learner_and_adds_nobody_meanwhile() {
    let mut o = healthy_leader();
    o.peers.insert(
        "etcd/2".into(),
        bag(&[("peer-url", "http://10.0.0.3:2380")]),
    );
    sees(
        &mut o,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xbb, "etcd1", "10.0.0.2", true),
        ],
    );
    let p = plan(&o, &paths(), None);
    assert!(p.steps.contains(&Step::PromoteLearner {
        name: "etcd1".into(),
        id: 0xbb
    }));
    assert!(!has(&p, |s| matches!(s, Step::AddMember { .. })));
}

#[test]
fn leader_removes_the_departing_units_member() {
    let mut o = healthy_leader();
    o.event = Event::Relation {
        endpoint: "cluster".into(),
        kind: RelationKind::Departed,
    };
    o.departing_unit = Some("etcd/1".into());
    sees(
        &mut o,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xbb, "etcd1", "10.0.0.2", false),
        ],
    );
    let p = plan(&o, &paths(), None);
    assert!(p.steps.contains(&Step::RemoveMember {
        name: "etcd1".into(),
        id: 0xbb
    }));
}

#[test]
fn stop_hook_removes_this_member_then_stops() {
    let mut o = healthy_leader();
    o.event = Event::Stop;
    let v = view(
        0xcc,
        0xbb,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xbb, "etcd1", "10.0.0.2", false),
        ],
    );
    o.cluster = Some(v);
    let p = plan(&o, &paths(), None);
    let tail: Vec<_> = p
        .steps
        .iter()
        .filter(|s| matches!(s, Step::RemoveMember { .. } | Step::StopEtcd))
        .cloned()
        .collect();
    assert_eq!(
        tail,
        vec![
            Step::RemoveMember {
                name: "etcd0".into(),
                id: 0xaa
            },
            Step::StopEtcd
        ]
    );
}

#[test]
fn a_stop_hook_blocked_by_bad_config_still_leaves_the_cluster_before_stopping() {
    let mut o = healthy_leader();
    o.event = Event::Stop;
    o.config = Err("config port=70000 is not a TCP port (1-65535)".into());
    o.cluster = Some(view(
        0xcc,
        0xaa,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xbb, "etcd1", "10.0.0.2", false),
        ],
    ));
    let p = plan(&o, &paths(), None);
    assert_eq!(
        p.steps,
        vec![
            Step::RemoveMember {
                name: "etcd0".into(),
                id: 0xaa
            },
            Step::StopEtcd
        ]
    );
    // The only voter (a learner beside it) has no cluster to keep: stopped.
    o.cluster = Some(view(
        0xcc,
        0xaa,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xbb, "etcd1", "10.0.0.2", true),
        ],
    ));
    assert_eq!(plan(&o, &paths(), None).steps, vec![Step::StopEtcd]);
}

#[test]
fn bad_config_blocks_and_changes_nothing() {
    let mut o = healthy_leader();
    o.config = Err("config port=70000 is not a TCP port (1-65535)".into());
    let p = plan(&o, &paths(), None);
    assert!(p.steps.is_empty());
    assert_eq!(status(&p).unwrap().0, StatusKind::Blocked);
}

#[test]
fn a_member_in_a_legacy_location_is_moved_before_any_config_is_written() {
    let mut o = fresh(true);
    o.disk.locations.push(Location {
        path: PathBuf::from("/r/var/snap/etcd/current/etcd0.etcd"),
        role: Role::Legacy,
        exists: true,
        member: Ok(Some(IDS)),
        facts: Default::default(),
    });
    let p = plan(&o, &paths(), None);
    let first_write = p
        .steps
        .iter()
        .position(|s| matches!(s, Step::WriteConfig { .. }))
        .expect("the config is written after the move");
    let last_move = p
        .steps
        .iter()
        .rposition(|s| matches!(s, Step::Migrate(_)))
        .expect("the member is moved");
    assert!(last_move < first_write, "{:#?}", p.steps);
    // The member is a cluster: no token is generated for it.
    assert_eq!(p.token, None);
}

#[test]
fn final_status_priority() {
    use super::final_status;
    let s = |k, m: &str| (k, m.to_string());
    assert_eq!(
        final_status(
            &[
                s(StatusKind::Waiting, "w"),
                s(StatusKind::Blocked, "b"),
                s(StatusKind::Maintenance, "m")
            ],
            Some(3)
        ),
        s(StatusKind::Blocked, "b")
    );
    assert_eq!(final_status(&[], Some(1)).1, "Healthy with 1 known peer");
    assert_eq!(final_status(&[], Some(3)).1, "Healthy with 3 known peers");
    assert_eq!(final_status(&[], None).0, StatusKind::Waiting);
}

// ---------------------------------------------------------------- migration
// (issue 5: a member in a legacy location is moved before etcd.conf.yml is
// rewritten; the token is only ever read back.)

const LEGACY_DIR: &str = "/r/var/snap/etcd/current/etcd0.etcd";

/// A unit as the snap's 2.x → 3.x move left it: the member in etcd0.etcd,
/// a config pointing there without any initial-* keys, etcd running on it.
fn snap_migrated(leader: bool) -> Observed {
    let mut o = fresh(leader);
    o.event = Event::UpgradeCharm;
    o.active = true;
    o.disk.config = Some(Ok(FoundConfig {
        name: Some("etcd0".into()),
        data_dir: Some("/var/snap/etcd/current/etcd0.etcd".into()),
        ..Default::default()
    }));
    o.config_text =
        Some("name: 'etcd0'\ndata-dir: '/var/snap/etcd/current/etcd0.etcd'\nwal-dir: ''\n".into());
    let mut legacy = canonical(Some(IDS));
    legacy.path = PathBuf::from(LEGACY_DIR);
    legacy.role = Role::Legacy;
    legacy.facts.member_dir = true;
    legacy.facts.device = Some(1);
    o.disk.locations[0].exists = true;
    o.disk.locations[0].facts.device = Some(1);
    o.disk.locations.push(legacy);
    o
}

fn migrate_then_configure(p: &Plan) -> Vec<&'static str> {
    p.steps.iter().map(super::apply::step_key).collect()
}

#[test]
fn snap_migrated_unit_moves_then_writes_config_then_starts_and_verifies() {
    let mut o = snap_migrated(true);
    o.disk.env_configs = vec![(
        PathBuf::from("/r/var/snap/etcd/common/etcd.conf.2x"),
        [(
            "ETCD_INITIAL_CLUSTER_TOKEN".to_string(),
            "Q7XK2P".to_string(),
        )]
        .into(),
    )];
    let p = plan(&o, &paths(), None);
    assert_eq!(
        migrate_then_configure(&p),
        [
            "stop",
            "migrate-snapshot",
            "migrate-rename",
            "set-leader-data",
            "publish",
            "write-config",
            "start",
            "wait-member",
            "verify-member",
            "open-port",
            "set-version"
        ]
    );
    assert!(matches!(&p.token, Some((t, TokenSource::EnvConfig(_))) if t == "Q7XK2P"));
    assert!(p
        .steps
        .contains(&Step::SetLeaderData(bag(&[("token", "Q7XK2P")]))));
    assert!(p.steps.contains(&Step::VerifyMember(IDS)));
    let cfg = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::WriteConfig { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        cfg.contains("data-dir: \"/r/var/snap/etcd/current\""),
        "{cfg}"
    );
    assert!(cfg.contains("initial-cluster-state: \"existing\""), "{cfg}");
    assert!(cfg.contains("initial-cluster-token: \"Q7XK2P\""), "{cfg}");
    assert!(cfg.contains("name: \"etcd0\""), "{cfg}");
    // The member is published with its ID, as if already in place.
    assert!(has(
        &p,
        |s| matches!(s, Step::Publish(b) if b.get("member-id").map(String::as_str) == Some("aa"))
    ));
}

#[test]
fn snap_migrated_unit_without_any_token_is_never_given_a_new_one() {
    let p = plan(&snap_migrated(true), &paths(), None);
    assert_eq!(p.token, None);
    assert!(!has(
        &p,
        |s| matches!(s, Step::SetLeaderData(b) if b.contains_key("token"))
    ));
    assert!(has(&p, |s| matches!(s, Step::Migrate(_))));
    assert!(p.steps.contains(&Step::StartEtcd));
}

#[test]
fn a_non_leader_keeps_the_token_from_leader_get() {
    let mut o = snap_migrated(false);
    o.leader.legacy = bag(&[("token", "Q7XK2P")]);
    let p = plan(&o, &paths(), None);
    assert_eq!(p.token, Some(("Q7XK2P".into(), TokenSource::LeaderGet)));
    assert!(p.steps.contains(&Step::StartEtcd));
}

#[test]
fn update_status_restarts_what_the_migration_stopped() {
    let mut o = snap_migrated(false);
    o.event = Event::UpdateStatus;
    let p = plan(&o, &paths(), None);
    let keys = migrate_then_configure(&p);
    assert!(
        keys.starts_with(&["stop", "migrate-snapshot", "migrate-rename"]),
        "{keys:?}"
    );
    assert!(p.steps.contains(&Step::StartEtcd), "{keys:?}");
    // Not running before: update-status moves the member but only reports.
    o.active = false;
    let p = plan(&o, &paths(), None);
    assert!(!p.steps.contains(&Step::StartEtcd));
    assert!(has(&p, |s| matches!(s, Step::Migrate(_))));
    assert_eq!(status(&p).unwrap().0, StatusKind::Blocked);
}

/// The states a "nothing touched" block is checked from: as observed (etcd
/// installed and running), and a fresh machine (etcd not installed, not
/// running, no drop-in yet), where install and the drop-in would come first.
fn as_observed_and_on_a_fresh_machine(o: &Observed) -> [(&'static str, Observed); 2] {
    let mut fresh_machine = o.clone();
    fresh_machine.etcd_version = None;
    fresh_machine.dropin_text = None;
    fresh_machine.active = false;
    fresh_machine.local = None;
    [("as observed", o.clone()), ("fresh machine", fresh_machine)]
}

const DROPIN: &str = "[Service]\nRestart=on-failure\n";

#[test]
fn a_conflict_blocks_with_nothing_moved_stopped_or_written() {
    let mut o = snap_migrated(true);
    o.disk.locations[0] = canonical(Some(WalIds {
        member_id: 0x1,
        cluster_id: 0x2,
    }));
    for (state, o) in as_observed_and_on_a_fresh_machine(&o) {
        let p = plan(&o, &paths(), Some(DROPIN.into()));
        // Not installed, no drop-in, no daemon-reload, no move, no stop.
        assert_eq!(p.steps, vec![], "{state}");
        let (k, m) = status(&p).unwrap();
        assert_eq!(k, StatusKind::Blocked, "{state}");
        assert!(
            m.contains("two different members")
                && m.contains("etcd0.etcd")
                && m.contains("member 1 of cluster 2"),
            "{state}: {m}"
        );
    }
}

#[test]
fn a_departing_unit_never_restarts_or_rejoins() {
    let mut o = fresh(false);
    o.leader.app = bag(&[("token", "ABC123"), ("cluster-id", "cc")]);
    o.disk.locations = vec![canonical(Some(IDS))];
    // Its member was just removed by the leader, so etcd exited.
    o.cluster = Some(view(
        0xcc,
        0xbb,
        vec![member(0xbb, "etcd1", "10.0.0.2", false)],
    ));
    for kind in [RelationKind::Departed, RelationKind::Broken] {
        o.event = Event::Relation {
            endpoint: "cluster".into(),
            kind,
        };
        o.departing_unit = (kind == RelationKind::Departed).then(|| "etcd/0".to_string());
        let p = plan(&o, &paths(), None);
        assert!(
            !has(&p, |s| matches!(
                s,
                Step::StartEtcd | Step::MoveDataAside { .. } | Step::WriteConfig { .. }
            )),
            "{kind:?}: {:?}",
            p.steps
        );
    }
}

#[test]
fn an_add_whose_answer_was_lost_is_published_not_repeated() {
    let mut o = healthy_leader();
    o.peers.insert(
        "etcd/1".into(),
        bag(&[("peer-url", "http://10.0.0.2:2380")]),
    );
    sees(
        &mut o,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xbb, "", "10.0.0.2", true),
        ],
    );
    // No join record: the add happened, its answer never reached the data.
    let p = plan(&o, &paths(), None);
    assert!(p.steps.contains(&Step::AddMember {
        name: "etcd1".into(),
        peer_url: "http://10.0.0.2:2380".into()
    }));
    // With the record in place, nothing more is done until it starts.
    o.leader.app.insert(
        "join-etcd1".into(),
        "bb etcd0=http://10.0.0.1:2380,etcd1=http://10.0.0.2:2380".into(),
    );
    let p = plan(&o, &paths(), None);
    assert!(!has(&p, |s| matches!(
        s,
        Step::AddMember { .. } | Step::PromoteLearner { .. } | Step::RemoveMember { .. }
    )));
}

#[test]
fn an_unstarted_member_no_unit_claims_is_removed() {
    let mut o = healthy_leader();
    sees(
        &mut o,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xbb, "", "10.0.0.9", true),
        ],
    );
    let p = plan(&o, &paths(), None);
    assert!(has(&p, |s| matches!(
        s,
        Step::RemoveMember { id: 0xbb, .. }
    )));
}

#[test]
fn leadership_data_in_one_home_only_is_mirrored_to_the_other() {
    let mut o = healthy_leader();
    o.event = Event::UpdateStatus;
    // Recorded by leader-set at install, before the peer relation existed.
    o.leader.app.remove("cluster-id");
    o.leader.app.remove("cluster");
    let p = plan(&o, &paths(), None);
    let set = p.steps.iter().find_map(|s| match s {
        Step::SetLeaderData(d) => Some(d.clone()),
        _ => None,
    });
    let set = set.expect("leadership data is written");
    assert_eq!(set.get("cluster-id").map(|s| s.as_str()), Some("cc"));
    assert_eq!(
        set.get("cluster").map(|s| s.as_str()),
        Some("etcd0=http://10.0.0.1:2380")
    );
    assert!(
        !set.contains_key("token"),
        "the token is already in both: {set:?}"
    );
}

#[test]
fn client_relations_get_every_started_members_client_url() {
    let mut o = healthy_leader();
    o.peers.insert(
        "etcd/1".into(),
        bag(&[("client-url", "http://10.0.0.2:2379"), ("member-id", "bb")]),
    );
    // Not a member yet: not offered to clients.
    o.peers.insert(
        "etcd/2".into(),
        bag(&[("client-url", "http://10.0.0.3:2379")]),
    );
    o.clients = vec![("db:7".into(), Databag::new())];
    let p = plan(&o, &paths(), None);
    assert!(p.steps.contains(&Step::PublishClient {
        relation: "db:7".into(),
        data: bag(&[
            (
                "connection_string",
                "http://10.0.0.1:2379,http://10.0.0.2:2379"
            ),
            ("version", "3.4.23"),
        ]),
    }));
}

#[test]
fn a_tls_member_is_not_rewritten_with_plain_urls() {
    let mut o = healthy_leader();
    let mut found = FoundConfig::default();
    found.raw.insert(
        "initial-advertise-peer-urls".into(),
        "https://10.0.0.1:2380".into(),
    );
    found.raw.insert(
        "advertise-client-urls".into(),
        "https://10.0.0.1:2379".into(),
    );
    o.disk.config = Some(Ok(found));
    for (state, o) in as_observed_and_on_a_fresh_machine(&o) {
        let p = plan(&o, &paths(), Some(DROPIN.into()));
        let (k, m) = status(&p).unwrap();
        assert_eq!(k, StatusKind::Blocked, "{state}");
        assert!(
            m.contains("initial-advertise-peer-urls, advertise-client-urls use https"),
            "{state}: {m}"
        );
        // Neither the config nor etcd, the snap or the drop-in is touched.
        assert_eq!(p.steps, vec![], "{state}");
    }
}

#[test]
fn a_changed_address_updates_the_members_peer_url_before_the_config() {
    let mut o = healthy_leader();
    o.address = "10.0.0.7".into();
    o.client_address = "10.0.0.7".into();
    let p = plan(&o, &paths(), None);
    let upd = p
        .steps
        .iter()
        .position(|s| {
            *s == Step::UpdatePeerUrl {
                id: 0xaa,
                peer_url: "http://10.0.0.7:2380".into(),
            }
        })
        .expect("member update planned");
    let write = p
        .steps
        .iter()
        .position(|s| matches!(s, Step::WriteConfig { .. }))
        .expect("config rewritten");
    assert!(upd < write, "{:?}", p.steps);
    assert!(p.steps.contains(&Step::RestartEtcd));
}

#[test]
fn the_drop_in_is_written_when_it_differs_and_removed_with_the_unit() {
    let mut o = healthy_leader();
    let want = Some("[Service]\nRestart=on-failure\n".to_string());
    let p = plan(&o, &paths(), want.clone());
    assert!(p.steps.contains(&Step::WriteDropIn));
    o.dropin_text = want.clone();
    let p = plan(&o, &paths(), want.clone());
    assert!(!p.steps.contains(&Step::WriteDropIn));
    o.event = Event::Remove;
    assert_eq!(plan(&o, &paths(), want).steps, vec![Step::RemoveDropIn]);
    // The direct backend has no drop-in.
    assert!(plan(&o, &paths(), None).steps.is_empty());
}

fn settled_config(o: &Observed, c: &CharmConfig) -> String {
    crate::render::render_etcd_config(&desired_config(
        o,
        c,
        &paths(),
        "ABC123",
        crate::render::ClusterState::Existing,
        vec![("etcd0".into(), "http://10.0.0.1:2380".into())],
    ))
}

#[test]
fn bind_with_insecure_http_adds_the_loopback_listener_and_restarts() {
    let mut o = healthy_leader();
    o.config_text = Some(settled_config(&o, &CharmConfig::default()));
    let c = CharmConfig {
        bind_with_insecure_http: true,
        ..CharmConfig::default()
    };
    o.config = Ok(c);
    let p = plan(&o, &paths(), None);
    let text = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::WriteConfig { text, .. } => Some(text.clone()),
            _ => None,
        })
        .expect("the config is rewritten");
    assert!(
        text.contains("listen-client-urls: \"http://0.0.0.0:2379,http://127.0.0.1:4001\""),
        "{text}"
    );
    assert!(p.steps.contains(&Step::RestartEtcd), "{:?}", p.steps);
}

#[test]
fn snapd_refresh_is_set_by_the_hooks_that_change_it_on_the_snap_backend_only() {
    use super::config::SnapdRefresh;
    let dropin = Some("[Service]\n".to_string());
    let mut o = healthy_leader();
    o.dropin_text = dropin.clone();
    o.config_text = Some(settled_config(&o, &CharmConfig::default()));
    for (event, planned) in [
        (Event::ConfigChanged, true),
        (Event::UpgradeCharm, true),
        (Event::Install, true),
        (Event::UpdateStatus, false),
        (Event::Start, false),
    ] {
        o.event = event.clone();
        let p = plan(&o, &paths(), dropin.clone());
        assert_eq!(
            p.steps.contains(&Step::SnapdRefresh(SnapdRefresh::Hold)),
            planned,
            "{event:?}: {:?}",
            p.steps
        );
        // The direct backend (no drop-in) has no snapd.
        assert!(!has(&plan(&o, &paths(), None), |s| matches!(
            s,
            Step::SnapdRefresh(_)
        )));
    }
    o.event = Event::ConfigChanged;
    o.config = Ok(CharmConfig {
        snapd_refresh: SnapdRefresh::Timer("fri,23:00".into()),
        ..CharmConfig::default()
    });
    let p = plan(&o, &paths(), dropin);
    assert!(p
        .steps
        .contains(&Step::SnapdRefresh(SnapdRefresh::Timer("fri,23:00".into()))));
    // A timer is no runtime option of etcd: no restart.
    assert!(!p.steps.contains(&Step::RestartEtcd), "{:?}", p.steps);
}
/// The two-phase bootstrap and the cluster-identity checks (issue 10.3).
mod bootstrap;

/// Membership cleanup that converges (issue 10.5).
mod cleanup;

/// A member whose WAL is gone (issue 10.4).
mod walloss;
#[test]
fn a_quota_or_compaction_change_rewrites_the_config_and_restarts() {
    let mut o = healthy_leader();
    o.config_text = Some(settled_config(&o, &CharmConfig::default()));
    o.config = Ok(CharmConfig {
        quota_backend_bytes: 4 << 20,
        auto_compaction_retention: "1h".into(),
        ..CharmConfig::default()
    });
    let p = plan(&o, &paths(), None);
    let text = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::WriteConfig { text, .. } => Some(text.clone()),
            _ => None,
        })
        .expect("the config is rewritten");
    assert!(text.contains("quota-backend-bytes: 4194304"), "{text}");
    assert!(text.contains("auto-compaction-retention: \"1h\""), "{text}");
    assert!(p.steps.contains(&Step::RestartEtcd), "{:?}", p.steps);
}

#[test]
fn a_changed_port_closes_the_one_the_config_still_advertises() {
    let mut o = healthy_leader();
    o.event = Event::ConfigChanged;
    o.disk.config = Some(Ok(FoundConfig {
        advertise_client_urls: Some("http://10.0.0.1:2379".into()),
        ..Default::default()
    }));
    o.config = Ok(CharmConfig {
        port: 4002,
        ..CharmConfig::default()
    });
    let p = plan(&o, &paths(), None);
    let close = p.steps.iter().position(|s| *s == Step::ClosePort(2379));
    let open = p.steps.iter().position(|s| *s == Step::OpenPort(4002));
    assert!(close.is_some() && close < open, "{:?}", p.steps);
    // The same port as configured: nothing to close.
    o.config = Ok(CharmConfig::default());
    let p = plan(&o, &paths(), None);
    assert!(!p.steps.iter().any(|s| matches!(s, Step::ClosePort(_))));
}

/// A TLS member of the Python charm kept on TLS (issue 11).
mod http_apis;
mod tls;

/// Each piece of evidence that a cluster exists stops a bootstrap on its
/// own (the integration test only shows that all of them together do).
#[test]
fn any_one_sign_of_a_cluster_alone_stops_a_bootstrap() {
    let decided = || {
        let mut o = fresh(true);
        o.leader.legacy = bag(&[("token", "ABC123"), ("bootstrap-member", "etcd0")]);
        o.leader.app = o.leader.legacy.clone();
        o
    };
    let bootstraps = |o: &Observed| {
        has(
            &plan(o, &paths(), None),
            |s| matches!(s, Step::WriteConfig { text, .. } if text.contains("initial-cluster-state: 'new'") || text.contains("initial-cluster-state: \"new\"") || text.contains("initial-cluster-state: new")),
        )
    };
    assert!(bootstraps(&decided()), "the base case must bootstrap");
    let mut recorded = decided();
    recorded.leader.app.insert("cluster-id".into(), "cc".into());
    let mut peer_member = decided();
    peer_member.peers.insert(
        "etcd/1".into(),
        bag(&[("member-id", "bb"), ("member-name", "etcd1")]),
    );
    let mut live = decided();
    live.cluster = Some(view(
        0xcc,
        0xbb,
        vec![member(0xbb, "etcd1", "10.0.0.2", false)],
    ));
    let mut on_disk = decided();
    on_disk.disk.locations = vec![canonical(Some(IDS))];
    for (what, o) in [
        ("a recorded cluster-id", recorded),
        ("a peer's member-id", peer_member),
        ("a live cluster", live),
        ("a WAL on disk", on_disk),
    ] {
        assert!(!bootstraps(&o), "{what} alone did not stop the bootstrap");
    }
}

/// The bootstrap decision itself, as a new leader meets it: the unit named
/// in `bootstrap-member` is another one (here, gone, so nothing shows a
/// cluster yet). The new leader waits for it and never bootstraps a second
/// cluster of its own (under Juju 4 the live view usually decides first, so
/// only this test holds the decision to account).
#[test]
fn a_new_leader_waits_for_the_decided_member_and_never_bootstraps_itself() {
    let mut o = fresh(true);
    o.leader.legacy = bag(&[("token", "ABC123"), ("bootstrap-member", "etcd1")]);
    o.leader.app = o.leader.legacy.clone();
    let p = plan(&o, &paths(), None);
    assert!(!has(&p, |s| matches!(
        s,
        Step::WriteConfig { .. } | Step::StartEtcd
    )));
    let (kind, msg) = status(&p).unwrap();
    assert_eq!(kind, StatusKind::Waiting);
    assert!(
        msg.starts_with("Waiting for etcd1 to bootstrap the cluster"),
        "{msg}"
    );
    assert!(msg.contains("not in the peer relation"), "{msg}");
}
