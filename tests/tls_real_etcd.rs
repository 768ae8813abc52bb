//! Real etcd 3.4 accepts the TLS config we render: https on both
//! listeners, client-cert auth. A test CA (rcgen) signs our own server
//! key/CSR (tls::key) and a client pair; the files go where the charm
//! keeps them (tls::files). A client without a certificate, or with one
//! from another CA, is refused; etcd::connect with the pair works. A peer
//! whose certificate lacks the peer CN is refused by etcd 3.4 and 3.5.
//! Loopback range 127.81.0.x.

mod test_ca;
use etcd_charm::etcd::{self, ClientTls, Endpoints};
use etcd_charm::render::{self, ClusterState, EtcdConfig, EtcdTls};
use etcd_charm::tls::files::{self, Material, TlsPaths};
use etcd_charm::tls::key::KeyAlg;
use etcd_charm::tls::{cert, ciphers, sans};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use test_ca::{leaf, new_ca};

const IP: &str = "127.81.0.1";

/// etcd on a rendered config; killed on drop (a panic included).
struct Running(Child, std::path::PathBuf);
impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
impl Running {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.1).unwrap_or_default()
    }
}

fn etcdctl(args: &[&str]) -> std::process::Output {
    Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args([
            "--endpoints",
            &format!("https://{IP}:2379"),
            "--dial-timeout",
            "5s",
        ])
        .args(args)
        .output()
        .expect("etcdctl installed")
}

#[test]
fn etcd_serves_https_with_client_cert_auth_on_the_rendered_config() {
    let d = tempfile::tempdir().unwrap();
    let paths = etcd_charm::paths::Paths::new(d.path());
    let ca = new_ca("etcd test CA");
    let names = sans::unit_sans([IP], "etcd-0");
    let server = leaf(&ca, KeyAlg::Rsa2048, IP, &names);
    let client = leaf(&ca, KeyAlg::EcdsaP256, "etcd-client", &[]);
    files::write(
        &paths,
        &Material {
            ca: ca.pem.clone(),
            server: server.clone(),
            client: client.clone(),
        },
    )
    .unwrap();

    // The suites the operator asked for, checked against the server key.
    let asked = ciphers::parse_option(
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    );
    let key_type = cert::parse(&server.cert).unwrap().key_type;
    let suites = ciphers::usable_for(&asked, &key_type).unwrap();
    assert_eq!(suites, ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);

    let p = TlsPaths::new(&paths);
    let s = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let cfg = EtcdConfig {
        name: "etcd0".into(),
        data_dir: s(&d.path().join("data")),
        listen_peer_urls: vec![format!("https://{IP}:2380")],
        listen_client_urls: vec![format!("https://{IP}:2379")],
        listen_metrics_urls: vec![],
        initial_advertise_peer_urls: vec![format!("https://{IP}:2380")],
        advertise_client_urls: vec![format!("https://{IP}:2379")],
        initial_cluster: vec![("etcd0".into(), format!("https://{IP}:2380"))],
        initial_cluster_token: "tls-test".into(),
        initial_cluster_state: ClusterState::New,
        snapshot_count: None,
        heartbeat_interval: 100,
        election_timeout: 1000,
        strict_reconfig_check: true,
        enable_v2: false,
        grpc_gateway: true,
        force_new_cluster: false,
        storage: Default::default(),
        tls: Some(EtcdTls {
            cert_file: s(&p.server_cert),
            key_file: s(&p.server_key),
            trusted_ca_file: s(&p.ca),
            cipher_suites: suites,
            peer_allowed_cn: None,
        }),
    };
    cfg.validate().unwrap();
    let conf = d.path().join("etcd.conf.yml");
    std::fs::write(&conf, render::render_etcd_config(&cfg)).unwrap();
    let log = d.path().join("etcd.log");
    let out = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new("etcd");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("ETCD") {
            cmd.env_remove(k);
        }
    }
    let child = cmd
        .arg("--config-file")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("etcd installed");
    let etcd = Running(child, log);

    let tls = ClientTls {
        ca_pem: ca.pem.clone(),
        cert_pem: client.cert.clone(),
        key_pem: client.key.clone(),
    };
    let eps = Endpoints::new(vec![format!("https://{IP}:2379")], Some(tls.clone()));
    let deadline = Instant::now() + Duration::from_secs(60);
    let view = loop {
        match etcd::block_on(etcd::view(&eps)) {
            Ok(v) => break v,
            Err(e) if Instant::now() > deadline => {
                panic!("no https answer: {e}\n--- etcd log:\n{}", etcd.log())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(500)),
        }
    };
    assert_eq!(view.members.len(), 1);
    assert_eq!(view.members[0].name, "etcd0");
    assert_eq!(view.members[0].peer_urls, [format!("https://{IP}:2380")]);
    assert_eq!(view.members[0].client_urls, [format!("https://{IP}:2379")]);
    let st = etcd::block_on(etcd::member_status(eps.only(&format!("https://{IP}:2379")))).unwrap();
    assert_eq!(st.member_id, view.members[0].id);

    // etcdctl with the pair works; without a client certificate it is
    // refused; with a pair from another CA too.
    let cacert = s(&p.ca);
    let ok = etcdctl(&[
        "--cacert",
        &cacert,
        "--cert",
        &s(&p.client_cert),
        "--key",
        &s(&p.client_key),
        "put",
        "k",
        "v",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let refused = etcdctl(&["--cacert", &cacert, "put", "k", "no-cert"]);
    assert!(
        !refused.status.success(),
        "a client without a certificate was served"
    );
    let other = new_ca("another CA");
    let stranger = leaf(&other, KeyAlg::EcdsaP256, "stranger", &[]);
    let bad = ClientTls {
        ca_pem: ca.pem.clone(),
        cert_pem: stranger.cert,
        key_pem: stranger.key,
    };
    let bad_eps = Endpoints::new(eps.urls.clone(), Some(bad));
    assert!(etcd::block_on(etcd::member_status(&bad_eps)).is_err());
    // Plain (no TLS) against the https listener fails too.
    assert!(etcd::block_on(etcd::member_status(&format!("http://{IP}:2379"))).is_err());
    // Our client still works after all that, and the put is there once.
    let got = etcdctl(&[
        "--cacert",
        &cacert,
        "--cert",
        &s(&p.client_cert),
        "--key",
        &s(&p.client_key),
        "get",
        "k",
        "--print-value-only",
    ]);
    assert_eq!(String::from_utf8_lossy(&got.stdout).trim(), "v");
    drop(etcd);
}

/// etcd 3.5 for the allowed-CN check: ./test's SNAP_STANDIN_ETCD35 (3.5.16),
/// else packaging/prereqs' cache.
fn etcd35() -> Option<std::path::PathBuf> {
    let dirs = [
        std::env::var("SNAP_STANDIN_ETCD35").ok().map(Into::into),
        std::env::var("HOME")
            .ok()
            .map(|h| std::path::PathBuf::from(h).join(".cache/etcd-charm/etcd-3.5.16/usr/bin")),
    ];
    dirs.into_iter()
        .flatten()
        .map(|d: std::path::PathBuf| d.join("etcd"))
        .find(|e| e.is_file())
}

/// One member of a two-member TLS cluster on `ip`, demanding `allowed_cn`
/// of its peer, serving `server`; killed on drop.
fn peer_member(
    bin: &std::path::Path,
    dir: &std::path::Path,
    name: &str,
    ip: &str,
    cluster: &[(&str, &str)],
    material: &Material,
    allowed_cn: &str,
) -> Running {
    let paths = etcd_charm::paths::Paths::new(dir);
    files::write(&paths, material).unwrap();
    let p = TlsPaths::new(&paths);
    let s = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let cfg = EtcdConfig {
        name: name.into(),
        data_dir: s(&dir.join("data")),
        listen_peer_urls: vec![format!("https://{ip}:2380")],
        listen_client_urls: vec![format!("https://{ip}:2379")],
        listen_metrics_urls: vec![],
        initial_advertise_peer_urls: vec![format!("https://{ip}:2380")],
        advertise_client_urls: vec![format!("https://{ip}:2379")],
        initial_cluster: cluster
            .iter()
            .map(|(n, ip)| (n.to_string(), format!("https://{ip}:2380")))
            .collect(),
        initial_cluster_token: "cn-test".into(),
        initial_cluster_state: ClusterState::New,
        snapshot_count: None,
        heartbeat_interval: 100,
        election_timeout: 1000,
        strict_reconfig_check: true,
        enable_v2: false,
        grpc_gateway: true,
        force_new_cluster: false,
        storage: Default::default(),
        tls: Some(EtcdTls {
            cert_file: s(&p.server_cert),
            key_file: s(&p.server_key),
            trusted_ca_file: s(&p.ca),
            cipher_suites: vec![],
            peer_allowed_cn: Some(allowed_cn.into()),
        }),
    };
    let conf = dir.join("etcd.conf.yml");
    std::fs::write(&conf, render::render_etcd_config(&cfg)).unwrap();
    let log = dir.join("etcd.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(bin)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .arg("--config-file")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("etcd installed");
    Running(child, log)
}

/// Whether the member at `ip` answers over TLS with a raft leader.
fn has_leader(ip: &str, tls: &ClientTls) -> bool {
    let eps = Endpoints::new(vec![format!("https://{ip}:2379")], Some(tls.clone()));
    etcd::block_on(etcd::member_status(&eps)).is_ok_and(|s| s.leader != 0)
}

/// `PeerTLSInfo.AllowedCN` as we render it is honoured by the etcd we run:
/// a peer whose certificate the same CA signed under another common name
/// (a kubelet's, say) is refused, so two members never form a cluster;
/// with certificates carrying the peer CN the same two do.
fn allowed_cn_is_enforced_by(bin: &std::path::Path, ips: [&str; 2]) {
    let cn = etcd_charm::charm::certificates_peer::for_token("CNTESTTOKEN00001");
    let ca = new_ca("etcd test CA");
    let client = leaf(&ca, KeyAlg::EcdsaP256, "etcd-client", &[]);
    let tls = ClientTls {
        ca_pem: ca.pem.clone(),
        cert_pem: client.cert.clone(),
        key_pem: client.key.clone(),
    };
    let material = |cn: &str, ip: &str| Material {
        ca: ca.pem.clone(),
        server: leaf(&ca, KeyAlg::Rsa2048, cn, &sans::unit_sans([ip], "host")),
        client: client.clone(),
    };
    let cluster = [("a", ips[0]), ("b", ips[1])];
    let d = tempfile::tempdir().unwrap();
    let a = peer_member(
        bin,
        &d.path().join("a"),
        "a",
        ips[0],
        &cluster,
        &material(&cn, ips[0]),
        &cn,
    );
    let stranger = material("system:node:kubelet-0", ips[1]);
    let b = peer_member(
        bin,
        &d.path().join("b1"),
        "b",
        ips[1],
        &cluster,
        &stranger,
        &cn,
    );
    // Long enough for an election several times over (1 s timeout).
    let until = Instant::now() + Duration::from_secs(8);
    while Instant::now() < until {
        assert!(
            !has_leader(ips[0], &tls),
            "{}: a peer with CN system:node:kubelet-0 formed a cluster with one demanding {cn}\n--- a:\n{}",
            bin.display(),
            a.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(b);
    let b = peer_member(
        bin,
        &d.path().join("b2"),
        "b",
        ips[1],
        &cluster,
        &material(&cn, ips[1]),
        &cn,
    );
    let until = Instant::now() + Duration::from_secs(60);
    while !(has_leader(ips[0], &tls) && has_leader(ips[1], &tls)) {
        assert!(
            Instant::now() < until,
            "{}: two members with CN {cn} formed no cluster in 60 s\n--- a:\n{}\n--- b:\n{}",
            bin.display(),
            a.log(),
            b.log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn a_peer_certificate_without_the_peer_cn_is_refused_by_etcd_3_4() {
    allowed_cn_is_enforced_by(std::path::Path::new("etcd"), ["127.81.0.2", "127.81.0.3"]);
}

#[test]
fn a_peer_certificate_without_the_peer_cn_is_refused_by_etcd_3_5() {
    let Some(bin) = etcd35() else {
        etcd_charm::prereq::skip(
            "tls_real_etcd 3.5",
            "no etcd 3.5.16 binaries",
            "packaging/prereqs unpacks them into ~/.cache/etcd-charm/etcd-3.5.16",
        );
        return;
    };
    allowed_cn_is_enforced_by(&bin, ["127.81.0.4", "127.81.0.5"]);
}
