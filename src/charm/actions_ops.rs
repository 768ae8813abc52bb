//! The maintenance actions: health, member-list, alarm-list, alarm-disarm,
//! compact and defrag. Each result has `output` (a text an operator reads,
//! as the Python charm gave) and structured keys beside it. The shaping of
//! results and the defrag order are pure; the calls are in `crate::etcd`.

use super::action_support::ActionCtx;
use crate::error::{Error, Result};
use crate::etcd::{self, ClusterView, Member, MemberDetail};
use crate::hooktools::Databag;
use std::time::{Duration, Instant};

/// How long a probe of the other members may take before a defrag.
const PROBE: Duration = Duration::from_secs(3);
/// How long a defragmented member may take to answer again.
const BACK_WITHIN: Duration = Duration::from_secs(60);

/// A result key for a member: its name, or `unstarted-<id>` before it ran.
pub fn member_key(m: &Member) -> String {
    if m.name.is_empty() {
        format!("unstarted-{:x}", m.id)
    } else {
        m.name.to_lowercase()
    }
}

/// `NOSPACE`, `CORRUPT` from etcd-client's `Nospace`, `Corrupt`.
pub fn alarm_name(debug_name: &str) -> String {
    debug_name.to_ascii_uppercase()
}

/// etcdctl's `alarm list` lines: `memberID:<decimal> alarm:<NAME>`.
pub fn alarm_lines(alarms: &[(u64, String)]) -> String {
    alarms
        .iter()
        .map(|(id, a)| format!("memberID:{id} alarm:{}", alarm_name(a)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The health result from the member list, what each member said (or why
/// it did not answer) and the raised alarms. Pure.
pub fn health_results(
    view: &ClusterView,
    details: &[(u64, std::result::Result<MemberDetail, String>)],
    alarms: &[(u64, String)],
) -> Databag {
    let mut out = Databag::new();
    let mut lines = Vec::new();
    let mut healthy_all = true;
    let leader = view.status.leader;
    for m in &view.members {
        let key = member_key(m);
        let url = m.client_urls.first().cloned().unwrap_or_default();
        let d = details.iter().find(|(id, _)| *id == m.id).map(|(_, d)| d);
        let mine: Vec<String> = alarms
            .iter()
            .filter(|(id, _)| *id == m.id)
            .map(|(_, a)| alarm_name(a))
            .collect();
        let reachable = matches!(d, Some(Ok(_)));
        let healthy = reachable && mine.is_empty() && !m.name.is_empty();
        healthy_all &= healthy;
        let p = |k: &str| format!("members.{key}.{k}");
        out.insert(p("id"), format!("{:x}", m.id));
        out.insert(p("healthy"), healthy.to_string());
        out.insert(p("reachable"), reachable.to_string());
        out.insert(p("leader"), (m.id == leader).to_string());
        out.insert(p("learner"), m.is_learner.to_string());
        out.insert(p("peer-url"), m.peer_urls.join(","));
        out.insert(p("client-url"), url.clone());
        out.insert(p("alarms"), mine.join(","));
        let line = match d {
            Some(Ok(d)) => {
                out.insert(p("raft-index"), d.raft_index.to_string());
                out.insert(p("raft-term"), d.raft_term.to_string());
                out.insert(p("db-size"), d.db_size.to_string());
                out.insert(p("db-size-in-use"), d.db_size_in_use.to_string());
                out.insert(p("version"), d.version.clone());
                format!(
                    "{key} ({:x}) {url}: {}{}{}, raft index {}, db {} ({} in use){}",
                    m.id,
                    if healthy { "healthy" } else { "unhealthy" },
                    if m.id == leader { ", leader" } else { "" },
                    if m.is_learner { ", learner" } else { "" },
                    d.raft_index,
                    crate::space::human(d.db_size.max(0) as u64),
                    crate::space::human(d.db_size_in_use.max(0) as u64),
                    if mine.is_empty() {
                        String::new()
                    } else {
                        format!(", alarms {}", mine.join(","))
                    }
                )
            }
            Some(Err(e)) => {
                out.insert(p("error"), e.clone());
                format!("{key} ({:x}) {url}: unreachable: {e}", m.id)
            }
            None => format!("{key} ({:x}): not started yet", m.id),
        };
        lines.push(line);
    }
    out.insert("cluster-id".into(), format!("{:x}", view.cluster_id()));
    out.insert("leader".into(), format!("{:x}", leader));
    out.insert("healthy".into(), healthy_all.to_string());
    lines.push(format!(
        "cluster {:x} is {}",
        view.cluster_id(),
        if healthy_all { "healthy" } else { "unhealthy" }
    ));
    out.insert("output".into(), lines.join("\n"));
    out
}

fn details(view: &ClusterView) -> Vec<(u64, std::result::Result<MemberDetail, String>)> {
    view.members
        .iter()
        .filter_map(|m| {
            let url = m.client_urls.first()?;
            let d = etcd::block_on(etcd::member_detail(url)).map_err(|e| e.message);
            Some((m.id, d))
        })
        .collect()
}

pub fn health(ctx: &ActionCtx) -> Result<Databag> {
    let view = ctx.view()?;
    let alarms = etcd::block_on(etcd::alarms(&view.endpoint))?;
    Ok(health_results(&view, &details(&view), &alarms))
}

/// The member-list result (etcdctl's table, one line per member). Pure.
pub fn member_list_results(view: &ClusterView) -> Databag {
    let mut out = Databag::new();
    let mut lines = Vec::new();
    for m in &view.members {
        let key = member_key(m);
        let started = if m.name.is_empty() {
            "unstarted"
        } else {
            "started"
        };
        let p = |k: &str| format!("members.{key}.{k}");
        out.insert(p("id"), format!("{:x}", m.id));
        out.insert(p("status"), started.into());
        out.insert(p("peer-urls"), m.peer_urls.join(","));
        out.insert(p("client-urls"), m.client_urls.join(","));
        out.insert(p("learner"), m.is_learner.to_string());
        lines.push(format!(
            "{:x}, {started}, {}, {}, {}, {}",
            m.id,
            m.name,
            m.peer_urls.join(","),
            m.client_urls.join(","),
            m.is_learner
        ));
    }
    out.insert("output".into(), lines.join("\n"));
    out
}

pub fn member_list(ctx: &ActionCtx) -> Result<Databag> {
    Ok(member_list_results(&ctx.view()?))
}

fn alarms_result(alarms: &[(u64, String)], none: &str) -> Databag {
    let mut out = Databag::new();
    let text = alarm_lines(alarms);
    out.insert(
        "output".into(),
        if text.is_empty() { none.into() } else { text },
    );
    out.insert("count".into(), alarms.len().to_string());
    out
}

pub fn alarm_list(ctx: &ActionCtx) -> Result<Databag> {
    let view = ctx.view()?;
    let a = etcd::block_on(etcd::alarms(&view.endpoint))?;
    // The Python charm's output was etcdctl's: empty when there is none.
    Ok(alarms_result(&a, ""))
}

pub fn alarm_disarm(ctx: &ActionCtx) -> Result<Databag> {
    let view = ctx.view()?;
    let a = etcd::block_on(etcd::alarm_disarm(&view.endpoint))?;
    let mut out = alarms_result(&a, "no alarm was raised");
    if !a.is_empty() {
        out.insert("output".into(), format!("disarmed:\n{}", alarm_lines(&a)));
    }
    Ok(out)
}

/// `revision` as the operator gave it: empty is the current revision.
pub fn parse_revision(s: &str) -> std::result::Result<Option<i64>, String> {
    match s.trim() {
        "" => Ok(None),
        t => match t.parse::<i64>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(format!(
                "revision={t:?} is not a positive whole number; leave it empty to compact to the current revision"
            )),
        },
    }
}

pub fn compact(ctx: &ActionCtx) -> Result<Databag> {
    let rev = parse_revision(&ctx.string("revision")).map_err(Error::Other)?;
    let physical = ctx.boolean("physical");
    let view = ctx.view()?;
    let done = etcd::block_on(etcd::compact(&view.endpoint, rev, physical)).map_err(|e| {
        Error::Other(format!(
            "{e}; a revision already compacted or not yet written is refused: run health, or leave revision empty"
        ))
    })?;
    let mut out = Databag::new();
    out.insert("output".into(), format!("compacted revision {done}"));
    out.insert("revision".into(), done.to_string());
    out.insert("physical".into(), physical.to_string());
    Ok(out)
}

/// The members to defragment, in order: started members only, the raft
/// leader last (a defrag stalls its member; the leader stalling costs an
/// election). `only` is a member name (`etcd0`) or unit name (`etcd/0`).
pub fn defrag_order(
    members: &[Member],
    leader: u64,
    only: &str,
) -> std::result::Result<Vec<Member>, String> {
    let mut started: Vec<Member> = members
        .iter()
        .filter(|m| !m.name.is_empty() && !m.client_urls.is_empty())
        .cloned()
        .collect();
    if !only.is_empty() {
        let want = only.replace('/', "");
        started.retain(|m| m.name == want);
        if started.is_empty() {
            let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
            return Err(format!(
                "member={only:?} is not a started member of the cluster (members: {names:?})"
            ));
        }
    }
    started.sort_by_key(|m| (m.id == leader, m.name.clone()));
    Ok(started)
}

pub fn defrag(ctx: &ActionCtx) -> Result<Databag> {
    let view = ctx.view()?;
    let order = defrag_order(&view.members, view.status.leader, &ctx.string("member"))
        .map_err(Error::Other)?;
    let mut out = Databag::new();
    let mut lines = Vec::new();
    for m in &order {
        let url = &m.client_urls[0];
        let others: Vec<Member> = view
            .members
            .iter()
            .filter(|o| o.id != m.id)
            .cloned()
            .collect();
        let up = etcd::block_on(async {
            Ok::<_, etcd::EtcdError>(etcd::reachable(&others, PROBE).await)
        })?;
        let down: Vec<String> = others
            .iter()
            .filter(|o| !up.contains(&o.id))
            .map(member_key)
            .collect();
        if !down.is_empty() {
            return Err(Error::Other(format!(
                "defrag stopped before {}: {down:?} do not answer, and defragmenting stalls a member; \
                 bring them back (health action), then run defrag again{}",
                m.name,
                if lines.is_empty() {
                    String::new()
                } else {
                    format!(" (done so far: {})", lines.join("; "))
                }
            )));
        }
        let before = etcd::block_on(etcd::member_detail(url))?;
        ctx.log(&format!("defragmenting {} at {url}", m.name));
        let t = Instant::now();
        etcd::block_on(etcd::defragment(url))?;
        let took = t.elapsed();
        // The next member waits until this one serves again.
        let deadline = Instant::now() + BACK_WITHIN;
        let after = loop {
            match etcd::block_on(etcd::member_detail(url)) {
                Ok(d) => break d,
                Err(e) if Instant::now() > deadline => {
                    return Err(Error::Other(format!(
                        "{} did not answer within {BACK_WITHIN:?} after its defrag ({e}); the other members were not defragmented",
                        m.name
                    )))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(250)),
            }
        };
        let key = member_key(m);
        out.insert(
            format!("members.{key}.db-size-before"),
            before.db_size.to_string(),
        );
        out.insert(
            format!("members.{key}.db-size-after"),
            after.db_size.to_string(),
        );
        out.insert(
            format!("members.{key}.seconds"),
            format!("{:.2}", took.as_secs_f64()),
        );
        lines.push(format!(
            "defragmented {} ({url}): db {} -> {} in {:.2} s",
            m.name,
            crate::space::human(before.db_size.max(0) as u64),
            crate::space::human(after.db_size.max(0) as u64),
            took.as_secs_f64()
        ));
    }
    out.insert("output".into(), lines.join("\n"));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd::MemberStatus;

    fn member(id: u64, name: &str) -> Member {
        Member {
            id,
            name: name.into(),
            peer_urls: vec![format!("http://10.0.0.{id}:2380")],
            client_urls: if name.is_empty() {
                vec![]
            } else {
                vec![format!("http://10.0.0.{id}:2379")]
            },
            is_learner: false,
        }
    }

    fn view(members: Vec<Member>, leader: u64) -> ClusterView {
        ClusterView {
            endpoint: "http://10.0.0.1:2379".into(),
            status: MemberStatus {
                member_id: 1,
                cluster_id: 0xc1,
                leader,
                version: "3.4.23".into(),
                raft_index: 9,
                is_learner: false,
                errors: vec![],
            },
            members,
        }
    }

    fn detail(id: u64) -> MemberDetail {
        MemberDetail {
            member_id: id,
            leader: 2,
            version: "3.4.23".into(),
            raft_index: 42,
            raft_term: 3,
            raft_applied_index: 42,
            is_learner: false,
            db_size: 4 << 20,
            db_size_in_use: 1 << 20,
            revision: 7,
            errors: vec![],
        }
    }

    #[test]
    fn defrag_puts_the_leader_last_and_skips_unstarted() {
        let ms = vec![
            member(2, "etcd1"),
            member(1, "etcd0"),
            member(3, "etcd2"),
            member(4, ""),
        ];
        let names: Vec<String> = defrag_order(&ms, 2, "")
            .unwrap()
            .into_iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(names, ["etcd0", "etcd2", "etcd1"]);
        let one = defrag_order(&ms, 2, "etcd/2").unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].name, "etcd2");
        let e = defrag_order(&ms, 2, "etcd9").unwrap_err();
        assert!(e.contains("etcd9"), "{e}");
    }

    #[test]
    fn health_names_every_member_and_its_alarms() {
        let v = view(
            vec![member(1, "etcd0"), member(2, "etcd1"), member(3, "")],
            2,
        );
        let r = health_results(
            &v,
            &[(1, Ok(detail(1))), (2, Err("connection refused".into()))],
            &[(1, "Nospace".into())],
        );
        assert_eq!(r["healthy"], "false");
        assert_eq!(r["members.etcd0.alarms"], "NOSPACE");
        assert_eq!(r["members.etcd0.reachable"], "true");
        assert_eq!(r["members.etcd0.healthy"], "false");
        assert_eq!(r["members.etcd0.db-size"], (4u64 << 20).to_string());
        assert_eq!(r["members.etcd0.raft-index"], "42");
        assert_eq!(r["members.etcd1.reachable"], "false");
        assert_eq!(r["members.etcd1.leader"], "true");
        assert!(
            r["output"].contains("unreachable: connection refused"),
            "{}",
            r["output"]
        );
        assert!(r["output"].contains("not started yet"), "{}", r["output"]);
        let ok = health_results(
            &view(vec![member(1, "etcd0")], 1),
            &[(1, Ok(detail(1)))],
            &[],
        );
        assert_eq!(ok["healthy"], "true");
        assert_eq!(ok["members.etcd0.alarms"], "");
    }

    #[test]
    fn alarms_read_like_etcdctl() {
        assert_eq!(
            alarm_lines(&[(10, "Nospace".into()), (11, "Corrupt".into())]),
            "memberID:10 alarm:NOSPACE\nmemberID:11 alarm:CORRUPT"
        );
    }

    #[test]
    fn revisions() {
        assert_eq!(parse_revision(""), Ok(None));
        assert_eq!(parse_revision(" 12 "), Ok(Some(12)));
        assert!(parse_revision("-1").is_err());
        assert!(parse_revision("abc")
            .unwrap_err()
            .contains("revision=\"abc\""));
    }

    #[test]
    fn member_list_lines() {
        let r = member_list_results(&view(vec![member(1, "etcd0"), member(4, "")], 1));
        assert_eq!(r["members.etcd0.status"], "started");
        assert_eq!(r["members.unstarted-4.status"], "unstarted");
        assert!(
            r["output"].starts_with("1, started, etcd0, http://10.0.0.1:2380"),
            "{}",
            r["output"]
        );
    }
}
