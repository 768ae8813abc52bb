//! etcd-charm: a Juju machine charm for etcd, and `jujusim`, a local Juju
//! model that runs it against real etcd.
//!
//! # Layout
//! - `context`   — which hook or action Juju is running, and the frozen JUJU_* context.
//! - `hooktools` — the only code that runs Juju hook tools; typed calls, typed errors.
//! - `paths`     — every host path, resolved under `ETCD_CHARM_ROOT`.
//! - `diff`      — a small unified diff, for the upgrade dry run's view of etcd.conf.yml.
//! - `stamp`     — UTC times as text (backup names, log lines), one civil-date algorithm.
//! - `aside`     — the dated set-aside: `<name>.<kind>-<stamp>[-n]`, renamed, dir synced.
//! - `durable`   — the one durable atomic file write (temp, fsync, rename, fsync dir).
//! - `addr`      — URLs from host and port (IPv6 in brackets).
//! - `render`    — etcd.conf.yml and the systemd drop-in, from templates/ and typed structs.
//! - `restart`   — the restart policy the systemd drop-in and the direct supervisor share.
//! - `wal`       — reads a member's and cluster's IDs from a data dir's WAL.
//! - `layout`    — what is on disk: configs, data dirs, legacy locations, their members.
//! - `migrate`   — moving a member out of a legacy location, crash-safely (mod: types; plan: pure; apply: executor; copy: copy engine).
//! - `storage`   — the `data` volume: fstab, mounts, device signatures; mkfs/mount/umount.
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
//! steps and status; `join` plans a WAL-less unit's join, `with_wal` a
//! member's start on its WAL, `clients` what the `db` relation gets), `apply` (the only code that changes anything), `token`,
//! `turn` (the rolling-turn gate), `config`, `options` (what the Python
//! charm's later options do), `actions`
//! (+ `actions_ops`, `actions_debug`: the Python charm's actions), `alarms` (alarms and the quota in the status), `dryrun`, `dryrun_refresh` (what
//! `juju refresh` keeps and drops), `compat` (Juju's refresh rules over two
//! charms' metadata), `logging` (tracing → juju-log), `volume` (the data storage in the plan), and the monitoring
//! endpoints: `monitoring` (prometheus, grafana, nrpe: observe, pure plan,
//! apply), `nagios` (the nrpe files, rendered), `checks` (the `nrpe-check`
//! Nagios plugins).

pub mod addr;
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
pub mod paths;
pub mod render;
pub mod restart;
pub mod rolling;
pub mod service;
pub mod sim;
pub mod space;
pub mod stamp;
pub mod storage;
pub mod tls;
pub mod wal;
