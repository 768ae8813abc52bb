//! The charm as `packaging/pack` builds it runs where the Python charm ran:
//! its binary needs no glibc newer than focal's 2.31, and its manifest lists
//! focal beside jammy and noble. The build is the shipped recipe
//! (cargo-zigbuild against glibc 2.31) in cargo's dev profile, which links
//! the same symbol versions in a fraction of the release build's time.

use std::path::Path;
use std::process::Command;

/// Every `GLIBC_x.y[.z]` version the binary's dynamic symbols require.
fn glibc_versions(binary: &Path) -> Vec<Vec<u32>> {
    let out = Command::new("objdump")
        .arg("-T")
        .arg(binary)
        .output()
        .expect("objdump runs (binutils; packaging/prereqs installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v: Vec<Vec<u32>> = text
        .split_whitespace()
        .filter_map(|w| w.trim_matches(['(', ')']).strip_prefix("GLIBC_"))
        .filter_map(|n| n.split('.').map(|p| p.parse().ok()).collect())
        .collect();
    v.sort();
    v.dedup();
    v
}

#[test]
fn the_packed_binary_needs_no_glibc_newer_than_focals() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("charm");
    let run = Command::new(repo.join("packaging/pack"))
        .args(["--profile", "dev", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "packaging/pack: {}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let bin = out.join("bin/etcd-charm");
    let versions = glibc_versions(&bin);
    assert!(!versions.is_empty(), "no GLIBC symbol versions read");
    let newest = versions.last().unwrap();
    assert!(
        *newest <= vec![2, 31],
        "{} needs GLIBC_{}: focal has 2.31",
        bin.display(),
        newest
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(".")
    );
    // It runs here too (Debian 12, glibc 2.36).
    let v = Command::new(&bin).arg("--version").output().unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
    let manifest = std::fs::read_to_string(out.join("manifest.yaml")).unwrap();
    for channel in ["'20.04'", "'22.04'", "'24.04'"] {
        assert!(manifest.contains(channel), "{channel} in {manifest}");
    }
}
