//! Issue 11, item 5 on a real TLS cluster (tests/tls_cluster_support): the
//! `package-client-credentials` action's tarball holds a pair that works,
//! is private and atomic, keeps a different older package aside, and no
//! result names the key; `proxy` gets the same cluster, client pair and CA
//! from every unit.

mod test_ca;
mod tls_cluster_support;
mod upgrade_support;
use tls_cluster_support::TlsCluster;
use upgrade_support::*;

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

fn action(m: &Model, unit: &str, name: &str) -> Value {
    let out = m.ok(&["run-action", unit, name, "--format", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["status"], "completed", "{out}");
    v["results"].clone()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// etcdctl with exactly these credential files (none from the environment).
fn etcdctl_with(eps: &str, ca: &Path, cert: &Path, key: &Path, args: &[&str]) -> String {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .env_remove("ETCDCTL_CACERT")
        .env_remove("ETCDCTL_CERT")
        .env_remove("ETCDCTL_KEY")
        .arg(format!("--endpoints={eps}"))
        .arg(format!("--cacert={}", ca.display()))
        .arg(format!("--cert={}", cert.display()))
        .arg(format!("--key={}", key.display()))
        .args(["--dial-timeout=5s", "--command-timeout=10s"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "etcdctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every key and value of every result, as one text.
fn all_text(v: &Value) -> String {
    v.as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

#[test]
fn credentials_are_packaged_and_proxy_gets_them_on_a_tls_cluster() {
    let started = Instant::now();
    let c = TlsCluster::taken_over(3);
    let m = &c.up.m;
    let unit = &c.up.units[1];
    let home = m.root(unit).join("home/ubuntu");
    let tarball = home.join("etcd_credentials.tar.gz");

    let r = action(m, unit, "package-client-credentials");
    assert_eq!(r["path"], tarball.display().to_string(), "{r}");
    assert_eq!(
        r["copy"]["cmd"],
        format!("juju scp {unit}:{} .", tarball.display())
    );
    assert!(r.get("previous").is_none(), "{r}");
    let shown = all_text(&r);
    assert!(!shown.contains("PRIVATE KEY"), "{shown}");
    assert!(!shown.contains(c.tls.key_pem.trim()), "{shown}");
    assert_eq!(mode(&tarball), 0o600, "the tarball holds a private key");
    // Nothing else is left beside it (no staging copy of the key).
    let beside: Vec<String> = std::fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(beside, ["etcd_credentials.tar.gz"]);

    // The Python charm's layout, the files this unit serves with.
    let out = tempfile::tempdir().unwrap();
    let x = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(out.path())
        .output()
        .unwrap();
    assert!(x.status.success(), "{}", String::from_utf8_lossy(&x.stderr));
    let d = out.path().join("etcd_credentials");
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["README.txt", "ca.crt", "client.crt", "client.key"]);
    let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    assert_eq!(read("client.crt"), c.tls.cert_pem);
    assert_eq!(read("client.key"), c.tls.key_pem);
    assert_eq!(read("ca.crt"), c.tls.ca_pem);
    assert_eq!(mode(&d.join("client.key")), 0o600);
    let readme = read("README.txt");
    let mut eps = c.eps.clone();
    eps.sort();
    assert!(
        readme.contains(&format!("ETCDCTL_ENDPOINTS={}\n", eps.join(","))),
        "{readme}"
    );
    // What it holds reaches the cluster, as its README says.
    let (ca, cert, key) = (d.join("ca.crt"), d.join("client.crt"), d.join("client.key"));
    etcdctl_with(&c.endpoints(), &ca, &cert, &key, &["put", "pkg/k", "v1"]);
    let got = etcdctl_with(
        &c.eps[2],
        &ca,
        &cert,
        &key,
        &["get", "pkg/k", "--print-value-only"],
    );
    assert_eq!(got.trim(), "v1");

    // The same credentials again: the same bytes, nothing set aside.
    let first = std::fs::read(&tarball).unwrap();
    let r = action(m, unit, "package-client-credentials");
    assert!(r.get("previous").is_none(), "{r}");
    assert!(
        std::fs::read(&tarball).unwrap() == first,
        "the same package"
    );
    // A different package already there is kept beside the new one.
    std::fs::write(&tarball, b"an older package").unwrap();
    let r = action(m, unit, "package-client-credentials");
    let previous = r["previous"].as_str().expect("the old package is kept");
    assert!(
        previous.starts_with(&format!("{}-", tarball.display())),
        "{previous}"
    );
    assert_eq!(std::fs::read(previous).unwrap(), b"an older package");
    assert!(
        std::fs::read(&tarball).unwrap() == first,
        "the same package"
    );
    assert_eq!(mode(&tarball), 0o600);

    // proxy: every unit publishes the same cluster, client pair and CA.
    let proxy = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/charms/etcd-proxy-client");
    m.ok(&["deploy", proxy.to_str().unwrap()]);
    m.ok(&["integrate", "etcd:proxy", "etcd-proxy-client:etcd"]);
    m.ok(&["settle"]);
    let rel: Vec<String> = serde_json::from_str(&m.ok(&[
        "exec",
        "etcd-proxy-client/0",
        "--",
        "relation-ids",
        "etcd",
        "--format=json",
    ]))
    .unwrap();
    let bags: Vec<Value> =
        c.up.units
            .iter()
            .map(|u| {
                let bag = m.ok(&[
                    "exec",
                    "etcd-proxy-client/0",
                    "--",
                    "relation-get",
                    "-r",
                    &rel[0],
                    "-",
                    u,
                    "--format=json",
                ]);
                serde_json::from_str(&bag).unwrap()
            })
            .collect();
    assert!(bags.windows(2).all(|w| w[0] == w[1]), "{bags:?}");
    let b = &bags[0];
    assert_eq!(b["client_cert"], c.tls.cert_pem.as_str());
    assert_eq!(b["client_key"], c.tls.key_pem.as_str());
    assert_eq!(b["client_ca"], c.tls.ca_pem.as_str());
    let want: Vec<String> = c
        .peers
        .iter()
        .map(|(n, ip)| format!("{n}=https://{ip}:2380"))
        .collect();
    assert_eq!(b["cluster"], want.join(","));
    eprintln!(
        "credentials and proxy on 3 TLS units in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
