//! Rule 7 on a unit that serves TLS (a Python-charm TLS member taken over,
//! with a `db` client that gets the client pair): no private key in the
//! dry run (text and JSON, under Juju and by hand), the `debug` action's
//! result and tarball, the status, the charm's log or its hooks' output;
//! the cluster token in none of them but the dry run (which shows the
//! token it keeps, by design). Also: nrpe related, the unit installs the
//! `etcd-cert-expiry` check, and it answers OK; prometheus related, the
//! scrape job is https with the client pair, and scraping with it works;
//! the same for the maintenance agent's job (etcd-charm-agent), whose
//! listener serves /metrics only, never plain.

mod test_ca;
mod upgrade_support;
use test_ca::{leaf, new_ca};
use upgrade_support::*;

use etcd_charm::etcd::{self, ClientTls, Endpoints};
use etcd_charm::tls::files::{self, Material, TlsPaths};
use etcd_charm::tls::key::KeyAlg;
use etcd_charm::tls::sans;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn https(ip: &str, port: u16) -> String {
    format!("https://{ip}:{port}")
}

/// etcd.conf.yml as the Python charm rendered it for a one-member TLS cluster.
fn python_tls_config(name: &str, data_dir: &str, ip: &str, f: &TlsPaths) -> String {
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
         initial-cluster: {name}={peer}\n\
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

/// A line from the middle of a PEM key: base64 that only the key holds.
fn key_body(pem: &str) -> String {
    let lines: Vec<&str> = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    lines[lines.len() / 2].to_string()
}

/// Fails naming `what` if `text` holds a key (its label or a line of its
/// body) or, when `token` is set, the cluster token.
fn assert_clean(what: &str, text: &str, bodies: &[String], token: bool) {
    assert!(!text.contains("PRIVATE KEY"), "{what} shows a private key");
    for b in bodies {
        assert!(!text.contains(b.as_str()), "{what} shows key material");
    }
    if token {
        assert!(!text.contains(TOKEN), "{what} shows the cluster token");
    }
}

fn out_text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn a_tls_unit_shows_no_key_and_logs_no_token() {
    let up = Upgrade::deploy(1, &[]);
    let u = up.units[0].clone();
    let ip = up.m.address(&u);
    let name = Upgrade::member_name(&u);
    let ca = new_ca("secrets-kept-ca");
    let client = leaf(&ca, KeyAlg::EcdsaP256, "etcd-client", &[]);
    let server = leaf(
        &ca,
        KeyAlg::Rsa2048,
        &ip,
        &sans::unit_sans([ip.as_str()], &u.replace('/', "-")),
    );
    let bodies = vec![key_body(&client.key), key_body(&server.key)];
    let paths = up.paths(&u);
    std::fs::create_dir_all(paths.common_dir()).unwrap();
    files::write(
        &paths,
        &Material {
            ca: ca.pem.clone(),
            server,
            client: client.clone(),
        },
    )
    .unwrap();
    let dir = up.legacy_dir(&u);
    std::fs::create_dir_all(dir.parent().unwrap()).unwrap();
    let f = TlsPaths::new(&paths);
    std::fs::write(
        paths.config_file(),
        python_tls_config(&name, &dir.display().to_string(), &ip, &f),
    )
    .unwrap();
    let tls = ClientTls {
        ca_pem: ca.pem.clone(),
        cert_pem: client.cert.clone(),
        key_pem: client.key.clone(),
    };
    up.m.ok(&["exec", &u, "--", "leader-set", &format!("token={TOKEN}")]);
    up.m.ok(&[
        "exec",
        &u,
        "--",
        "env",
        "JUJU_DISPATCH_PATH=hooks/start",
        "./dispatch",
    ]);
    let ep = https(&ip, 2379);
    wait_until("TLS etcd of the Python charm", START_TIMEOUT, || {
        etcd::block_on(etcd::member_status(Endpoints::new(
            vec![ep.clone()],
            Some(tls.clone()),
        )))
        .is_ok_and(|s| s.leader != 0)
    });

    // The dry run, before the refresh: under Juju (JSON) and by hand (text
    // and JSON). It shows the TLS part of the plan by path, never a key.
    let runs = up.dry_run();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let report = runs[0].2.to_string();
    assert!(
        report.contains("server.crt"),
        "the TLS files by path: {report}"
    );
    // The token it keeps is the one thing the dry run shows on purpose
    // (and shows this check looks at the real text).
    assert!(report.contains(TOKEN), "{report}");
    assert_clean("the dry run (jujusim, JSON)", &report, &bodies, false);
    for format in ["--format=text", "--format=json"] {
        let out = Command::new(up.m.charm.join("bin/etcd-charm"))
            .args(["upgrade-charm", "--dry-run", format])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("ETCD_CHARM_ROOT", up.m.root(&u))
            .env("ETCD_CHARM_SERVICE", "direct")
            .output()
            .unwrap();
        let text = out_text(&out);
        assert!(text.contains("https://"), "{format}: {text}");
        assert_clean(
            &format!("the dry run by hand ({format})"),
            &text,
            &bodies,
            false,
        );
    }

    let out = up.refresh(&[]);
    assert!(out.status.success(), "refresh: {}", out_text(&out));
    // A client on db: the charm handles the client key in its hooks.
    let client_charm = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/etcd-client");
    up.m.ok(&["deploy", client_charm.to_str().unwrap()]);
    up.m.ok(&["integrate", "etcd:db", "etcd-client:etcd"]);
    up.m.ok(&["settle"]);
    wait_until("the unit active", Duration::from_secs(120), || {
        up.m.ok(&["update-status"]);
        workload(&up.m, &u).0 == "active"
    });
    let bag = up.m.ok(&[
        "exec",
        "etcd-client/0",
        "--",
        "relation-get",
        "-r",
        &serde_json::from_str::<Vec<String>>(&up.m.ok(&[
            "exec",
            "etcd-client/0",
            "--",
            "relation-ids",
            "etcd",
            "--format=json",
        ]))
        .unwrap()[0],
        "-",
        &u,
        "--format=json",
    ]);
    assert!(
        bag.contains("PRIVATE KEY"),
        "db carries the client key (the case this test is about): {bag}"
    );

    // The debug action: its result and every file of its tarball.
    let out = up.m.ok(&["run-action", &u, "debug", "--format", "json"]);
    assert_clean("the debug action's result", &out, &bodies, true);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let tarball = v["results"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("{out}"));
    let unpacked = tempfile::tempdir().unwrap();
    let tar = Command::new("tar")
        .arg("-xzf")
        .arg(tarball)
        .arg("-C")
        .arg(unpacked.path())
        .output()
        .unwrap();
    assert!(tar.status.success(), "{}", out_text(&tar));
    let mut seen = 0;
    for entry in walk(unpacked.path()) {
        let text = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
        assert_clean(
            &format!("{} in the debug tarball", entry.display()),
            &text,
            &bodies,
            true,
        );
        seen += 1;
    }
    assert!(seen >= 5, "the tarball holds its files: {seen}");

    // nrpe related: a TLS unit installs the cert-expiry check, and the
    // command it wrote answers OK (the test CA's leaves run for centuries).
    let nrpe = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/nrpe");
    up.m.ok(&["deploy", nrpe.to_str().unwrap()]);
    up.m.ok(&[
        "integrate",
        "etcd:nrpe-external-master",
        "nrpe:nrpe-external-master",
    ]);
    up.m.ok(&["settle"]);
    let cfg =
        up.m.root(&u)
            .join("etc/nagios/nrpe.d/check_etcd-cert-expiry.cfg");
    wait_until("the cert-expiry check", Duration::from_secs(60), || {
        cfg.exists()
    });
    let monitors =
        std::fs::read_to_string(up.m.root("nrpe/0").join("monitors-etcd-0.yaml")).unwrap();
    assert!(monitors.contains("check_etcd-cert-expiry"), "{monitors}");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let cmd = text
        .lines()
        .find_map(|l| l.strip_prefix("command[check_etcd-cert-expiry]="))
        .unwrap_or_else(|| panic!("{text}"));
    let check = Command::new("sh")
        .args(["-c", cmd])
        .env_remove("ETCD_CHARM_ROOT")
        .output()
        .unwrap();
    let line = String::from_utf8_lossy(&check.stdout).into_owned();
    assert_eq!(check.status.code(), Some(0), "{cmd}: {line}");
    assert!(
        line.starts_with("ETCD OK: server certificate expires in")
            || line.starts_with("ETCD OK: client certificate expires in")
            || line.starts_with("ETCD OK: CA certificate expires in"),
        "{line}"
    );

    // prometheus related: over TLS the scrape job is https with the CA and
    // the client pair (etcd asks a client certificate of /metrics too), and
    // scraping with exactly what was sent works.
    let prom = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/prometheus-manual");
    up.m.ok(&["deploy", prom.to_str().unwrap(), "--name", "prometheus"]);
    up.m.ok(&["integrate", "etcd:prometheus", "prometheus:manual-jobs"]);
    up.m.ok(&["settle"]);
    let saved = up.m.root("prometheus/0").join("requests-etcd-0.json");
    wait_until("etcd/0's scrape request", Duration::from_secs(60), || {
        saved.exists()
    });
    let bag: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let req: serde_json::Value = bag
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| k.starts_with("request_"))
        .filter_map(|(_, v)| serde_json::from_str::<serde_json::Value>(v.as_str()?).ok())
        .find(|r| r["job_name"] == "etcd")
        .unwrap_or_else(|| panic!("no request: {bag}"));
    assert_eq!(req["job_data"]["scheme"], "https", "{req}");
    let target = req["job_data"]["static_configs"][0]["targets"][0]
        .as_str()
        .unwrap()
        .to_string();
    let pems = tempfile::tempdir().unwrap();
    for k in ["ca_cert", "client_cert", "client_key"] {
        let v = req[k].as_str().unwrap_or_else(|| panic!("no {k}: {req}"));
        std::fs::write(pems.path().join(k), v).unwrap();
    }
    // GET `url` as Prometheus would, with or without the request's pair;
    // the status code on a last line of its own.
    let curl = |url: &str, with_pair: bool| {
        let mut c = Command::new("curl");
        c.args(["-sS", "--max-time", "10", "--cacert"])
            .arg(pems.path().join("ca_cert"));
        if with_pair {
            c.arg("--cert")
                .arg(pems.path().join("client_cert"))
                .arg("--key")
                .arg(pems.path().join("client_key"));
        }
        c.args(["-w", "\n%{http_code}"]).arg(url).output().unwrap()
    };
    let scrape = |with_pair: bool| curl(&format!("https://{target}/metrics"), with_pair);
    let got = scrape(true);
    assert!(
        String::from_utf8_lossy(&got.stdout).contains("etcd_server_has_leader 1"),
        "scraping {target}: {}",
        out_text(&got)
    );
    let refused = scrape(false);
    assert!(
        !String::from_utf8_lossy(&refused.stdout).contains("etcd_server_has_leader"),
        "/metrics answered without a client certificate"
    );

    // The second job, etcd-charm-agent: the maintenance agent's /metrics on
    // the unit's address, https with the same pair, refused without it, and
    // never its JSON state there; the agent has no plain listener but its
    // loopback one.
    let agent_req = || -> Option<serde_json::Value> {
        let text = std::fs::read_to_string(&saved).ok()?;
        let bag: serde_json::Value = serde_json::from_str(&text).ok()?;
        bag.as_object()?
            .iter()
            .filter(|(k, _)| k.starts_with("request_"))
            .filter_map(|(_, v)| serde_json::from_str::<serde_json::Value>(v.as_str()?).ok())
            .find(|r| r["job_name"] == "etcd-charm-agent")
    };
    wait_until(
        "the etcd-charm-agent request",
        Duration::from_secs(60),
        || agent_req().is_some(),
    );
    let areq = agent_req().unwrap();
    assert_eq!(areq["job_data"]["scheme"], "https", "{areq}");
    for k in ["ca_cert", "client_cert", "client_key"] {
        assert_eq!(areq[k], req[k], "{k}");
    }
    let atarget = areq["job_data"]["static_configs"][0]["targets"][0]
        .as_str()
        .unwrap()
        .to_string();
    let (host, _) = target.rsplit_once(':').unwrap();
    assert_eq!(atarget, format!("{host}:9380"), "{areq}");
    let agent_get = |with_pair: bool, path: &str, scheme: &str| {
        curl(&format!("{scheme}://{atarget}{path}"), with_pair)
    };
    // The agent is restarted with its listener by the relation's hook.
    wait_until(
        "the agent's metrics over https",
        Duration::from_secs(60),
        || {
            String::from_utf8_lossy(&agent_get(true, "/metrics", "https").stdout)
                .contains("etcd_charm_agent_up{unit=\"etcd/0\"} 1")
        },
    );
    for (pair, path, scheme) in [
        (false, "/metrics", "https"),
        (true, "/metrics", "http"),
        (true, "/", "https"),
        (true, "/state", "https"),
    ] {
        let got = agent_get(pair, path, scheme);
        let body = String::from_utf8_lossy(&got.stdout).into_owned();
        assert!(
            !body.contains("etcd_charm_agent_") && !body.contains("\"unit\""),
            "{scheme} {path} with the pair {pair}: {}",
            out_text(&got)
        );
        if pair && scheme == "https" {
            assert!(body.ends_with("404"), "{path}: {body}");
        }
    }
    let installed = etcd_charm::agent::service::installed(
        &etcd_charm::paths::Paths::new(up.m.root(&u)),
        &etcd_charm::service::Backend::Direct {
            etcd_bin: "etcd".into(),
        },
    )
    .expect("the agent runs");
    let arg = |f: &str| etcd_charm::agent::options::arg_value(&installed.args, f);
    assert_eq!(arg("--metrics-listen"), Some(atarget.as_str()));
    let common = etcd_charm::paths::Paths::new(up.m.root(&u)).common_dir();
    assert_eq!(
        arg("--metrics-tls").map(std::path::PathBuf::from),
        Some(common),
        "{:?}",
        installed.args
    );
    // Listening: the loopback one and the scrape one, on the unit's address.
    let ss = Command::new("ss").args(["-ltnH"]).output().unwrap();
    let ss = String::from_utf8_lossy(&ss.stdout);
    let on_9380: Vec<&str> = ss
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter(|a| a.ends_with(":9380"))
        .collect();
    assert!(on_9380.contains(&atarget.as_str()), "{ss}");
    assert!(
        !on_9380
            .iter()
            .any(|a| a.starts_with("0.0.0.0") || a.starts_with('*') || a.starts_with('[')),
        "{ss}"
    );

    // The status, the charm's log (juju-log) and every hook's output.
    let status = up.m.ok(&["status", "--format=json"]);
    assert_clean("the status", &status, &bodies, true);
    let log = up.m.ok(&["log", "--juju-log", "--unit", &u]);
    assert!(log.contains("step: "), "the charm logged its steps: {log}");
    assert_clean("juju-log", &log, &bodies, true);
    assert_clean(
        "the hook log",
        &up.m.ok(&["log", "--unit", &u]),
        &bodies,
        true,
    );
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
