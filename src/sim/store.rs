//! The model directory: where each file lives, the flock every reader and
//! writer of `model.json` holds, atomic rewrites, and the JSON-lines logs.
//!
//! Tool processes and the controller both change the state, so every change
//! is lock → load → modify → write temp + rename → unlock.

use crate::sim::error::{bail, Context as _, Result, SimError};
use crate::sim::model::Model;
use nix::fcntl::{Flock, FlockArg};
use serde::Serialize;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone)]
pub struct ModelDir {
    /// Canonical (absolute) path.
    pub root: PathBuf,
}

impl ModelDir {
    /// Opens (creating when `create`) the model directory.
    pub fn open(path: &Path, create: bool) -> Result<ModelDir> {
        if create {
            fs::create_dir_all(path).ctx(format!("creating model dir {}", path.display()))?;
        }
        let root = fs::canonicalize(path).map_err(|_| {
            SimError::new(format!(
                "no model at {} (deploy creates one; --model or JUJUSIM_MODEL choose another)",
                path.display()
            ))
        })?;
        Ok(ModelDir { root })
    }

    pub fn state_file(&self) -> PathBuf {
        self.root.join("model.json")
    }
    pub fn tools_dir(&self) -> PathBuf {
        self.root.join("tools")
    }
    pub fn units_dir(&self) -> PathBuf {
        self.root.join("units")
    }
    pub fn charms_dir(&self) -> PathBuf {
        self.root.join("charms")
    }
    pub fn hook_log(&self) -> PathBuf {
        self.root.join("hook-log.jsonl")
    }
    pub fn tool_log(&self) -> PathBuf {
        self.root.join("tool-calls.jsonl")
    }
    pub fn juju_log(&self) -> PathBuf {
        self.root.join("juju-log.jsonl")
    }

    pub fn exists(&self) -> bool {
        self.state_file().exists()
    }

    /// Takes the state lock and loads the state (a fresh one if none yet).
    pub fn lock(&self) -> Result<Locked> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.root.join("lock"))
            .ctx("opening the model lock")?;
        let lock = Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, e)| SimError::new(format!("locking the model: {e}")))?;
        let model = match fs::read(self.state_file()) {
            Ok(bytes) => serde_json::from_slice(&bytes).ctx("reading model.json")?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Model::default(),
            Err(e) => return Err(SimError::from(e).context("reading model.json")),
        };
        Ok(Locked {
            _lock: lock,
            model,
            path: self.state_file(),
        })
    }

    /// Lock, load, change, save: the whole of one state transition.
    pub fn update<T>(&self, f: impl FnOnce(&mut Model) -> Result<T>) -> Result<T> {
        let mut locked = self.lock()?;
        let out = f(&mut locked.model)?;
        locked.save()?;
        Ok(out)
    }

    /// A consistent snapshot, for reading only.
    pub fn read(&self) -> Result<Model> {
        if !self.exists() {
            bail!("no model at {} (deploy creates one)", self.root.display());
        }
        Ok(self.lock()?.model)
    }

    /// The exclusive lock the controller holds for a whole command, so two
    /// commands never run hooks of one model at the same time.
    pub fn controller_lock(&self) -> Result<Flock<File>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.root.join("controller.lock"))?;
        Flock::lock(file, FlockArg::LockExclusive)
            .map_err(|(_, e)| SimError::new(format!("locking the controller: {e}")))
    }
}

pub struct Locked {
    _lock: Flock<File>,
    pub model: Model,
    path: PathBuf,
}

impl Locked {
    pub fn save(&self) -> Result<()> {
        let tmp = self.path.with_extension("json.tmp");
        let bytes = serde_json::to_vec_pretty(&self.model)?;
        fs::write(&tmp, bytes).ctx("writing model.json")?;
        fs::rename(&tmp, &self.path).ctx("replacing model.json")?;
        Ok(())
    }
}

/// Appends one JSON line (O_APPEND: whole lines from concurrent writers).
pub fn append_jsonl(path: &Path, record: &impl Serialize) -> Result<()> {
    let mut line = serde_json::to_string(record)?;
    line.push('\n');
    let mut f = OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(line.as_bytes())?;
    Ok(())
}

/// Every record of a JSON-lines file (none if it does not exist).
pub fn read_jsonl(path: &Path) -> Result<Vec<serde_json::Value>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(SimError::from))
        .collect()
}

/// Now, as RFC 3339 UTC with milliseconds (`2024-05-01T12:00:00.123Z`).
pub fn now_rfc3339() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, dd) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{dd:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_844), (2024, 5, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
