//! The `s3-parameters` relation, the pure half: what s3-integrator puts in
//! its application databag (bucket, endpoint, region, path, access-key,
//! secret-key, tls-ca-chain, s3-uri-style), checked into [`S3Params`], and
//! the names backups get there. The keys never reach a log, a status or an
//! action's results: [`S3Params`]'s Debug hides them.

use crate::hooktools::Databag;

pub const ENDPOINT: &str = "s3-parameters";

/// Where backups go and how to reach it.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct S3Params {
    pub bucket: String,
    /// None: AWS itself (the region's endpoint).
    pub endpoint: Option<String>,
    pub region: String,
    /// The key prefix, without slashes at either end; may be empty.
    pub path: String,
    pub access_key: String,
    pub secret_key: String,
    /// PEM certificates to trust for the endpoint (its own CA), if any.
    pub ca_chain: Vec<String>,
    /// `s3-uri-style: path` (MinIO, Ceph, moto) rather than virtual-host.
    pub path_style: bool,
}

impl std::fmt::Debug for S3Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Params")
            .field("bucket", &self.bucket)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("path", &self.path)
            .field("access_key", &"<hidden>")
            .field("secret_key", &"<hidden>")
            .field("ca_chain", &self.ca_chain.len())
            .field("path_style", &self.path_style)
            .finish()
    }
}

impl S3Params {
    /// The object key of a backup, and of the sha256 stored beside it.
    pub fn key(&self, id: &str) -> String {
        if self.path.is_empty() {
            id.to_string()
        } else {
            format!("{}/{id}", self.path)
        }
    }

    pub fn sum_key(&self, id: &str) -> String {
        format!("{}{SUM_SUFFIX}", self.key(id))
    }

    /// Where the backups are, for messages: `s3://bucket/path`.
    pub fn url(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.path)
    }
}

/// What the object beside a backup is named after (its `sha256sum` line).
pub const SUM_SUFFIX: &str = ".sha256";

/// The provider's databag as an [`S3Params`], or what is missing or wrong
/// (named, for the action's message; no value is ever quoted).
pub fn parse(bag: &Databag) -> Result<S3Params, String> {
    let get = |k: &str| bag.get(k).map(|v| v.trim()).unwrap_or_default();
    let missing: Vec<&str> = ["bucket", "access-key", "secret-key"]
        .into_iter()
        .filter(|k| get(k).is_empty())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "the s3-parameters relation lacks {} (set them on s3-integrator: juju config / its sync-s3-credentials action)",
            missing.join(", ")
        ));
    }
    let path_style = match get("s3-uri-style") {
        "" | "host" | "virtual" => false,
        "path" => true,
        other => return Err(format!("s3-uri-style {other:?} is neither host nor path")),
    };
    let endpoint = match get("endpoint") {
        "" => None,
        e if e.starts_with("http://") || e.starts_with("https://") => Some(e.to_string()),
        // s3-integrator accepts a bare host name; it means https.
        e => Some(format!("https://{e}")),
    };
    let ca_chain = match get("tls-ca-chain") {
        "" => Vec::new(),
        text => serde_json::from_str::<Vec<String>>(text)
            .map_err(|_| "tls-ca-chain is not a JSON list of PEM certificates".to_string())?,
    };
    Ok(S3Params {
        bucket: get("bucket").into(),
        endpoint,
        region: match get("region") {
            "" => "us-east-1".into(),
            r => r.into(),
        },
        path: get("path").trim_matches('/').into(),
        access_key: get("access-key").into(),
        secret_key: get("secret-key").into(),
        ca_chain,
        path_style,
    })
}

/// A backup's id: when it was taken, `%Y-%m-%dT%H:%M:%SZ` (charmed-etcd-
/// operator's format, so its runbooks read ours).
pub fn backup_id(t: std::time::SystemTime) -> String {
    crate::stamp::utc_timestamp(t)
}

/// `2026-12-07T15:04:05Z` and nothing else: what `restore backup-id=`
/// accepts and what `list-backups` lists (other objects under the path are
/// not ours).
pub fn is_backup_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bag(kv: &[(&str, &str)]) -> Databag {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn full() -> Databag {
        bag(&[
            ("bucket", "backups"),
            ("endpoint", "http://127.0.0.1:9000"),
            ("region", "eu-west-1"),
            ("path", "/etcd/prod/"),
            ("access-key", "AKIDEXAMPLE"),
            ("secret-key", "wJalrXUtnFEMI/K7MDENG"),
            ("s3-uri-style", "path"),
        ])
    }

    #[test]
    fn the_integrators_fields_become_params_and_keys_under_the_path() {
        let p = parse(&full()).unwrap();
        assert_eq!(p.bucket, "backups");
        assert_eq!(p.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(p.region, "eu-west-1");
        assert!(p.path_style);
        assert_eq!(
            p.key("2026-12-07T15:04:05Z"),
            "etcd/prod/2026-12-07T15:04:05Z"
        );
        assert_eq!(
            p.sum_key("2026-12-07T15:04:05Z"),
            "etcd/prod/2026-12-07T15:04:05Z.sha256"
        );
        let mut b = full();
        b.remove("path");
        b.insert("endpoint".into(), "s3.example.com".into());
        let p = parse(&b).unwrap();
        assert_eq!(p.key("x"), "x");
        assert_eq!(p.endpoint.as_deref(), Some("https://s3.example.com"));
    }

    #[test]
    fn missing_fields_are_named_and_no_secret_is_ever_printed() {
        let mut b = full();
        b.remove("bucket");
        b.remove("secret-key");
        let e = parse(&b).unwrap_err();
        assert!(e.contains("bucket, secret-key"), "{e}");
        let mut b = full();
        b.insert("tls-ca-chain".into(), "-----BEGIN".into());
        assert!(parse(&b).unwrap_err().contains("tls-ca-chain"));
        let mut b = full();
        b.insert("s3-uri-style".into(), "sideways".into());
        assert!(parse(&b).unwrap_err().contains("sideways"));
        let shown = format!("{:?}", parse(&full()).unwrap());
        assert!(
            !shown.contains("AKIDEXAMPLE") && !shown.contains("wJalr"),
            "{shown}"
        );
    }

    #[test]
    fn backup_ids_are_utc_seconds_and_nothing_else_passes_as_one() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_655_845);
        let id = backup_id(t);
        assert_eq!(id, "2026-12-07T15:04:05Z");
        assert!(is_backup_id(&id));
        for bad in [
            "2026-12-07T15-04-05Z",
            "2026-12-07T15:04:05Z.sha256",
            "../etc/passwd",
            "",
        ] {
            assert!(!is_backup_id(bad), "{bad}");
        }
    }
}
