//! Apply: performs a plan's steps in order; the only code that changes the
//! unit, the model or the cluster. Membership changes retry within the hook,
//! with a bound, because etcd refuses them for a few seconds after the last.

use super::desired;
use super::observed::Observed;
use super::steps::Step;
use crate::error::{io, Error, Result};
use crate::etcd::{self, ClusterView};
use crate::hooktools::{Databag, HookTools, StatusKind};
use crate::paths::Paths;
use crate::service::{Installed, Service};
use std::path::Path;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// How long a membership change may keep being refused before the hook
/// gives up (and is retried by Juju).
pub(super) const MEMBERSHIP_RETRY: Duration = Duration::from_secs(40);
const MEMBER_UP: Duration = Duration::from_secs(60);

pub struct Applier<'a> {
    pub tools: &'a HookTools,
    pub paths: &'a Paths,
    pub service: &'a Service,
    pub observed: &'a Observed,
    /// When this unit last knew it was leader (leader-only steps re-ask).
    pub lease: super::lease::Lease,
}

/// What apply learned that the final status must say.
#[derive(Debug, Default)]
pub struct Outcome {
    pub status: Vec<(StatusKind, String)>,
    /// Steps that completed.
    pub done: usize,
}

impl Applier<'_> {
    pub fn apply(&self, steps: &[Step]) -> Result<Outcome> {
        let mut out = Outcome::default();
        let result = self.apply_until_stopped(steps, &mut out);
        // The unit is going away but its member is still a voter (the
        // removal was refused for quorum, or failed): etcd keeps running
        // and the hook fails, saying why and what to do.
        if let Some(refused) = self.removal_refused(steps, &out, &result) {
            return Err(refused);
        }
        // Out of the cluster (or never needing to leave it): whatever else
        // stopped the plan, the stop hook stops etcd.
        let stopped = steps.iter().position(|s| *s == Step::StopEtcd);
        let stop_pending = stopped.is_some_and(|i| out.done <= i);
        if self.observed.event == crate::context::Event::Stop && stop_pending {
            info!("step: {} (the stop hook always stops etcd)", Step::StopEtcd);
            self.service.stop()?;
        }
        result.map(|()| out)
    }

    fn apply_until_stopped(&self, steps: &[Step], out: &mut Outcome) -> Result<()> {
        // The rolling turn, while held; dropping it (a step failed or
        // stopped the plan) gives it back.
        let mut turn = None;
        for step in steps {
            // Routine steps stay out of juju-log: each line is a call to the agent.
            if matches!(
                step,
                Step::OpenPort(_)
                    | Step::ClosePort(_)
                    | Step::SetVersion(_)
                    | Step::Publish(_)
                    | Step::PublishClient { .. }
            ) {
                tracing::debug!("step: {step}");
            } else {
                info!("step: {step}");
            }
            let stopped = match self.leader_gone(step)? {
                Some(s) => Some(s),
                None => match step {
                    Step::TakeTurn { reason } => self.take_turn(reason, &mut turn)?,
                    Step::ReleaseTurn => self.release_turn(&mut turn)?,
                    _ => self.step(step)?,
                },
            };
            if let Some(status) = stopped {
                warn!("step {step} stopped: {}", status.1);
                out.status.push(status);
                break;
            }
            out.done += 1;
            crate::failpoint::hit(&format!("after:{}", step_key(step)));
        }
        Ok(())
    }

    /// Leader-only membership steps re-ask is-leader when the last answer
    /// is older than the lease allows; no longer leader → waiting.
    pub(super) fn leader_gone(&self, step: &Step) -> Result<Option<(StatusKind, String)>> {
        let leader_only = matches!(
            step,
            Step::AddMember { .. } | Step::PromoteLearner { .. } | Step::RecordCluster
        ) || (matches!(step, Step::RemoveMember { .. })
            && self.observed.is_leader
            && !self.removes_self(step));
        if !leader_only || self.lease.still_leader(|| self.tools.is_leader())? {
            return Ok(None);
        }
        Ok(Some((
            StatusKind::Waiting,
            format!("No longer the leader: leaving \"{step}\" to the new leader"),
        )))
    }

    fn relation(&self) -> Option<&str> {
        self.observed.peer_relation.as_deref()
    }

    pub(super) fn endpoints(&self) -> Vec<String> {
        let o = self.observed;
        let mut eps = Vec::new();
        if let Ok(c) = &o.config {
            eps.push(desired::client_url(o, c));
        }
        eps.extend(
            o.peers
                .values()
                .filter_map(|b| b.get("client-url").cloned()),
        );
        eps
    }

    /// Ok(Some(status)) stops the plan with that status; Err fails the hook.
    fn step(&self, step: &Step) -> Result<Option<(StatusKind, String)>> {
        match step {
            Step::InstallEtcd => {
                self.tools
                    .status_set(StatusKind::Maintenance, "Installing etcd")?;
                match self.service.install()? {
                    Installed::Ready { version } => info!("etcd {version} is installed"),
                    Installed::Missing { reason } => {
                        return Ok(Some((
                            StatusKind::Blocked,
                            format!("etcd cannot run: {reason}"),
                        )))
                    }
                }
            }
            Step::WriteDropIn => {
                self.service.ensure_dropin()?;
            }
            Step::RemoveDropIn => self.service.remove_dropin()?,
            Step::TightenBackups(ps) => {
                super::backups::tighten(ps).map_err(|e| {
                    Error::Other(format!("making the keyspace copies root-only: {e}"))
                })?;
                info!("made {} keyspace cop(ies) and dirs root-only", ps.len());
            }
            Step::SetLeaderData(d) => self.set_leader_data(d)?,
            Step::PublishClient { relation, data } => self.tools.relation_set(relation, data)?,
            Step::Publish(d) => {
                if let Some(rel) = self.relation() {
                    self.tools.relation_set(rel, d)?;
                }
            }
            Step::WriteConfig { text, config, .. } => {
                return write_config(&self.paths.config_file(), text, config)
            }
            Step::StartEtcd | Step::RestartEtcd => return self.start_or_status(step),
            Step::StopEtcd => self.service.stop()?,
            Step::WaitMember => return self.wait_member(),
            Step::RecordCluster => self.record_cluster()?,
            Step::AddMember { name, peer_url } => return self.add_member(name, peer_url),
            Step::PromoteLearner { name, id } => return self.promote(name, *id),
            Step::UpdatePeerUrl { id, peer_url } => {
                let eps = voter_endpoints(&self.view()?);
                etcd::block_on(etcd::update_peer_url(&eps, *id, peer_url))?;
            }
            Step::RemoveMember { name, id } => return self.remove_member(name, *id),
            Step::MoveDataAside { data_dir, reason } => {
                let to = move_aside(data_dir, reason)?;
                warn!(
                    "moved {}/member to {} ({reason})",
                    data_dir.display(),
                    to.display()
                );
            }
            Step::OpenPort(p) => self.tools.open_port(*p)?,
            Step::ClosePort(p) => self.tools.close_port(*p)?,
            Step::SetVersion(v) => self.tools.application_version_set(v)?,
            Step::Migrate(m) => {
                self.tools.status_set(
                    StatusKind::Maintenance,
                    &format!("Migrating the etcd member: {}", short(&m.to_string())),
                )?;
                let mut report = |msg: &str| {
                    if let Err(e) = self.tools.status_set(StatusKind::Maintenance, msg) {
                        warn!("{e}");
                    }
                };
                if let Some(msg) = crate::migrate::apply(m, &mut report)? {
                    return Ok(Some((StatusKind::Blocked, msg)));
                }
            }
            Step::VerifyMember(ids) => return self.verify_member(*ids),
            Step::SnapdRefresh(r) => self.service.set_snapd_refresh(r)?,
            Step::Monitoring(m) => super::monitoring::apply(m, self.tools, self.paths)?,
            Step::S3(s) => super::s3_handoff::apply(s, self.paths)?,
            // Held across steps: apply() runs them (charm/turn.rs).
            Step::TakeTurn { .. } | Step::ReleaseTurn => {}
            Step::SnapUpgrade(u) => return self.snap_upgrade(u),
            Step::Tls(t) => {
                if let Some(d) = super::certificates_apply::apply(t, self.paths, self.tools)? {
                    self.set_leader_data(&d)?;
                }
            }
            Step::Volume(v) => crate::storage::apply(v, self.paths, &|| {
                self.service.connect_removable_media().map_err(Into::into)
            })?,
            Step::Restore(r) => return self.restore_step(r),
            Step::Rebuild(r) => return self.rebuild_step(r),
            Step::Agent(a) => return Ok(super::agent::apply(a, self.paths, self.service)),
        }
        Ok(None)
    }

    /// After a start: the member answering on this unit's client URL must
    /// be the one the data dir's WAL records (after a migration: the one
    /// observed before it).
    fn verify_member(&self, want: crate::wal::WalIds) -> Result<Option<(StatusKind, String)>> {
        let ep = self.own_endpoint()?;
        let s = etcd::block_on(etcd::member_status(&ep))?;
        if s.member_id == want.member_id && s.cluster_id == want.cluster_id {
            info!("etcd at {ep} is {want}, as its WAL records");
            return Ok(None);
        }
        Ok(Some((
            StatusKind::Blocked,
            format!(
                "etcd at {ep} answers as member {:x} of cluster {:x}, but its data dir holds {want}; check which etcd listens there",
                s.member_id, s.cluster_id
            ),
        )))
    }

    /// Leadership data goes to the peer app databag, and to leader-set while
    /// the running Juju still has it (contract: "Leadership data and Juju 4").
    pub(super) fn set_leader_data(&self, d: &Databag) -> Result<()> {
        if let Some(rel) = self.relation() {
            self.tools.relation_set_app(rel, d)?;
        }
        if self.observed.has_leader_tools {
            self.tools.leader_set(d)?;
        }
        Ok(())
    }

    pub(super) fn own_endpoint(&self) -> Result<String> {
        let o = self.observed;
        o.config
            .as_ref()
            .map(|c| desired::client_url(o, c))
            .map_err(|e| Error::Config(e.clone()))
    }

    /// A refused start (the guard, systemd's start limit, a failing
    /// ExecStart) still fails the hook (Juju retries it; the snap backend
    /// resets the start limit first, service/snap.rs), and the workload
    /// status says why in one line.
    fn start_or_status(&self, step: &Step) -> Result<Option<(StatusKind, String)>> {
        let r = if *step == Step::RestartEtcd {
            self.service.restart()
        } else {
            self.service.start()
        };
        if let Err(e) = &r {
            // The cause, then the log's last line (the direct backend's
            // problem carries a multi-line tail), never the whole log.
            let mut lines = e.problem.splitn(2, '\n');
            let first = lines.next().unwrap_or("").to_string();
            let why = match lines.next() {
                Some(rest) => format!("{first} {}", crate::service::one_line_tail(rest)),
                None => first,
            };
            let msg: String = format!("etcd did not {}: {why}", step_key(step))
                .chars()
                .take(300)
                .collect();
            if let Err(se) = self.tools.status_set(StatusKind::Blocked, &msg) {
                warn!("status-set: {se}");
            }
        }
        r.map(|()| None).map_err(Into::into)
    }

    fn wait_member(&self) -> Result<Option<(StatusKind, String)>> {
        let ep = self.own_endpoint()?;
        let start = Instant::now();
        loop {
            match etcd::block_on(etcd::member_status(&ep)) {
                Ok(s) if s.leader != 0 || s.is_learner => return Ok(None),
                Ok(_) => {}
                Err(e) if start.elapsed() > MEMBER_UP => {
                    let tail = self.service.log_tail(5);
                    return Err(Error::Other(format!(
                        "etcd at {ep} did not answer within {MEMBER_UP:?}: {e}; log tail: {tail}"
                    )));
                }
                Err(_) => {}
            }
            if !self.service.is_active().unwrap_or(false) {
                let tail = self.service.log_tail(5);
                return Ok(Some((
                    StatusKind::Blocked,
                    format!("etcd exited after start: {}", last_line(&tail)),
                )));
            }
            if start.elapsed() > MEMBER_UP {
                return Ok(Some((
                    StatusKind::Waiting,
                    format!("Waiting for etcd at {ep} to elect a leader"),
                )));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The cluster as this unit's member sees it (at the URL the config
    /// wants, else at the one it answered on when observed), else as any
    /// peer sees it.
    pub(super) fn view(&self) -> Result<ClusterView> {
        let mut own: Vec<String> = self.own_endpoint().ok().into_iter().collect();
        if let Some(v) = &self.observed.local {
            if !own.contains(&v.endpoint) {
                own.push(v.endpoint.clone());
            }
        }
        for ep in &own {
            if let Ok(v) = etcd::block_on(etcd::view_from(ep)) {
                if !v.status.is_learner {
                    return Ok(v);
                }
            }
        }
        Ok(etcd::block_on(etcd::view(&self.endpoints()))?)
    }
}

/// Client URLs of the started voters, where membership changes are served.
pub(super) fn voter_endpoints(v: &ClusterView) -> Vec<String> {
    v.members
        .iter()
        .filter(|m| !m.is_learner && !m.name.is_empty())
        .filter_map(|m| m.client_urls.first().cloned())
        .collect()
}

fn last_line(s: &str) -> String {
    s.lines()
        .last()
        .unwrap_or("no log")
        .chars()
        .take(200)
        .collect()
}

/// A failpoint name per step kind, stable across runs.
pub fn step_key(s: &Step) -> &'static str {
    match s {
        Step::InstallEtcd => "install",
        Step::WriteDropIn => "write-dropin",
        Step::RemoveDropIn => "remove-dropin",
        Step::TightenBackups(_) => "tighten-backups",
        Step::S3(_) => "s3-handoff",
        Step::SetLeaderData(_) => "set-leader-data",
        Step::Publish(_) => "publish",
        Step::PublishClient { .. } => "publish-client",
        Step::WriteConfig { .. } => "write-config",
        Step::StartEtcd => "start",
        Step::RestartEtcd => "restart",
        Step::StopEtcd => "stop",
        Step::WaitMember => "wait-member",
        Step::RecordCluster => "record-cluster",
        Step::AddMember { .. } => "add-member",
        Step::PromoteLearner { .. } => "promote",
        Step::UpdatePeerUrl { .. } => "update-peer-url",
        Step::RemoveMember { .. } => "remove-member",
        Step::MoveDataAside { .. } => "move-aside",
        Step::OpenPort(_) => "open-port",
        Step::ClosePort(_) => "close-port",
        Step::SetVersion(_) => "set-version",
        Step::Migrate(m) => m.key(),
        Step::VerifyMember(_) => "verify-member",
        Step::SnapdRefresh(_) => "snapd-refresh",
        Step::Monitoring(m) => m.key(),
        Step::TakeTurn { .. } => "take-turn",
        Step::ReleaseTurn => "release-turn",
        Step::Volume(_) => "volume",
        Step::SnapUpgrade(u) => u.key(),
        Step::Restore(r) => r.key(),
        Step::Rebuild(r) => r.key(),
        Step::Agent(_) => "agent",
        Step::Tls(_) => "tls",
    }
}

/// Status messages stay one readable line.
fn short(s: &str) -> String {
    if s.chars().count() <= 120 {
        return s.to_string();
    }
    let cut: String = s.chars().take(117).collect();
    format!("{cut}...")
}

/// [`crate::durable::write_atomic`], with the path in the error.
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    crate::durable::write_atomic(path, text.as_bytes()).map_err(io("writing", path))
}

/// Validates before writing: a config etcd would read differently (a URL
/// holding a comma, a member name with `&`) is never written; blocked.
pub fn write_config(
    path: &Path,
    text: &str,
    config: &crate::render::EtcdConfig,
) -> Result<Option<(StatusKind, String)>> {
    if let Err(e) = config.validate() {
        return Ok(Some((
            StatusKind::Blocked,
            format!("etcd.conf.yml not written, it would be invalid: {e}"),
        )));
    }
    write_atomic(path, text)?;
    Ok(None)
}

/// Moves `<data_dir>/member` to `<data_dir>/member.backup-<stamp>`: never
/// deleted (rule 4), and etcd only ever looks at `member/`.
pub fn move_aside(data_dir: &Path, reason: &str) -> Result<std::path::PathBuf> {
    let from = data_dir.join("member");
    let to = crate::aside::set_aside(&from, "member.backup").map_err(io("moving aside", &from))?;
    let note = to.join("WHY");
    let _ = std::fs::write(&note, format!("{reason}\n"));
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invalid_config_is_never_written() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("etcd.conf.yml");
        let mut c = crate::render::EtcdConfig {
            name: "etcd0".into(),
            data_dir: "/d".into(),
            listen_peer_urls: vec!["http://10.0.0.1:2380".into()],
            listen_client_urls: vec!["http://10.0.0.1:2379".into()],
            listen_metrics_urls: vec![],
            initial_advertise_peer_urls: vec!["http://10.0.0.1:2380".into()],
            advertise_client_urls: vec!["http://10.0.0.1:2379".into()],
            initial_cluster: vec![("etcd0".into(), "http://10.0.0.1:2380".into())],
            initial_cluster_token: "T".into(),
            initial_cluster_state: crate::render::ClusterState::New,
            snapshot_count: None,
            heartbeat_interval: 100,
            election_timeout: 1000,
            strict_reconfig_check: true,
            enable_v2: false,
            grpc_gateway: true,
            force_new_cluster: false,
            storage: Default::default(),
            tls: None,
        };
        assert_eq!(write_config(&path, "ok\n", &c).unwrap(), None);
        c.initial_cluster
            .push(("a&b".into(), "http://10.0.0.2:2380".into()));
        let (kind, msg) = write_config(&path, "bad\n", &c).unwrap().unwrap();
        assert_eq!(kind, StatusKind::Blocked);
        assert!(msg.contains("initial-cluster"), "{msg}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "ok\n");
    }

    #[test]
    fn move_aside_keeps_the_member() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("member/wal")).unwrap();
        std::fs::write(d.path().join("member/wal/x.wal"), b"x").unwrap();
        let to = move_aside(d.path(), "test").unwrap();
        assert!(!d.path().join("member").exists());
        assert_eq!(std::fs::read(to.join("wal/x.wal")).unwrap(), b"x");
    }
}
