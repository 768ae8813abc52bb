"""Section `hooks`: update-status and a no-change config-changed on a healthy
3-unit cluster beside a minimal `ops` charm, and the pieces a hook is made of."""

import json
import re
import shutil
import time

from harness import (
    DIRECT_ENV, LOOPBACK_CONFIG, Model, VENV, WORK, client_urls, etcd_charm_dir, log, med,
    ops_charm_dir, parse_time, run, tool_calls_by_context, wait_for,
)


# ------------------------------------------------------------ 1, 2, 5: hooks

def context_records(m, hook, app, since_contexts=frozenset()):
    """(context → hook-log entry) for `hook` on units of `app`, exit 0."""
    out = {}
    for e in m.jsonl("hook-log.jsonl"):
        if e["hook"] == hook and e["unit"].split("/")[0] == app and e["context"] not in since_contexts:
            if e["exit"] != 0:
                raise RuntimeError(f"{e['context']} exited {e['exit']}:\n{e.get('output', '')}")
            out[e["context"]] = e
    return out


def etcd_pids(m, n):
    return [(m.root(f"etcd/{i}") / "run/etcd-charm/etcd.etcd.pid").read_text().strip()
            for i in range(n)]


def bench_hooks(runs, results):
    log("hooks: deploying etcd-charm (3 units) and the ops charm (3 units) into one model")
    ours, ops = etcd_charm_dir(), ops_charm_dir()
    m = Model("hooks")
    m.deploy(ours, 3, config=LOOPBACK_CONFIG, env=DIRECT_ENV)
    wait_for("etcd-charm active", 120, lambda: m.all_active("etcd", 3), every=0.5)
    eps = client_urls(m, "etcd", 3)
    m.deploy(ops, 3, name="etcd-ops", config=[f"endpoints={eps}"])
    wait_for("ops charm active", 120, lambda: m.all_active("etcd-ops", 3), every=0.5)
    apps = ["etcd", "etcd-ops"]
    for app in apps:  # warm the page cache and both interpreters
        for i in range(3):
            m.sim("update-status", f"{app}/{i}")
    before = {e["context"] for e in m.jsonl("hook-log.jsonl")}
    pids_before = etcd_pids(m, 3)

    log(f"hooks: update-status x{runs} per charm, interleaved")
    for r in range(runs):
        for app in (apps if r % 2 == 0 else apps[::-1]):
            m.sim("update-status", f"{app}/{r % 3}")
    toggles = -(-runs // 3)
    log(f"hooks: config-changed x{toggles * 3} per charm (snapshot_count auto <-> '')")
    for t in range(toggles):
        value = "" if t % 2 == 0 else "auto"
        for app in (apps if t % 2 == 0 else apps[::-1]):
            m.sim("config", app, f"snapshot_count={value}")
    log(f"hooks: peer relation-changed x{toggles * 3} per charm (a key no charm reads, set by one unit)")
    for t in range(toggles):
        for app in (apps if t % 2 == 0 else apps[::-1]):
            rel = json.loads(m.sim("exec", f"{app}/0", "--", "relation-ids", "cluster",
                                   "--format=json").stdout)[0]
            m.sim("exec", f"{app}/{t % 3}", "--", "relation-set", "-r", rel, f"bench-note={t}")
            m.sim("settle")
    if etcd_pids(m, 3) != pids_before:
        raise RuntimeError("etcd restarted during the no-change hooks")
    for app in apps:
        if not m.all_active(app, 3):
            raise RuntimeError(f"{app} is not all active after the hook runs: {m.units(app)}")

    probes = {p["context"]: p for p in m.probes()}
    calls = tool_calls_by_context(m)
    data = {}
    for hook in HOOK_KINDS:
        for app in apps:
            entries = context_records(m, hook, app, before)
            rows = []
            for ctx, e in sorted(entries.items(), key=lambda kv: kv[1]["time"]):
                p = probes.get(ctx)
                if p is None:
                    raise RuntimeError(f"no probe record for {ctx} (did the hook exit through libc?)")
                rows.append({"context": ctx, "wall_ms": p["wall_us"] / 1000,
                             "rss_mib": p["vmhwm_kb"] / 1024, "sim_ms": e["duration_ms"],
                             "tool_calls": calls.get(ctx, 0)})
            data[(hook, app)] = rows
    results["hooks"] = {f"{h}|{a}": rows for (h, a), rows in data.items()}

    # Where the time goes: the pieces of a hook measured on their own.
    results["hook_parts"] = hook_parts(m, data)
    results["hooks_priced"] = priced(data, results["hook_parts"])
    m.destroy()


HOOK_KINDS = ("update-status", "config-changed", "cluster-relation-changed")

# What one hook-tool call costs on a real controller: each is a round trip
# from the hook's tool binary over the unit agent's socket to the agent,
# which serialises it with the uniter and often asks the controller; an
# independent harness timed ~16 ms per call on a real Juju 3.x controller
# (issue 14). A jujusim call is a local process start plus a model-file
# read and rewrite, so hooks here pay far less per call than in production:
# wall time is also shown with every call re-priced at this cost.
REAL_CALL_MS = 16.0


def priced(data, parts):
    """Per hook kind and charm: median calls, median wall time as measured
    (calls at jujusim's cost) and re-priced with each call at REAL_CALL_MS
    instead of jujusim's (the median of one call timed alone)."""
    sim_call = med(parts["tool_call_ms"])
    out = {"real_call_ms": REAL_CALL_MS, "sim_call_ms": sim_call}
    for (hook, app), rows in data.items():
        if not rows:
            continue
        out[f"{hook}|{app}"] = {
            "calls": med([r["tool_calls"] for r in rows]),
            "wall_sim_ms": med([r["wall_ms"] for r in rows]),
            "wall_real_ms": med([r["wall_ms"] + r["tool_calls"] * (REAL_CALL_MS - sim_call)
                                 for r in rows]),
        }
    return out


def hook_parts(m, data):
    """The costs a hook is made of, each measured alone on this model: one
    hook-tool call as a program sees it (spawn to exit), `etcdctl endpoint
    health` (the ops charm's check), starting the venv's Python bare and with
    `import ops`; from the tool-call log, the spacing of etcd-charm's calls
    and its longest stretch without one; and the programs it runs."""
    loop = ("import json, subprocess, time\n"
            "out = []\n"
            "for i in range(40):\n"
            "    tool = ['config-get', '--format=json'] if i % 2 else ['is-leader', '--format=json']\n"
            "    t = time.perf_counter()\n"
            "    subprocess.run(tool, capture_output=True, check=True)\n"
            "    out.append((time.perf_counter() - t) * 1000)\n"
            "print(json.dumps(out))\n")
    tool_ms = json.loads(m.sim("exec", "etcd/0", "--", VENV / "bin" / "python3", "-c", loop).stdout)

    def timed(cmd, n=10):
        out = []
        for _ in range(n):
            t = time.perf_counter()
            run(cmd, timeout=60)
            out.append((time.perf_counter() - t) * 1000)
        return out
    endpoint = f"http://{m.address('etcd/0')}:2379"
    health = ["env", "ETCDCTL_API=3", "etcdctl", "--endpoints", endpoint,
              "--dial-timeout=3s", "--command-timeout=5s", "endpoint", "health"]
    parts = {
        "tool_call_ms": tool_ms,
        "etcdctl_health_ms": timed(health),
        "bare_python_ms": timed([VENV / "bin" / "python3", "-c", "pass"]),
        "import_ops_ms": timed([VENV / "bin" / "python3", "-c", "import ops"]),
    }
    calls = {}
    for c in m.jsonl("tool-calls.jsonl"):
        calls.setdefault(c["context"], []).append(c)
    # Each tool-call record is written as the call ends: the spacing of
    # back-to-back calls is one call as the charm sees it; the longest
    # stretch without a call is where it talks to etcd.
    spacing, stretch = [], []
    for row in data[("update-status", "etcd")]:
        times = [parse_time(c["time"]) * 1000 for c in calls.get(row["context"], [])]
        deltas = sorted(b - a for a, b in zip(times, times[1:]))
        if deltas:
            spacing.append(med(deltas))
            stretch.append(deltas[-1])
    parts["call_spacing_ms"] = spacing
    parts["longest_stretch_ms"] = stretch
    parts["programs"] = programs_run(m, ["etcd/0", "etcd/1"])
    return parts


def programs_run(m, units):
    """The programs one update-status runs, hook tools aside, from
    `strace -f -e trace=execve` around the charm's dispatch (run through
    `jujusim exec`, as the upgrade tests run a hook by hand)."""
    if not shutil.which("strace"):
        return ["(strace is not installed)"]
    seen = {}
    skip = set(HOOK_TOOLS) | {"dispatch.real", "etcd-charm", "env", "strace"}
    for unit in units:
        out = WORK / f"execve-{unit.replace('/', '-')}.txt"
        charm = m.dir / "units" / unit.replace("/", "-") / "charm"
        m.sim("exec", unit, "--", "strace", "-f", "-qq", "-e", "trace=execve", "-s", "40", "-o", out,
              "env", "JUJU_DISPATCH_PATH=hooks/update-status", charm / "dispatch.real")
        for line in out.read_text().splitlines():
            mt = re.search(r'execve\("([^"]+)", \[(.*?)\]', line)
            if not mt or line.rstrip().endswith("ENOENT (No such file or directory)"):
                continue
            prog = mt.group(1).rsplit("/", 1)[-1]
            if prog in skip:
                continue
            argv = re.findall(r'"([^"]*)"', mt.group(2))
            key = " ".join([prog] + [a for a in argv[1:3] if a.startswith("-")])
            seen[key] = seen.get(key, 0) + 1
        out.unlink()
    return [f"{k} ×{v}" for k, v in sorted(seen.items())]


HOOK_TOOLS = ["is-leader", "leader-get", "leader-set", "config-get", "relation-ids", "relation-list",
              "relation-get", "relation-set", "network-get", "unit-get", "status-set", "status-get",
              "application-version-set", "open-port", "close-port", "opened-ports", "goal-state",
              "juju-log", "state-get", "state-set", "state-delete", "storage-get", "storage-list",
              "action-get", "action-set", "action-fail", "action-log"]
