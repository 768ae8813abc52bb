//! What this unit's member runs, published on the peer relation once it is
//! running it: `config-hash`, a digest of the etcd.conf.yml etcd was
//! (re)started on, and `etcd-version`, the version the member reports (a
//! `channel` upgrade restarts etcd on the same config).
//!
//! Why: a peer's status counts the voters that answer when its hook runs.
//! A hook that ran while another member was restarting in its rolling
//! turn ends on "Healthy with 2 known peers", and nothing else in the model
//! changes to run it again. Publishing after the restart is that change:
//! every peer runs `cluster-relation-changed` once the member is back, so
//! the last word on each unit comes after the last restart. An operator
//! also reads the rollout from `juju show-unit`: a unit whose hash did not
//! change has not taken the new config yet.

use super::observed::Observed;
use super::steps::{Plan, Step};
use crate::hooktools::Databag;

pub const KEY: &str = "config-hash";
pub const VERSION_KEY: &str = "etcd-version";

/// The first 16 hex digits of the text's SHA-256: enough to tell configs
/// apart, short enough to read in `juju show-unit`.
pub fn config_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(text.as_bytes());
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Adds the publish when the member runs the config on disk and no step of
/// this plan writes, stops or (re)starts anything. Pure.
pub fn plan(o: &Observed, p: &mut Plan) {
    let busy = p.steps.iter().any(|s| {
        matches!(
            s,
            Step::WriteConfig { .. }
                | Step::StartEtcd
                | Step::StopEtcd
                | Step::RestartEtcd
                | Step::Migrate(_)
                | Step::MoveDataAside { .. }
                | Step::SnapUpgrade(_)
        )
    });
    let (Some(text), true, false, Some(_)) = (&o.config_text, o.active, busy, &o.peer_relation)
    else {
        return;
    };
    let Some(local) = &o.local else {
        // Running but not answering: not yet what it was started on.
        return;
    };
    let mut bag = Databag::new();
    let hash = config_hash(text);
    if o.own_bag.get(KEY) != Some(&hash) {
        bag.insert(KEY.into(), hash);
    }
    let version = &local.status.version;
    if !version.is_empty() && o.own_bag.get(VERSION_KEY) != Some(version) {
        bag.insert(VERSION_KEY.into(), version.clone());
    }
    if !bag.is_empty() {
        p.steps.push(Step::Publish(bag));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::charm::plan_tests::{fresh, member, view};

    fn running(text: &str) -> Observed {
        let mut o = fresh(true);
        o.config_text = Some(text.into());
        o.active = true;
        o.peer_relation = Some("cluster:0".into());
        let me = member(0xaa, "etcd0", "10.0.0.1", false);
        o.local = Some(view(0xcc, 0xaa, vec![me]));
        o
    }

    fn published(p: &Plan) -> Option<String> {
        p.steps.iter().find_map(|s| match s {
            Step::Publish(b) => b.get(KEY).cloned(),
            _ => None,
        })
    }

    #[test]
    fn a_running_member_publishes_the_hash_of_its_config_once() {
        let o = running("name: etcd0\n");
        let mut p = Plan::default();
        plan(&o, &mut p);
        let h = published(&p).expect("published");
        assert_eq!(h, config_hash("name: etcd0\n"));
        assert_eq!(h.len(), 16);
        assert_ne!(h, config_hash("name: etcd1\n"));

        let mut o = o;
        o.own_bag.insert(KEY.into(), h);
        let mut p = Plan::default();
        plan(&o, &mut p);
        assert_eq!(published(&p), None, "published again: {:?}", p.steps);
    }

    /// A channel upgrade restarts etcd on the same config: the new version
    /// is the change that runs every peer's hook once the member is back.
    #[test]
    fn a_member_back_on_another_version_publishes_it() {
        let mut o = running("name: etcd0\n");
        o.own_bag.insert(KEY.into(), config_hash("name: etcd0\n"));
        o.local.as_mut().unwrap().status.version = "3.4.30".into();
        let bag_of = |o: &Observed| {
            let mut p = Plan::default();
            plan(o, &mut p);
            p.steps.iter().find_map(|s| match s {
                Step::Publish(b) => Some(b.clone()),
                _ => None,
            })
        };
        let bag = bag_of(&o).expect("published");
        assert_eq!(bag.get(VERSION_KEY).map(String::as_str), Some("3.4.30"));
        assert_eq!(bag.get(KEY), None, "the hash did not change: {bag:?}");
        o.own_bag.insert(VERSION_KEY.into(), "3.4.30".into());
        assert_eq!(bag_of(&o), None);
        o.local.as_mut().unwrap().status.version = "3.5.16".into();
        let bag = bag_of(&o).expect("published after the upgrade");
        assert_eq!(bag.get(VERSION_KEY).map(String::as_str), Some("3.5.16"));
    }

    #[test]
    fn nothing_is_published_while_a_restart_or_write_is_pending_or_etcd_is_down() {
        let o = running("a\n");
        for step in [Step::RestartEtcd, Step::StartEtcd, Step::StopEtcd] {
            let mut p = Plan::default();
            p.steps.push(step.clone());
            plan(&o, &mut p);
            assert_eq!(published(&p), None, "with {step:?}");
        }
        // A config on disk that is not the one wanted: the plan writes it.
        let mut stale = crate::charm::plan_tests::healthy_leader();
        stale.config_text = Some("name: old\n".into());
        let p = crate::charm::plan::plan(&stale, &crate::paths::Paths::new("/srv/t"), None);
        assert!(p
            .steps
            .iter()
            .any(|s| matches!(s, Step::WriteConfig { .. })));
        assert_eq!(published(&p), None, "{:?}", p.steps);
        let mut down = running("a\n");
        down.active = false;
        let mut p = Plan::default();
        plan(&down, &mut p);
        assert_eq!(published(&p), None);
        let mut silent = running("a\n");
        silent.local = None;
        let mut p = Plan::default();
        plan(&silent, &mut p);
        assert_eq!(published(&p), None);
    }
}
