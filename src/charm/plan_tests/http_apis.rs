//! The HTTP APIs a taken-over cluster's clients use stay served.
use super::*;

fn written(o: &Observed) -> String {
    plan(o, &paths(), None)
        .steps
        .iter()
        .find_map(|s| match s {
            Step::WriteConfig { text, .. } => Some(text.clone()),
            _ => None,
        })
        .expect("a config is written")
}

fn with_found(v2: Option<&str>) -> Observed {
    let mut o = healthy_leader();
    let mut found = FoundConfig::default();
    if let Some(v) = v2 {
        found.raw.insert("enable-v2".into(), v.into());
    }
    o.disk.config = Some(Ok(found));
    o
}

#[test]
fn enable_v2_is_kept_where_the_config_on_disk_had_it_and_nowhere_else() {
    assert!(written(&with_found(Some("true"))).contains("\nenable-v2: true\n"));
    for v2 in [None, Some("false"), Some("")] {
        let text = written(&with_found(v2));
        assert!(!text.contains("\nenable-v2:"), "{v2:?}: {text}");
    }
}

#[test]
fn the_json_gateway_is_always_served() {
    for v2 in [None, Some("true")] {
        assert!(written(&with_found(v2)).contains("\nenable-grpc-gateway: true\n"));
    }
}
