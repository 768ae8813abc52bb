//! The `package-client-credentials` action: the client pair and CA a TLS
//! unit serves with, and a README saying how to use them, in
//! `/home/ubuntu/etcd_credentials.tar.gz` (where the Python charm put it:
//! `etcd_credentials/{client.crt,client.key,ca.crt,README.txt}`).
//!
//! The tarball holds a private key: it is written 0600 from its creation,
//! atomically (a reader sees the old package or the new one), owned by the
//! owner of its directory so `juju scp` (as that user) can fetch it. A
//! package that differs from the one already there moves the old one to a
//! dated name beside it first (nothing is deleted). The results name the
//! path and how to copy it; never the key.

use super::action_support::ActionCtx;
use crate::error::{io, Error, Result};
use crate::etcd::ClientTls;
use crate::hooktools::Databag;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The directory inside the tarball, and the tarball's name.
pub const PACKAGE: &str = "etcd_credentials";

/// Where the package goes, as the Python charm named it.
pub fn target(paths: &crate::paths::Paths) -> PathBuf {
    paths.host("/home/ubuntu").join(format!("{PACKAGE}.tar.gz"))
}

/// README.txt: what the files are and the etcdctl lines that use them.
/// Pure (no time in it: the same credentials give the same package);
/// `endpoints` are the cluster's client URLs as this unit knows them.
pub fn readme(unit: &str, endpoints: &[String]) -> String {
    let mut eps = endpoints.to_vec();
    eps.sort();
    eps.dedup();
    format!(
        "# etcd client credentials\n\
         \n\
         Packaged by the etcd charm on {unit}. etcd serves its\n\
         clients over TLS and asks each for a certificate signed by its CA:\n\
         \n\
         \x20 client.crt  the client certificate (the one etcd's `db` relation carries)\n\
         \x20 client.key  its private key: keep it secret, like a password\n\
         \x20 ca.crt      the CA that signed the members' certificates\n\
         \n\
         Unpack it somewhere only you can read, then:\n\
         \n\
         \x20 tar -xzf {PACKAGE}.tar.gz && cd {PACKAGE}\n\
         \x20 export ETCDCTL_API=3\n\
         \x20 export ETCDCTL_CACERT=$PWD/ca.crt\n\
         \x20 export ETCDCTL_CERT=$PWD/client.crt\n\
         \x20 export ETCDCTL_KEY=$PWD/client.key\n\
         \x20 export ETCDCTL_ENDPOINTS={}\n\
         \x20 etcdctl member list\n\
         \n\
         The endpoints are the members' client URLs when this was packaged. From\n\
         outside the model, `juju expose etcd` opens the client port; keep it\n\
         firewalled from anyone who does not need it. A renewed certificate or a\n\
         new CA makes this package stale: run the action again.\n",
        eps.join(",")
    )
}

/// The action's results: where the package is, how to copy it, and what
/// was set aside. Pure; no key material.
pub fn results(unit: &str, path: &Path, previous: Option<&Path>) -> Databag {
    let mut out = Databag::new();
    out.insert("path".into(), path.display().to_string());
    out.insert(
        "copy.cmd".into(),
        format!("juju scp {unit}:{} .", path.display()),
    );
    let mut msg = format!(
        "client credentials (client.crt, client.key, ca.crt, README.txt) packaged in {}",
        path.display()
    );
    if let Some(p) = previous {
        out.insert("previous".into(), p.display().to_string());
        msg.push_str(&format!(
            "; the previous package was moved to {}",
            p.display()
        ));
    }
    out.insert("output".into(), msg);
    out
}

pub fn package(ctx: &ActionCtx) -> Result<Databag> {
    let Some(tls) = super::observe::local_tls(ctx.paths) else {
        return Err(Error::Other(
            "package-client-credentials: this unit does not serve TLS (etcd.conf.yml has no \
             https URL, or the certificate files in /var/snap/etcd/common are incomplete), so \
             there are no client credentials to package; relate etcd to a certificates \
             provider (easyrsa, vault, self-signed-certificates) and run the action again"
                .into(),
        ));
    };
    let dest = target(ctx.paths);
    let dir = dest.parent().expect("the target has a directory");
    std::fs::create_dir_all(dir).map_err(io("creating", dir))?;
    let stamp = crate::stamp::utc_stamp(SystemTime::now());
    let text = readme(&ctx.unit, &ctx.endpoints);
    let bytes = tarball(dir, &tls, &text)?;
    let mut previous = None;
    match std::fs::read(&dest) {
        Ok(old) if old == bytes => {}
        Ok(_) => {
            // A link first: the package's name never goes missing, and the
            // rename below replaces it in one step.
            let aside = crate::aside::free_name(dir, &format!("{PACKAGE}.tar.gz"), &stamp);
            std::fs::hard_link(&dest, &aside).map_err(io("keeping the old package as", &aside))?;
            previous = Some(aside);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("reading", &dest)(e)),
    }
    crate::durable::write_atomic_private(&dest, &bytes).map_err(io("writing", &dest))?;
    give_to_dir_owner(&dest, dir)?;
    ctx.log(&format!(
        "client credentials packaged in {}",
        dest.display()
    ));
    Ok(results(&ctx.unit, &dest, previous.as_deref()))
}

/// The tarball's bytes, built from a private staging dir beside `dir`'s
/// package (removed after). The same files give the same bytes (sorted
/// names, fixed owner, the client certificate's time, gzip without a
/// name or time): an unchanged package is recognised as such.
fn tarball(dir: &Path, tls: &ClientTls, readme: &str) -> Result<Vec<u8>> {
    let staging = dir.join(format!(".{PACKAGE}.{}.staging", std::process::id()));
    let built = (|| {
        let inner = staging.join(PACKAGE);
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&inner)
            .map_err(io("creating", &inner))?;
        for (name, text, private) in [
            ("client.crt", &tls.cert_pem, false),
            ("client.key", &tls.key_pem, true),
            ("ca.crt", &tls.ca_pem, false),
            ("README.txt", &readme.to_string(), false),
        ] {
            let p = inner.join(name);
            let r = if private {
                crate::durable::write_atomic_private(&p, text.as_bytes())
            } else {
                crate::durable::write_atomic(&p, text.as_bytes())
            };
            r.map_err(io("writing", &p))?;
        }
        let out = std::process::Command::new("tar")
            .args(["--sort=name", "--owner=0", "--group=0", "--numeric-owner"])
            .arg(format!("--mtime=@{}", cert_time(&tls.cert_pem)))
            .args(["--use-compress-program=gzip -n", "-cf", "-", "-C"])
            .arg(&staging)
            .arg(PACKAGE)
            .output()
            .map_err(io("running tar in", &staging))?;
        if !out.status.success() {
            return Err(Error::Other(format!(
                "tar of {} failed: {}",
                staging.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(out.stdout)
    })();
    // Our own temporary copy (the originals stay in /var/snap/etcd/common).
    let _ = std::fs::remove_dir_all(&staging);
    built
}

/// The client certificate's notBefore (seconds since the epoch), 0 if it
/// does not parse: the files' time inside the tarball.
fn cert_time(pem: &str) -> i64 {
    crate::tls::cert::parse(pem)
        .ok()
        .map(|c| c.not_before)
        .unwrap_or(0)
}

/// Owned by whoever owns `dir` (ubuntu, for /home/ubuntu), still 0600.
fn give_to_dir_owner(path: &Path, dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir).map_err(io("reading the owner of", dir))?;
    std::os::unix::fs::chown(path, Some(m.uid()), Some(m.gid())).map_err(io("chown of", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_readme_names_the_files_and_every_endpoint_once_sorted() {
        let eps = vec![
            "https://10.0.0.2:2379".to_string(),
            "https://10.0.0.1:2379".to_string(),
            "https://10.0.0.2:2379".to_string(),
        ];
        let r = readme("etcd/0", &eps);
        assert!(
            r.contains("export ETCDCTL_ENDPOINTS=https://10.0.0.1:2379,https://10.0.0.2:2379\n"),
            "{r}"
        );
        for f in ["client.crt", "client.key", "ca.crt"] {
            assert!(r.contains(f), "{r}");
        }
        assert!(r.contains("etcd/0"), "{r}");
    }

    #[test]
    fn results_name_the_path_and_copy_command_and_what_was_set_aside() {
        let p = Path::new("/home/ubuntu/etcd_credentials.tar.gz");
        let r = results("etcd/1", p, None);
        assert_eq!(r["path"], "/home/ubuntu/etcd_credentials.tar.gz");
        assert_eq!(
            r["copy.cmd"],
            "juju scp etcd/1:/home/ubuntu/etcd_credentials.tar.gz ."
        );
        assert!(!r.contains_key("previous"));
        let old = Path::new("/home/ubuntu/etcd_credentials.tar.gz-20261201T110000Z");
        let r = results("etcd/1", p, Some(old));
        assert_eq!(r["previous"], old.display().to_string());
        assert!(r["output"].contains("moved to"), "{}", r["output"]);
    }
}
