//! etcd-charm: a Juju machine charm for etcd, and `jujusim`, a local Juju
//! model that runs it against real etcd.
//!
//! # Layout
//! - `context`   — which hook or action Juju is running, and the frozen JUJU_* context.
//! - `hooktools` — the only code that runs Juju hook tools; typed calls, typed errors.
//! - `paths`     — every host path, resolved under `ETCD_CHARM_ROOT`.
//! - `diff`      — a small unified diff, for the upgrade dry run's view of etcd.conf.yml.
//! - `durable`   — the one durable atomic file write (temp, fsync, rename, fsync dir).
//! - `addr`      — URLs from host and port (IPv6 in brackets).
//! - `render`    — etcd.conf.yml and the systemd drop-in, from templates/ and typed structs.
//! - `restart`   — the restart policy the systemd drop-in and the direct supervisor share.
//! - `wal`       — reads a member's and cluster's IDs from a data dir's WAL.
//! - `layout`    — what is on disk: configs, data dirs, legacy locations, their members.
//! - `migrate`   — moving a member out of a legacy location, crash-safely (mod: types; plan: pure; apply: executor; copy: copy engine).
//! - `space`     — free space before a copy: need = size + margin, blocked when short.
//! - `rolling`   — the cluster-wide turn (a leased lock in etcd) a unit holds while its member is down.
//! - `service`   — starting and stopping etcd: the snap under systemd, or a direct process.
//! - `etcd`      — talking to the live cluster (health, members, membership changes), http or https.
//! - `tls`       — certificates: reading, our key and CSR, SANs, cipher suites, both tls-certificates protocols, the files.
//! - `charm`     — the reconcile loop: observe → plan → apply, and the status it ends on.
//! - `sim`       — jujusim, a generic local Juju model (no etcd knowledge inside).
//! - `cli`       — what a person gets when running the binary outside a hook.
//! - `error`     — the typed error every layer returns, with the file, member or tool.
//! - `failpoint` — crash points for the crash-safety tests (inert unless armed).
//!
//! Inside `charm`: `observe` (model, disk, cluster → plain data), `plan` (pure:
//! steps and status), `apply` (the only code that changes anything), `token`,
//! `turn` (the rolling-turn gate), `config`, `actions`, `dryrun`, `logging` (tracing → juju-log).

pub mod addr;
pub mod charm;
pub mod cli;
pub mod context;
pub mod diff;
pub mod durable;
pub mod error;
pub mod etcd;
pub mod failpoint;
pub mod hooktools;
pub mod layout;
pub mod migrate;
pub mod paths;
pub mod render;
pub mod restart;
pub mod rolling;
pub mod service;
pub mod sim;
pub mod space;
pub mod tls;
pub mod wal;
