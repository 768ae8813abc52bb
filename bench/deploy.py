"""Section `deploy`: `deploy -n 3` and `add-unit` to active, beside etcd
bootstrapped and joined by hand with etcdctl."""

import os
import re
import shutil
import time

from harness import (
    CLEANUP, DIRECT_ENV, LOOPBACK_CONFIG, Model, SETTLE_S, WORK, etcd_charm_dir, etcdctl,
    hand_etcd, log, parse_time, tool_calls_by_context, wait_for,
)


def bench_deploy(runs, results):
    ours = etcd_charm_dir()
    rows = []
    per_hook_calls = {}
    for r in range(runs):
        log(f"deploy: run {r + 1}/{runs}: jujusim deploy -n 3")
        m = Model(f"deploy-{r}")
        t0 = time.monotonic()
        m.deploy(ours, 3, config=LOOPBACK_CONFIG, env=DIRECT_ENV)
        wait_active_nudging(m, 3)
        deploy_s = time.monotonic() - t0
        deploy_ctx = {e["context"] for e in m.jsonl("hook-log.jsonl")}
        hooks = m.jsonl("hook-log.jsonl")
        calls = tool_calls_by_context(m)
        for e in hooks:
            per_hook_calls.setdefault(e["hook"], []).append(calls.get(e["context"], 0))
        longest = max(hooks, key=lambda e: e["duration_ms"])
        time.sleep(SETTLE_S)
        log(f"deploy: run {r + 1}/{runs}: jujusim add-unit")
        t0 = time.monotonic()
        m.sim("add-unit", "etcd", check=False)
        wait_active_nudging(m, 4)
        add_s = time.monotonic() - t0
        add_hooks = [e for e in m.jsonl("hook-log.jsonl") if e["context"] not in deploy_ctx]
        add_longest = max(add_hooks, key=lambda e: e["duration_ms"])
        jlog = m.jsonl("juju-log.jsonl")
        add_units = {e["unit"] for e in add_hooks} - {e["unit"] for e in hooks}
        ends = {e["context"]: parse_time(e["time"]) for e in hooks + add_hooks}
        row = {
            "membership": membership_waits(jlog, deploy_ctx, ends),
            "add_membership": membership_waits(jlog, {j["context"] for j in jlog} - deploy_ctx, ends),
            "add_hook_ms_sum": sum(e["duration_ms"] for e in add_hooks),
            "add_new_unit_hooks": [(e["hook"], e["duration_ms"]) for e in add_hooks if e["unit"] in add_units],
            "deploy_s": deploy_s, "add_unit_s": add_s,
            "deploy_hooks": len(hooks), "deploy_hook_ms_sum": sum(e["duration_ms"] for e in hooks),
            "deploy_longest": {"context": longest["context"], "ms": longest["duration_ms"],
                               "log": [j["message"][:200] for j in jlog if j["context"] == longest["context"]]},
            "add_hooks": len(add_hooks),
            "add_longest": {"context": add_longest["context"], "ms": add_longest["duration_ms"],
                            "log": [j["message"][:200] for j in jlog if j["context"] == add_longest["context"]]},
        }
        m.destroy()
        log(f"deploy: run {r + 1}/{runs}: etcd by hand (static bootstrap of 3, learner join)")
        row.update(hand_cluster(r))
        log(f"deploy: run {r + 1}/{runs}: etcd by hand (1 member, then 2 learner joins in sequence)")
        row.update(hand_sequential(r))
        rows.append(row)
        log(f"deploy: run {r + 1}/{runs}: deploy {deploy_s:.1f}s vs bootstrap {row['bootstrap_s']:.1f}s; "
            f"add-unit {add_s:.1f}s vs join {row['join_s']:.1f}s")
    results["deploy"] = rows
    results["deploy_tool_calls"] = per_hook_calls


def membership_waits(jlog, contexts, hook_ends):
    """Time etcd-charm spent in promote and member-add retry loops (from the
    step's log line to the next step, or the hook's end), and why each
    failed attempt failed (from its juju-log lines)."""
    out = {"promote_s": 0.0, "add_s": 0.0, "failures": {}}
    started = {}
    for j in jlog:
        if j["context"] not in contexts:
            continue
        msg, t, ctx = j["message"], parse_time(j["time"]), j["context"]
        if msg.startswith("step: promote"):
            started[(ctx, "promote")] = t
        elif msg.startswith("step: add ") and "learner" in msg:
            started[(ctx, "add")] = t
        elif msg.startswith("promoted ") and (ctx, "promote") in started:
            out["promote_s"] += t - started.pop((ctx, "promote"))
        elif msg.startswith("step: ") and (ctx, "add") in started:
            out["add_s"] += t - started.pop((ctx, "add"))
        if "not yet possible" in msg or "refused, retrying" in msg:
            kind = "promote" if "promote" in msg else "member add"
            detail = re.search(r'message: "([^"]+)"', msg)
            reason = (detail.group(1) if detail and "tcp connect" not in detail.group(1)
                      else "connection refused" if "Connection refused" in msg
                      else (detail.group(1) if detail else msg[-80:]))
            key = f"{kind}: {reason}"
            out["failures"][key] = out["failures"].get(key, 0) + 1
    for (ctx, kind), t in started.items():
        if ctx in hook_ends:
            out[f"{kind}_s"] += hook_ends[ctx] - t
    return out


def wait_active_nudging(m, n, limit=180):
    """Until n units are active with `Healthy with n known peers`. jujusim
    returns once no hook is queued; if a unit still waits, update-status
    (every 5 min under Juju) is what would move it: run it, and say so."""
    want = f"Healthy with {n} known peers"
    deadline = time.monotonic() + limit
    nudges = 0
    while not m.all_active("etcd", n, want):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{m.dir}: not all {n} units active: {m.units('etcd')}")
        time.sleep(0.5)
        if not m.all_active("etcd", n, want):
            m.sim("update-status", check=False)
            nudges += 1
    if nudges:
        log(f"  ({nudges} update-status run(s) were needed to reach active)")


def learner_join(eps, name, ip, token, base, procs):
    """etcdctl member add --learner (retried while etcd refuses it), the
    new member started, promote retried until it succeeds; returns how
    many add attempts etcd refused and why."""
    added, refused = {}, {}

    def add():
        p = etcdctl(eps, "member", "add", name, "--learner", f"--peer-urls=http://{ip}:2380")
        if p.returncode == 0:
            added["out"] = p.stdout
        else:
            why = (p.stderr.strip().splitlines() or ["?"])[-1][-60:]
            refused[why] = refused.get(why, 0) + 1
        return p.returncode == 0
    wait_for(f"member add --learner {name}", 60, add, every=0.2)
    member_id = re.search(r"Member\s+([0-9a-f]+)\s+added", added["out"]).group(1)
    initial = re.search(r'ETCD_INITIAL_CLUSTER="([^"]+)"', added["out"]).group(1)
    procs.append(hand_etcd(name, ip, base / name, initial, "existing", token, base))
    wait_for(f"member promote {name}", 60,
             lambda: etcdctl(eps, "member", "promote", member_id).returncode == 0, every=0.1)
    wait_for(f"{name} healthy", 60,
             lambda: etcdctl(f"http://{ip}:2379", "endpoint", "health").returncode == 0)
    return refused


def hand_sequential(r):
    """etcd's own cost of growing to 3 one member at a time, as the charm's
    deploy does: one member bootstrapped alone, then two learner joins by
    hand, back to back. etcd refuses a member add until the leader has been
    connected to every voting member for 5 s (its HealthInterval, with
    strict-reconfig-check on by default), so the second join waits."""
    base = WORK / "hand" / f"seq-{r}"
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    ips = [f"127.87.{10 + r}.{i}" for i in (1, 2, 3)]
    names = [f"s{i}" for i in range(3)]
    token = f"bench-seq-{os.getpid()}-{r}"
    procs, refused = [], {}
    try:
        t0 = time.monotonic()
        procs.append(hand_etcd(names[0], ips[0], base / names[0], f"{names[0]}=http://{ips[0]}:2380",
                               "new", token, base))
        wait_for("the first member healthy", 60,
                 lambda: etcdctl(f"http://{ips[0]}:2379", "endpoint", "health").returncode == 0)
        for i in (1, 2):
            eps = ",".join(f"http://{ip}:2379" for ip in ips[:i])
            for k, v in learner_join(eps, names[i], ips[i], token, base, procs).items():
                refused[k] = refused.get(k, 0) + v
        seq_s = time.monotonic() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        CLEANUP.stop_procs(procs, grace=10)
    shutil.rmtree(base, ignore_errors=True)
    return {"sequential_s": seq_s, "sequential_refused": refused}


def hand_cluster(r):
    """etcd's own: 3 members from a static initial-cluster until `endpoint
    health` passes on all; then, on that cluster settled, a learner added,
    started and promoted by hand until `endpoint health` passes on it."""
    base = WORK / "hand" / f"run-{r}"
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    ips = [f"127.88.{10 + r}.{i}" for i in (1, 2, 3, 4)]
    names = [f"h{i}" for i in range(4)]
    cluster = ",".join(f"{n}=http://{ip}:2380" for n, ip in zip(names[:3], ips[:3]))
    token = f"bench-{os.getpid()}-{r}"
    eps = ",".join(f"http://{ip}:2379" for ip in ips[:3])
    procs = []
    try:
        t0 = time.monotonic()
        for n, ip in zip(names[:3], ips[:3]):
            procs.append(hand_etcd(n, ip, base / n, cluster, "new", token, base))
        wait_for("hand-made cluster healthy", 60,
                 lambda: etcdctl(eps, "endpoint", "health").returncode == 0)
        bootstrap_s = time.monotonic() - t0
        time.sleep(SETTLE_S)

        t0 = time.monotonic()
        added = {}

        def add():
            p = etcdctl(eps, "member", "add", names[3], "--learner", f"--peer-urls=http://{ips[3]}:2380")
            if p.returncode == 0:
                added["out"] = p.stdout
            return p.returncode == 0
        wait_for("member add --learner", 60, add, every=0.2)
        member_id = re.search(r"Member\s+([0-9a-f]+)\s+added", added["out"]).group(1)
        initial = re.search(r'ETCD_INITIAL_CLUSTER="([^"]+)"', added["out"]).group(1)
        procs.append(hand_etcd(names[3], ips[3], base / names[3], initial, "existing", token, base))
        wait_for("member promote", 60,
                 lambda: etcdctl(eps, "member", "promote", member_id).returncode == 0, every=0.1)
        wait_for("the new member healthy", 60,
                 lambda: etcdctl(f"http://{ips[3]}:2379", "endpoint", "health").returncode == 0)
        join_s = time.monotonic() - t0
    finally:
        for p in procs:  # throwaway members: no need for a graceful stop
            if p.poll() is None:
                p.kill()
        CLEANUP.stop_procs(procs, grace=10)
    shutil.rmtree(base, ignore_errors=True)
    return {"bootstrap_s": bootstrap_s, "join_s": join_s}
