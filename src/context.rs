//! Which hook or action Juju is running, and the frozen JUJU_* context.
//!
//! Everything here is pure: [`HookContext::from_env`] takes the environment as
//! a map, so every combination Juju can produce (and the broken ones it
//! cannot) is a table row in the tests below.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A hook or action, parsed from `JUJU_DISPATCH_PATH` (`hooks/config-changed`,
/// `actions/snapshot`) or, for `hooks/<name>` links, argv[0]'s basename.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Install,
    Start,
    Stop,
    Remove,
    ConfigChanged,
    UpgradeCharm,
    UpdateStatus,
    LeaderElected,
    LeaderSettingsChanged,
    /// `<endpoint>-relation-{created,joined,changed,departed,broken}`.
    Relation {
        endpoint: String,
        kind: RelationKind,
    },
    /// `<storage>-storage-{attached,detaching}`.
    Storage {
        name: String,
        attached: bool,
    },
    Action(String),
    /// A hook name we do not recognise; the charm exits 0 on it.
    Other(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RelationKind {
    Created,
    Joined,
    Changed,
    Departed,
    Broken,
}

impl RelationKind {
    /// Every kind, in the order Juju runs them for one relation.
    pub const ALL: [RelationKind; 5] = [
        RelationKind::Created,
        RelationKind::Joined,
        RelationKind::Changed,
        RelationKind::Departed,
        RelationKind::Broken,
    ];

    /// The hook-name suffix: `joined`, `broken`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            RelationKind::Created => "created",
            RelationKind::Joined => "joined",
            RelationKind::Changed => "changed",
            RelationKind::Departed => "departed",
            RelationKind::Broken => "broken",
        }
    }

    fn from_suffix(s: &str) -> Option<RelationKind> {
        RelationKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Hooks whose name is fixed, with the spelling Juju uses.
const FIXED_HOOKS: [(&str, Event); 9] = [
    ("install", Event::Install),
    ("start", Event::Start),
    ("stop", Event::Stop),
    ("remove", Event::Remove),
    ("config-changed", Event::ConfigChanged),
    ("upgrade-charm", Event::UpgradeCharm),
    ("update-status", Event::UpdateStatus),
    ("leader-elected", Event::LeaderElected),
    ("leader-settings-changed", Event::LeaderSettingsChanged),
];

impl Event {
    /// Parses `hooks/<name>` / `actions/<name>` or a bare hook name.
    pub fn parse(dispatch_path: &str) -> Event {
        let path = dispatch_path.trim();
        if let Some(action) = path.strip_prefix("actions/") {
            return Event::Action(action.to_string());
        }
        let name = path.strip_prefix("hooks/").unwrap_or(path);
        Event::parse_hook_name(name)
    }

    /// Parses a bare hook name (`config-changed`, `db-relation-joined`).
    pub fn parse_hook_name(name: &str) -> Event {
        if let Some((_, event)) = FIXED_HOOKS.iter().find(|(n, _)| *n == name) {
            return event.clone();
        }
        if let Some((endpoint, suffix)) = name.rsplit_once("-relation-") {
            if let Some(kind) = RelationKind::from_suffix(suffix) {
                if is_juju_name(endpoint) {
                    return Event::Relation {
                        endpoint: endpoint.to_string(),
                        kind,
                    };
                }
            }
        }
        for (suffix, attached) in [("-storage-attached", true), ("-storage-detaching", false)] {
            if let Some(storage) = name.strip_suffix(suffix) {
                if is_juju_name(storage) {
                    return Event::Storage {
                        name: storage.to_string(),
                        attached,
                    };
                }
            }
        }
        Event::Other(name.to_string())
    }

    /// The hook name as Juju spells it (`cluster-relation-joined`), or the action name.
    pub fn name(&self) -> String {
        if let Some((name, _)) = FIXED_HOOKS.iter().find(|(_, e)| e == self) {
            return name.to_string();
        }
        match self {
            Event::Relation { endpoint, kind } => format!("{endpoint}-relation-{}", kind.as_str()),
            Event::Storage {
                name,
                attached: true,
            } => format!("{name}-storage-attached"),
            Event::Storage {
                name,
                attached: false,
            } => format!("{name}-storage-detaching"),
            Event::Action(name) | Event::Other(name) => name.clone(),
            // Fixed hooks were returned above.
            _ => unreachable!("fixed hook {self:?} missing from FIXED_HOOKS"),
        }
    }

    /// `hooks/<name>` or `actions/<name>`, as Juju sets `JUJU_DISPATCH_PATH`.
    pub fn dispatch_path(&self) -> String {
        match self {
            Event::Action(name) => format!("actions/{name}"),
            other => format!("hooks/{}", other.name()),
        }
    }

    pub fn is_action(&self) -> bool {
        matches!(self, Event::Action(_))
    }
}

/// Endpoint and storage names: lowercase letters, digits and `-`, starting
/// with a letter. Anything else is not a relation or storage hook.
fn is_juju_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationContext {
    pub endpoint: String,
    /// `cluster:3`
    pub id: String,
    /// Empty for created/broken hooks.
    pub remote_unit: Option<String>,
    pub remote_app: Option<String>,
    pub departing_unit: Option<String>,
}

/// Everything Juju told this process through its environment, read once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookContext {
    pub event: Event,
    pub charm_dir: PathBuf,
    pub unit_name: String,
    pub model_name: String,
    pub model_uuid: String,
    pub machine_id: String,
    pub juju_version: String,
    pub context_id: String,
    pub relation: Option<RelationContext>,
    pub action_uuid: Option<String>,
    pub storage_location: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextError {
    /// The missing or malformed variable.
    pub variable: String,
    pub problem: String,
}

impl std::fmt::Display for ContextError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.variable, self.problem)
    }
}
impl std::error::Error for ContextError {}

impl ContextError {
    fn new(variable: &str, problem: impl Into<String>) -> Self {
        ContextError {
            variable: variable.to_string(),
            problem: problem.into(),
        }
    }
}

/// Set by Juju for every hook and action (shared/juju-contract.md). The
/// contract also lists `JUJU_HOOK_NAME` and `JUJU_AGENT_SOCKET_ADDRESS`, but
/// nothing here needs them, so their absence is tolerated.
const ALWAYS_SET: [&str; 7] = [
    "JUJU_CHARM_DIR",
    "JUJU_UNIT_NAME",
    "JUJU_MODEL_NAME",
    "JUJU_MODEL_UUID",
    "JUJU_MACHINE_ID",
    "JUJU_VERSION",
    "JUJU_CONTEXT_ID",
];

/// Basenames of argv[0] that are the entry point itself, not a hook link.
const ENTRY_POINTS: [&str; 2] = ["dispatch", "etcd-charm"];

/// The process environment as strings. A variable whose name or value is
/// not UTF-8 cannot be a JUJU_* one we read: its value is converted lossily
/// (and a non-UTF-8 name skipped) instead of panicking like `env::vars`.
pub fn env_map(
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> HashMap<String, String> {
    vars.into_iter()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.to_string_lossy().into_owned())))
        .collect()
}

impl HookContext {
    /// `Ok(None)` when this is not a Juju hook at all (no `JUJU_UNIT_NAME` and
    /// no `JUJU_DISPATCH_PATH`): the binary then behaves as an ordinary CLI.
    /// `argv0` is used when `JUJU_DISPATCH_PATH` is unset (hooks/<name> links).
    pub fn from_env(
        env: &HashMap<String, String>,
        argv0: &str,
    ) -> Result<Option<HookContext>, ContextError> {
        // An empty variable is treated exactly like an unset one.
        let get = |k: &str| env.get(k).map(|v| v.as_str()).filter(|v| !v.is_empty());
        if get("JUJU_DISPATCH_PATH").is_none() && get("JUJU_UNIT_NAME").is_none() {
            return Ok(None);
        }
        for var in ALWAYS_SET {
            if get(var).is_none() {
                return Err(ContextError::new(
                    var,
                    "not set, but Juju sets it for every hook and action; is this really running under Juju?",
                ));
            }
        }
        let required = |k: &str| get(k).unwrap_or_default().to_string();

        let unit_name = required("JUJU_UNIT_NAME");
        if !is_unit_name(&unit_name) {
            return Err(ContextError::new(
                "JUJU_UNIT_NAME",
                format!("{unit_name:?} is not a unit name like etcd/0"),
            ));
        }

        let event = event_from(&get, argv0)?;
        let relation = relation_from(&get, &event)?;

        Ok(Some(HookContext {
            event,
            charm_dir: PathBuf::from(required("JUJU_CHARM_DIR")),
            unit_name,
            model_name: required("JUJU_MODEL_NAME"),
            model_uuid: required("JUJU_MODEL_UUID"),
            machine_id: required("JUJU_MACHINE_ID"),
            juju_version: required("JUJU_VERSION"),
            context_id: required("JUJU_CONTEXT_ID"),
            relation,
            action_uuid: get("JUJU_ACTION_UUID").map(str::to_string),
            storage_location: get("JUJU_STORAGE_LOCATION").map(PathBuf::from),
        }))
    }

    /// Member name etcd knows this unit by: `etcd/0` → `etcd0`.
    pub fn member_name(&self) -> String {
        self.unit_name.replace('/', "")
    }

    /// `etcd/0` → `etcd`.
    pub fn app_name(&self) -> &str {
        self.unit_name.split('/').next().unwrap_or(&self.unit_name)
    }

    /// Juju 4 has no leader-get/leader-set.
    pub fn has_leader_tools(&self) -> bool {
        !self.juju_version.starts_with("4.")
    }
}

/// `app/N`: a Juju name, a slash, a number.
fn is_unit_name(s: &str) -> bool {
    match s.split_once('/') {
        Some((app, n)) => {
            is_juju_name(app) && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

/// The event: `JUJU_DISPATCH_PATH` when set; else argv[0] (a `hooks/<name>`
/// or `actions/<name>` link); else, when argv[0] is the entry point itself,
/// `JUJU_ACTION_NAME` or `JUJU_HOOK_NAME`.
fn event_from<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    argv0: &str,
) -> Result<Event, ContextError> {
    if let Some(path) = get("JUJU_DISPATCH_PATH") {
        return Ok(Event::parse(path));
    }
    let path = Path::new(argv0);
    let base = path
        .file_name()
        .and_then(|b| b.to_str())
        .unwrap_or_default();
    let parent = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|p| p.to_str());
    if !base.is_empty() && !ENTRY_POINTS.contains(&base) {
        return Ok(match parent {
            Some("actions") => Event::Action(base.to_string()),
            _ => Event::parse_hook_name(base),
        });
    }
    // Actions never carry a hook name, so an action name wins.
    if let Some(action) = get("JUJU_ACTION_NAME") {
        return Ok(Event::Action(action.to_string()));
    }
    if let Some(hook) = get("JUJU_HOOK_NAME") {
        return Ok(Event::parse_hook_name(hook));
    }
    Err(ContextError::new(
        "JUJU_DISPATCH_PATH",
        format!(
            "not set, and neither argv[0] ({argv0:?}) nor JUJU_HOOK_NAME/JUJU_ACTION_NAME says which hook is running"
        ),
    ))
}

/// The relation a hook runs for. Required for relation hooks; outside them
/// Juju may still set it (e.g. `juju exec -r`), and then it is kept.
fn relation_from<'a>(
    get: &impl Fn(&str) -> Option<&'a str>,
    event: &Event,
) -> Result<Option<RelationContext>, ContextError> {
    let id = match (get("JUJU_RELATION_ID"), event) {
        (Some(id), _) => id,
        (None, Event::Relation { .. }) => {
            return Err(ContextError::new(
                "JUJU_RELATION_ID",
                "not set, but Juju sets it for every relation hook",
            ))
        }
        (None, _) => return Ok(None),
    };
    let Some((id_endpoint, number)) = id.split_once(':') else {
        return Err(ContextError::new(
            "JUJU_RELATION_ID",
            format!("{id:?} is not a relation id like cluster:3"),
        ));
    };
    if !is_juju_name(id_endpoint)
        || number.is_empty()
        || !number.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(ContextError::new(
            "JUJU_RELATION_ID",
            format!("{id:?} is not a relation id like cluster:3"),
        ));
    }
    let endpoint = get("JUJU_RELATION").unwrap_or(id_endpoint).to_string();
    let remote_unit = get("JUJU_REMOTE_UNIT").map(str::to_string);
    // Juju sets JUJU_REMOTE_APP too; derive it from the unit if an older agent did not.
    let remote_app = get("JUJU_REMOTE_APP").map(str::to_string).or_else(|| {
        remote_unit
            .as_deref()
            .and_then(|u| u.split_once('/'))
            .map(|(app, _)| app.to_string())
    });
    Ok(Some(RelationContext {
        endpoint,
        id: id.to_string(),
        remote_unit,
        remote_app,
        departing_unit: get("JUJU_DEPARTING_UNIT").map(str::to_string),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_map_survives_non_utf8() {
        use std::os::unix::ffi::OsStringExt;
        let bad = std::ffi::OsString::from_vec(vec![b'a', 0xff, b'b']);
        let m = env_map([
            ("JUJU_UNIT_NAME".into(), "etcd/0".into()),
            ("LANG_X".into(), bad.clone()),
            (bad, "v".into()),
        ]);
        assert_eq!(m["JUJU_UNIT_NAME"], "etcd/0");
        assert_eq!(m["LANG_X"], "a\u{fffd}b");
        assert_eq!(m.len(), 2);
    }

    fn rel(endpoint: &str, kind: RelationKind) -> Event {
        Event::Relation {
            endpoint: endpoint.to_string(),
            kind,
        }
    }

    #[test]
    fn parse_table() {
        let cases: Vec<(&str, Event)> = vec![
            ("hooks/install", Event::Install),
            ("hooks/start", Event::Start),
            ("hooks/stop", Event::Stop),
            ("hooks/remove", Event::Remove),
            ("hooks/config-changed", Event::ConfigChanged),
            ("hooks/upgrade-charm", Event::UpgradeCharm),
            ("hooks/update-status", Event::UpdateStatus),
            ("hooks/leader-elected", Event::LeaderElected),
            (
                "hooks/leader-settings-changed",
                Event::LeaderSettingsChanged,
            ),
            ("config-changed", Event::ConfigChanged),
            ("install", Event::Install),
            (
                "hooks/cluster-relation-created",
                rel("cluster", RelationKind::Created),
            ),
            (
                "hooks/cluster-relation-joined",
                rel("cluster", RelationKind::Joined),
            ),
            (
                "hooks/cluster-relation-changed",
                rel("cluster", RelationKind::Changed),
            ),
            (
                "hooks/cluster-relation-departed",
                rel("cluster", RelationKind::Departed),
            ),
            (
                "hooks/cluster-relation-broken",
                rel("cluster", RelationKind::Broken),
            ),
            ("db-relation-joined", rel("db", RelationKind::Joined)),
            (
                "hooks/my-db2-relation-changed",
                rel("my-db2", RelationKind::Changed),
            ),
            // An endpoint may itself contain "relation".
            (
                "hooks/a-relation-b-relation-broken",
                rel("a-relation-b", RelationKind::Broken),
            ),
            (
                "hooks/data-storage-attached",
                Event::Storage {
                    name: "data".into(),
                    attached: true,
                },
            ),
            (
                "hooks/data-storage-detaching",
                Event::Storage {
                    name: "data".into(),
                    attached: false,
                },
            ),
            ("actions/snapshot", Event::Action("snapshot".into())),
            ("actions/health", Event::Action("health".into())),
            // Unknown or malformed: Other, never a panic.
            (
                "hooks/collect-metrics",
                Event::Other("collect-metrics".into()),
            ),
            (
                "hooks/secret-changed",
                Event::Other("secret-changed".into()),
            ),
            (
                "hooks/pre-series-upgrade",
                Event::Other("pre-series-upgrade".into()),
            ),
            (
                "hooks/cluster-relation-exploded",
                Event::Other("cluster-relation-exploded".into()),
            ),
            (
                "hooks/-relation-joined",
                Event::Other("-relation-joined".into()),
            ),
            (
                "hooks/-storage-attached",
                Event::Other("-storage-attached".into()),
            ),
            (
                "hooks/Cluster-relation-joined",
                Event::Other("Cluster-relation-joined".into()),
            ),
            ("relation-joined", Event::Other("relation-joined".into())),
            ("", Event::Other("".into())),
            ("somewhere/else", Event::Other("somewhere/else".into())),
        ];
        for (input, want) in cases {
            assert_eq!(Event::parse(input), want, "parsing {input:?}");
        }
    }

    #[test]
    fn name_round_trips() {
        let mut events: Vec<Event> = FIXED_HOOKS.iter().map(|(_, e)| e.clone()).collect();
        for kind in RelationKind::ALL {
            events.push(rel("cluster", kind));
            events.push(rel("db", kind));
        }
        events.push(Event::Storage {
            name: "data".into(),
            attached: true,
        });
        events.push(Event::Storage {
            name: "data".into(),
            attached: false,
        });
        events.push(Event::Action("snapshot".into()));
        events.push(Event::Other("collect-metrics".into()));
        for e in events {
            assert_eq!(Event::parse(&e.dispatch_path()), e, "round trip of {e:?}");
            if !e.is_action() {
                assert_eq!(Event::parse(&e.name()), e, "bare name of {e:?}");
            }
        }
    }

    #[test]
    fn names_as_juju_spells_them() {
        let cases = [
            (Event::LeaderSettingsChanged, "leader-settings-changed"),
            (
                rel("cluster", RelationKind::Joined),
                "cluster-relation-joined",
            ),
            (
                Event::Storage {
                    name: "data".into(),
                    attached: false,
                },
                "data-storage-detaching",
            ),
            (Event::Action("snapshot".into()), "snapshot"),
            (Event::Other("secret-changed".into()), "secret-changed"),
        ];
        for (e, want) in cases {
            assert_eq!(e.name(), want);
        }
        assert_eq!(
            Event::Action("health".into()).dispatch_path(),
            "actions/health"
        );
        assert_eq!(Event::UpdateStatus.dispatch_path(), "hooks/update-status");
    }

    /// The environment of a plain `config-changed` hook on etcd/0.
    fn base_env() -> HashMap<String, String> {
        [
            ("JUJU_DISPATCH_PATH", "hooks/config-changed"),
            ("JUJU_CHARM_DIR", "/var/lib/juju/agents/unit-etcd-0/charm"),
            ("JUJU_UNIT_NAME", "etcd/0"),
            ("JUJU_MODEL_NAME", "k8s"),
            ("JUJU_MODEL_UUID", "2f6ab9c4-0a0b-4c8e-8a3e-6d1f1c7d1e00"),
            ("JUJU_MACHINE_ID", "3"),
            ("JUJU_HOOK_NAME", "config-changed"),
            ("JUJU_VERSION", "3.6.1"),
            ("JUJU_CONTEXT_ID", "etcd/0-config-changed-123"),
            (
                "JUJU_AGENT_SOCKET_ADDRESS",
                "@/var/lib/juju/agents/unit-etcd-0/agent.socket",
            ),
            ("PATH", "/var/lib/juju/tools/unit-etcd-0:/usr/bin"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// Variables to set (`Some`) or remove (`None`) from [`base_env`].
    type Changes<'a> = Vec<(&'a str, Option<&'a str>)>;

    fn env_with(changes: &[(&str, Option<&str>)]) -> HashMap<String, String> {
        let mut env = base_env();
        for (k, v) in changes {
            match v {
                Some(v) => env.insert(k.to_string(), v.to_string()),
                None => env.remove(*k),
            };
        }
        env
    }

    const CHARM_BIN: &str = "/var/lib/juju/agents/unit-etcd-0/charm/bin/etcd-charm";

    #[test]
    fn full_context() {
        let ctx = HookContext::from_env(&base_env(), CHARM_BIN)
            .unwrap()
            .unwrap();
        assert_eq!(
            ctx,
            HookContext {
                event: Event::ConfigChanged,
                charm_dir: PathBuf::from("/var/lib/juju/agents/unit-etcd-0/charm"),
                unit_name: "etcd/0".into(),
                model_name: "k8s".into(),
                model_uuid: "2f6ab9c4-0a0b-4c8e-8a3e-6d1f1c7d1e00".into(),
                machine_id: "3".into(),
                juju_version: "3.6.1".into(),
                context_id: "etcd/0-config-changed-123".into(),
                relation: None,
                action_uuid: None,
                storage_location: None,
            }
        );
        assert_eq!(ctx.member_name(), "etcd0");
        assert_eq!(ctx.app_name(), "etcd");
        assert!(ctx.has_leader_tools());
    }

    #[test]
    fn not_a_hook() {
        let cases: Vec<HashMap<String, String>> = vec![
            HashMap::new(),
            [("PATH".to_string(), "/usr/bin".to_string())].into(),
            env_with(&[("JUJU_DISPATCH_PATH", None), ("JUJU_UNIT_NAME", None)]),
            env_with(&[
                ("JUJU_DISPATCH_PATH", Some("")),
                ("JUJU_UNIT_NAME", Some("")),
            ]),
        ];
        for env in cases {
            assert_eq!(
                HookContext::from_env(&env, "etcd-charm"),
                Ok(None),
                "{env:?}"
            );
        }
    }

    #[test]
    fn missing_or_malformed_variables() {
        let mut cases: Vec<(Changes, &str)> = ALWAYS_SET
            .iter()
            .filter(|v| **v != "JUJU_UNIT_NAME")
            .flat_map(|v| [(vec![(*v, None)], *v), (vec![(*v, Some(""))], *v)])
            .collect();
        cases.extend([
            // A dispatch path alone is enough to be taken as a hook, and then the unit is missing.
            (vec![("JUJU_UNIT_NAME", None)], "JUJU_UNIT_NAME"),
            (vec![("JUJU_UNIT_NAME", Some("etcd"))], "JUJU_UNIT_NAME"),
            (vec![("JUJU_UNIT_NAME", Some("etcd/x"))], "JUJU_UNIT_NAME"),
            (vec![("JUJU_UNIT_NAME", Some("/0"))], "JUJU_UNIT_NAME"),
            // A unit name alone, with nothing saying which hook runs.
            (
                vec![("JUJU_DISPATCH_PATH", None), ("JUJU_HOOK_NAME", None)],
                "JUJU_DISPATCH_PATH",
            ),
            // Relation hooks need their relation id, well formed.
            (
                vec![("JUJU_DISPATCH_PATH", Some("hooks/cluster-relation-joined"))],
                "JUJU_RELATION_ID",
            ),
            (
                vec![
                    ("JUJU_DISPATCH_PATH", Some("hooks/cluster-relation-joined")),
                    ("JUJU_RELATION_ID", Some("3")),
                ],
                "JUJU_RELATION_ID",
            ),
            (
                vec![
                    ("JUJU_DISPATCH_PATH", Some("hooks/cluster-relation-joined")),
                    ("JUJU_RELATION_ID", Some("cluster:")),
                ],
                "JUJU_RELATION_ID",
            ),
        ]);
        for (changes, var) in cases {
            let env = env_with(&changes);
            let argv0 = if env.contains_key("JUJU_DISPATCH_PATH") {
                CHARM_BIN
            } else {
                "/charm/dispatch"
            };
            let err =
                HookContext::from_env(&env, argv0).expect_err(&format!("{changes:?} should fail"));
            assert_eq!(err.variable, var, "{changes:?}: {err}");
            assert!(err.to_string().starts_with(var), "{err}");
        }
    }

    #[test]
    fn optional_variables_may_be_absent() {
        let env = env_with(&[
            ("JUJU_HOOK_NAME", None),
            ("JUJU_AGENT_SOCKET_ADDRESS", None),
        ]);
        let ctx = HookContext::from_env(&env, CHARM_BIN).unwrap().unwrap();
        assert_eq!(ctx.event, Event::ConfigChanged);
    }

    #[test]
    fn event_sources() {
        // (changes, argv0, expected event)
        let cases: Vec<(Changes, &str, Event)> = vec![
            // JUJU_DISPATCH_PATH wins over everything.
            (vec![], "/charm/hooks/install", Event::ConfigChanged),
            (
                vec![("JUJU_DISPATCH_PATH", Some("actions/snapshot"))],
                CHARM_BIN,
                Event::Action("snapshot".into()),
            ),
            // A hooks/<name> link without dispatch (old Juju, or dispatch not executable).
            (
                vec![("JUJU_DISPATCH_PATH", None)],
                "/charm/hooks/install",
                Event::Install,
            ),
            (
                vec![
                    ("JUJU_DISPATCH_PATH", None),
                    ("JUJU_RELATION", Some("db")),
                    ("JUJU_RELATION_ID", Some("db:1")),
                ],
                "hooks/db-relation-created",
                rel("db", RelationKind::Created),
            ),
            (
                vec![("JUJU_DISPATCH_PATH", None)],
                "update-status",
                Event::UpdateStatus,
            ),
            (
                vec![("JUJU_DISPATCH_PATH", None)],
                "/charm/actions/health",
                Event::Action("health".into()),
            ),
            // The entry point itself: fall back on the hook or action name.
            (
                vec![("JUJU_DISPATCH_PATH", None)],
                "/charm/dispatch",
                Event::ConfigChanged,
            ),
            (
                vec![("JUJU_DISPATCH_PATH", None)],
                "./dispatch",
                Event::ConfigChanged,
            ),
            (
                vec![
                    ("JUJU_DISPATCH_PATH", None),
                    ("JUJU_HOOK_NAME", Some("start")),
                ],
                CHARM_BIN,
                Event::Start,
            ),
            (
                vec![
                    ("JUJU_DISPATCH_PATH", None),
                    ("JUJU_HOOK_NAME", None),
                    ("JUJU_ACTION_NAME", Some("snapshot")),
                    ("JUJU_ACTION_UUID", Some("1a2b")),
                ],
                "/charm/dispatch",
                Event::Action("snapshot".into()),
            ),
            (
                vec![
                    ("JUJU_DISPATCH_PATH", Some("")),
                    ("JUJU_HOOK_NAME", Some("leader-elected")),
                ],
                "dispatch",
                Event::LeaderElected,
            ),
        ];
        for (changes, argv0, want) in cases {
            let ctx = HookContext::from_env(&env_with(&changes), argv0)
                .unwrap()
                .unwrap();
            assert_eq!(ctx.event, want, "{changes:?} argv0={argv0}");
        }
    }

    #[test]
    fn relation_contexts() {
        let joined = [
            ("JUJU_DISPATCH_PATH", Some("hooks/cluster-relation-joined")),
            ("JUJU_RELATION", Some("cluster")),
            ("JUJU_RELATION_ID", Some("cluster:3")),
            ("JUJU_REMOTE_UNIT", Some("etcd/1")),
            ("JUJU_REMOTE_APP", Some("etcd")),
        ];
        let ctx_of = |extra: &[(&str, Option<&str>)]| {
            let mut changes = joined.to_vec();
            changes.extend_from_slice(extra);
            HookContext::from_env(&env_with(&changes), CHARM_BIN)
                .unwrap()
                .unwrap()
                .relation
        };
        let want =
            |remote_unit: Option<&str>, remote_app: Option<&str>, departing: Option<&str>| {
                Some(RelationContext {
                    endpoint: "cluster".into(),
                    id: "cluster:3".into(),
                    remote_unit: remote_unit.map(String::from),
                    remote_app: remote_app.map(String::from),
                    departing_unit: departing.map(String::from),
                })
            };
        let cases: Vec<(Changes, Option<RelationContext>)> = vec![
            (vec![], want(Some("etcd/1"), Some("etcd"), None)),
            // created/broken: the remote unit is empty.
            (
                vec![
                    ("JUJU_DISPATCH_PATH", Some("hooks/cluster-relation-broken")),
                    ("JUJU_REMOTE_UNIT", Some("")),
                ],
                want(None, Some("etcd"), None),
            ),
            (
                vec![
                    ("JUJU_DISPATCH_PATH", Some("hooks/cluster-relation-created")),
                    ("JUJU_REMOTE_UNIT", None),
                ],
                want(None, Some("etcd"), None),
            ),
            (
                vec![
                    (
                        "JUJU_DISPATCH_PATH",
                        Some("hooks/cluster-relation-departed"),
                    ),
                    ("JUJU_DEPARTING_UNIT", Some("etcd/0")),
                ],
                want(Some("etcd/1"), Some("etcd"), Some("etcd/0")),
            ),
            // No JUJU_REMOTE_APP: derived from the remote unit.
            (
                vec![("JUJU_REMOTE_APP", None)],
                want(Some("etcd/1"), Some("etcd"), None),
            ),
            // No JUJU_RELATION: the endpoint comes from the relation id.
            (
                vec![("JUJU_RELATION", None)],
                want(Some("etcd/1"), Some("etcd"), None),
            ),
            // Not a relation hook and no relation id: no relation.
            (
                vec![
                    ("JUJU_DISPATCH_PATH", Some("hooks/config-changed")),
                    ("JUJU_RELATION", None),
                    ("JUJU_RELATION_ID", None),
                    ("JUJU_REMOTE_UNIT", None),
                    ("JUJU_REMOTE_APP", None),
                ],
                None,
            ),
        ];
        for (extra, expected) in cases {
            assert_eq!(ctx_of(&extra), expected, "{extra:?}");
        }

        let db = HookContext::from_env(
            &env_with(&[
                ("JUJU_DISPATCH_PATH", Some("hooks/db-relation-changed")),
                ("JUJU_RELATION", Some("db")),
                ("JUJU_RELATION_ID", Some("db:7")),
                ("JUJU_REMOTE_UNIT", Some("kubernetes-control-plane/2")),
                ("JUJU_REMOTE_APP", Some("kubernetes-control-plane")),
            ]),
            CHARM_BIN,
        )
        .unwrap()
        .unwrap();
        assert_eq!(db.event, rel("db", RelationKind::Changed));
        let r = db.relation.unwrap();
        assert_eq!((r.endpoint.as_str(), r.id.as_str()), ("db", "db:7"));
        assert_eq!(r.remote_app.as_deref(), Some("kubernetes-control-plane"));
    }

    #[test]
    fn action_and_storage_context() {
        let action = HookContext::from_env(
            &env_with(&[
                ("JUJU_DISPATCH_PATH", Some("actions/snapshot")),
                ("JUJU_HOOK_NAME", None),
                ("JUJU_ACTION_NAME", Some("snapshot")),
                ("JUJU_ACTION_UUID", Some("42")),
            ]),
            CHARM_BIN,
        )
        .unwrap()
        .unwrap();
        assert_eq!(action.event, Event::Action("snapshot".into()));
        assert_eq!(action.action_uuid.as_deref(), Some("42"));

        let storage = HookContext::from_env(
            &env_with(&[
                ("JUJU_DISPATCH_PATH", Some("hooks/data-storage-attached")),
                ("JUJU_STORAGE_ID", Some("data/0")),
                ("JUJU_STORAGE_LOCATION", Some("/srv/data")),
            ]),
            CHARM_BIN,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            storage.event,
            Event::Storage {
                name: "data".into(),
                attached: true
            }
        );
        assert_eq!(storage.storage_location, Some(PathBuf::from("/srv/data")));
    }

    #[test]
    fn juju_4_has_no_leader_tools() {
        for (version, has) in [
            ("2.9.49", true),
            ("3.6.1", true),
            ("4.0.0", false),
            ("4.1-beta1", false),
        ] {
            let ctx =
                HookContext::from_env(&env_with(&[("JUJU_VERSION", Some(version))]), CHARM_BIN)
                    .unwrap()
                    .unwrap();
            assert_eq!(ctx.has_leader_tools(), has, "{version}");
        }
    }
}
