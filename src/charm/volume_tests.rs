//! The volume's part of the plan, on frozen facts.

use super::plan::{plan, Step};
use super::plan_tests::{fresh, healthy_leader, member, sees};
use crate::context::Event;
use crate::hooktools::StatusKind;
use crate::paths::Paths;
use crate::storage::{Device, Mounted, Signature, StorageFacts, VolumeStep};
use std::path::PathBuf;

fn attached(sig: Signature) -> StorageFacts {
    StorageFacts {
        mount_point: PathBuf::from("/r/media/etcd"),
        device: Some(Device {
            id: Some("data/0".into()),
            path: PathBuf::from("/dev/loop7"),
            signature: sig,
        }),
        attaching: true,
        ..Default::default()
    }
}

fn volume_steps(steps: &[Step]) -> Vec<&VolumeStep> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Volume(v) => Some(v),
            _ => None,
        })
        .collect()
}

fn blocked(p: &super::plan::Plan) -> Option<&str> {
    p.status
        .iter()
        .find(|(k, _)| *k == StatusKind::Blocked)
        .map(|(_, m)| m.as_str())
}

#[test]
fn an_empty_device_is_formatted_mounted_and_put_in_fstab_and_nothing_else() {
    let mut o = fresh(true);
    o.event = Event::Storage {
        name: "data".into(),
        attached: true,
    };
    o.storage = attached(Signature::Empty);
    let p = plan(&o, &Paths::new("/r"), None);
    let v = volume_steps(&p.steps);
    assert!(matches!(v[0], VolumeStep::Format { .. }), "{v:?}");
    assert!(matches!(v[1], VolumeStep::Mount { fs_type, .. } if fs_type == "ext4"));
    assert!(matches!(v[2], VolumeStep::WriteFstab { .. }));
    assert_eq!(p.steps.len(), 3, "the volume first, alone: {:?}", p.steps);
}

#[test]
fn a_device_with_a_file_system_is_mounted_never_formatted() {
    let mut o = fresh(true);
    o.storage = attached(Signature::FileSystem {
        fs_type: "xfs".into(),
        uuid: Some("u".into()),
    });
    let p = plan(&o, &Paths::new("/r"), None);
    let v = volume_steps(&p.steps);
    assert!(
        !v.iter().any(|s| matches!(s, VolumeStep::Format { .. })),
        "{v:?}"
    );
    assert!(matches!(v[0], VolumeStep::Mount { fs_type, .. } if fs_type == "xfs"));
}

#[test]
fn a_device_with_another_signature_or_data_blocks_untouched() {
    for sig in [
        Signature::Other("swap (other)".into()),
        Signature::Data,
        Signature::Unreadable("EIO".into()),
    ] {
        let mut o = fresh(true);
        o.storage = attached(sig.clone());
        let p = plan(&o, &Paths::new("/r"), None);
        assert!(p.steps.is_empty(), "{sig:?}: {:?}", p.steps);
        let msg = blocked(&p).unwrap_or_else(|| panic!("{sig:?} blocks"));
        assert!(msg.contains("/dev/loop7"), "{msg}");
    }
}

#[test]
fn etcd_is_not_started_while_its_volume_is_not_mounted() {
    let mut o = healthy_leader();
    o.active = false;
    o.storage = StorageFacts {
        mount_point: PathBuf::from("/r/media/etcd"),
        fstab: Some("/dev/vdb /media/etcd ext4 defaults 0 0".into()),
        ..Default::default()
    };
    let p = plan(&o, &Paths::new("/r"), None);
    assert!(!p.steps.contains(&Step::StartEtcd), "{:?}", p.steps);
    assert!(blocked(&p).unwrap().contains("nothing is mounted"));
}

#[test]
fn detaching_withdraws_leaves_the_cluster_stops_and_unmounts_in_that_order() {
    let mut o = healthy_leader();
    sees(
        &mut o,
        vec![
            member(0xaa, "etcd0", "10.0.0.1", false),
            member(0xbb, "etcd1", "10.0.0.2", false),
            member(0xdd, "etcd2", "10.0.0.3", false),
        ],
    );
    o.event = Event::Storage {
        name: "data".into(),
        attached: false,
    };
    o.storage = StorageFacts {
        mount_point: PathBuf::from("/r/media/etcd"),
        fstab: Some("UUID=x /r/media/etcd ext4 defaults,nofail 0 0".into()),
        mounted: Some(Mounted {
            source: "/dev/loop7".into(),
            fs_type: "ext4".into(),
            dev: 7,
        }),
        detaching: true,
        ..Default::default()
    };
    let p = plan(&o, &Paths::new("/r"), None);
    let kinds: Vec<String> = p.steps.iter().map(|s| s.to_string()).collect();
    let pos = |f: &dyn Fn(&Step) -> bool| p.steps.iter().position(f).unwrap();
    let publish =
        pos(&|s| matches!(s, Step::Publish(d) if d.get("peer-url").is_some_and(|v| v.is_empty())));
    let remove = pos(&|s| matches!(s, Step::RemoveMember { id: 0xaa, .. }));
    let stop = pos(&|s| *s == Step::StopEtcd);
    let umount = pos(&|s| matches!(s, Step::Volume(VolumeStep::Unmount { .. })));
    let fstab = pos(&|s| matches!(s, Step::Volume(VolumeStep::RemoveFstab { .. })));
    assert!(
        publish < remove && remove < stop && stop < umount && umount < fstab,
        "{kinds:?}"
    );
}

#[test]
fn the_snap_plug_is_connected_before_etcd_starts_on_the_volume() {
    let mut o = healthy_leader();
    o.active = false;
    o.event = Event::Start;
    o.storage = StorageFacts {
        mount_point: PathBuf::from("/r/media/etcd"),
        fstab: Some("UUID=x /r/media/etcd ext4 defaults,nofail 0 0".into()),
        mounted: Some(Mounted {
            source: "/dev/loop7".into(),
            fs_type: "ext4".into(),
            dev: 7,
        }),
        ..Default::default()
    };
    let p = plan(
        &o,
        &Paths::new("/r").with_data_dir("/media/etcd/data"),
        None,
    );
    let connect = p
        .steps
        .iter()
        .position(|s| *s == Step::Volume(VolumeStep::ConnectMedia));
    let start = p.steps.iter().position(|s| *s == Step::StartEtcd);
    assert!(connect.is_some() && connect < start, "{:?}", p.steps);
    let text = p
        .steps
        .iter()
        .find_map(|s| match s {
            Step::WriteConfig { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap();
    assert!(text.contains("data-dir: \"/r/media/etcd/data\""), "{text}");
}

#[test]
fn something_else_mounted_at_the_mount_point_blocks() {
    let mut o = fresh(true);
    o.storage = attached(Signature::Unreadable("not read: mounted".into()));
    o.storage.mounted = Some(Mounted {
        source: "/dev/sda9".into(),
        fs_type: "ext4".into(),
        dev: 12345,
    });
    let p = plan(&o, &Paths::new("/r"), None);
    assert!(volume_steps(&p.steps).is_empty(), "{:?}", p.steps);
    assert!(blocked(&p).unwrap().contains("/dev/sda9"));
}
