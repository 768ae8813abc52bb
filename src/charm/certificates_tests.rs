//! The pure half: the stage from files, config and member list; what the
//! plan publishes and writes; nothing printed carries a key.

use super::*;
use crate::charm::plan::plan as full_plan;
use crate::charm::plan_tests::{fresh, healthy_leader, member, sees};
use crate::layout::FoundConfig;

/// etcd.conf.yml as observe reads it: `bridge` adds the transport section.
fn found(peer: &str, client: &str) -> FoundConfig {
    let mut f = FoundConfig::default();
    if peer == "bridge" {
        f.raw.insert(
            "peer-transport-security".into(),
            "{cert-file: /s.crt, client-cert-auth: true}".into(),
        );
        return found_urls(f, "http", client);
    }
    found_urls(f, peer, client)
}

fn found_urls(mut f: FoundConfig, peer: &str, client: &str) -> FoundConfig {
    f.raw.insert(
        "initial-advertise-peer-urls".into(),
        format!("{peer}://10.0.0.1:2380"),
    );
    f.raw
        .insert("listen-peer-urls".into(), format!("{peer}://10.0.0.1:2380"));
    f.raw.insert(
        "advertise-client-urls".into(),
        format!("{client}://10.0.0.1:2379"),
    );
    f.raw.insert(
        "listen-client-urls".into(),
        format!("{client}://10.0.0.1:2379"),
    );
    f
}

fn pair(c: &str) -> Pair {
    Pair {
        cert: format!("{c} CERT"),
        key: format!("{c} SECRET KEY"),
    }
}

/// healthy_leader related to a legacy provider that issued everything.
fn related() -> Observed {
    let mut o = healthy_leader();
    o.disk.config = Some(Ok(found("http", "http")));
    o.certs.relation = Some("certificates:5".into());
    o.certs.provider = Some("easyrsa".into());
    o.certs.protocol = Some(Protocol::Legacy);
    o.certs.offer = Offer {
        ca: Some("CA".into()),
        server: Some(pair("SERVER")),
        client: Some(pair("CLIENT")),
    };
    o
}

fn https_member(id: u64, name: &str, ip: &str, peer: bool) -> crate::etcd::Member {
    let mut m = member(id, name, ip, false);
    m.client_urls = vec![format!("https://{ip}:2379")];
    if peer {
        m.peer_urls = vec![format!("https://{ip}:2380")];
    }
    m
}

#[test]
fn stage_follows_files_config_and_the_member_list() {
    let mut o = related();
    assert_eq!(stage(&o), Stage::Plain, "no files yet");
    o.certs.files_complete = true;
    assert_eq!(
        stage(&o),
        Stage::Bridge,
        "a member with a WAL bridges first"
    );
    o.disk.config = Some(Ok(found("bridge", "http")));
    let two = vec![
        member(0xaa, "etcd0", "10.0.0.1", false),
        member(0xbb, "etcd1", "10.0.0.2", false),
        member(0xcc, "etcd2", "10.0.0.3", false),
    ];
    sees(&mut o, two.clone());
    o.peers.insert("etcd/1".into(), Databag::new());
    o.peers.insert(
        "etcd/2".into(),
        [(STAGE_KEY.to_string(), "full".to_string())].into(),
    );
    assert_eq!(stage(&o), Stage::Bridge, "etcd1 has not bridged yet");
    o.peers.insert(
        "etcd/1".into(),
        [(STAGE_KEY.to_string(), "bridge".to_string())].into(),
    );
    assert_eq!(stage(&o), Stage::Full, "every member bridged or on TLS");
    let mut third = two;
    third[2] = https_member(0xcc, "etcd2", "10.0.0.3", true);
    o.peers.remove("etcd/2");
    sees(&mut o, third);
    assert_eq!(stage(&o), Stage::Full, "an https peer URL says so too");
    o.disk.config = Some(Ok(found("https", "https")));
    assert_eq!(stage(&o), Stage::Full);
    // A fresh unit joining a TLS cluster goes straight to https.
    let mut j = fresh(false);
    j.certs.files_complete = true;
    assert_eq!(stage(&j), Stage::Full);
    // Also once the leader added it under the http URL it published before
    // its certificates came (an unstarted member): that URL serves nothing,
    // and the leader replaces the member once the unit asks for https.
    sees(
        &mut j,
        vec![
            https_member(0xbb, "etcd1", "10.0.0.2", true),
            member(0xaa, "", "10.0.0.1", true),
        ],
    );
    assert_eq!(
        stage(&j),
        Stage::Full,
        "the unstarted http member is no peer"
    );
    // A started member on http peers is one: bridge with it first.
    sees(
        &mut j,
        vec![
            https_member(0xbb, "etcd1", "10.0.0.2", true),
            member(0xcc, "etcd2", "10.0.0.3", false),
        ],
    );
    assert_eq!(stage(&j), Stage::Plain);
}

#[test]
fn a_bridged_config_has_the_transport_sections_and_plain_urls() {
    let mut o = related();
    o.certs.files_complete = true;
    let p = full_plan(&o, &crate::paths::Paths::new("/r"), None);
    let config = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::WriteConfig { config, .. } => Some(config.clone()),
            _ => None,
        })
        .expect("the bridge config is written");
    assert_eq!(config.listen_peer_urls, vec!["http://0.0.0.0:2380"]);
    assert_eq!(
        config.initial_advertise_peer_urls,
        vec!["http://10.0.0.1:2380"]
    );
    assert_eq!(config.listen_client_urls, vec!["http://0.0.0.0:2379"]);
    assert_eq!(config.advertise_client_urls, vec!["http://10.0.0.1:2379"]);
    assert!(config.tls.is_some());
    assert!(p.steps.contains(&Step::RestartEtcd));
    assert!(!p
        .steps
        .iter()
        .any(|s| matches!(s, Step::UpdatePeerUrl { .. })));
}

#[test]
fn from_bridge_to_full_the_leader_moves_off_then_the_peer_url_changes_in_the_turn() {
    let mut o = related();
    o.certs.files_complete = true;
    o.disk.config = Some(Ok(found("bridge", "http")));
    sees(
        &mut o,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            https_member(0xbb, "etcd1", "10.0.0.2", true),
        ],
    );
    let p = full_plan(&o, &crate::paths::Paths::new("/r"), None);
    let at = |f: &dyn Fn(&Step) -> bool| p.steps.iter().position(f);
    let take = at(&|s| matches!(s, Step::TakeTurn { .. })).expect("a turn");
    let mv = at(&|s| matches!(s, Step::Tls(TlsStep::MoveLeader { to: 0xbb, .. })))
        .expect("leader moved");
    let upd = at(&|s| {
        matches!(s, Step::UpdatePeerUrl { id: 0xaa, peer_url } if peer_url == "https://10.0.0.1:2380")
    })
    .expect("peer URL to https");
    let restart = at(&|s| *s == Step::RestartEtcd).expect("restart");
    assert!(take < mv && mv < upd && upd < restart, "{:?}", p.steps);
}

#[test]
fn requests_both_protocols_until_the_provider_speaks() {
    let mut o = related();
    o.certs.protocol = None;
    o.certs.offer = Offer::default();
    o.certs.hostname = "host-0".into();
    let mut p = Plan::default();
    plan(&o, &CharmConfig::default(), &mut p);
    let published = p.steps.iter().find_map(|s| match s {
        Step::PublishClient { relation, data } if relation == "certificates:5" => Some(data),
        _ => None,
    });
    let d = published.expect("the legacy request");
    assert_eq!(d["unit_name"], "etcd/0");
    assert_eq!(d["common_name"], "10.0.0.1");
    assert_eq!(d["sans"], r#"["10.0.0.1","127.0.0.1","::1","host-0"]"#);
    assert!(d.contains_key("client_cert_requests"));
    assert!(p
        .steps
        .iter()
        .any(|s| matches!(s, Step::Tls(TlsStep::NewCsr { .. }))));
    assert!(!p
        .steps
        .iter()
        .any(|s| matches!(s, Step::Tls(TlsStep::WriteFiles(_)))));
    assert!(
        p.notes.iter().any(|n| n.contains("waiting")),
        "{:?}",
        p.notes
    );
    // Legacy known: no v4 key is made.
    o.certs.protocol = Some(Protocol::Legacy);
    let mut p = Plan::default();
    plan(&o, &CharmConfig::default(), &mut p);
    assert!(!p
        .steps
        .iter()
        .any(|s| matches!(s, Step::Tls(TlsStep::NewCsr { .. }))));
}

#[test]
fn issued_material_is_written_once_and_a_renewal_is_files_only() {
    let o = related();
    let mut p = Plan::default();
    plan(&o, &CharmConfig::default(), &mut p);
    let w = p
        .steps
        .iter()
        .find(|s| matches!(s, Step::Tls(TlsStep::WriteFiles(_))))
        .expect("files written");
    let shown = format!("{w} {w:?} {:?}", p.steps);
    assert!(!shown.contains("SECRET"), "{shown}");
    // Written: nothing more.
    let mut o = related();
    o.certs.disk = OnDiskPems {
        ca: Some("CA".into()),
        server: Some("SERVER CERT".into()),
        client: Some("CLIENT CERT".into()),
    };
    let mut p = Plan::default();
    plan(&o, &CharmConfig::default(), &mut p);
    assert!(
        !p.steps.iter().any(|s| matches!(s, Step::Tls(_))),
        "{:?}",
        p.steps
    );
    // A new leaf, same CA, on a TLS member: the files, no restart.
    o.disk.config = Some(Ok(found("https", "https")));
    o.certs.files_complete = true;
    o.certs.offer.server = Some(pair("RENEWED"));
    let mut p = Plan::default();
    plan(&o, &CharmConfig::default(), &mut p);
    assert!(p
        .steps
        .iter()
        .any(|s| matches!(s, Step::Tls(TlsStep::WriteFiles(_)))));
    assert!(!p.steps.contains(&Step::RestartEtcd));
    // A new CA on a TLS member starts the rotation (certificates_rotation):
    // ca.crt old + new and a restart, the leaves kept.
    o.certs.offer.ca = Some("CA2".into());
    let mut p = Plan::default();
    plan(&o, &CharmConfig::default(), &mut p);
    assert!(!p
        .steps
        .iter()
        .any(|s| matches!(s, Step::Tls(TlsStep::WriteFiles(_)))));
    assert!(p
        .steps
        .iter()
        .any(|s| matches!(s, Step::Tls(TlsStep::WriteCa { pem, .. }) if pem == "CA\nCA2\n")));
    assert!(!p.status.iter().any(|(k, _)| *k == StatusKind::Blocked));
}

#[test]
fn a_due_server_certificate_asks_for_a_new_csr() {
    let t0 = 1_700_000_000;
    let kp = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(vec!["10.0.0.1".to_string()]).unwrap();
    p.not_before = rcgen::date_time_ymd(2023, 11, 14);
    p.not_after = rcgen::date_time_ymd(2024, 2, 12);
    let cert = p.self_signed(&kp).unwrap().pem();
    let info = crate::tls::cert::parse(&cert).unwrap();
    let mut c = Certs {
        now: t0,
        ..Default::default()
    };
    c.offer.server = Some(Pair {
        cert,
        key: kp.serialize_pem(),
    });
    c.now = info.not_before + 86_400;
    assert!(!super::server_due(&c));
    c.now = super::super::certificates_renewal::renew_at(info.not_before, info.not_after);
    assert!(super::server_due(&c));
}
