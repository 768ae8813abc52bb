//! The rolling turn's two steps, apply's half (the gate is turn.rs).

use super::apply::Applier;
use super::turn::member_id;
use crate::error::Result;
use crate::hooktools::StatusKind;
use crate::rolling::{self, Request, Taken, Turn};
use tracing::info;

impl Applier<'_> {
    fn turn_member(&self) -> Option<(String, u64)> {
        let o = self.observed;
        // The URL the member answers on now (a move to TLS changes the
        // planned one before the restart; a bridged member serves both).
        let ep = match &o.local {
            Some(v) => v.endpoint.clone(),
            None => o
                .config
                .as_ref()
                .ok()
                .map(|c| super::desired::client_url(o, c))?,
        };
        Some((ep, member_id(o)?))
    }

    /// Takes the turn into `held`, or ends the plan with a waiting status.
    pub(super) fn take_turn(
        &self,
        reason: &str,
        held: &mut Option<Turn>,
    ) -> Result<Option<(StatusKind, String)>> {
        let Some((ep, member_id)) = self.turn_member() else {
            return Ok(None);
        };
        let fallback: Vec<String> = self
            .observed
            .peers
            .values()
            .filter_map(|b| b.get("client-url").cloned())
            .collect();
        self.tools.status_set(
            StatusKind::Maintenance,
            &format!("Taking a rolling turn to restart etcd ({reason})"),
        )?;
        let req = Request {
            unit: &self.observed.unit,
            reason,
            own_endpoint: &ep,
            fallback: &fallback,
            member_id,
            wait: rolling::wait_limit(),
        };
        match rolling::take(&req)? {
            Taken::Held(t) => *held = Some(t),
            Taken::NotNeeded => info!("no other voter: no rolling turn needed"),
            Taken::Busy { why } => {
                return Ok(Some((
                    StatusKind::Waiting,
                    format!("Waiting for a rolling turn to restart etcd ({reason}; {why})"),
                )))
            }
        }
        Ok(None)
    }

    /// Gives the turn back once the cluster is healthy again (bounded).
    pub(super) fn release_turn(
        &self,
        held: &mut Option<Turn>,
    ) -> Result<Option<(StatusKind, String)>> {
        let (Some(turn), Some((now, member_id))) = (held.take(), self.turn_member()) else {
            return Ok(None);
        };
        // Back on the URL the new config advertises: after the restart that
        // moves a member to https, the http one it answered on is gone, and
        // waiting on it would hold the turn for the whole bound.
        let o = self.observed;
        let ep = o
            .config
            .as_ref()
            .map_or(now, |c| super::desired::client_url(o, c));
        Ok(turn.release(&ep, member_id).map(|why| {
            (
                StatusKind::Waiting,
                format!("Waiting for the cluster to be healthy again after restarting etcd: {why}"),
            )
        }))
    }
}
