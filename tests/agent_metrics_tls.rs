//! The maintenance agent's scrape listener on a real process: `/metrics`
//! over https for a client certificate of the unit's CA only, nothing else
//! served there; the loopback listener keeps serving the JSON state.

mod test_ca;

use etcd_charm::tls::key::KeyAlg;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const LOOPBACK: &str = "127.93.0.1:19379";
const METRICS_HOST: &str = "127.93.0.2";
const METRICS: &str = "127.93.0.2:19380";

/// The agent process, killed on drop (also on panic).
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(name), text).unwrap();
}

fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "20"])
        .args(args)
        .output()
        .unwrap()
}

fn start(root: &Path, loopback: &str, metrics: &str, tls: Option<&Path>) -> Agent {
    let mut c = Command::new(env!("CARGO_BIN_EXE_etcd-charm"));
    c.env("ETCD_CHARM_ROOT", root)
        .args(["agent", "--unit", "etcd/0", "--listen", loopback])
        .args(["--check-interval", "1h", "--snapshot-interval", "0"])
        .args(["--metrics-listen", metrics]);
    if let Some(d) = tls {
        c.arg("--metrics-tls").arg(d);
    }
    let child = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let agent = Agent(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(metrics).is_err() {
        assert!(
            Instant::now() < deadline,
            "the agent never listened on {metrics}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    agent
}

#[test]
fn metrics_over_mtls_only_for_the_units_ca() {
    let root = tempfile::tempdir().unwrap();
    let tls = tempfile::tempdir().unwrap();
    let d = tls.path();
    let ca = test_ca::new_ca("unit-ca");
    let server = test_ca::leaf(&ca, KeyAlg::EcdsaP256, "etcd0", &[METRICS_HOST.into()]);
    let client = test_ca::leaf(&ca, KeyAlg::Rsa2048, "client", &[]);
    let other_ca = test_ca::new_ca("another-ca");
    let stranger = test_ca::leaf(&other_ca, KeyAlg::EcdsaP256, "client", &[]);
    write(d, "ca.crt", &ca.pem);
    write(d, "server.crt", &server.cert);
    write(d, "server.key", &server.key);
    for (name, text) in [
        ("client.crt", &client.cert),
        ("client.key", &client.key),
        ("other.crt", &stranger.cert),
        ("other.key", &stranger.key),
    ] {
        write(d, name, text);
    }
    let path = |n: &str| d.join(n).to_string_lossy().into_owned();
    let (cacert, cert, key) = (path("ca.crt"), path("client.crt"), path("client.key"));
    let _agent = start(root.path(), LOOPBACK, METRICS, Some(d));
    let url = |p: &str| format!("https://{METRICS}{p}");

    // The client pair of the unit's CA: the metrics.
    let pair = ["--cacert", &cacert, "--cert", &cert, "--key", &key];
    let ok = curl(&[&pair[..], &["-f", &url("/metrics")]].concat());
    let body = String::from_utf8_lossy(&ok.stdout);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(body.contains("etcd_charm_agent_up"), "{body}");

    // Never the JSON state there, nor anything else.
    for p in ["/", "/state", "/nope"] {
        let out = curl(
            &[
                &pair[..],
                &["-o", "/dev/null", "-w", "%{http_code}", &url(p)],
            ]
            .concat(),
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "404", "{p}");
    }

    // No client certificate, or one of another CA: refused in the handshake.
    let bare = curl(&["--cacert", &cacert, "-f", &url("/metrics")]);
    assert!(!bare.status.success());
    assert!(!String::from_utf8_lossy(&bare.stdout).contains("etcd_charm_agent_"));
    let other = curl(&[
        "--cacert",
        &cacert,
        "--cert",
        &path("other.crt"),
        "--key",
        &path("other.key"),
        "-f",
        &url("/metrics"),
    ]);
    assert!(!other.status.success());
    assert!(!String::from_utf8_lossy(&other.stdout).contains("etcd_charm_agent_"));
    // Nor plain http on that port.
    let plain = curl(&["-f", &format!("http://{METRICS}/metrics")]);
    assert!(!plain.status.success());

    // The loopback listener is as it was: the JSON state for the hooks.
    let state = etcd_charm::agent::http::get_state(LOOPBACK).unwrap();
    assert_eq!(state.unit, "etcd/0");
}

#[test]
fn without_tls_dir_plain_metrics_only() {
    let root = tempfile::tempdir().unwrap();
    let plain = "127.93.0.4:19380";
    let _agent = start(root.path(), "127.93.0.4:19379", plain, None);
    let ok = curl(&["-f", &format!("http://{plain}/metrics")]);
    assert!(ok.status.success());
    assert!(String::from_utf8_lossy(&ok.stdout).contains("etcd_charm_agent_up"));
    let state = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("http://{plain}/state"),
    ]);
    assert_eq!(String::from_utf8_lossy(&state.stdout), "404");
}

#[test]
fn a_tls_dir_without_its_files_stops_the_agent() {
    let root = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_etcd-charm"))
        .env("ETCD_CHARM_ROOT", root.path())
        .args(["agent", "--unit", "etcd/0", "--listen", "127.93.0.3:19379"])
        .args(["--metrics-listen", "127.93.0.3:19380", "--metrics-tls"])
        .arg(empty.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--metrics-tls") && err.contains("ca.crt"),
        "{err}"
    );
}
