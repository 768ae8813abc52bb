//! The rotation's turns from ca.crt, the leaves and the peers' labels,
//! against CAs made here with rcgen.

use super::*;
use crate::charm::plan_tests::{healthy_leader, member, sees};
use crate::hooktools::Databag;
use crate::tls::Pair;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    let pem = p.self_signed(&key).unwrap().pem();
    Ca {
        pem,
        issuer: Issuer::new(p, key),
    }
}

fn leaf(ca: &Ca, cn: &str) -> Pair {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(vec!["10.0.0.1".to_string()]).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    Pair {
        cert: p.signed_by(&key, &ca.issuer).unwrap().pem(),
        key: key.serialize_pem(),
    }
}

struct World {
    old: Ca,
    new: Ca,
    old_server: Pair,
    old_client: Pair,
    offer: Material,
}

fn world() -> World {
    let (old, new) = (ca("old"), ca("new"));
    let offer = Material {
        ca: new.pem.clone(),
        server: leaf(&new, "server"),
        client: leaf(&new, "client"),
    };
    World {
        old_server: leaf(&old, "server"),
        old_client: leaf(&old, "client"),
        old,
        new,
        offer,
    }
}

/// A 3-member TLS cluster whose leader is this unit, files as `ca` with
/// the old leaves; the peers' labels as given.
fn observed(w: &World, ca: &str, own: Option<&str>, peers: [Option<&str>; 2]) -> Observed {
    let mut o = healthy_leader();
    sees(
        &mut o,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xbb, "etcd1", "10.0.0.2", false),
            member(0xdd, "etcd2", "10.0.0.3", false),
        ],
    );
    o.certs.disk.ca = Some(ca.to_string());
    o.certs.disk.server = Some(w.old_server.cert.clone());
    o.certs.disk.client = Some(w.old_client.cert.clone());
    let fp = fingerprint(&w.new.pem);
    let lab = |t: Option<&str>| -> Databag {
        t.map(|t| [(CA_KEY.to_string(), format!("{t}:{fp}"))].into())
            .unwrap_or_default()
    };
    if let Some(t) = own {
        o.own_bag.extend(lab(Some(t)));
    }
    o.peers.insert("etcd/1".into(), lab(peers[0]));
    o.peers.insert("etcd/2".into(), lab(peers[1]));
    o
}

fn both(w: &World) -> String {
    format!("{}\n{}\n", w.old.pem.trim(), w.new.pem.trim())
}

fn run(o: &Observed, w: &World) -> Plan {
    let mut p = Plan::default();
    assert!(handles(o, &w.offer), "the rotation plans this");
    plan(o, &w.offer, &mut p);
    p
}

fn published(p: &Plan) -> Option<String> {
    p.steps.iter().find_map(|s| match s {
        Step::Publish(d) => d.get(CA_KEY).cloned(),
        _ => None,
    })
}

fn written_ca(p: &Plan) -> Option<String> {
    p.steps.iter().find_map(|s| match s {
        Step::Tls(TlsStep::WriteCa { pem, .. }) => Some(pem.clone()),
        _ => None,
    })
}

fn restarts(p: &Plan) -> bool {
    p.steps.contains(&Step::RestartEtcd)
}

fn pos(p: &Plan, f: impl Fn(&Step) -> bool) -> usize {
    p.steps.iter().position(f).expect("step missing")
}

#[test]
fn a_new_ca_is_first_trusted_beside_the_old_one_with_a_restart_in_the_turn() {
    let w = world();
    let o = observed(&w, &w.old.pem, None, [None, None]);
    let p = run(&o, &w);
    let bundle = written_ca(&p).expect("ca.crt rewritten");
    assert_eq!(bundle, both(&w), "old + new, the old first");
    assert!(restarts(&p));
    let fp = fingerprint(&w.new.pem);
    assert_eq!(published(&p), Some(format!("both:{fp}")));
    assert!(
        !p.steps
            .iter()
            .any(|s| matches!(s, Step::Tls(TlsStep::WriteFiles(_)))),
        "no new leaf before every member trusts the new CA"
    );
    // The leader hands raft leadership over; all of it inside the turn,
    // and the label only once the member is back.
    let g = crate::charm::turn::gate(&o, p);
    let take = pos(&g, |s| matches!(s, Step::TakeTurn { .. }));
    let moved = pos(&g, |s| matches!(s, Step::Tls(TlsStep::MoveLeader { .. })));
    let restart = pos(&g, |s| *s == Step::RestartEtcd);
    let release = pos(&g, |s| *s == Step::ReleaseTurn);
    let label = pos(&g, |s| matches!(s, Step::Publish(_)));
    let write = pos(&g, |s| matches!(s, Step::Tls(TlsStep::WriteCa { .. })));
    assert!(write < restart && take < moved && moved < restart && restart < release);
    assert!(release < label, "{g:?}");
}

#[test]
fn a_crash_between_the_bundle_and_the_restart_restarts_again() {
    let w = world();
    let o = observed(&w, &both(&w), None, [None, None]);
    let p = run(&o, &w);
    assert_eq!(written_ca(&p), None, "the bundle is there already");
    assert!(restarts(&p));
    assert!(published(&p).is_some_and(|l| l.starts_with("both:")));
}

#[test]
fn new_leaves_wait_for_every_member_to_trust_both_then_are_files_only() {
    let w = world();
    let o = observed(&w, &both(&w), Some("both"), [Some("both"), None]);
    let p = run(&o, &w);
    assert!(
        p.steps.is_empty(),
        "etcd2 does not trust the new CA yet: {p:?}"
    );
    assert!(p.notes.iter().any(|n| n.contains("waiting")));

    let o = observed(&w, &both(&w), Some("both"), [Some("both"), Some("leaf")]);
    let p = run(&o, &w);
    let m = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::Tls(TlsStep::WriteFiles(m)) => Some(m.clone()),
            _ => None,
        })
        .expect("the new leaves written");
    assert_eq!(m.ca, both(&w), "the bundle stays");
    assert_eq!(m.server, w.offer.server);
    assert_eq!(m.client, w.offer.client);
    assert!(!restarts(&p), "a leaf is read per handshake");
    assert_eq!(published(&p), None, "not before the files are there");
}

#[test]
fn the_leaf_turn_is_said_once_the_clients_data_carries_the_new_pair() {
    let w = world();
    let mut o = observed(&w, &both(&w), Some("both"), [Some("both"), Some("both")]);
    o.certs.disk.server = Some(w.offer.server.cert.clone());
    o.certs.disk.client = Some(w.offer.client.cert.clone());
    let old_data: Databag = [
        ("client_cert".to_string(), w.old_client.cert.clone()),
        ("client_ca".to_string(), w.old.pem.clone()),
    ]
    .into();
    o.clients = vec![("db:3".into(), old_data)];
    let p = run(&o, &w);
    assert_eq!(published(&p), None, "kube-apiserver still has the old pair");
    o.clients[0].1 = [
        ("client_cert".to_string(), w.offer.client.cert.clone()),
        ("client_ca".to_string(), both(&w)),
    ]
    .into();
    let p = run(&o, &w);
    let fp = fingerprint(&w.new.pem);
    assert_eq!(published(&p), Some(format!("leaf:{fp}")));
    assert!(!restarts(&p));
}

#[test]
fn the_old_ca_goes_once_every_member_serves_a_new_leaf_with_a_restart() {
    let w = world();
    let mut o = observed(&w, &both(&w), Some("leaf"), [Some("leaf"), Some("both")]);
    o.certs.disk.server = Some(w.offer.server.cert.clone());
    o.certs.disk.client = Some(w.offer.client.cert.clone());
    let p = run(&o, &w);
    assert!(p.steps.is_empty(), "etcd2 still serves the old leaf: {p:?}");

    o.peers.insert(
        "etcd/2".into(),
        [(
            CA_KEY.to_string(),
            label(Turn::New, &fingerprint(&w.new.pem)),
        )]
        .into(),
    );
    let p = run(&o, &w);
    assert_eq!(written_ca(&p), Some(format!("{}\n", w.new.pem.trim())));
    assert!(restarts(&p));
    assert!(published(&p).is_some_and(|l| l.starts_with("new:")));

    // A crash after that write: the restart is still to do.
    o.certs.disk.ca = Some(w.new.pem.clone());
    let p = run(&o, &w);
    assert_eq!(written_ca(&p), None);
    assert!(restarts(&p));
    assert!(published(&p).is_some_and(|l| l.starts_with("new:")));

    // Done: the files are the provider's alone, the label says so.
    o.own_bag
        .insert(CA_KEY.into(), label(Turn::New, &fingerprint(&w.new.pem)));
    assert!(!handles(&o, &w.offer), "nothing left to rotate");
}

#[test]
fn a_label_of_another_ca_counts_for_nothing() {
    let w = world();
    let other = fingerprint(&w.old.pem);
    assert_ne!(other, fingerprint(&w.new.pem));
    assert_eq!(
        parse_label(Some(&format!("new:{other}")), &fingerprint(&w.new.pem)),
        None
    );
    let mut o = observed(&w, &w.old.pem, None, [None, None]);
    o.own_bag.insert(CA_KEY.into(), format!("new:{other}"));
    let p = run(&o, &w);
    assert!(written_ca(&p).is_some(), "a later rotation starts over");
}

#[test]
fn a_unit_already_on_the_new_ca_alone_says_so_while_its_peers_rotate() {
    let w = world();
    let mut o = observed(&w, &w.new.pem, None, [Some("both"), None]);
    o.certs.disk.server = Some(w.offer.server.cert.clone());
    o.certs.disk.client = Some(w.offer.client.cert.clone());
    assert!(!handles(&o, &w.offer));
    let mut p = Plan::default();
    settled(&o, &w.offer, &mut p);
    assert!(published(&p).is_some_and(|l| l.starts_with("new:")));
    // Nobody rotating: nothing to say.
    let mut o = observed(&w, &w.new.pem, None, [None, None]);
    o.certs.disk.server = Some(w.offer.server.cert.clone());
    let mut p = Plan::default();
    settled(&o, &w.offer, &mut p);
    assert_eq!(published(&p), None);
}
