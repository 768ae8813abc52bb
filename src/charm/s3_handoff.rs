//! The bucket's parameters handed to the maintenance agent, which uploads
//! its scheduled snapshots there too (agent/upload.rs). The agent has no
//! hook tools and its command line is readable by every account, so each
//! hook writes them to a root-only file (0600) in the snap's common dir
//! while `s3-parameters` is related with complete data, and removes the
//! file when it is not (a copy of relation data, not state: the relation
//! is the truth and the next hook rewrites it).

use super::observed::{tolerate, Mode, Observed};
use super::s3_params::{self, S3Params};
use super::steps::{Plan, Step};
use crate::error::{io, Result};
use crate::hooktools::HookTools;
use crate::paths::Paths;
use std::path::PathBuf;

pub fn file(paths: &Paths) -> PathBuf {
    paths.common_dir().join("s3-parameters.json")
}

/// What the relation asks for and what the file holds: JSON texts that
/// hold the keys, so Debug shows only whether they are there.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct S3Seen {
    /// False in a dry run that could not ask the relation: no step then.
    pub known: bool,
    pub wanted: Option<String>,
    pub on_disk: Option<String>,
}

impl std::fmt::Debug for S3Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Seen")
            .field("known", &self.known)
            .field("wanted", &self.wanted.is_some())
            .field("on_disk", &self.on_disk.is_some())
            .finish()
    }
}

/// The agent's step: write this text, or remove the file.
#[derive(Clone, PartialEq, Eq)]
pub enum S3Step {
    Write(String),
    Remove,
}

impl std::fmt::Debug for S3Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")
    }
}

impl std::fmt::Display for S3Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            S3Step::Write(_) => write!(
                f,
                "hand the s3-parameters bucket to the maintenance agent (s3-parameters.json, 0600)"
            ),
            S3Step::Remove => write!(
                f,
                "take the s3-parameters bucket from the maintenance agent (the relation is gone or incomplete)"
            ),
        }
    }
}

pub fn observe(
    tools: &HookTools,
    paths: &Paths,
    mode: Mode,
    unread: &mut Vec<String>,
) -> Result<S3Seen> {
    let bag = tolerate(
        mode,
        unread,
        "the s3-parameters relation",
        || -> std::result::Result<_, crate::hooktools::HookToolError> {
            let Some(rel) = tools.relation_ids(s3_params::ENDPOINT)?.into_iter().next() else {
                return Ok(Some(None));
            };
            let Some(unit) = tools.relation_list(&rel)?.into_iter().next() else {
                return Ok(Some(None));
            };
            let app = unit.split('/').next().unwrap_or_default().to_string();
            tools.relation_get_app(&rel, &app).map(|b| Some(Some(b)))
        },
        || None,
    )?;
    let known = bag.is_some();
    let wanted = bag
        .flatten()
        .and_then(|b| s3_params::parse(&b).ok())
        .map(|p| to_text(&p));
    let path = file(paths);
    let on_disk = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("reading", &path)(e)),
    };
    Ok(S3Seen {
        known,
        wanted,
        on_disk,
    })
}

pub fn to_text(p: &S3Params) -> String {
    serde_json::to_string(p).unwrap_or_default()
}

/// The file's parameters, for the agent; None when it is absent or bad.
pub fn read(paths: &Paths) -> Option<S3Params> {
    let text = std::fs::read_to_string(file(paths)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Pure: the file follows the relation.
pub fn plan(o: &Observed, p: &mut Plan) {
    let s = &o.s3;
    if !s.known {
        return;
    }
    match (&s.wanted, &s.on_disk) {
        (Some(w), d) if d.as_ref() != Some(w) => p.steps.push(Step::S3(S3Step::Write(w.clone()))),
        (None, Some(_)) => p.steps.push(Step::S3(S3Step::Remove)),
        _ => {}
    }
}

pub fn apply(step: &S3Step, paths: &Paths) -> Result<()> {
    let path = file(paths);
    match step {
        S3Step::Write(text) => crate::durable::write_atomic_private(&path, text.as_bytes())
            .map_err(io("writing", &path)),
        S3Step::Remove => match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("removing", &path)(e)),
            _ => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charm::plan_tests::fresh;

    fn params() -> S3Params {
        let bag = [
            ("bucket", "b"),
            ("access-key", "AKIDEXAMPLE"),
            ("secret-key", "SECRETSECRET"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        s3_params::parse(&bag).unwrap()
    }

    fn steps(wanted: Option<String>, on_disk: Option<String>) -> Vec<Step> {
        let mut o = fresh(false);
        o.s3 = S3Seen {
            known: true,
            wanted,
            on_disk,
        };
        let mut p = Plan::default();
        plan(&o, &mut p);
        p.steps
    }

    #[test]
    fn the_file_follows_the_relation_and_its_steps_never_show_the_keys() {
        let text = to_text(&params());
        assert_eq!(serde_json::from_str::<S3Params>(&text).unwrap(), params());
        let s = steps(Some(text.clone()), None);
        assert_eq!(s, vec![Step::S3(S3Step::Write(text.clone()))]);
        let seen = S3Seen {
            known: true,
            wanted: Some(text.clone()),
            on_disk: None,
        };
        let shown = format!("{} {:?} {seen:?}", s[0], s[0]);
        assert!(
            !shown.contains("SECRETSECRET") && !shown.contains("AKIDEXAMPLE"),
            "{shown}"
        );
        assert_eq!(steps(Some(text.clone()), Some(text.clone())), vec![]);
        assert_eq!(steps(None, Some(text)), vec![Step::S3(S3Step::Remove)]);
        assert_eq!(steps(None, None), vec![]);
        // A dry run that could not read the relation changes nothing.
        let mut o = fresh(false);
        o.s3.on_disk = Some("{}".into());
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert_eq!(p.steps, vec![]);
    }
}
