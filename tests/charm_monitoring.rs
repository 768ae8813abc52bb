//! The monitoring endpoints end to end on real etcd, with shell stand-ins
//! for the remote charms (tests/charms/prometheus-manual, grafana-dashboard,
//! nrpe): what the remote side reads from our databags, and what it can do
//! with it (scrape every target, show the dashboard, run every check).

mod charm_support;
use charm_support::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(60);

fn stand_in(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/charms")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The databag a stand-in saved for `etcd/N` (`<prefix>-etcd-N.json`).
fn saved_bag(m: &Model, stand_in_unit: &str, prefix: &str, etcd_unit: &str) -> Option<Value> {
    let f = m
        .root(stand_in_unit)
        .join(format!("{prefix}-{}.json", etcd_unit.replace('/', "-")));
    serde_json::from_str(&std::fs::read_to_string(f).ok()?).ok()
}

/// The one `request_*` in a saved databag, parsed, with its id.
fn request(bag: &Value) -> Option<(String, Value)> {
    let obj = bag.as_object()?;
    let mut reqs: Vec<_> = obj
        .iter()
        .filter(|(k, v)| k.starts_with("request_") && v.as_str().is_some_and(|s| !s.is_empty()))
        .collect();
    assert!(reqs.len() <= 1, "one request at most: {bag}");
    let (k, v) = reqs.pop()?;
    let req: Value = serde_json::from_str(v.as_str()?).expect("the request is JSON");
    Some((k.trim_start_matches("request_").to_string(), req))
}

fn targets(req: &Value) -> Vec<String> {
    req["job_data"]["static_configs"][0]["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

/// A plain HTTP GET of `http://<target>/metrics`: the body.
fn metrics(target: &str) -> String {
    let mut s = std::net::TcpStream::connect(target).unwrap_or_else(|e| panic!("{target}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.0\r\nHost: {target}\r\nAccept: text/plain\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(
        out.starts_with("HTTP/1.0 200") || out.starts_with("HTTP/1.1 200"),
        "{target}: {}",
        tail(&out, 5)
    );
    out
}

/// Every file of `dir` (names).
fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs an nrpe command line as nagios-nrpe-server does (through sh):
/// (exit code, stdout).
fn run_check(cmd: &str) -> (i32, String) {
    let out = Command::new("sh")
        .args(["-c", cmd])
        .env_remove("ETCD_CHARM_ROOT")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `command[check_x]=<cmd>` of every nrpe.d file of ours on `unit`.
fn nrpe_commands(m: &Model, unit: &str) -> Vec<(String, String)> {
    let dir = m.root(unit).join("etc/nagios/nrpe.d");
    files(&dir)
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(dir.join(&f)).unwrap();
            assert!(text.contains("\n# servicegroups: juju\n"), "{f}: {text}");
            let line = text
                .lines()
                .find(|l| l.starts_with("command["))
                .unwrap_or_else(|| panic!("{f}: {text}"));
            let (name, cmd) = line["command[".len()..].split_once("]=").unwrap();
            (name.to_string(), cmd.to_string())
        })
        .collect()
}

#[test]
fn prometheus_scrapes_every_member_and_grafana_gets_the_dashboard() {
    let m = Model::new();
    m.deploy(1);
    m.assert_all_healthy(1);
    m.ok(&[
        "deploy",
        &stand_in("prometheus-manual"),
        "--name",
        "prometheus",
    ]);
    m.ok(&["integrate", "etcd:prometheus", "prometheus:manual-jobs"]);

    let bag = saved_bag(&m, "prometheus/0", "requests", "etcd/0").expect("etcd/0's request");
    let (id, req) = request(&bag).expect("a request");
    assert_eq!(req["request_id"], id.as_str());
    assert_eq!(req["job_name"], "etcd");
    assert_eq!(req["job_data"]["scheme"], "http");
    let want = format!("{}:2379", m.address("etcd/0"));
    assert_eq!(targets(&req), vec![want.clone()]);
    assert!(metrics(&want).contains("etcd_server_has_leader 1"));

    // A second member: the same request (same id), now with both targets.
    m.ok(&["add-unit", "etcd"]);
    m.assert_all_healthy(2);
    let leader = m.leader();
    let bag = saved_bag(&m, "prometheus/0", "requests", &leader).expect("the leader's request");
    let (id2, req) = request(&bag).expect("a request");
    assert_eq!(id2, id, "the request id is kept across hooks");
    let mut want: Vec<String> = m
        .units()
        .iter()
        .map(|u| format!("{}:2379", m.address(u)))
        .collect();
    want.sort();
    assert_eq!(targets(&req), want);
    for t in &want {
        let body = metrics(t);
        for metric in [
            "etcd_server_has_leader",
            "etcd_disk_wal_fsync_duration_seconds_bucket",
        ] {
            assert!(body.contains(metric), "{metric} at {t}");
        }
    }
    // Only the leader registers the job.
    for u in m.units().iter().filter(|u| **u != leader) {
        let other = saved_bag(&m, "prometheus/0", "requests", u);
        assert!(other.as_ref().and_then(request).is_none(), "{u}: {other:?}");
    }

    m.ok(&[
        "deploy",
        &stand_in("grafana-dashboard"),
        "--name",
        "grafana",
    ]);
    m.ok(&["integrate", "etcd:grafana", "grafana:dashboards"]);
    let bag = saved_bag(&m, "grafana/0", "dashboards", &leader).expect("the leader's dashboard");
    let (gid, req) = request(&bag).expect("a dashboard request");
    assert_eq!(req["request_id"], gid.as_str());
    assert_eq!(req["name"], "etcd");
    let panels = req["dashboard"]["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    for p in panels {
        assert_eq!(p["datasource"], "prometheus - Juju generated source", "{p}");
    }
    assert!(
        req["dashboard"].to_string().contains(&format!("etcd-{id}")),
        "the panels read the scrape job etcd-<prometheus request id>"
    );
    m.assert_all_healthy(2);

    // Leadership moves: the new leader registers, the old one withdraws
    // (Juju does not tell a deposed leader; leadership data does).
    let other = m.units().into_iter().find(|u| *u != leader).unwrap();
    m.ok(&["elect", &other]);
    let bag = saved_bag(&m, "prometheus/0", "requests", &other).expect("the new leader's bag");
    let (_, req) = request(&bag).expect("the new leader's request");
    assert_eq!(targets(&req), want);
    let bag = saved_bag(&m, "grafana/0", "dashboards", &other).expect("the new leader's bag");
    assert!(request(&bag).is_some(), "the new leader's dashboard: {bag}");
    for stand_in in ["prometheus/0", "grafana/0"] {
        let prefix = if stand_in == "grafana/0" {
            "dashboards"
        } else {
            "requests"
        };
        let bag = saved_bag(&m, stand_in, prefix, &leader).unwrap();
        assert!(
            request(&bag).is_none(),
            "{leader} withdrew on {stand_in}: {bag}"
        );
    }
    m.assert_all_healthy(2);
}

#[test]
fn nrpe_checks_are_written_run_and_removed() {
    let m = Model::new();
    m.deploy(1);
    m.assert_all_healthy(1);
    // jujusim does not model subordinates: the stand-in is a principal
    // related to etcd, which sees it as a remote unit just the same.
    m.ok(&["deploy", &stand_in("nrpe")]);
    m.ok(&[
        "integrate",
        "etcd:nrpe-external-master",
        "nrpe:nrpe-external-master",
    ]);

    let root = m.root("nrpe/0");
    let monitors = std::fs::read_to_string(root.join("monitors-etcd-0.yaml")).unwrap();
    let y: serde_yaml::Value = serde_yaml::from_str(&monitors).unwrap();
    let nrpe = y["monitors"]["remote"]["nrpe"]
        .as_mapping()
        .expect("monitors");
    let mut names: Vec<String> = nrpe
        .iter()
        .map(|(k, v)| {
            let k = k.as_str().unwrap().to_string();
            assert_eq!(v["command"].as_str(), Some(format!("check_{k}").as_str()));
            k
        })
        .collect();
    names.sort();
    // The direct backend has no systemd unit to check.
    assert_eq!(names, ["etcd-alarms", "etcd-health"]);
    assert_eq!(
        std::fs::read_to_string(root.join("primary-etcd-0"))
            .unwrap()
            .trim(),
        "False"
    );

    // The files, under the remote's nagios_hostname.
    let export: PathBuf = m.root("etcd/0").join("var/lib/nagios/export");
    let want: Vec<String> = names
        .iter()
        .map(|n| format!("service__nagios-test-host_check_{n}.cfg"))
        .collect();
    wait_until("the export files", LONG, || files(&export) == want);
    for f in &want {
        let text = std::fs::read_to_string(export.join(f)).unwrap();
        assert!(
            text.contains("host_name                       nagios-test-host\n"),
            "{text}"
        );
        assert!(
            text.contains("check_command                   check_nrpe!check_etcd-"),
            "{text}"
        );
    }
    let commands = nrpe_commands(&m, "etcd/0");
    assert_eq!(
        commands.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["check_etcd-alarms", "check_etcd-health"]
    );

    // Healthy: every check is OK, in one line.
    for (name, cmd) in &commands {
        let (code, out) = run_check(cmd);
        assert_eq!(code, 0, "{name}: {out}");
        assert!(
            out.starts_with("ETCD OK: ") && out.lines().count() == 1,
            "{name}: {out}"
        );
    }
    // etcd killed: every check is CRITICAL.
    m.kill_etcd("etcd/0");
    let ep = m.endpoint("etcd/0");
    wait_until("etcd to die", LONG, || {
        etcdctl(&ep, &["endpoint", "health"]).status.code() != Some(0)
    });
    for (name, cmd) in &commands {
        let (code, out) = run_check(cmd);
        assert_eq!(code, 2, "{name}: {out}");
        assert!(out.starts_with("ETCD CRITICAL: "), "{name}: {out}");
    }

    // The nrpe unit goes: etcd's checks go with it.
    m.ok(&["remove-unit", "nrpe/0"]);
    assert_eq!(files(&export), Vec::<String>::new());
    assert_eq!(
        files(&m.root("etcd/0").join("etc/nagios/nrpe.d")),
        Vec::<String>::new()
    );
}

/// The prometheus requests in a saved databag, by job name.
fn jobs(bag: &Value) -> std::collections::BTreeMap<String, Value> {
    bag.as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("request_"))
        .filter_map(|(_, v)| serde_json::from_str::<Value>(v.as_str()?).ok())
        .map(|r| (r["job_name"].as_str().unwrap_or("").to_string(), r))
        .collect()
}

/// A plain GET of `path` on `target`: the status line.
fn status_line(target: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(target).unwrap_or_else(|e| panic!("{target}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {target}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.lines().next().unwrap_or("").to_string()
}

#[test]
fn plain_agents_are_scraped_only_when_the_operator_allows_plain_listeners() {
    let m = Model::new();
    m.deploy(2);
    m.assert_all_healthy(2);
    m.ok(&[
        "deploy",
        &stand_in("prometheus-manual"),
        "--name",
        "prometheus",
    ]);
    m.ok(&["integrate", "etcd:prometheus", "prometheus:manual-jobs"]);
    let leader = m.leader();
    let bag = saved_bag(&m, "prometheus/0", "requests", &leader).expect("the leader's request");
    // Plain members, plain listeners not allowed: the etcd job only, and
    // no agent listens on 9380.
    assert_eq!(jobs(&bag).keys().collect::<Vec<_>>(), ["etcd"], "{bag}");
    for u in m.units() {
        let addr = format!("{}:9380", m.address(&u));
        assert!(std::net::TcpStream::connect(&addr).is_err(), "{addr}");
    }

    // The operator allows them: every agent serves /metrics (only) on its
    // address, and the leader asks for the etcd-charm-agent job over them.
    m.ok(&["config", "etcd", "allow_insecure_listeners=true"]);
    m.ok(&["settle"]);
    let mut want: Vec<String> = m
        .units()
        .iter()
        .map(|u| format!("{}:9380", m.address(u)))
        .collect();
    want.sort();
    let bag = saved_bag(&m, "prometheus/0", "requests", &leader).unwrap();
    let jobs_now = jobs(&bag);
    let agent = jobs_now
        .get("etcd-charm-agent")
        .unwrap_or_else(|| panic!("{bag}"));
    assert_eq!(agent["job_data"]["scheme"], "http");
    assert!(agent.get("client_key").is_none(), "{agent}");
    assert_eq!(targets(agent), want);
    let etcd_id = jobs_now["etcd"]["request_id"].clone();
    assert_ne!(agent["request_id"], etcd_id, "each job its own id");
    for t in &want {
        assert!(metrics(t).contains("etcd_charm_agent_up{"), "{t}");
        for path in ["/", "/state"] {
            assert!(status_line(t, path).contains("404"), "{t}{path}");
        }
    }
    // Another hook: both ids kept.
    m.ok(&["config", "etcd", "agent_check_interval=30s"]);
    m.ok(&["settle"]);
    let again = jobs(&saved_bag(&m, "prometheus/0", "requests", &leader).unwrap());
    assert_eq!(again["etcd"]["request_id"], etcd_id);
    assert_eq!(again["etcd-charm-agent"]["request_id"], agent["request_id"]);

    // agent_metrics_port=0: the listeners go and the job is withdrawn;
    // etcd itself is not restarted for it.
    let etcd_pids = || -> Vec<String> {
        m.units()
            .iter()
            .map(|u| {
                let paths = etcd_charm::paths::Paths::new(m.root(u));
                let f = paths.direct_pid_file().with_extension("etcd.pid");
                std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()))
            })
            .collect()
    };
    let before = etcd_pids();
    m.ok(&["config", "etcd", "agent_metrics_port=0"]);
    m.ok(&["settle"]);
    assert_eq!(etcd_pids(), before, "etcd kept running");
    let bag = saved_bag(&m, "prometheus/0", "requests", &leader).unwrap();
    assert_eq!(jobs(&bag).keys().collect::<Vec<_>>(), ["etcd"], "{bag}");
    for t in &want {
        assert!(std::net::TcpStream::connect(t).is_err(), "{t}");
    }
    m.assert_all_healthy(2);
}

/// The unprivileged account a check runs as here (nrpe runs them as
/// `nagios`; `nobody` has no more rights than it).
const NOBODY: [&str; 4] = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"];

/// `cmd` through sh as `nobody`: (exit code, stdout).
fn run_check_unprivileged(cmd: &str) -> (i32, String) {
    let out = Command::new("setpriv")
        .args(NOBODY)
        .args(["sh", "-c", cmd])
        .env_remove("ETCD_CHARM_ROOT")
        .current_dir("/")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

/// On a real machine `/`, `/var` and `/var/snap` are open to every
/// account; the model's temp dirs are root's (0700). Opens the dirs above
/// `unit`'s root (search only), never what the charm made under it.
fn open_the_way_to(m: &Model, unit: &str) {
    use std::os::unix::fs::PermissionsExt;
    let root = m.root(unit);
    let top = m.dir.parent().unwrap().parent().unwrap();
    for d in root.ancestors().skip(1).take_while(|d| d.starts_with(top)) {
        let mode = std::fs::metadata(d).unwrap().permissions().mode();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode | 0o011)).unwrap();
    }
}

/// Issue 19.9: on a TLS unit the checks answer as nrpe's own unprivileged
/// user, who cannot read the client key (nor any other key): they ask
/// etcd's loopback metrics listener, not the TLS client.
#[test]
fn nrpe_checks_on_a_tls_unit_answer_ok_as_an_unprivileged_user() {
    let m = Model::new();
    m.deploy(1);
    m.assert_all_healthy(1);
    let unit = "etcd/0";
    let paths = etcd_charm::paths::Paths::new(m.root(unit));
    let tls = etcd_charm::tls::files::TlsPaths::new(&paths);
    m.ok(&["deploy", &stand_in("v4-ca")]);
    m.ok(&["integrate", "etcd:certificates", "v4-ca:certificates"]);
    let https = format!("https://{}:2379", m.address(unit));
    wait_until("etcd/0 serving https", LONG * 4, || {
        let conf = std::fs::read_to_string(paths.config_file()).unwrap_or_default();
        let on = conf.contains(&https) && m.unit(unit)["workload-status"]["current"] == "active";
        if !on {
            m.ok(&["update-status"]);
        }
        on
    });
    m.ok(&["deploy", &stand_in("nrpe")]);
    m.ok(&[
        "integrate",
        "etcd:nrpe-external-master",
        "nrpe:nrpe-external-master",
    ]);
    open_the_way_to(&m, unit);

    // The keys stay root's: nobody reads them.
    for key in [&tls.client_key, &tls.server_key] {
        assert!(key.exists(), "{}", key.display());
        let out = Command::new("setpriv")
            .args(NOBODY)
            .arg("cat")
            .arg(key)
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "an unprivileged user read {}",
            key.display()
        );
    }

    let commands = nrpe_commands(&m, unit);
    assert_eq!(
        commands.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        [
            "check_etcd-alarms",
            "check_etcd-cert-expiry",
            "check_etcd-health"
        ]
    );
    for (name, cmd) in &commands {
        let (code, out) = run_check_unprivileged(cmd);
        eprintln!("{name} as nobody: {}", out.trim());
        assert!(
            code == 0 && out.starts_with("ETCD OK: ") && out.lines().count() == 1,
            "{name} as nobody: exit {code}: {out}"
        );
    }
    // etcd killed: CRITICAL, not UNKNOWN, for nobody too.
    m.kill_etcd(unit);
    for (name, cmd) in commands.iter().filter(|(n, _)| !n.ends_with("cert-expiry")) {
        let (code, out) = run_check_unprivileged(cmd);
        assert_eq!(code, 2, "{name} as nobody with etcd down: {out}");
        assert!(out.starts_with("ETCD CRITICAL: "), "{name}: {out}");
    }
}
