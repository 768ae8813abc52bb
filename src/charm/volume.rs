//! The `data` storage volume in the plan (pure): prepare an attached device
//! (format only an empty one, mount it at /media/etcd, fstab), refuse to run
//! etcd on a volume that is not mounted, and on detaching leave the cluster
//! as a departing unit does, stop etcd, then unmount.

use super::leader::plan_stop;
use super::observed::Observed;
use super::steps::{Plan, Step};
use crate::context::Event;
use crate::hooktools::StatusKind;
use crate::storage::{Signature, VolumeStep};

/// Plans the volume's steps. True: the pass ends here (the volume is being
/// prepared or released, or etcd must not run); the next pass plans the
/// rest with the volume as observed then.
pub(super) fn plan_volume(o: &Observed, p: &mut Plan) -> bool {
    let s = &o.storage;
    let mp = s.mount_point.clone();
    if s.detaching {
        // A unit that stays in the model without its data must not be
        // taken for a joiner (the leader adds every unit with a peer URL):
        // withdraw what it published.
        let withdraw: crate::hooktools::Databag = ["peer-url", "client-url", "member-id"]
            .into_iter()
            .filter(|k| o.own_bag.get(*k).is_some_and(|v| !v.is_empty()))
            .map(|k| (k.to_string(), String::new()))
            .collect();
        if o.peer_relation.is_some() && !withdraw.is_empty() {
            p.steps.push(Step::Publish(withdraw));
        }
        // Out of the cluster while quorum allows (a departing unit's rule),
        // etcd stopped; never running on a mount about to vanish.
        plan_stop(o, p);
        if s.mounted.is_some() {
            p.steps.push(Step::Volume(VolumeStep::Unmount {
                mount_point: mp.clone(),
            }));
        }
        if s.fstab.is_some() {
            p.steps
                .push(Step::Volume(VolumeStep::RemoveFstab { mount_point: mp }));
        }
        p.status.push((
            StatusKind::Blocked,
            "the data storage was detached: this unit left the cluster and etcd is stopped; attach storage again or remove the unit".into(),
        ));
        return true;
    }
    let block = |p: &mut Plan, msg: String| {
        p.status.push((StatusKind::Blocked, msg));
        true
    };
    if let Some(d) = &s.device {
        let dev = d.path.display();
        match (&s.mounted, &d.signature) {
            (Some(m), _) if !s.mounted_is_device() => {
                return block(
                    p,
                    format!(
                        "{} is mounted from {}, not from the attached storage {dev}; unmount it or fix fstab",
                        mp.display(),
                        m.source
                    ),
                );
            }
            (Some(_), _) => {}
            (None, sig) => {
                let fs_type = match sig {
                    Signature::Empty => {
                        p.steps.push(Step::Volume(VolumeStep::Format {
                            device: d.path.clone(),
                        }));
                        "ext4".to_string()
                    }
                    Signature::FileSystem { fs_type, .. } => fs_type.clone(),
                    Signature::Directory => "none".to_string(),
                    Signature::Other(what) => {
                        return block(p, format!("the storage {dev} holds {what}, not a file system: it is not formatted; wipe it (wipefs) if it may be, or attach another"));
                    }
                    Signature::Data => {
                        return block(p, format!("the storage {dev} holds data but no file system signature: it is not formatted; wipe it if it may be, or attach another"));
                    }
                    Signature::Unreadable(why) => {
                        return block(
                            p,
                            format!("cannot tell what the storage {dev} holds: {why}"),
                        );
                    }
                };
                p.steps.push(Step::Volume(VolumeStep::Mount {
                    device: d.path.clone(),
                    fs_type,
                    mount_point: mp.clone(),
                }));
                p.steps.push(Step::Volume(VolumeStep::WriteFstab {
                    device: d.path.clone(),
                    mount_point: mp,
                }));
                p.status
                    .push((StatusKind::Maintenance, "Preparing the data storage".into()));
                return true;
            }
        }
        if s.fstab.is_none() {
            p.steps.push(Step::Volume(VolumeStep::WriteFstab {
                device: d.path.clone(),
                mount_point: mp.clone(),
            }));
        }
    }
    if s.in_use() && s.mounted.is_none() {
        let why = match (&s.fstab, s.config_on_volume) {
            (Some(line), _) => format!("fstab mounts it ({line})"),
            (None, _) => "etcd.conf.yml's data-dir is on it".to_string(),
        };
        return block(
            p,
            format!(
                "etcd's data is on the storage volume at {} ({why}) but nothing is mounted there; etcd is not started on the bare directory: mount the volume or attach the storage",
                mp.display()
            ),
        );
    }
    // The snap's etcd is confined: it reaches /media only through its
    // removable-media plug (the Python charm connected it too). Connecting
    // is idempotent; done in the hooks that (re)start a unit, once etcd is
    // installed.
    let settling = matches!(o.event, Event::Install | Event::UpgradeCharm | Event::Start);
    if s.in_use() && s.mounted.is_some() && o.etcd_version.is_some() && settling {
        p.steps.push(Step::Volume(VolumeStep::ConnectMedia));
    }
    // The attached hook prepares the volume only: install and the hooks
    // after it do the rest.
    s.attaching
}
