//! A unit taken over from the Python charm keeps the HTTP APIs its clients
//! used: the v2 API (its config had `enable-v2: true`) with its v2 keys, and
//! the v3 JSON gateway (`/v3/...`), which etcd reading a config file serves
//! only when the file turns it on. Real etcd 3.4 through jujusim.

mod upgrade_support;
use upgrade_support::*;

use std::process::Command;
use std::time::Duration;

/// `curl` against a member; (HTTP code, body).
fn http(url: &str, args: &[&str]) -> (String, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs (packaging/prereqs installs it)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().to_string(), body.to_string())
}

#[test]
fn a_taken_over_unit_keeps_its_v2_keys_and_serves_the_json_gateway() {
    let up = Upgrade::deploy(1, &[]);
    let u = "etcd/0";
    bootstrap_legacy(&up, 5, true);
    // The Python charm's template turned v2 on.
    let conf = up.paths(u).config_file();
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str("enable-v2: true\n");
    std::fs::write(&conf, text).unwrap();
    up.start_old_etcd();
    let ep = up.m.endpoint(u);
    let (code, body) = http(
        &format!("{ep}/v2/keys/legacy-v2"),
        &["-X", "PUT", "-d", "value=kept"],
    );
    assert!(code == "201" || code == "200", "v2 put: {code} {body}");

    let out = up.refresh(&[]);
    assert!(
        out.status.success(),
        "refresh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    up.m.assert_all_healthy(1);
    let written = std::fs::read_to_string(&conf).unwrap();
    assert!(written.contains("\nenable-v2: true\n"), "{written}");

    let ep = up.m.endpoint(u);
    let mut last = (String::new(), String::new());
    wait_until(
        "the v2 key after the refresh",
        Duration::from_secs(20),
        || {
            last = http(&format!("{ep}/v2/keys/legacy-v2"), &[]);
            last.0 == "200"
        },
    );
    assert!(last.1.contains("\"value\":\"kept\""), "v2 get: {last:?}");

    // "legacy/0" is one of bootstrap_legacy's v3 keys.
    let key = "bGVnYWN5LzA="; // base64("legacy/0")
    let (code, body) = http(
        &format!("{ep}/v3/kv/range"),
        &["-X", "POST", "-d", &format!("{{\"key\":\"{key}\"}}")],
    );
    assert_eq!(code, "200", "the JSON gateway: {body}");
    assert!(
        body.contains("\"kvs\""),
        "the key through the gateway: {body}"
    );
}
