//! Which hooks Juju queues, on which units, in what order. Each function is
//! one trigger (a deploy, a unit entering a relation, a databag change, a
//! leader-set, a removal...) and only appends to unit queues or moves
//! relation membership; the scheduler runs the queues.

use crate::sim::model::{app_of, Agent, Event, HookKind, Life, Member, Model, Unit};

/// Appends a hook, coalescing it with an identical one still pending (Juju
/// runs one `-relation-changed` for several changes, and so on).
pub fn enqueue(unit: &mut Unit, ev: Event) {
    if ev.coalesces() && pending(unit).any(|q| *q == ev) {
        return;
    }
    unit.queue.push_back(ev);
}

/// The queued hooks not yet started (the head may be running).
fn pending(unit: &Unit) -> impl Iterator<Item = &Event> {
    unit.queue.iter().skip(running(unit))
}

fn running(unit: &Unit) -> usize {
    usize::from(matches!(unit.agent, Agent::Executing(_)))
}

/// Drops the queued hooks not yet started for which `drop` holds.
fn drop_pending_where(unit: &mut Unit, drop: impl Fn(&Event) -> bool) {
    let keep_head = running(unit);
    let mut i = 0;
    unit.queue.retain(|ev| {
        i += 1;
        i <= keep_head || !drop(ev)
    });
}

/// The hooks a new unit runs: storage-attached, install, the peer (and any
/// existing cross-application) relation-created hooks, leader-elected or
/// leader-settings-changed, config-changed, start.
pub fn new_unit(model: &mut Model, unit: &str) {
    let app = app_of(unit).to_string();
    let leader = model.is_leader(unit);
    let mut evs: Vec<Event> = model.units[unit]
        .storage
        .iter()
        .map(|s| Event::storage(HookKind::StorageAttached, &s.name))
        .collect();
    evs.push(Event::simple(HookKind::Install));
    let mut rels: Vec<(bool, u32)> = model
        .relations
        .values()
        .filter(|r| r.endpoint_of(&app).is_some())
        .map(|r| (!r.is_peer(), r.id))
        .collect();
    rels.sort();
    for (_, id) in rels {
        evs.push(created_event(model, id, &app));
    }
    evs.push(Event::simple(if leader {
        HookKind::LeaderElected
    } else {
        HookKind::LeaderSettingsChanged
    }));
    evs.push(Event::simple(HookKind::ConfigChanged));
    evs.push(Event::simple(HookKind::Start));
    model
        .units
        .get_mut(unit)
        .expect("unit exists")
        .queue
        .extend(evs);
}

fn created_event(model: &Model, rel: u32, app: &str) -> Event {
    let r = &model.relations[&rel];
    let ep = &r.endpoint_of(app).expect("app in relation").name;
    Event::relation(
        HookKind::RelationCreated,
        ep,
        rel,
        r.remote_app_of(app).unwrap_or(app),
    )
}

/// A relation was added (integrate): every unit of both sides runs
/// `-relation-created`.
pub fn relation_added(model: &mut Model, rel: u32) {
    let apps: Vec<String> = model.relations[&rel]
        .endpoints
        .iter()
        .map(|e| e.app.clone())
        .collect();
    for app in apps {
        for unit in model.units_of(&app) {
            if model.units[&unit].life == Life::Alive {
                let ev = created_event(model, rel, &app);
                enqueue(model.units.get_mut(&unit).expect("listed"), ev);
            }
        }
    }
}

fn relation_event(model: &Model, kind: HookKind, rel: u32, receiver: &str, remote: &str) -> Event {
    let r = &model.relations[&rel];
    let ep = &r
        .endpoint_of(app_of(receiver))
        .expect("receiver in relation")
        .name;
    Event::relation(kind, ep, rel, app_of(remote)).with_remote_unit(remote)
}

/// Whether `a` and `b` see each other in the relation: any two units of a
/// peer relation; units of different applications otherwise.
fn counterparts(model: &Model, rel: u32, a: &str, b: &str) -> bool {
    a != b && (model.relations[&rel].is_peer() || app_of(a) != app_of(b))
}

/// After its `-relation-created` succeeded, a unit is in scope: it and every
/// live counterpart already in scope join each other (joined, then changed).
pub fn enter_scope(model: &mut Model, rel: u32, unit: &str) {
    if model.units.get(unit).is_none_or(|u| u.life != Life::Alive) {
        return;
    }
    let Some(r) = model.relations.get_mut(&rel) else {
        return;
    };
    r.members.entry(unit.to_string()).or_default().in_scope = true;
    let others: Vec<String> = model.relations[&rel]
        .members
        .iter()
        .filter(|(name, m)| {
            m.in_scope
                && model
                    .units
                    .get(*name)
                    .is_some_and(|u| u.life == Life::Alive)
        })
        .map(|(name, _)| name.clone())
        .filter(|name| counterparts(model, rel, unit, name))
        .collect();
    for other in others {
        for (receiver, remote) in [(other.as_str(), unit), (unit, other.as_str())] {
            let joined = relation_event(model, HookKind::RelationJoined, rel, receiver, remote);
            let changed = relation_event(model, HookKind::RelationChanged, rel, receiver, remote);
            let u = model.units.get_mut(receiver).expect("member is a unit");
            u.queue.push_back(joined);
            enqueue(u, changed);
        }
    }
}

/// A unit's databag changed: each counterpart that has joined it runs
/// `-relation-changed` for it.
pub fn unit_bag_changed(model: &mut Model, rel: u32, unit: &str) {
    let receivers: Vec<String> = model.relations[&rel]
        .members
        .iter()
        .filter(|(_, m)| m.joined.contains(unit))
        .map(|(name, _)| name.clone())
        .collect();
    for receiver in receivers {
        let ev = relation_event(model, HookKind::RelationChanged, rel, &receiver, unit);
        if let Some(u) = model.units.get_mut(&receiver) {
            enqueue(u, ev);
        }
    }
}

/// An application databag changed: the units that may read it (the other
/// side; every other unit in a peer relation) run `-relation-changed` with
/// no remote unit.
pub fn app_bag_changed(model: &mut Model, rel: u32, app: &str, writer: &str) {
    let r = &model.relations[&rel];
    let receivers: Vec<String> = r
        .members
        .keys()
        .filter(|name| name.as_str() != writer && (r.is_peer() || app_of(name) != app))
        .cloned()
        .collect();
    for receiver in receivers {
        let ep = &model.relations[&rel]
            .endpoint_of(app_of(&receiver))
            .expect("member")
            .name;
        let ev = Event::relation(HookKind::RelationChanged, ep, rel, app);
        if let Some(u) = model.units.get_mut(&receiver) {
            enqueue(u, ev);
        }
    }
}

/// After a leader-set: every other unit of the application.
pub fn leader_settings_changed(model: &mut Model, app: &str) {
    for unit in model.units_of(app) {
        if !model.is_leader(&unit) {
            enqueue(
                model.units.get_mut(&unit).expect("listed"),
                Event::simple(HookKind::LeaderSettingsChanged),
            );
        }
    }
}

/// Every unit of the application gets `kind` (config-changed, update-status).
pub fn to_all(model: &mut Model, app: &str, kind: HookKind) {
    for unit in model.units_of(app) {
        enqueue(
            model.units.get_mut(&unit).expect("listed"),
            Event::simple(kind),
        );
    }
}

/// `juju refresh`: upgrade-charm → config-changed → leader-settings-changed
/// (non-leaders) → start, on each of `units`.
pub fn refreshed(model: &mut Model, units: &[String]) {
    for unit in units {
        let leader = model.is_leader(unit);
        let u = model.units.get_mut(unit).expect("listed");
        u.queue.push_back(Event::simple(HookKind::UpgradeCharm));
        u.queue.push_back(Event::simple(HookKind::ConfigChanged));
        if !leader {
            u.queue
                .push_back(Event::simple(HookKind::LeaderSettingsChanged));
        }
        u.queue.push_back(Event::simple(HookKind::Start));
    }
}

/// A relation removed outright (a peer endpoint a refresh dropped): it and
/// its databags are gone, and no unit runs a hook of it any more.
pub fn forget_relation(model: &mut Model, rel: u32) {
    model.relations.remove(&rel);
    for u in model.units.values_mut() {
        drop_pending_where(u, |ev| ev.relation == Some(rel));
    }
}

/// Leadership moves to `unit`, which runs leader-elected.
pub fn elect(model: &mut Model, unit: &str) {
    let app = app_of(unit).to_string();
    if let Some(a) = model.applications.get_mut(&app) {
        a.leader = Some(unit.to_string());
    }
    if let Some(u) = model.units.get_mut(unit) {
        u.queue.push_back(Event::simple(HookKind::LeaderElected));
    }
}

/// `remove-unit`: the unit leaves every relation (departed for each unit it
/// joined, and on each unit that joined it; then broken), then stop,
/// storage-detaching, remove. Hooks about joins not yet run are dropped on
/// both sides, since neither side saw the other.
pub fn begin_removal(model: &mut Model, unit: &str) {
    let u = model.units.get_mut(unit).expect("unit exists");
    u.life = Life::Dying;
    // A dying unit enters no relation it has not entered yet.
    drop_pending_where(u, |ev| ev.kind == HookKind::RelationCreated);
    let mut rels: Vec<(bool, u32)> = model
        .relations
        .values()
        .filter(|r| r.members.contains_key(unit))
        .map(|r| (!r.is_peer(), r.id))
        .collect();
    rels.sort();
    for (_, rel) in rels {
        let members: Vec<(String, Member)> = model.relations[&rel]
            .members
            .iter()
            .map(|(n, m)| (n.clone(), m.clone()))
            .collect();
        // Pending joins are forgotten on the dying unit.
        drop_pending(model, unit, rel, None);
        for (other, m) in &members {
            if !counterparts(model, rel, unit, other) {
                continue;
            }
            drop_pending(model, other, rel, Some(unit));
            if m.joined.contains(unit) {
                let ev = relation_event(model, HookKind::RelationDeparted, rel, other, unit);
                let ev = Event {
                    departing_unit: Some(unit.to_string()),
                    ..ev
                };
                model
                    .units
                    .get_mut(other)
                    .expect("member")
                    .queue
                    .push_back(ev);
            }
        }
        let mine = members
            .iter()
            .find(|(n, _)| n == unit)
            .map(|(_, m)| m.joined.clone())
            .unwrap_or_default();
        for remote in mine {
            let ev = relation_event(model, HookKind::RelationDeparted, rel, unit, &remote);
            let ev = Event {
                departing_unit: Some(unit.to_string()),
                ..ev
            };
            model.units.get_mut(unit).expect("unit").queue.push_back(ev);
        }
        let app = app_of(unit).to_string();
        let broken = {
            let r = &model.relations[&rel];
            let ep = &r.endpoint_of(&app).expect("member").name;
            Event::relation(
                HookKind::RelationBroken,
                ep,
                rel,
                r.remote_app_of(&app).unwrap_or(&app),
            )
        };
        model
            .units
            .get_mut(unit)
            .expect("unit")
            .queue
            .push_back(broken);
    }
    let u = model.units.get_mut(unit).expect("unit");
    u.queue.push_back(Event::simple(HookKind::Stop));
    for s in &u.storage {
        u.queue
            .push_back(Event::storage(HookKind::StorageDetaching, &s.name));
    }
    u.queue.push_back(Event::simple(HookKind::Remove));
}

/// Drops pending joined/changed hooks of `rel` on `unit` (about `remote`
/// only, when given).
fn drop_pending(model: &mut Model, unit: &str, rel: u32, remote: Option<&str>) {
    let Some(u) = model.units.get_mut(unit) else {
        return;
    };
    drop_pending_where(u, |ev| {
        matches!(
            ev.kind,
            HookKind::RelationJoined | HookKind::RelationChanged
        ) && ev.relation == Some(rel)
            && ev.remote_unit.is_some()
            && remote.is_none_or(|r| ev.remote_unit.as_deref() == Some(r))
    });
}

/// After a successful `remove`: the unit is gone; a new leader is chosen if
/// it led, and runs leader-elected.
pub fn finish_removal(model: &mut Model, unit: &str) {
    model.units.remove(unit);
    model.contexts.retain(|_, c| c.unit != unit);
    for r in model.relations.values_mut() {
        r.members.remove(unit);
        for m in r.members.values_mut() {
            m.joined.remove(unit);
        }
    }
    let app = app_of(unit).to_string();
    let was_leader = model
        .applications
        .get(&app)
        .and_then(|a| a.leader.as_deref())
        == Some(unit);
    if was_leader {
        if let Some(a) = model.applications.get_mut(&app) {
            a.leader = None;
        }
        let next = model
            .units_of(&app)
            .into_iter()
            .find(|u| model.units[u].life == Life::Alive);
        if let Some(next) = next {
            elect(model, &next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::model::{Application, Endpoint, Relation};

    /// An application `a` with `n` units and a peer relation 0 in which
    /// every unit is in scope and has joined every other.
    fn model(n: u32) -> Model {
        let mut m = Model::default();
        m.applications.insert(
            "a".into(),
            Application {
                name: "a".into(),
                leader: Some("a/0".into()),
                ..Default::default()
            },
        );
        let mut rel = Relation {
            id: 0,
            endpoints: vec![Endpoint {
                app: "a".into(),
                name: "peer".into(),
                interface: "x".into(),
                role: "peer".into(),
                scope: "global".into(),
            }],
            ..Default::default()
        };
        let names: Vec<String> = (0..n).map(|i| format!("a/{i}")).collect();
        for name in &names {
            let others = names.iter().filter(|o| *o != name).cloned().collect();
            rel.members.insert(
                name.clone(),
                Member {
                    in_scope: true,
                    joined: others,
                },
            );
            let number = name[2..].parse().unwrap();
            m.units.insert(
                name.clone(),
                Unit {
                    name: name.clone(),
                    app: "a".into(),
                    number,
                    ..Default::default()
                },
            );
        }
        m.relations.insert(0, rel);
        m
    }

    fn queue(m: &Model, unit: &str) -> Vec<String> {
        m.units[unit]
            .queue
            .iter()
            .map(|e| {
                format!(
                    "{}{}",
                    e.name,
                    e.remote_unit
                        .as_deref()
                        .map(|r| format!(" {r}"))
                        .unwrap_or_default()
                )
            })
            .collect()
    }

    #[test]
    fn pending_changed_hooks_coalesce() {
        let mut m = model(2);
        unit_bag_changed(&mut m, 0, "a/1");
        unit_bag_changed(&mut m, 0, "a/1");
        leader_settings_changed(&mut m, "a");
        leader_settings_changed(&mut m, "a");
        assert_eq!(queue(&m, "a/0"), ["peer-relation-changed a/1"]);
        assert_eq!(queue(&m, "a/1"), ["leader-settings-changed"]);
    }

    #[test]
    fn a_running_hook_does_not_absorb_a_new_one() {
        let mut m = model(2);
        leader_settings_changed(&mut m, "a");
        m.units.get_mut("a/1").unwrap().agent = Agent::Executing("leader-settings-changed".into());
        leader_settings_changed(&mut m, "a");
        assert_eq!(
            queue(&m, "a/1"),
            ["leader-settings-changed", "leader-settings-changed"]
        );
    }

    #[test]
    fn removal_departs_both_ways_then_breaks_stops_removes() {
        let mut m = model(3);
        begin_removal(&mut m, "a/2");
        assert_eq!(
            queue(&m, "a/2"),
            [
                "peer-relation-departed a/0",
                "peer-relation-departed a/1",
                "peer-relation-broken",
                "stop",
                "remove"
            ]
        );
        assert_eq!(queue(&m, "a/0"), ["peer-relation-departed a/2"]);
        let departing: Vec<_> = m.units["a/0"]
            .queue
            .iter()
            .map(|e| e.departing_unit.clone())
            .collect();
        assert_eq!(departing, [Some("a/2".to_string())]);
    }

    #[test]
    fn removal_forgets_joins_not_yet_run() {
        let mut m = model(2);
        // a/2 entered scope; nobody has run the joins yet.
        m.units.insert(
            "a/2".into(),
            Unit {
                name: "a/2".into(),
                app: "a".into(),
                number: 2,
                ..Default::default()
            },
        );
        enter_scope(&mut m, 0, "a/2");
        assert_eq!(
            queue(&m, "a/0"),
            ["peer-relation-joined a/2", "peer-relation-changed a/2"]
        );
        begin_removal(&mut m, "a/2");
        assert!(queue(&m, "a/0").is_empty(), "{:?}", queue(&m, "a/0"));
        assert_eq!(queue(&m, "a/2"), ["peer-relation-broken", "stop", "remove"]);
    }

    #[test]
    fn removing_the_leader_elects_the_next_live_unit() {
        let mut m = model(3);
        m.units.get_mut("a/1").unwrap().life = Life::Dying;
        finish_removal(&mut m, "a/0");
        assert_eq!(m.applications["a"].leader.as_deref(), Some("a/2"));
        assert_eq!(queue(&m, "a/2"), ["leader-elected"]);
        assert!(!m.relations[&0].members["a/2"].joined.contains("a/0"));
    }
}
