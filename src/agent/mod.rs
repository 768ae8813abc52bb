//! The maintenance agent: `etcd-charm agent`, a long-running process on
//! every machine next to etcd. It takes scheduled snapshots (its own
//! rolling copies: the newest N kept, older ones removed, sha256 beside
//! each, only while the data dir keeps room), defragments its member when free pages pass
//! a threshold (only while holding the cluster-wide rolling turn, so two
//! agents never defragment at once), clears a NOSPACE alarm (compact,
//! defragment one member at a time, disarm), and serves what it did and
//! sees on loopback: JSON at `/`, Prometheus text at `/metrics`; while
//! Prometheus is related, `/metrics` also on the unit's address (mTLS).
//!
//! # Layout
//! - `options` — the charm options and the command line they become (pure).
//! - `decide`  — what one check does, from what it saw (pure).
//! - `state`   — the served state and its metrics.
//! - `http`    — the endpoint (tokio) and a hook's one GET (std).
//! - `scrape`  — the second listener, `/metrics` only, for Prometheus
//!   (TLS with client certificates, or plain by the operator's leave).
//! - `run`     — the loop: observe, decide, act.
//! - `upload`  — scheduled snapshots to the s3-parameters bucket.
//! - `service` — the systemd unit (snap backend) or the detached process
//!   (direct backend) the charm runs it as.
//!
//! The charm's side (observe, plan step, apply, status notes) is
//! `charm::agent`.

pub mod decide;
pub mod http;
pub mod options;
pub mod run;
pub mod scrape;
pub mod service;
pub mod state;
pub mod upload;
