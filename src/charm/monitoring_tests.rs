//! The monitoring endpoints' pure half: requests, dashboard, nrpe files.

use super::*;
use crate::etcd::{ClientTls, ClusterView, Member, MemberStatus};
use crate::layout::DiskLayout;

fn member(id: u64, name: &str, ip: &str) -> Member {
    Member {
        id,
        name: name.into(),
        peer_urls: vec![format!("http://{ip}:2380")],
        client_urls: if name.is_empty() {
            vec![]
        } else {
            vec![format!("http://{ip}:2379")]
        },
        is_learner: false,
    }
}

/// A started leader etcd/0 in a cluster of etcd0, etcd1 and a learner not
/// yet started, with monitoring observed as given.
fn leader(m: Monitoring) -> Observed {
    Observed {
        event: Event::UpdateStatus,
        disk: DiskLayout {
            config: None,
            env_configs: vec![],
            locations: vec![],
            migration: Default::default(),
        },
        active: true,
        cluster: Some(ClusterView {
            endpoint: "http://10.0.0.1:2379".into(),
            status: MemberStatus {
                member_id: 1,
                cluster_id: 9,
                leader: 1,
                version: "3.4.23".into(),
                raft_index: 5,
                is_learner: false,
                errors: vec![],
            },
            members: vec![
                member(2, "etcd1", "10.0.0.2"),
                member(1, "etcd0", "10.0.0.1"),
                member(3, "", "10.0.0.3"),
            ],
        }),
        monitoring: m,
        ..crate::charm::plan_tests::fresh(true)
    }
}

fn rel(id: &str, remote: &str, own: Databag, fresh: &str) -> RelationData {
    let mut remotes = BTreeMap::new();
    remotes.insert(remote.to_string(), Databag::new());
    RelationData {
        id: id.into(),
        own,
        remotes,
        fresh_id: fresh.into(),
        fresh_agent_id: String::new(),
    }
}

fn known() -> Monitoring {
    Monitoring {
        known: true,
        check_binary: "/charm/bin/etcd-charm".into(),
        ..Default::default()
    }
}

/// The monitoring steps (leadership data as if already recorded).
fn steps(o: &Observed) -> Vec<MonitoringStep> {
    let mut o = o.clone();
    o.leader.app.insert(REQUESTS_BY.into(), o.unit.clone());
    let mut p = Plan::default();
    plan(&o, &Paths::new("/"), &mut p);
    p.steps
        .into_iter()
        .map(|s| match s {
            Step::Monitoring(m) => m,
            other => panic!("not a monitoring step: {other}"),
        })
        .collect()
}

fn published(s: &[MonitoringStep], relation: &str) -> Databag {
    s.iter()
        .find_map(|s| match s {
            MonitoringStep::Publish { relation: r, data } if r == relation => Some(data.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

const ID: &str = "0b6d5c8e-3f1a-4c2b-9d7e-5a4f3e2d1c0b";

#[test]
fn prometheus_request_is_sorted_json_over_every_started_member() {
    let mut m = known();
    m.prometheus = vec![rel("prometheus:3", "prometheus/0", Databag::new(), ID)];
    let s = steps(&leader(m));
    let bag = published(&s, "prometheus:3");
    let text = &bag[&format!("request_{ID}")];
    assert_eq!(
        text,
        &format!(
            r#"{{"job_data":{{"scheme":"http","static_configs":[{{"targets":["10.0.0.1:2379","10.0.0.2:2379"]}}]}},"job_name":"etcd","request_id":"{ID}"}}"#
        )
    );
}

#[test]
fn over_tls_the_scrape_job_is_https_with_the_ca_and_the_client_pair() {
    let mut m = known();
    m.prometheus = vec![rel("prometheus:3", "prometheus/0", Databag::new(), ID)];
    let mut o = leader(m);
    o.tls = Some(ClientTls {
        ca_pem: "CA PEM".into(),
        cert_pem: "CLIENT CERT PEM".into(),
        key_pem: "CLIENT KEY PEM".into(),
    });
    // Plain members: the pair is not sent where it is not needed.
    let req = |o: &Observed| -> Value {
        let bag = published(&steps(o), "prometheus:3");
        serde_json::from_str(&bag[&format!("request_{ID}")]).unwrap()
    };
    let plain = req(&o);
    assert_eq!(plain["job_data"]["scheme"], "http");
    assert!(plain.get("client_key").is_none(), "{plain}");
    for mem in &mut o.cluster.as_mut().unwrap().members {
        for u in &mut mem.client_urls {
            *u = u.replace("http://", "https://");
        }
    }
    let tls = req(&o);
    assert_eq!(tls["job_data"]["scheme"], "https");
    assert_eq!(tls["ca_cert"], "CA PEM");
    assert_eq!(tls["client_cert"], "CLIENT CERT PEM");
    assert_eq!(tls["client_key"], "CLIENT KEY PEM");
    assert_eq!(
        tls["job_data"]["static_configs"][0]["targets"],
        json!(["10.0.0.1:2379", "10.0.0.2:2379"])
    );
    // What the dry run and the logs show of the step: key names only.
    let shown: Vec<String> = steps(&o).iter().map(|s| s.to_string()).collect();
    assert!(!shown.concat().contains("KEY PEM"), "{shown:?}");
}

#[test]
fn an_existing_request_id_is_reused_and_unchanged_requests_are_not_rewritten() {
    let targets = vec!["10.0.0.1:2379".to_string(), "10.0.0.2:2379".to_string()];
    let mut own = Databag::new();
    own.insert(
        format!("request_{ID}"),
        prometheus_request(ID, &targets, None),
    );
    let mut m = known();
    m.prometheus = vec![rel("prometheus:3", "prometheus/0", own.clone(), "")];
    assert_eq!(steps(&leader(m.clone())), vec![]);

    // A member more: the same id, new targets.
    let mut o = leader(m);
    if let Some(v) = o.cluster.as_mut() {
        v.members[2] = member(3, "etcd2", "10.0.0.3");
    }
    let bag = published(&steps(&o), "prometheus:3");
    let req: Value = serde_json::from_str(&bag[&format!("request_{ID}")]).unwrap();
    assert_eq!(req["request_id"], ID);
    assert_eq!(
        req["job_data"]["static_configs"][0]["targets"],
        json!(["10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"])
    );
}

#[test]
fn a_non_leader_withdraws_its_old_request_and_a_stale_one_is_dropped() {
    let mut own = Databag::new();
    own.insert(format!("request_{ID}"), prometheus_request(ID, &[], None));
    let mut m = known();
    m.prometheus = vec![rel("prometheus:3", "prometheus/0", own, "")];
    let mut o = leader(m);
    o.is_leader = false;
    let bag = published(&steps(&o), "prometheus:3");
    assert_eq!(bag[&format!("request_{ID}")], "");
}

#[test]
fn a_new_leader_says_so_in_leadership_data_so_the_old_one_withdraws() {
    let mut m = known();
    m.prometheus = vec![rel("prometheus:3", "prometheus/0", Databag::new(), ID)];
    let mut o = leader(m);
    o.leader.app.insert(REQUESTS_BY.into(), "etcd/1".into());
    let mut p = Plan::default();
    plan(&o, &Paths::new("/"), &mut p);
    let mut want = Databag::new();
    want.insert(REQUESTS_BY.into(), "etcd/0".into());
    assert!(
        p.steps.contains(&Step::SetLeaderData(want)),
        "{:?}",
        p.steps
    );
}

#[test]
fn a_refused_request_is_reported() {
    let mut r = rel("prometheus:3", "prometheus/0", Databag::new(), ID);
    r.remotes.get_mut("prometheus/0").unwrap().insert(
        format!("response_{ID}"),
        r#"{"success": false, "reason": "bad job"}"#.into(),
    );
    let mut m = known();
    m.prometheus = vec![r];
    let s = steps(&leader(m));
    assert!(
        s.contains(&MonitoringStep::Refused {
            relation: "prometheus:3".into(),
            unit: "prometheus/0".into(),
            reason: "bad job".into()
        }),
        "{s:?}"
    );
}

#[test]
fn grafana_waits_for_prometheus_then_names_its_source() {
    let mut m = known();
    m.grafana = vec![rel("grafana:4", "grafana/0", Databag::new(), "g-1")];
    assert_eq!(steps(&leader(m.clone())), vec![]);

    m.prometheus = vec![rel("prometheus:3", "prom/0", Databag::new(), ID)];
    let s = steps(&leader(m));
    let bag = published(&s, "grafana:4");
    let req: Value = serde_json::from_str(&bag["request_g-1"]).unwrap();
    assert_eq!(req["name"], "etcd");
    assert_eq!(req["request_id"], "g-1");
    let panels = req["dashboard"]["panels"].as_array().unwrap();
    assert!(panels.len() >= 7);
    for p in panels {
        assert_eq!(p["datasource"], "prom - Juju generated source", "{p}");
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            assert!(expr.contains(&format!("job=\"etcd-{ID}\"")), "{expr}");
        }
    }
    assert!(!bag["request_g-1"].contains("__"), "placeholders left");
}

#[test]
fn the_dashboard_template_covers_the_metrics_that_matter() {
    let d = dashboard("p", "x").to_string();
    for metric in [
        "etcd_server_leader_changes_seen_total",
        "etcd_server_proposals_committed_total",
        "etcd_server_proposals_failed_total",
        "etcd_mvcc_db_total_size_in_bytes",
        "etcd_disk_wal_fsync_duration_seconds_bucket",
        "etcd_disk_backend_commit_duration_seconds_bucket",
        "grpc_server_started_total",
        "etcd_network_peer_round_trip_time_seconds_bucket",
    ] {
        assert!(d.contains(metric), "{metric}");
    }
}

#[test]
fn nrpe_writes_the_checks_and_the_monitors_once() {
    let mut r = rel("nrpe-external-master:5", "nrpe/0", Databag::new(), "");
    r.remotes
        .get_mut("nrpe/0")
        .unwrap()
        .insert("nagios_hostname".into(), "node-7".into());
    let mut m = known();
    m.nrpe = vec![r];
    let mut o = leader(m);
    o.is_leader = false;
    let s = steps(&o);
    let bag = published(&s, "nrpe-external-master:5");
    assert_eq!(bag["primary"], "False");
    assert_eq!(
        bag["monitors"],
        nagios::render_monitors(&nagios::checks(false))
    );
    let Some(MonitoringStep::NrpeFiles { write, remove }) = s
        .iter()
        .find(|s| matches!(s, MonitoringStep::NrpeFiles { .. }))
        .cloned()
    else {
        panic!("{s:?}")
    };
    assert!(remove.is_empty());
    assert_eq!(write.len(), 4, "{write:?}");
    let health = &write[&PathBuf::from("/etc/nagios/nrpe.d/check_etcd-health.cfg")];
    assert!(health.contains("command[check_etcd-health]=/charm/bin/etcd-charm nrpe-check health\n"));
    assert!(health.contains("# servicegroups: juju\n"));
    assert!(write.contains_key(&PathBuf::from(
        "/var/lib/nagios/export/service__node-7_check_etcd-alarms.cfg"
    )));

    // Once written, nothing more to do.
    let mut after = o.clone();
    after.monitoring.nrpe_files = write;
    after.monitoring.nrpe[0].own = bag;
    assert_eq!(steps(&after), vec![]);

    // Relation gone: every file of ours goes.
    after.monitoring.nrpe.clear();
    let s = steps(&after);
    match &s[..] {
        [MonitoringStep::NrpeFiles { write, remove }] => {
            assert!(write.is_empty());
            assert_eq!(remove.len(), 4);
        }
        _ => panic!("{s:?}"),
    }
}

#[test]
fn a_new_nagios_hostname_replaces_the_export_files() {
    let checks = nagios::checks(false);
    let bin = Path::new("/charm/bin/etcd-charm");
    let old = nagios::files(&checks, "juju-etcd-0", "juju", bin, Path::new("/"));
    let mut r = rel("nrpe-external-master:5", "nrpe/0", Databag::new(), "");
    r.remotes
        .get_mut("nrpe/0")
        .unwrap()
        .insert("nagios_hostname".into(), "node-7".into());
    let mut m = known();
    m.nrpe = vec![r];
    m.nrpe_files = old;
    let s = steps(&leader(m));
    let Some(MonitoringStep::NrpeFiles { write, remove }) = s.last().cloned() else {
        panic!("{s:?}")
    };
    // The nrpe.d files name no host: unchanged, not rewritten.
    assert_eq!(write.len(), 2, "{write:?}");
    assert!(write.keys().all(|p| p.to_string_lossy().contains("node-7")));
    assert_eq!(
        remove,
        vec![
            nagios::export_file("juju-etcd-0", "etcd-alarms"),
            nagios::export_file("juju-etcd-0", "etcd-health"),
        ]
    );
}

#[test]
fn unknown_monitoring_plans_nothing() {
    let mut m = known();
    m.known = false;
    m.nrpe_files
        .insert(nagios::nrpe_file("etcd-health"), "x".into());
    assert_eq!(steps(&leader(m)), vec![]);
}

#[test]
fn uuid4_has_the_version_and_variant_bits() {
    let u = uuid4().unwrap();
    assert_eq!(u.len(), 36);
    assert_eq!(&u[14..15], "4");
    assert!("89ab".contains(&u[19..20]), "{u}");
    assert_ne!(u, uuid4().unwrap());
}

const AGENT_ID: &str = "7c1e2d3f-4a5b-4c6d-8e7f-90a1b2c3d4e5";

/// A prometheus relation of a leader that has drawn both ids.
fn both_fresh() -> Monitoring {
    let mut r = rel("prometheus:3", "prometheus/0", Databag::new(), ID);
    r.fresh_agent_id = AGENT_ID.into();
    let mut m = known();
    m.prometheus = vec![r];
    m
}

fn request(bag: &Databag, id: &str) -> Value {
    serde_json::from_str(&bag[&format!("request_{id}")]).unwrap()
}

fn https(o: &mut Observed) {
    o.tls = Some(ClientTls {
        ca_pem: "CA PEM".into(),
        cert_pem: "CLIENT CERT PEM".into(),
        key_pem: "CLIENT KEY PEM".into(),
    });
    for mem in &mut o.cluster.as_mut().unwrap().members {
        for u in &mut mem.client_urls {
            *u = u.replace("http://", "https://");
        }
    }
}

#[test]
fn the_leader_asks_for_a_second_job_over_the_agents_metrics_listeners() {
    let bag = published(&steps(&leader(both_fresh())), "prometheus:3");
    assert_eq!(bag.len(), 2, "{bag:?}");
    assert_eq!(request(&bag, ID)["job_name"], "etcd");
    let agent = request(&bag, AGENT_ID);
    assert_eq!(agent["job_name"], AGENT_JOB);
    assert_eq!(agent["request_id"], AGENT_ID);
    assert_eq!(agent["job_data"]["scheme"], "http");
    assert_eq!(
        agent["job_data"]["static_configs"][0]["targets"],
        json!(["10.0.0.1:9380", "10.0.0.2:9380"])
    );
    assert!(agent.get("client_key").is_none(), "{agent}");

    // Over TLS: https with exactly the etcd job's CA and pair.
    let mut o = leader(both_fresh());
    https(&mut o);
    let bag = published(&steps(&o), "prometheus:3");
    let (etcd, agent) = (request(&bag, ID), request(&bag, AGENT_ID));
    assert_eq!(agent["job_data"]["scheme"], "https");
    for k in ["ca_cert", "client_cert", "client_key"] {
        assert_eq!(agent[k], etcd[k], "{k}");
    }
    assert_eq!(agent["client_key"], "CLIENT KEY PEM");

    // The port follows agent_metrics_port.
    let mut o = leader(both_fresh());
    o.config.as_mut().unwrap().agent.metrics_port = 9999;
    let bag = published(&steps(&o), "prometheus:3");
    assert_eq!(
        request(&bag, AGENT_ID)["job_data"]["static_configs"][0]["targets"],
        json!(["10.0.0.1:9999", "10.0.0.2:9999"])
    );
}

#[test]
fn both_ids_are_found_again_and_unchanged_requests_are_not_rewritten() {
    let first = published(&steps(&leader(both_fresh())), "prometheus:3");
    // The next hook: our databag holds both; observe drew no fresh ids
    // (it finds both by job name), or other ones that must not be used.
    for fresh in ["", "ffffffff-0000-4000-8000-000000000000"] {
        let mut r = rel("prometheus:3", "prometheus/0", first.clone(), fresh);
        r.fresh_agent_id = fresh.into();
        let mut m = known();
        m.prometheus = vec![r];
        assert_eq!(steps(&leader(m.clone())), vec![], "fresh {fresh:?}");
        // TLS arrives: both rewritten in place, under the same ids.
        let mut o = leader(m);
        https(&mut o);
        let bag = published(&steps(&o), "prometheus:3");
        assert_eq!(bag.len(), 2, "{bag:?}");
        assert_eq!(request(&bag, ID)["job_data"]["scheme"], "https");
        assert_eq!(request(&bag, AGENT_ID)["job_data"]["scheme"], "https");
    }
}

#[test]
fn a_non_leader_withdraws_both_requests() {
    let own = published(&steps(&leader(both_fresh())), "prometheus:3");
    let mut m = known();
    m.prometheus = vec![rel("prometheus:3", "prometheus/0", own, "")];
    let mut o = leader(m);
    o.is_leader = false;
    let bag = published(&steps(&o), "prometheus:3");
    assert_eq!(bag[&format!("request_{ID}")], "");
    assert_eq!(bag[&format!("request_{AGENT_ID}")], "");
}

#[test]
fn no_agent_job_where_no_agent_listens() {
    let own = published(&steps(&leader(both_fresh())), "prometheus:3");
    let cases: [fn(&mut Observed); 3] = [
        |o| o.config.as_mut().unwrap().agent.metrics_port = 0,
        |o| o.config.as_mut().unwrap().agent.enabled = false,
        // Plain members and plain listeners not allowed: the agents have none.
        |o| o.config.as_mut().unwrap().allow_insecure_listeners = false,
    ];
    for (i, change) in cases.into_iter().enumerate() {
        // Never asked for...
        let mut o = leader(both_fresh());
        change(&mut o);
        let bag = published(&steps(&o), "prometheus:3");
        assert_eq!(
            bag.keys().collect::<Vec<_>>(),
            [&format!("request_{ID}")],
            "{i}"
        );
        // ...and one asked for before is withdrawn; the etcd job stays.
        let mut m = known();
        m.prometheus = vec![rel("prometheus:3", "prometheus/0", own.clone(), "")];
        let mut o = leader(m);
        change(&mut o);
        let bag = published(&steps(&o), "prometheus:3");
        assert_eq!(bag.len(), 1, "{i}: {bag:?}");
        assert_eq!(bag[&format!("request_{AGENT_ID}")], "", "{i}");
    }
}
