//! Backups off the machine, the I/O half: one S3 bucket (s3-integrator's
//! parameters, charm/s3_params.rs) through `object_store`, never a
//! hand-written signer. A backup is two objects: the snapshot under
//! `<path>/<backup-id>` (multipart above [`PART`]) and `<path>/<backup-id>
//! .sha256` beside it, a `sha256sum` line. A download is checked against
//! that line before anything uses it.

use crate::charm::s3_params::{is_backup_id, S3Params, SUM_SUFFIX};
use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

/// Multipart above this size, in parts of this size (S3's minimum part is
/// 5 MiB; 16 MiB parts keep a 1 GiB snapshot at 64 requests).
pub const PART: usize = 16 << 20;

/// Why a bucket operation failed, for an action's message: what was tried
/// and what the store answered (never a key).
#[derive(Debug)]
pub struct S3Error(pub String);

impl std::fmt::Display for S3Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

pub type Result<T> = std::result::Result<T, S3Error>;

fn fail<'a>(what: &str, p: &'a S3Params) -> impl Fn(object_store::Error) -> S3Error + 'a {
    let what = what.to_string();
    move |e| S3Error(format!("{what} ({}): {}", p.url(), short(&e)))
}

/// object_store's errors carry the request URL and the store's XML; the
/// first line says what went wrong.
fn short(e: &object_store::Error) -> String {
    let full = e.to_string();
    let first = full.lines().next().unwrap_or_default();
    let code = [
        "AccessDenied",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "NoSuchBucket",
    ]
    .into_iter()
    .find(|c| full.contains(c));
    match code {
        Some(c) if !first.contains(c) => format!("{c}: {first}"),
        _ => first.to_string(),
    }
}

/// One backup in the bucket, as `list-backups` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub id: String,
    pub size: u64,
    /// Its sha256 object is there (a backup without one cannot be restored).
    pub has_sum: bool,
}

pub struct Bucket {
    store: AmazonS3,
    params: S3Params,
}

impl Bucket {
    pub fn new(p: &S3Params) -> Result<Bucket> {
        install_crypto();
        let mut opts = ClientOptions::new()
            .with_timeout(Duration::from_secs(120))
            .with_connect_timeout(Duration::from_secs(5));
        for pem in &p.ca_chain {
            let cert = object_store::Certificate::from_pem(pem.as_bytes())
                .map_err(|e| S3Error(format!("tls-ca-chain: {e}")))?;
            opts = opts.with_root_certificate(cert);
        }
        let endpoint = p.endpoint.clone().unwrap_or_default();
        if endpoint.starts_with("http://") {
            opts = opts.with_allow_http(true);
        }
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(&p.bucket)
            .with_region(&p.region)
            .with_access_key_id(&p.access_key)
            .with_secret_access_key(&p.secret_key)
            .with_virtual_hosted_style_request(!p.path_style)
            .with_client_options(opts)
            .with_retry(RetryConfig {
                max_retries: 3,
                retry_timeout: Duration::from_secs(30),
                ..Default::default()
            });
        if !endpoint.is_empty() {
            b = b.with_endpoint(endpoint);
        }
        let store = b.build().map_err(|e| {
            S3Error(format!(
                "the s3-parameters do not make a client: {}",
                short(&e)
            ))
        })?;
        Ok(Bucket {
            store,
            params: p.clone(),
        })
    }

    /// Uploads `file` as backup `id` and its sha256 beside it (last, so a
    /// listed sum means a whole snapshot). Returns (bytes, sha256).
    pub async fn upload(&self, id: &str, file: &Path) -> Result<(u64, String)> {
        let p = &self.params;
        let key = Key::from(p.key(id));
        let mut f = std::fs::File::open(file)
            .map_err(|e| S3Error(format!("reading {}: {e}", file.display())))?;
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let mut h = Sha256::new();
        if len as usize <= PART {
            let mut buf = Vec::with_capacity(len as usize);
            f.read_to_end(&mut buf)
                .map_err(|e| S3Error(format!("reading {}: {e}", file.display())))?;
            h.update(&buf);
            self.store
                .put(&key, PutPayload::from(buf))
                .await
                .map_err(fail("uploading the snapshot", p))?;
        } else {
            let up = self
                .store
                .put_multipart(&key)
                .await
                .map_err(fail("starting the multipart upload", p))?;
            let mut w = object_store::WriteMultipart::new_with_chunk_size(up, PART);
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = f
                    .read(&mut buf)
                    .map_err(|e| S3Error(format!("reading {}: {e}", file.display())))?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
                w.wait_for_capacity(4)
                    .await
                    .map_err(fail("uploading a part", p))?;
                w.write(&buf[..n]);
            }
            w.finish().await.map_err(fail("completing the upload", p))?;
        }
        let sum = hex(&h.finalize());
        self.store
            .put(
                &Key::from(p.sum_key(id)),
                PutPayload::from(format!("{sum}  {id}\n").into_bytes()),
            )
            .await
            .map_err(fail("uploading the sha256", p))?;
        Ok((len, sum))
    }

    /// A backup id no object has yet: ids are UTC seconds, so a second
    /// backup within the same second waits for the next one rather than
    /// overwrite the first. Any other answer to the HEAD (a refusal: a
    /// HEAD's 403 has no body to name its cause) gives the id, and the
    /// upload that follows says what is wrong.
    pub async fn free_id(&self) -> Result<String> {
        let p = &self.params;
        for _ in 0..3 {
            let id = crate::charm::s3_params::backup_id(std::time::SystemTime::now());
            match self.store.head(&Key::from(p.key(&id))).await {
                Ok(_) => tokio::time::sleep(Duration::from_millis(1000)).await,
                Err(_) => return Ok(id),
            }
        }
        Err(S3Error(format!(
            "no free backup id under {} for 3 s: another backup is being taken",
            p.url()
        )))
    }

    /// Every backup under the path, newest first.
    pub async fn list(&self) -> Result<Vec<Listed>> {
        let p = &self.params;
        let prefix = (!p.path.is_empty()).then(|| Key::from(p.path.as_str()));
        let mut objects = self.store.list(prefix.as_ref());
        let (mut snaps, mut sums) = (Vec::new(), std::collections::BTreeSet::new());
        while let Some(o) = objects.next().await {
            let o = o.map_err(fail("listing the bucket", p))?;
            let name = o.location.filename().unwrap_or_default().to_string();
            if let Some(id) = name.strip_suffix(SUM_SUFFIX) {
                sums.insert(id.to_string());
            } else if is_backup_id(&name) && o.location.as_ref() == p.key(&name) {
                snaps.push((name, o.size));
            }
        }
        let mut out: Vec<Listed> = snaps
            .into_iter()
            .map(|(id, size)| Listed {
                has_sum: sums.contains(&id),
                id,
                size,
            })
            .collect();
        out.sort_by(|a, b| b.id.cmp(&a.id));
        Ok(out)
    }

    /// Downloads backup `id` to `dest` (0600) and checks it against its
    /// sha256 object; a mismatch leaves nothing at `dest`. Returns the sum.
    pub async fn download(&self, id: &str, dest: &Path) -> Result<String> {
        let p = &self.params;
        let line = self
            .store
            .get(&Key::from(p.sum_key(id)))
            .await
            .map_err(fail(&format!("reading backup {id}'s sha256"), p))?
            .bytes()
            .await
            .map_err(fail(&format!("reading backup {id}'s sha256"), p))?;
        let want = String::from_utf8_lossy(&line)
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string();
        let got = self
            .store
            .get(&Key::from(p.key(id)))
            .await
            .map_err(fail(&format!("downloading backup {id}"), p))?;
        let part = dest.with_extension("part");
        let mut out = crate::private::create(&part)
            .map_err(|e| S3Error(format!("creating {}: {e}", part.display())))?;
        let mut h = Sha256::new();
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(fail(&format!("downloading backup {id}"), p))?;
            h.update(&chunk);
            out.write_all(&chunk)
                .map_err(|e| S3Error(format!("writing {}: {e}", part.display())))?;
        }
        out.sync_all()
            .map_err(|e| S3Error(format!("writing {}: {e}", part.display())))?;
        let sum = hex(&h.finalize());
        if sum != want {
            // A copy of a bad object: nothing of the cluster's is lost.
            let _ = std::fs::remove_file(&part);
            return Err(S3Error(format!(
                "backup {id} in {} is corrupt: its sha256 is {sum}, the one stored beside it {want}; nothing was changed",
                p.url()
            )));
        }
        std::fs::rename(&part, dest)
            .map_err(|e| S3Error(format!("moving {}: {e}", part.display())))?;
        Ok(sum)
    }
}

/// Runs one bucket operation to its end (the actions and the agent are
/// not async).
pub fn block_on<T>(fut: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| S3Error(format!("cannot start the async runtime: {e}")))?
        .block_on(fut)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// reqwest is built without a crypto provider (ring, as tonic uses, not a
/// second C library): the process default is ring.
fn install_crypto() {
    let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
}
