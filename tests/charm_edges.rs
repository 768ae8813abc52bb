//! Regressions at the binary's edges (issue 10.6), one test per bug.

use std::os::unix::ffi::OsStringExt;
use std::process::{Command, Stdio};

/// `std::env::vars()` panics on a non-UTF-8 variable; a hook environment
/// may well hold one (a locale, a path) and must still run.
#[test]
fn a_non_utf8_environment_variable_does_not_panic_the_hook() {
    let bad = std::ffi::OsString::from_vec(vec![b'/', 0xff, 0xfe]);
    let out = Command::new(env!("CARGO_BIN_EXE_etcd-charm"))
        .env_clear()
        .env("SOME_PATH", &bad)
        // Incomplete on purpose: the binary must get as far as saying so.
        .env("JUJU_UNIT_NAME", "etcd/0")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(101), "panicked: {stderr}");
    assert!(
        stderr.contains("incomplete Juju hook environment"),
        "{stderr}"
    );
}
