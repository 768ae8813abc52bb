//! A real S3 server for the backup tests: moto's standalone server (PyPI,
//! installed into the cache by packaging/prereqs) on a loopback address of
//! the test's own, with IAM auth on: one user whose keys may use S3, so
//! wrong keys are refused as AWS refuses them. Killed on drop.
#![allow(dead_code)]

// A range of its own, held as long as the server runs (a backup test uses
// it across two models); charm_support loads the same file for its models.
#[allow(clippy::duplicate_mod)]
#[path = "../address_support/mod.rs"]
mod address_support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BUCKET: &str = "etcd-backups";

pub struct S3Server {
    child: Child,
    _range: address_support::Range,
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// Where packaging/prereqs put moto, if it did.
pub fn moto_dir() -> Option<PathBuf> {
    let cache = std::env::var_os("ETCD_CHARM_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/etcd-charm")))?;
    let d = cache.join("moto");
    d.join("moto/server.py").is_file().then_some(d)
}

/// Boto3 (moto's own dependency) creates the user, its keys and policy and
/// the bucket while auth is still off (the first four requests).
const SETUP: &str = r#"
import json, sys, boto3
kw = dict(endpoint_url=sys.argv[1], region_name="us-east-1",
          aws_access_key_id="setup", aws_secret_access_key="setup")
iam = boto3.client("iam", **kw)
iam.create_user(UserName="etcd-backups")
key = iam.create_access_key(UserName="etcd-backups")["AccessKey"]
iam.put_user_policy(UserName="etcd-backups", PolicyName="s3", PolicyDocument=json.dumps(
    {"Version": "2012-10-17",
     "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
boto3.client("s3", **kw).create_bucket(Bucket=sys.argv[2])
print(key["AccessKeyId"], key["SecretAccessKey"])
"#;

/// A boto3 client `c` from argv 1-3 (endpoint, access key, secret key).
pub const CLIENT: &str = r#"
import sys, boto3
c = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                 aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3])
"#;

impl S3Server {
    /// None (after a counted skip, or a strict failure) without moto.
    pub fn start(test: &str) -> Option<S3Server> {
        let Some(moto) = moto_dir() else {
            etcd_charm::prereq::skip(
                test,
                "moto (PyPI's S3 server) is not in the cache",
                "run packaging/prereqs (it installs moto[s3] into ~/.cache/etcd-charm/moto)",
            );
            return None;
        };
        let range = address_support::take();
        let host = range.cidr.replace(".0/24", ".250");
        let endpoint = format!("http://{host}:9000");
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("moto.log");
        let child = Command::new("python3")
            .args(["-m", "moto.server", "-H", &host, "-p", "9000"])
            .env("PYTHONPATH", &moto)
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "4")
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.path().join("moto.err")).unwrap())
            .spawn()
            .expect("starting moto's server");
        let mut s = S3Server {
            child,
            _range: range,
            endpoint,
            access_key: String::new(),
            secret_key: String::new(),
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(format!("{host}:9000")).is_err() {
            assert!(
                Instant::now() < deadline,
                "moto did not listen on {host}:9000 within 60 s: {}",
                s.stderr()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        let out = s.python(SETUP, &[&s.endpoint.clone(), BUCKET]);
        let mut it = out.split_whitespace();
        s.access_key = it.next().unwrap_or_default().to_string();
        s.secret_key = it.next().unwrap_or_default().to_string();
        assert!(!s.secret_key.is_empty(), "moto setup printed {out:?}");
        Some(s)
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("moto.err")).unwrap_or_default()
    }

    /// Runs a Python snippet with moto's packages (boto3) on the path.
    pub fn python(&self, code: &str, args: &[&str]) -> String {
        let out = Command::new("python3")
            .arg("-c")
            .arg(code)
            .args(args)
            .env("PYTHONPATH", moto_dir().unwrap())
            .stdin(Stdio::null())
            .output()
            .expect("running python3");
        assert!(
            out.status.success(),
            "python failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The bucket's objects under `prefix`: (key, size).
    pub fn objects(&self, prefix: &str) -> Vec<(String, u64)> {
        let code = CLIENT.to_string()
            + r#"
for o in c.list_objects_v2(Bucket=sys.argv[4], Prefix=sys.argv[5]).get("Contents", []):
    print(o["Key"], o["Size"])
"#;
        self.python(
            &code,
            &[
                &self.endpoint,
                &self.access_key,
                &self.secret_key,
                BUCKET,
                prefix,
            ],
        )
        .lines()
        .filter_map(|l| {
            let (k, s) = l.rsplit_once(' ')?;
            Some((k.to_string(), s.parse().ok()?))
        })
        .collect()
    }

    /// Overwrites an object with other bytes (a corrupted backup).
    pub fn overwrite(&self, key: &str, body: &str) {
        let code = CLIENT.to_string()
            + r#"
c.put_object(Bucket=sys.argv[4], Key=sys.argv[5], Body=sys.argv[6].encode())
"#;
        self.python(
            &code,
            &[
                &self.endpoint,
                &self.access_key,
                &self.secret_key,
                BUCKET,
                key,
                body,
            ],
        );
    }

    /// The requests moto served (its access log), for a failure message.
    pub fn requests(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default() + &self.stderr()
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
