//! The pure migration planner: from the observed [`DiskLayout`] to the steps
//! that move this unit's member into the canonical data dir.

use super::{Aside, Method, Migration, MigrationStep, FORCE_ENV, INCOMING, VERIFIED};
use crate::layout::{configured_data_dir, DiskLayout, Location, Role};
use crate::paths::Paths;
use crate::wal::WalIds;
use std::path::{Path, PathBuf};

/// Decides what to do with this unit's member. Pure: reads only `layout`.
/// A plan whose copies do not fit the observed free space is blocked
/// before anything is touched (the executor checks again as it writes).
pub fn plan_migration(layout: &DiskLayout, paths: &Paths, member_name: &str) -> Migration {
    plan_migration_live(layout, paths, member_name, None)
}

/// [`plan_migration`], told which member answers now (`(endpoint, member
/// id)`): when it is the member to move, its snapshot is taken online,
/// first, while it runs (the charm puts that step before the stop), so
/// the time etcd is down does not grow with the data. Otherwise the
/// stopped member's db is copied.
pub fn plan_migration_live(
    layout: &DiskLayout,
    paths: &Paths,
    member_name: &str,
    live: Option<(&str, u64)>,
) -> Migration {
    let mut planned = plan_steps(layout, paths, member_name);
    if let (
        Migration::Migrate {
            ids,
            stop_etcd: true,
            steps,
            ..
        },
        Some((endpoint, id)),
    ) = (&mut planned, live)
    {
        if id == ids.member_id {
            go_online(steps, endpoint);
        }
    }
    if let Migration::Migrate { steps, .. } = &planned {
        if let Some(message) = space_shortfall(layout, paths, steps) {
            return Migration::Conflict { message };
        }
    }
    planned
}

/// Turns the offline snapshot into an online one, taken first.
fn go_online(steps: &mut Vec<MigrationStep>, endpoint: &str) {
    let Some(i) = steps
        .iter()
        .position(|s| matches!(s, MigrationStep::Snapshot { .. }))
    else {
        return;
    };
    if let MigrationStep::Snapshot {
        member_dir,
        name,
        ids,
        backup_dir,
    } = steps.remove(i)
    {
        steps.insert(
            0,
            MigrationStep::OnlineSnapshot {
                endpoint: endpoint.to_string(),
                member_dir,
                name,
                ids,
                backup_dir,
            },
        );
    }
}

/// The first copy of `steps` that does not fit, as a blocked message.
fn space_shortfall(layout: &DiskLayout, paths: &Paths, steps: &[MigrationStep]) -> Option<String> {
    let space = layout.migration.space.as_ref()?;
    let show = |p: &Path| paths.unhost(p).display().to_string();
    let location_of = |member_dir: &Path| {
        layout
            .locations
            .iter()
            .find(|l| l.path.join("member") == member_dir)
    };
    let mut copy_bytes = 0;
    for s in steps {
        if let MigrationStep::Copy { from, to, .. } = s {
            let bytes = location_of(from)
                .and_then(|l| space.member_bytes.get(&l.path))
                .copied()
                .unwrap_or(0);
            copy_bytes += bytes;
            let dir = to.parent().unwrap_or(to);
            if let Some(m) = crate::space::shortfall(
                &format!("the copy of {}", show(from)),
                bytes,
                Path::new(&show(dir)),
                space.canonical_free,
            ) {
                return Some(m);
            }
        }
    }
    for s in steps {
        if let MigrationStep::Snapshot {
            member_dir,
            backup_dir,
            ..
        }
        | MigrationStep::OnlineSnapshot {
            member_dir,
            backup_dir,
            ..
        } = s
        {
            let l = location_of(member_dir);
            let bytes = l
                .and_then(|l| l.facts.db_size)
                .or_else(|| l.and_then(|l| space.member_bytes.get(&l.path)).copied())
                .unwrap_or(0);
            // On one file system the copy and the snapshot share its space.
            let shared = if space.same_fs { copy_bytes } else { 0 };
            if let Some(m) = crate::space::shortfall(
                &format!("the pre-migration snapshot of {}", show(member_dir)),
                bytes + shared,
                Path::new(&show(backup_dir)),
                space.backup_free,
            ) {
                return Some(m);
            }
        }
    }
    None
}

fn plan_steps(layout: &DiskLayout, paths: &Paths, member_name: &str) -> Migration {
    let show = |p: &Path| paths.unhost(p).display().to_string();
    let conflict = |message: String| Migration::Conflict { message };

    for l in &layout.locations {
        if let Err(e) = &l.member {
            return conflict(format!(
                "cannot read the WAL of {}: {}; nothing was moved",
                show(&l.path),
                e.problem
            ));
        }
    }
    let m = &layout.migration;
    let verified = m.verified.as_ref().filter(|v| !v.empty);
    let verified_ids = match verified.map(|v| &v.member) {
        Some(Err(e)) => {
            return conflict(format!(
                "cannot read the WAL of the verified copy {}: {}; nothing was moved",
                show(
                    &m.verified
                        .as_ref()
                        .map(|v| v.path.clone())
                        .unwrap_or_default()
                ),
                e.problem
            ))
        }
        Some(Ok(ids)) => *ids,
        None => None,
    };
    let incoming = m.incoming.as_ref().filter(|i| !i.empty);

    let canonical = layout.locations.iter().find(|l| l.role == Role::Canonical);
    let canon_dir = canonical
        .map(|l| l.path.clone())
        .unwrap_or_else(|| paths.data_dir());
    let canon_ids = canonical.and_then(|l| l.member.clone().ok().flatten());
    let sources: Vec<(&Location, WalIds)> = layout
        .locations
        .iter()
        .filter(|l| l.role != Role::Canonical)
        .filter_map(|l| Some((l, l.member.clone().ok()??)))
        .collect();
    let configured = layout
        .found_config()
        .and_then(|c| configured_data_dir(paths, c));
    let names = |l: &Path| configured.as_deref() == Some(l);

    if sources.len() > 1 || (canon_ids.is_some() && !sources.is_empty()) {
        let mut all: Vec<(PathBuf, WalIds)> = Vec::new();
        if let (Some(ids), Some(c)) = (canon_ids, canonical) {
            all.push((c.path.clone(), ids));
        }
        all.extend(sources.iter().map(|(l, ids)| (l.path.clone(), *ids)));
        let same = all.windows(2).all(|w| w[0].1 == w[1].1);
        // The same member twice, and the config says which one etcd ran
        // last: that one is current, the other a leftover copy.
        if same && all.len() == 2 && canon_ids.is_some() {
            let (src, ids) = sources[0];
            if names(&canon_dir) {
                return Migration::Migrate {
                    from: src.path.clone(),
                    ids,
                    method: Method::InPlace,
                    stop_etcd: false,
                    steps: vec![MigrationStep::SetAside {
                        path: src.path.join("member"),
                        kind: Aside::Migrated,
                    }],
                };
            }
            if names(&src.path) {
                let mut steps = vec![MigrationStep::SetAside {
                    path: canon_dir.join("member"),
                    kind: Aside::Stale,
                }];
                steps.extend(move_steps(layout, paths, member_name, src, ids, &canon_dir).1);
                return Migration::Migrate {
                    from: src.path.clone(),
                    ids,
                    method: method(layout, src, canonical),
                    stop_etcd: true,
                    steps,
                };
            }
        }
        let list: Vec<String> = all
            .iter()
            .map(|(p, ids)| format!("{ids} at {}", show(p)))
            .collect();
        let config_says = match &configured {
            Some(c) => format!("etcd.conf.yml names {}", show(c)),
            None => "etcd.conf.yml names no data-dir".to_string(),
        };
        let what = if same {
            "the same member in two places"
        } else {
            "two different members"
        };
        return conflict(format!(
            "{what}: {}; {config_says}. Nothing was moved: keep the member that belongs to the cluster and move the other out of these paths by hand",
            list.join(" and ")
        ));
    }

    let Some(&(src, ids)) = sources.first() else {
        // No member outside the canonical dir.
        if canon_ids.is_some() {
            return Migration::Nothing;
        }
        if let Some(vids) = verified_ids {
            // The source was set aside after its copy was verified.
            let v = verified.expect("verified_ids implies verified");
            let mut steps = Vec::new();
            if let Some(i) = incoming {
                steps.push(MigrationStep::SetAside {
                    path: i.path.clone(),
                    kind: Aside::Incomplete,
                });
            }
            // A wal-dir source whose WAL went aside first keeps a WAL-less member/.
            for l in layout
                .locations
                .iter()
                .filter(|l| l.role != Role::Canonical)
            {
                if l.facts.member_dir && l.facts.wal_dir.is_some() {
                    steps.push(MigrationStep::SetAside {
                        path: l.path.join("member"),
                        kind: Aside::Migrated,
                    });
                }
            }
            steps.extend(walless_canonical(canonical, &canon_dir));
            steps.push(MigrationStep::MoveIntoPlace {
                from: v.path.clone(),
                to: canon_dir.join("member"),
            });
            return Migration::Migrate {
                from: v.path.clone(),
                ids: vids,
                method: Method::Copy {
                    why: "resuming: the verified copy is put in place".into(),
                },
                stop_etcd: true,
                steps,
            };
        }
        if let Some(i) = incoming {
            return conflict(format!(
                "{} holds an unfinished copy of a member, but no source member is left in {} or any configured data-dir. Nothing was moved: find where the member went before the charm continues",
                show(&i.path),
                paths
                    .unhost(paths.legacy_data_dir(member_name))
                    .display()
            ));
        }
        return Migration::Nothing;
    };

    if let (Some(vids), Some(v)) = (verified_ids, verified) {
        if vids != ids {
            return conflict(format!(
                "two different members: {ids} at {} and {vids} in the verified copy {}. Nothing was moved: keep the member that belongs to the cluster and move the other out of these paths by hand",
                show(&src.path),
                show(&v.path)
            ));
        }
        let stale = match (src.facts.newest_change, v.mtime) {
            (Some(changed), Some(verified_at)) => changed > verified_at,
            _ => true,
        };
        if !stale {
            let mut steps = Vec::new();
            if let Some(i) = incoming {
                steps.push(MigrationStep::SetAside {
                    path: i.path.clone(),
                    kind: Aside::Incomplete,
                });
            }
            steps.extend(snapshot_step(layout, paths, member_name, src, ids));
            steps.extend(finish_copy_steps(
                src,
                v.path.clone(),
                &canon_dir,
                canonical,
            ));
            return Migration::Migrate {
                from: src.path.clone(),
                ids,
                method: Method::Copy {
                    why: "resuming: the copy was verified".into(),
                },
                stop_etcd: true,
                steps,
            };
        }
        let mut steps = vec![MigrationStep::SetAside {
            path: v.path.clone(),
            kind: Aside::Stale,
        }];
        steps.extend(move_steps(layout, paths, member_name, src, ids, &canon_dir).1);
        return Migration::Migrate {
            from: src.path.clone(),
            ids,
            method: method(layout, src, canonical),
            stop_etcd: true,
            steps,
        };
    }

    let mut steps = Vec::new();
    if let Some(v) = m
        .verified
        .as_ref()
        .filter(|v| !v.empty && verified_ids.is_none())
    {
        steps.push(MigrationStep::SetAside {
            path: v.path.clone(),
            kind: Aside::Incomplete,
        });
    }
    let (method, more) = move_steps(layout, paths, member_name, src, ids, &canon_dir);
    steps.extend(more);
    Migration::Migrate {
        from: src.path.clone(),
        ids,
        method,
        stop_etcd: true,
        steps,
    }
}

fn method(layout: &DiskLayout, src: &Location, canonical: Option<&Location>) -> Method {
    if layout.migration.force_copy {
        return Method::Copy {
            why: format!("forced by {FORCE_ENV}=copy"),
        };
    }
    if src.facts.wal_dir.is_some() {
        return Method::Copy {
            why: "the WAL lives in a separate wal-dir".into(),
        };
    }
    let canon_dev = canonical.and_then(|c| c.facts.device);
    match (src.facts.device, canon_dev) {
        (Some(a), Some(b)) if a == b => Method::Rename,
        _ => Method::Copy {
            why: "the member is on another file system".into(),
        },
    }
}

/// Snapshot (unless a fresh one exists), then rename or copy, for a source
/// that still holds the member. Clears a leftover `member.incoming` first.
fn move_steps(
    layout: &DiskLayout,
    paths: &Paths,
    member_name: &str,
    src: &Location,
    ids: WalIds,
    canon_dir: &Path,
) -> (Method, Vec<MigrationStep>) {
    let canonical = layout.locations.iter().find(|l| l.role == Role::Canonical);
    let method = method(layout, src, canonical);
    let mut steps = Vec::new();
    if let Some(i) = layout.migration.incoming.as_ref().filter(|i| !i.empty) {
        steps.push(MigrationStep::SetAside {
            path: i.path.clone(),
            kind: Aside::Incomplete,
        });
    }
    steps.extend(walless_canonical(canonical, canon_dir));
    steps.extend(snapshot_step(layout, paths, member_name, src, ids));
    match &method {
        Method::Rename | Method::InPlace => steps.push(MigrationStep::Rename {
            from: src.path.join("member"),
            to: canon_dir.join("member"),
        }),
        Method::Copy { .. } => {
            let incoming = canon_dir.join(INCOMING);
            let verified = canon_dir.join(VERIFIED);
            steps.push(MigrationStep::Copy {
                from: src.path.join("member"),
                wal_dir: src.facts.wal_dir.clone(),
                to: incoming.clone(),
            });
            steps.push(MigrationStep::Verify {
                from: src.path.join("member"),
                wal_dir: src.facts.wal_dir.clone(),
                copy: incoming,
                ids,
                to: verified.clone(),
            });
            steps.extend(finish_copy_steps(src, verified, canon_dir, None));
        }
    }
    (method, steps)
}

/// Set the source aside (its wal-dir first, so a kill in between leaves no
/// second WAL of this member), then put the verified copy in place.
fn finish_copy_steps(
    src: &Location,
    verified: PathBuf,
    canon_dir: &Path,
    canonical: Option<&Location>,
) -> Vec<MigrationStep> {
    let mut steps = Vec::new();
    if let Some(w) = &src.facts.wal_dir {
        steps.push(MigrationStep::SetAsideWalDir { wal_dir: w.clone() });
    }
    steps.push(MigrationStep::SetAside {
        path: src.path.join("member"),
        kind: Aside::Migrated,
    });
    steps.extend(walless_canonical(canonical, canon_dir));
    steps.push(MigrationStep::MoveIntoPlace {
        from: verified,
        to: canon_dir.join("member"),
    });
    steps
}

/// A `member/` in the canonical dir without a WAL (a failed start on an
/// empty dir leaves one) must go aside before the member can take its place.
fn walless_canonical(canonical: Option<&Location>, canon_dir: &Path) -> Option<MigrationStep> {
    canonical
        .filter(|c| c.facts.member_dir && matches!(c.member, Ok(None)))
        .map(|_| MigrationStep::SetAside {
            path: canon_dir.join("member"),
            kind: Aside::NoWal,
        })
}

fn snapshot_step(
    layout: &DiskLayout,
    paths: &Paths,
    member_name: &str,
    src: &Location,
    ids: WalIds,
) -> Option<MigrationStep> {
    let fresh = layout.migration.snapshots.iter().any(|s| {
        s.member_id == ids.member_id
            && matches!((s.newest_change, src.facts.newest_change), (Some(taken), Some(changed)) if taken >= changed)
    });
    (!fresh).then(|| MigrationStep::Snapshot {
        member_dir: src.path.join("member"),
        name: member_name.to_string(),
        ids,
        backup_dir: paths.backup_dir(),
    })
}
