//! A TLS cluster of the Python charm (https on both listeners, client-cert
//! auth, the certificates in /var/snap/etcd/common, members born under
//! `<name>.etcd`), and its takeover by this charm: the TLS cluster the
//! client tests run against until the certificates relation issues ours.
//!
//! The including test declares `mod test_ca; mod upgrade_support;`.
#![allow(dead_code)]

use crate::test_ca::{leaf, new_ca, Ca};
use crate::upgrade_support::*;
use etcd_charm::etcd::{self, ClientTls, Endpoints};
use etcd_charm::tls::files::{self, Material, TlsPaths};
use etcd_charm::tls::key::KeyAlg;
use etcd_charm::tls::sans;
use std::time::{Duration, Instant};

pub fn https(ip: &str, port: u16) -> String {
    format!("https://{ip}:{port}")
}

/// etcd.conf.yml as the Python charm rendered it for a TLS member.
pub fn python_tls_config(
    name: &str,
    data_dir: &str,
    ip: &str,
    cluster: &str,
    f: &TlsPaths,
) -> String {
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

/// One member's status over https with `tls`, None if it does not answer.
pub fn status(tls: &ClientTls, ep: &str) -> Option<etcd::MemberStatus> {
    etcd::block_on(etcd::member_status(Endpoints::new(
        vec![ep.to_string()],
        Some(tls.clone()),
    )))
    .ok()
}

/// The model (dropped last: it stops every etcd), the CA, the client pair
/// every unit holds, and each unit's member name, address and client URL.
pub struct TlsCluster {
    pub up: Upgrade,
    pub ca: Ca,
    pub tls: ClientTls,
    /// (member name, address), in unit order.
    pub peers: Vec<(String, String)>,
    /// https client URLs, in unit order.
    pub eps: Vec<String>,
    /// A copy of the client pair and CA (ca.pem, cert.pem, key.pem) that
    /// outlives any unit, for etcdctl.
    pub creds: tempfile::TempDir,
}

impl TlsCluster {
    /// `n` units of the Python charm serving TLS, started, every member
    /// answering over https, the token in leadership data. etcdctl (the
    /// shared helpers) is pointed at [`creds`](Self::creds).
    pub fn python(n: u32) -> TlsCluster {
        let up = Upgrade::deploy(n, &[]);
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
        let creds = tempfile::tempdir().unwrap();
        for (env, file, text) in [
            ("ETCDCTL_CACERT", "ca.pem", &tls.ca_pem),
            ("ETCDCTL_CERT", "cert.pem", &tls.cert_pem),
            ("ETCDCTL_KEY", "key.pem", &tls.key_pem),
        ] {
            let p = creds.path().join(file);
            std::fs::write(&p, text).unwrap();
            std::env::set_var(env, &p);
        }

        // The Python charm's cluster: started by its start hook, token in
        // leadership data.
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
        TlsCluster {
            up,
            ca,
            tls,
            peers,
            eps,
            creds,
        }
    }

    /// Refreshes every unit to this charm (must succeed).
    pub fn refresh(&self) {
        let out = self.up.refresh(&[]);
        assert!(
            out.status.success(),
            "refresh: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs update-status until every unit is active and healthy (notes
    /// may follow the health); returns the units' workload statuses.
    pub fn wait_healthy(&self) -> Vec<(String, String, String)> {
        let n = self.up.units.len();
        let want = format!("Healthy with {n} known peers");
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let w = self.up.m.workloads();
            if w.iter()
                .all(|(_, s, m)| s == "active" && m.starts_with(&want))
            {
                return w;
            }
            assert!(Instant::now() < deadline, "units never all healthy: {w:?}");
            self.up.m.ok(&["update-status"]);
        }
    }

    /// A TLS cluster run by this charm: [`python`](Self::python), then
    /// refreshed and healthy.
    pub fn taken_over(n: u32) -> TlsCluster {
        let c = TlsCluster::python(n);
        c.refresh();
        c.wait_healthy();
        c
    }

    /// One key's value read over TLS with the client pair from `eps`
    /// (comma-joined), None if absent; panics if etcdctl fails.
    pub fn get(&self, eps: &str, key: &str) -> Option<String> {
        let out = etcdctl(eps, &["get", key, "--print-value-only"]);
        assert!(
            out.status.success(),
            "etcdctl get {key}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = String::from_utf8_lossy(&out.stdout).trim_end().to_string();
        (!v.is_empty()).then_some(v)
    }

    /// The https client URLs, comma-joined (for the etcdctl helpers).
    pub fn endpoints(&self) -> String {
        self.eps.join(",")
    }
}
