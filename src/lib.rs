//! etcd-charm: a Juju machine charm for etcd, and `jujusim`, a local Juju
//! model that runs it against real etcd.
//!
//! # Layout
//! Floors, each importing only from floors below it (no import circle):
//!
//! 1. Facts and edges
//!    - `context`   — which hook or action Juju is running, and the frozen JUJU_* context.
//!    - `hooktools` — the only code that runs Juju hook tools; typed calls, typed errors.
//!    - `paths`     — every host path, resolved under `ETCD_CHARM_ROOT`.
//!    - `wal`       — reads a member's and cluster's IDs from a data dir's WAL.
//!    - `diff`      — a small unified diff, for the dry run's view of etcd.conf.yml.
//!    - `stamp`     — UTC times as text (backup names, log lines), one civil-date algorithm.
//!    - `durable`   — the one durable atomic file write (temp, fsync, rename, fsync dir).
//!    - `private`   — root-only files (0600) and dirs (0700) for keyspace copies; wider ones tightened.
//!    - `aside`     — the dated set-aside: `<name>.<kind>-<stamp>[-n]`, renamed, dir synced.
//!    - `addr`      — URLs from host and port (IPv6 in brackets).
//!    - `space`     — free space before a copy: need = size + margin.
//!    - `mounts`    — what mountinfo says is mounted where; the data volume's mount point.
//!    - `restart`   — the restart policy the drop-in and the direct supervisor share.
//!    - `failpoint` — crash points for the crash-safety tests (inert unless armed).
//!    - `prereq`    — a test's missing prerequisite: fatal when ./test runs strict, else counted.
//! 2. The workload
//!    - `render`    — etcd.conf.yml and the systemd drop-in, from templates/ and typed structs.
//!    - `layout`    — what is on disk: configs, data dirs, legacy locations, their members; the start guard.
//!    - `etcd`      — talking to the live cluster (health, members, membership, maintenance), http or https.
//!    - `service`   — starting and stopping etcd: the snap under systemd, or a direct process.
//!    - `tls`       — certificates: reading, our key and CSR, SANs, cipher suites, both protocols, the files.
//! 3. Procedures over the workload (these may return the charm's `error::Error`,
//!    which wraps the lower floors' own errors through `From`)
//!    - `migrate`   — a member out of a legacy location, crash-safely (plan / apply / copy engine; `fsops` under both).
//!    - `rolling`   — the cluster-wide turn (a leased key in etcd) held while a member is down.
//!    - `storage`   — the `data` volume: fstab, mounts, device signatures; mkfs/mount/umount
//!      (floor 3, not 2: it returns the charm's `Error`).
//!    - `agent`     — the maintenance agent (`etcd-charm agent`): scheduled snapshots, defrag under the turn, NOSPACE.
//! 4. The charm
//!    - `charm`     — the reconcile loop: observe → plan → apply, the status it ends on; actions; the dry run.
//!    - `cli`       — what a person gets when running the binary outside a hook.
//!
//! Inside `charm`, files layer too: the vocabulary at the bottom —
//! `config`, `options`, `observed` (what observe found, every concern's
//! part of it), `steps` (the Step enum, each concern's step type, the
//! Plan), `loopback_metrics` (etcd's `/health` and `/metrics` listener on
//! loopback, for the nrpe checks), `desired` (the member's URLs and etcd.conf.yml),
//! `certificates_stage`, `verdict` (a check's answer); above it the
//! concerns, which import only the vocabulary and each other downward:
//! `join` (a WAL-less unit), `with_wal` (a member starting on its WAL),
//! `bootstrap` (two-phase), `leader` (membership), `lease` (leadership
//! re-checks), `turn` (the rolling-turn gate; its apply half
//! `turn_apply`), `clients` (`db`), `endpoints` (`proxy`),
//! `certificates` (+ `_names`, `_rotation`, `_apply`: the relation, plain
//! → TLS; `_client`: the shared client pair; `_renewal`: when a v4
//! certificate is asked for again), `monitoring` + `nagios` (prometheus, grafana, nrpe; `scrape_jobs`
//! what both scrape jobs point at), `volume`
//! (the data storage), `alarms`, `token`, `snap_upgrade` (etcd version
//! upgrades through `channel`; its I/O and the `snap-upgrade` action in
//! `snap_upgrade_apply`), `restore` (a restore's plan; `restore_apply` its
//! apply half), `agent`, `running`, rule 7's `insecure` (no plain
//! listener off loopback unless the operator asks) and `expiry`
//! (certificate end dates); then the orchestrators: `observe` (model,
//! disk, cluster → plain data), `plan` (the decision; pure), `apply` (the
//! only code that changes anything); on top `actions` (+ `action_support`,
//! `actions_ops`, `actions_debug`, `actions_creds`, `actions_restore`),
//! `checks` (the `nrpe-check` plugins; `checks_metrics` their
//! keyless view through the loopback metrics listener), `dryrun`, `dryrun_refresh` and
//! `compat` (what `juju refresh` keeps, drops and refuses), `quiet`,
//! `logging` (tracing → juju-log). `tests/house_layout.rs` fails on any
//! import circle between files and on a floor importing from above.
//!
//! `sim` is a separate house: jujusim, a generic local Juju model that knows
//! Juju and never etcd (its own map is in `sim/mod.rs`).

pub mod addr;
pub mod agent;
pub mod aside;
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
pub mod mounts;
pub mod paths;
pub mod prereq;
pub mod private;
pub mod render;
pub mod restart;
pub mod rolling;
pub mod s3;
pub mod service;
pub mod settable;
pub mod sim;
pub mod space;
pub mod stamp;
pub mod storage;
pub mod tls;
pub mod wal;
