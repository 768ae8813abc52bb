//! The rolling turn's mechanics (src/rolling.rs) on three hand-run etcd
//! members: the key names its holder, a second unit waits (bounded) and is
//! told who holds it, the lease outlives its TTL while the holder's own
//! member is down (the keep-alive goes to the other members), giving it
//! back deletes the key, and nobody gets a turn while another voter is down.
//!
//! Addresses: 127.78.9.0/24 belongs to this file.

mod etcd_support;
use etcd_support::*;

use etcd_charm::rolling::{self, Request, Taken, TURN_KEY};
use std::time::Duration;

fn holder(eps: &str) -> String {
    ctl(eps, &["get", TURN_KEY, "--print-value-only"])
        .unwrap()
        .trim()
        .to_string()
}

fn request<'a>(unit: &'a str, ep: &'a str, id: u64, wait: Duration) -> Request<'a> {
    Request {
        unit,
        reason: "a test",
        own_endpoint: ep,
        fallback: &[],
        member_id: id,
        wait,
    }
}

#[test]
fn one_turn_at_a_time_kept_alive_through_the_other_members_and_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let peers: Vec<(String, String)> = (1..=3)
        .map(|i| (format!("etcd{}", i - 1), format!("127.78.9.{i}")))
        .collect();
    let spec = |(name, ip): &(String, String)| {
        Spec::new(
            name,
            ip,
            &dir.path().join(name),
            &dir.path().join(format!("{name}.log")),
        )
        .peers(&peers)
        .token("turns")
    };
    let mut ms: Vec<Etcd> = peers.iter().map(|p| spec(p).start()).collect();
    for m in &mut ms {
        m.wait_healthy();
    }
    let eps: Vec<String> = ms.iter().map(Etcd::endpoint).collect();
    let all = eps.join(",");
    let ids: Vec<u64> = eps.iter().map(|e| live_ids(e).member_id).collect();
    // The raft leader takes the turn, so the hand-over is exercised too.
    let leader = endpoint_status(&eps[0]).unwrap().leader;
    let a = ids.iter().position(|i| *i == leader).unwrap();
    let b = (a + 1) % 3;
    let c = (a + 2) % 3;
    let unit = |i: usize| format!("etcd/{i}");
    let (unit_a, unit_b) = (unit(a), unit(b));

    let wait = Duration::from_secs(2);
    let Taken::Held(turn) = rolling::take(&request(&unit_a, &eps[a], ids[a], wait)).unwrap() else {
        panic!("the first unit gets the turn");
    };
    assert_eq!(holder(&all), format!("{unit_a}: a test"));
    let now = endpoint_status(&eps[b]).unwrap().leader;
    assert_ne!(now, ids[a], "raft leadership moved off the turn's member");

    // A second unit waits, bounded (it returns at all), and learns who
    // holds the turn.
    match rolling::take(&request(&unit_b, &eps[b], ids[b], wait)).unwrap() {
        Taken::Busy { why } => assert_eq!(why, format!("held by {unit_a}")),
        _ => panic!("a second turn was given"),
    }

    // The holder's member goes down for longer than the lease's TTL: the
    // keep-alive, sent to the other members, keeps the turn.
    ms[a].stop();
    std::thread::sleep(rolling::LEASE_TTL + Duration::from_secs(8));
    let others = format!("{},{}", eps[b], eps[c]);
    assert_eq!(holder(&others), format!("{unit_a}: a test"));
    ms[a] = spec(&peers[a]).start();
    ms[a].wait_healthy();

    // Given back once every voter is healthy: the key is gone.
    assert_eq!(turn.release(&eps[a], ids[a]), None);
    assert_eq!(holder(&all), "");

    // A voter down: nobody gets a turn, and none is left taken.
    ms[c].stop();
    match rolling::take(&request(&unit_b, &eps[b], ids[b], wait)).unwrap() {
        Taken::Busy { why } => assert!(why.contains(&peers[c].0), "{why}"),
        _ => panic!("a turn was given with {} down", peers[c].0),
    }
    assert_eq!(holder(&format!("{},{}", eps[a], eps[b])), "");
    ms[c] = spec(&peers[c]).start();
    ms[c].wait_healthy();
    let Taken::Held(turn) = rolling::take(&request(&unit_b, &eps[b], ids[b], wait)).unwrap() else {
        panic!("with every voter back, the turn is given");
    };
    drop(turn);
    assert_eq!(holder(&all), "", "dropping a turn gives it back");
    stop_leader_last(&mut ms);
}
