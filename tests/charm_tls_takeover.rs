//! Issue 11, item 1: a 3-unit cluster of the Python charm served over TLS
//! (https on both listeners, client-cert auth, the certificates in
//! /var/snap/etcd/common, its members born under `<name>.etcd`) refreshed
//! to this charm with a writer running. The charm keeps TLS with those
//! files: same cluster ID, member IDs, token and keys; a client without a
//! certificate is still refused and the pair `db` publishes works; no
//! acknowledged write lost, never two members down (the rolling turn
//! reaches the cluster over https with the client pair).

mod test_ca;
mod upgrade_support;
use test_ca::{leaf, new_ca};
use upgrade_support::*;
#[path = "writer_support/mod.rs"]
mod writer_support;

use etcd_charm::etcd::{self, ClientTls, Endpoints};
use etcd_charm::tls::files::{self, Material, TlsPaths};
use etcd_charm::tls::key::KeyAlg;
use etcd_charm::tls::sans;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const KEYS: usize = 30;

fn https(ip: &str, port: u16) -> String {
    format!("https://{ip}:{port}")
}

/// etcd.conf.yml as the Python charm rendered it for a TLS member.
fn python_tls_config(name: &str, data_dir: &str, ip: &str, cluster: &str, f: &TlsPaths) -> String {
    let block = format!(
        "  cert-file: {}\n  key-file: {}\n  trusted-ca-file: {}\n  client-cert-auth: true\n",
        f.server_cert.display(),
        f.server_key.display(),
        f.ca.display()
    );
    format!(
        "name: {name}\n\
         data-dir: {data_dir}\n\
         listen-peer-urls: {peer}\n\
         listen-client-urls: {client}\n\
         initial-advertise-peer-urls: {peer}\n\
         advertise-client-urls: {client}\n\
         initial-cluster: {cluster}\n\
         initial-cluster-token: {TOKEN}\n\
         initial-cluster-state: new\n\
         heartbeat-interval: {HEARTBEAT_MS}\n\
         election-timeout: {ELECTION_MS}\n\
         client-transport-security:\n{block}\
         peer-transport-security:\n{block}",
        peer = https(ip, 2380),
        client = https(ip, 2379),
    )
}

fn status(tls: &ClientTls, ep: &str) -> Option<etcd::MemberStatus> {
    etcd::block_on(etcd::member_status(Endpoints::new(
        vec![ep.to_string()],
        Some(tls.clone()),
    )))
    .ok()
}

#[test]
fn a_tls_cluster_of_the_python_charm_is_taken_over_with_its_certificates() {
    let started = Instant::now();
    let up = Upgrade::deploy(3, &[]);
    let ca = new_ca("python-charm-ca");
    let client = leaf(&ca, KeyAlg::EcdsaP256, "etcd-client", &[]);
    let peers: Vec<(String, String)> = up
        .units
        .iter()
        .map(|u| (Upgrade::member_name(u), up.m.address(u)))
        .collect();
    let cluster: Vec<String> = peers
        .iter()
        .map(|(n, ip)| format!("{n}={}", https(ip, 2380)))
        .collect();
    let cluster = cluster.join(",");
    for (u, (name, ip)) in up.units.iter().zip(&peers) {
        let paths = up.paths(u);
        std::fs::create_dir_all(paths.common_dir()).unwrap();
        let names = sans::unit_sans([ip.as_str()], &u.replace('/', "-"));
        let server = leaf(&ca, KeyAlg::Rsa2048, ip, &names);
        files::write(
            &paths,
            &Material {
                ca: ca.pem.clone(),
                server,
                client: client.clone(),
            },
        )
        .unwrap();
        let dir = up.legacy_dir(u);
        std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
        let f = TlsPaths::new(&paths);
        let text = python_tls_config(name, &dir.display().to_string(), ip, &cluster, &f);
        std::fs::write(paths.config_file(), text).unwrap();
    }
    let tls = ClientTls {
        ca_pem: ca.pem.clone(),
        cert_pem: client.cert.clone(),
        key_pem: client.key.clone(),
    };
    // etcdctl (the shared helpers) shows unit 0's copy of the client pair.
    let f0 = TlsPaths::new(&up.paths(&up.units[0]));
    std::env::set_var("ETCDCTL_CACERT", &f0.ca);
    std::env::set_var("ETCDCTL_CERT", &f0.client_cert);
    std::env::set_var("ETCDCTL_KEY", &f0.client_key);
    writer_support::use_tls(&tls.ca_pem, &tls.cert_pem, &tls.key_pem);

    // The Python charm's cluster: started by its start hook, token in
    // leadership data, keys written.
    let first_leader = up.m.leader();
    up.m.ok(&[
        "exec",
        &first_leader,
        "--",
        "leader-set",
        &format!("token={TOKEN}"),
    ]);
    for u in &up.units {
        up.m.ok(&[
            "exec",
            u,
            "--",
            "env",
            "JUJU_DISPATCH_PATH=hooks/start",
            "./dispatch",
        ]);
    }
    let eps: Vec<String> = peers.iter().map(|(_, ip)| https(ip, 2379)).collect();
    for ep in &eps {
        wait_until(&format!("TLS etcd on {ep}"), START_TIMEOUT, || {
            status(&tls, ep).is_some_and(|s| s.leader != 0)
        });
    }
    let all = eps.join(",");
    put_keys(&all, "legacy", KEYS);
    let before: Vec<etcd::MemberStatus> = eps.iter().map(|e| status(&tls, e).unwrap()).collect();
    let cluster_id = before[0].cluster_id;

    let writer = writer_support::Writer::start(&eps);
    std::thread::sleep(Duration::from_secs(1));
    let out = up.refresh(&[]);
    assert!(
        out.status.success(),
        "refresh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let w = up.m.workloads();
        if w.iter()
            .all(|(_, s, m)| s == "active" && m.starts_with("Healthy with 3 known peers"))
        {
            // No certificates relation: the status says nothing renews
            // the certificates kept on disk (charm/expiry.rs).
            for (u, _, m) in &w {
                assert!(m.contains("certificates not related"), "{u}: {m}");
            }
            break;
        }
        assert!(Instant::now() < deadline, "units never all healthy: {w:?}");
        up.m.ok(&["update-status"]);
    }
    let report = writer.finish(Duration::from_secs(30));
    report.print("TLS takeover of 3 units under a writer");

    for ((u, ep), b) in up.units.iter().zip(&eps).zip(&before) {
        let s = status(&tls, ep).unwrap_or_else(|| panic!("{u} answers over https"));
        assert_eq!(s.member_id, b.member_id, "{u} runs its own member");
        assert_eq!(s.cluster_id, cluster_id, "{u}");
        assert_keys(ep, "legacy", KEYS);
        let text = std::fs::read_to_string(up.paths(u).config_file()).unwrap();
        assert!(text.contains("client-cert-auth: true"), "{u}: {text}");
        assert!(!text.contains("http://"), "{u}: {text}");
        let legacy = up.legacy_dir(u).display().to_string();
        assert!(!text.contains(&legacy), "{u}: the charm rewrote it: {text}");
        assert!(
            matches!(etcd_charm::wal::read_ids(&up.m.data_dir(u)), Ok(Some(_))),
            "{u}: the member was moved to the canonical data dir"
        );
    }
    assert_eq!(up.m.token(), TOKEN, "the token is unchanged");
    assert_eq!(up.m.cluster_id(), format!("{cluster_id:x}"));
    let m = members(&all);
    assert_eq!(m.len(), 3, "{m:?}");

    // Actions reach the member over https with the client pair.
    let out =
        up.m.ok(&["run-action", &up.units[0], "health", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["results"]["healthy"], "true", "{out}");
    // So does the nrpe health check, run outside any hook.
    let check = Command::new(env!("CARGO_BIN_EXE_etcd-charm"))
        .args(["nrpe-check", "health"])
        .env("ETCD_CHARM_ROOT", up.m.root(&up.units[0]))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "nrpe health: {}",
        String::from_utf8_lossy(&check.stdout)
    );

    // TLS is still demanded: no client certificate, no answer.
    let plain = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .env_remove("ETCDCTL_CERT")
        .env_remove("ETCDCTL_KEY")
        .args([
            "--endpoints",
            &eps[0],
            "--dial-timeout=3s",
            "--command-timeout=5s",
        ])
        .args(["get", "legacy/0"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !plain.status.success(),
        "a client without a certificate was served"
    );

    // What db publishes works (and is the same from every unit).
    let client_charm =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/etcd-client");
    up.m.ok(&["deploy", client_charm.to_str().unwrap()]);
    up.m.ok(&["integrate", "etcd:db", "etcd-client:etcd"]);
    up.m.ok(&["settle"]);
    let got = up.m.ok(&[
        "exec",
        "etcd-client/0",
        "--",
        "relation-ids",
        "etcd",
        "--format=json",
    ]);
    let rel: Vec<String> = serde_json::from_str(&got).unwrap();
    let mut published = Vec::new();
    for u in &up.units {
        let bag = up.m.ok(&[
            "exec",
            "etcd-client/0",
            "--",
            "relation-get",
            "-r",
            &rel[0],
            "-",
            u,
            "--format=json",
        ]);
        let v: serde_json::Value = serde_json::from_str(&bag).unwrap();
        published.push(v);
    }
    assert!(published.windows(2).all(|w| w[0] == w[1]), "{published:?}");
    let p = &published[0];
    let conn = p["connection_string"].as_str().unwrap();
    assert!(conn.split(',').all(|u| u.starts_with("https://")), "{conn}");
    let theirs = ClientTls {
        ca_pem: p["client_ca"].as_str().unwrap().into(),
        cert_pem: p["client_cert"].as_str().unwrap().into(),
        key_pem: p["client_key"].as_str().unwrap().into(),
    };
    let urls: Vec<String> = conn.split(',').map(String::from).collect();
    let v = etcd::block_on(etcd::view(Endpoints::new(urls, Some(theirs))))
        .expect("the db pair reaches the cluster");
    assert_eq!(v.cluster_id(), cluster_id);

    assert_eq!(report.lost, 0, "lost: {:?}", report.lost_keys);
    assert!(report.acked > 0);
    assert!(report.max_down <= 1, "{:?}", report.max_down_at);
    eprintln!(
        "3 TLS units taken over in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
