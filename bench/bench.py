#!/usr/bin/env python3
"""The measurements behind bench/run. Each section runs etcd-charm and its
peer side by side on this machine and reports medians, spreads and ratios.

Sections:
  hooks    update-status and a no-change config-changed on a healthy 3-unit
           cluster, beside a minimal charm on the Python `ops` library in the
           same model: wall time and peak RSS of the hook process, hook-tool
           calls; and the pieces a hook is made of, each timed alone.
  deploy   `deploy -n 3` to all active and `add-unit` to active, beside a
           3-member etcd bootstrapped by hand and a learner join + promote
           done by hand with etcdctl; hook-tool calls per deploy hook.
  migrate  a legacy member moved by `jujusim refresh` on the rename path at
           several sizes, beside a plain restart of the same member, and the
           copy path's throughput beside `cp -a` + `sync`; then
           tests/upgrade_bench.rs as it is (the same steps, cold caches).

Everything lives under target/bench/; every etcd started here listens on
loopback only (jujusim's 127.X.Y.N, or 127.88.x.y for etcd run by hand) and
is stopped on the way out, also on failure or Ctrl-C.
"""

import argparse
import base64
import datetime
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "target" / "bench"
SIM = REPO / "target" / "release" / "jujusim"
CHARM_BIN = REPO / "target" / "release" / "etcd-charm"
VENV = WORK / "venv"

MiB = 1 << 20


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, timeout=120, check=True, **kw):
    """A command with a bound; its output as text."""
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}:\n"
                           f"{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return p


def etcdctl(endpoints, *args, timeout=15, check=False):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
    env["ETCDCTL_API"] = "3"
    return run(["etcdctl", "--endpoints", endpoints, "--dial-timeout=2s",
                "--command-timeout=5s", *args], timeout=timeout, check=check, env=env)


def wait_for(what, limit, check, every=0.1):
    """Polls check() until true; raises after `limit` seconds."""
    deadline = time.monotonic() + limit
    while True:
        if check():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {limit}s waiting for {what}")
        time.sleep(every)


# ------------------------------------------------------------ statistics

def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs, fmt):
    """`median [min–max] (n)` in the given number format."""
    if not xs:
        return "—"
    if len(xs) == 1:
        return f"{fmt(xs[0])} (n=1)"
    return f"{fmt(med(xs))} [{fmt(min(xs))}–{fmt(max(xs))}] (n={len(xs)})"


def ms(x):
    return f"{x:.1f} ms" if x < 100 else f"{x:.0f} ms"


def secs(x):
    return f"{x:.2f} s"


def mib(x):
    return f"{x:.1f} MiB"


def ratio(x):
    return f"{x:.3f}" if x < 0.1 else f"{x:.2f}"


def mibs(x):
    return f"{x:.0f} MiB/s"


# ------------------------------------------------------------ cleanup

class Cleanup:
    """What this run started: models to destroy, processes to stop."""

    def __init__(self):
        self.models = []
        self.procs = []

    def proc(self, p):
        self.procs.append(p)
        return p

    def stop_procs(self, procs=None, grace=10):
        procs = self.procs if procs is None else procs
        for p in procs:
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + grace
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        for p in list(procs):
            if p in self.procs:
                self.procs.remove(p)

    def all(self):
        for m in list(self.models):
            m.destroy()
        self.stop_procs()


CLEANUP = Cleanup()


def on_signal(signum, _frame):
    raise SystemExit(f"stopped by signal {signum}")


# ------------------------------------------------------------ jujusim

class Model:
    """A jujusim model under target/bench/models/<name>, made afresh."""

    def __init__(self, name):
        self.dir = WORK / "models" / name
        if self.dir.exists():
            self.sim("destroy", check=False, timeout=120)
            shutil.rmtree(self.dir)
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        self.probe_log = self.dir.parent / f"{name}.probe.jsonl"
        if self.probe_log.exists():
            self.probe_log.unlink()
        self.extra_roots = []
        CLEANUP.models.append(self)

    def sim(self, *args, timeout=600, check=True):
        return run([SIM, "--model", self.dir, "--quiet", "--kill-timeout", "3", *args],
                   timeout=timeout, check=check)

    def deploy(self, charm, n, name=None, config=(), env=()):
        args = ["deploy", charm, "-n", str(n)]
        if name:
            args += ["--name", name]
        for c in config:
            args += ["--config", c]
        for e in [f"BENCH_PROBE_LOG={self.probe_log}", *env]:
            args += ["--env", e]
        return self.sim(*args, check=False)

    def status(self):
        return json.loads(self.sim("status", "--format=json", timeout=60).stdout)

    def units(self, app):
        return self.status()["applications"].get(app, {}).get("units", {})

    def address(self, unit):
        return self.units(unit.split("/")[0])[unit]["address"]

    def all_active(self, app, n, message=None):
        units = self.units(app)
        return len(units) == n and all(
            u["workload-status"]["current"] == "active"
            and (message is None or u["workload-status"]["message"] == message)
            for u in units.values())

    def root(self, unit):
        return self.dir / "units" / unit.replace("/", "-") / "root"

    def jsonl(self, name):
        path = self.dir / name
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def probes(self):
        if not self.probe_log.exists():
            return []
        return [json.loads(line) for line in self.probe_log.read_text().splitlines() if line.strip()]

    def destroy(self):
        if self.dir.exists():
            for root in self.dir.glob("units/*/root"):
                stop_direct_etcd(root)
            try:
                self.sim("destroy", check=False, timeout=120)
            except subprocess.TimeoutExpired:
                log(f"destroy of {self.dir} timed out")
        if self in CLEANUP.models:
            CLEANUP.models.remove(self)


def _ours(pid, root):
    """Whether a live pid runs under this unit root (its command line or
    ETCD_CHARM_ROOT names it): stale pid files and reused pids are skipped."""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        env = Path(f"/proc/{pid}/environ").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and (str(root).encode() in cmd or str(root).encode() in env)


def stop_direct_etcd(root, grace=15):
    """Stops what the direct backend (or the legacy stand-in) runs under a
    unit root: the supervisor first (it passes SIGTERM on to etcd and waits),
    then etcd itself if it is still there."""
    run_dir = root / "run" / "etcd-charm"
    for f in ("etcd.pid", "etcd.etcd.pid"):
        try:
            pid = int((run_dir / f).read_text().strip())
        except (OSError, ValueError):
            continue
        if not _ours(pid, root):
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + grace
        while _ours(pid, root) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _ours(pid, root):
            os.kill(pid, signal.SIGKILL)


# ------------------------------------------------------------ charm dirs

def add_probe(charm_dir):
    """bench-dispatch in front of the charm's dispatch, bench-probe.so beside."""
    os.rename(charm_dir / "dispatch", charm_dir / "dispatch.real")
    shutil.copy2(WORK / "probe" / "bench-dispatch", charm_dir / "dispatch")
    shutil.copy2(WORK / "probe" / "bench-probe.so", charm_dir / "bench-probe.so")


def etcd_charm_dir():
    out = WORK / "charms" / "etcd"
    run([REPO / "packaging" / "pack", "--binary", CHARM_BIN, "--out", out])
    add_probe(out)
    return out


def ops_charm_dir():
    out = WORK / "charms" / "etcd-ops"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(REPO / "bench" / "ops-charm", out, symlinks=True)
    (out / "venv").symlink_to(VENV)
    add_probe(out)
    return out


def legacy_charm_dir():
    """A stand-in for the Python etcd charm: on start it runs etcd (through
    the direct backend's supervisor) on whatever etcd.conf.yml is laid out,
    as systemd would run the snap's etcd. Nothing else."""
    out = WORK / "charms" / "legacy"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    for f in ("metadata.yaml", "config.yaml"):
        shutil.copy2(REPO / "packaging" / f, out / f)
    (out / "dispatch").write_text(f"""#!/bin/sh
name="${{JUJU_DISPATCH_PATH##*/}}"
conf="$ETCD_CHARM_ROOT/var/snap/etcd/common/etcd.conf.yml"
if [ "$name" = start ] && [ -f "$conf" ]; then
    mkdir -p "$ETCD_CHARM_ROOT/var/log"
    setsid "{CHARM_BIN}" supervise >>"$ETCD_CHARM_ROOT/var/log/legacy-charm.log" 2>&1 </dev/null &
fi
exit 0
""")
    (out / "dispatch").chmod(0o755)
    return out


DIRECT_ENV = ["ETCD_CHARM_SERVICE=direct", "ETCD_CHARM_ROOT={unit_root}"]
LOOPBACK_CONFIG = ["bind_to_all_interfaces=false"]


def client_urls(m, app, n):
    return ",".join(f"http://{m.address(f'{app}/{i}')}:2379" for i in range(n))


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


def tool_calls_by_context(m):
    counts = {}
    for c in m.jsonl("tool-calls.jsonl"):
        counts[c["context"]] = counts.get(c["context"], 0) + 1
    return counts


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
    if etcd_pids(m, 3) != pids_before:
        raise RuntimeError("etcd restarted during the no-change hooks")
    for app in apps:
        if not m.all_active(app, 3):
            raise RuntimeError(f"{app} is not all active after the hook runs: {m.units(app)}")

    probes = {p["context"]: p for p in m.probes()}
    calls = tool_calls_by_context(m)
    data = {}
    for hook in ("update-status", "config-changed"):
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
    m.destroy()


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


def parse_time(s):
    return datetime.datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


# ------------------------------------------------------------ 3, 5: deploy

SETTLE_S = 10  # a cluster this old takes membership changes at once


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


def hand_etcd(name, ip, data_dir, cluster, state, token, logs):
    out = open(logs / f"{name}.log", "w")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
    p = subprocess.Popen(
        ["etcd", "--name", name, "--data-dir", str(data_dir),
         "--listen-client-urls", f"http://{ip}:2379", "--advertise-client-urls", f"http://{ip}:2379",
         "--listen-peer-urls", f"http://{ip}:2380", "--initial-advertise-peer-urls", f"http://{ip}:2380",
         "--initial-cluster", cluster, "--initial-cluster-token", token,
         "--initial-cluster-state", state],
        stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
    out.close()
    return CLEANUP.proc(p)


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


# ------------------------------------------------------------ 4: migration

TOKEN = "BENCH1"


def snap_config(name, data_dir, ip):
    """etcd.conf.yml as the etcd snap rewrote it from etcd 2.x's env file."""
    return (
        "# As the etcd snap wrote it when it moved this unit from etcd 2.3 to 3.x.\n"
        f"name: '{name}'\n"
        f"data-dir: '{data_dir}'\n"
        "wal-dir: ''\n"
        "snapshot-count: \n"
        "heartbeat-interval: 100\n"
        "election-timeout: 1000\n"
        f"listen-peer-urls: 'http://{ip}:2380'\n"
        f"listen-client-urls: 'http://{ip}:2379'\n"
        f"initial-advertise-peer-urls: 'http://{ip}:2380'\n"
        f"advertise-client-urls: 'http://{ip}:2379'\n"
        "discovery: ''\n"
        "strict-reconfig-check: \n"
        "proxy: 'off'\n"
        "debug: \n")


def env_2x(name, data_dir, ip):
    return (f"ETCD_NAME={name}\nETCD_DATA_DIR=\"{data_dir}\"\n"
            f"ETCD_LISTEN_PEER_URLS=\"http://{ip}:2380\"\nETCD_LISTEN_CLIENT_URLS=\"http://{ip}:2379\"\n"
            f"ETCD_INITIAL_ADVERTISE_PEER_URLS=\"http://{ip}:2380\"\n"
            f"ETCD_INITIAL_CLUSTER=\"{name}=http://{ip}:2380\"\nETCD_INITIAL_CLUSTER_STATE=new\n"
            f"ETCD_INITIAL_CLUSTER_TOKEN={TOKEN}\nETCD_ADVERTISE_CLIENT_URLS='http://{ip}:2379'\n")


def du_bytes(path):
    return int(run(["du", "-sb", path], timeout=300).stdout.split()[0])


def put_bytes(endpoint, total, value_size=MiB):
    """Writes `total` bytes of random values through etcd's JSON gateway."""
    written, i = 0, 0
    while written < total:
        size = min(value_size, total - written)
        body = json.dumps({"key": base64.b64encode(f"bench/{i:08d}".encode()).decode(),
                           "value": base64.b64encode(os.urandom(size)).decode()}).encode()
        req = urllib.request.Request(f"{endpoint}/v3/kv/put", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            resp.read()
        written += size
        i += 1
    return i


def legacy_template(size, ip):
    """A stopped single-member etcd born under etcd0.etcd at `ip` with
    `size` bytes of values written; kept between runs of the benchmark."""
    tmpl = WORK / "migrate-templates" / f"{size // MiB}MiB"
    stamp = tmpl / "made-for"
    if stamp.exists() and stamp.read_text() == f"{ip} {TOKEN}\n":
        return tmpl / "etcd0.etcd"
    if tmpl.exists():
        shutil.rmtree(tmpl)
    tmpl.mkdir(parents=True)
    log(f"migrate: building a {size // MiB} MiB legacy member (once; kept in {tmpl})")
    p = hand_etcd("etcd0", ip, tmpl / "etcd0.etcd", f"etcd0=http://{ip}:2380", "new", TOKEN, tmpl)
    try:
        wait_for("legacy template etcd healthy", 60,
                 lambda: etcdctl(f"http://{ip}:2379", "endpoint", "health").returncode == 0)
        put_bytes(f"http://{ip}:2379", size)
    finally:
        CLEANUP.stop_procs([p], grace=20)
    (tmpl / "etcd0.log").unlink()
    stamp.write_text(f"{ip} {TOKEN}\n")
    return tmpl / "etcd0.etcd"


def step_times(m, ctx, end_time):
    """(step text, seconds) of each `step:` juju-log line of a context, up to
    the next step or pass line (or the hook's end)."""
    lines = [j for j in m.jsonl("juju-log.jsonl") if j["context"] == ctx]
    marks = [(parse_time(j["time"]), j["message"]) for j in lines
             if j["message"].startswith("step:") or j["message"].startswith("pass ")]
    marks.append((end_time, "end"))
    out = []
    for (t, msg), (t_next, _) in zip(marks, marks[1:]):
        if msg.startswith("step:"):
            out.append((msg[len("step: "):], t_next - t))
    return out


def one_migration(legacy, ours, tmpl, ip, copy):
    """A fresh model with the stand-in old charm running etcd on a copy of
    the template, refreshed to etcd-charm. Returns the timings."""
    m = Model("migrate")
    env = DIRECT_ENV + (["ETCD_CHARM_MIGRATE=copy"] if copy else [])
    out = m.deploy(legacy, 1, config=LOOPBACK_CONFIG, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"deploying the stand-in: {out.stderr}")
    if m.address("etcd/0") != ip:
        raise RuntimeError(f"unit address {m.address('etcd/0')} is not the template's {ip}")
    root = m.root("etcd/0")
    current = root / "var/snap/etcd/current"
    common = root / "var/snap/etcd/common"
    current.mkdir(parents=True, exist_ok=True)
    common.mkdir(parents=True, exist_ok=True)
    run(["cp", "-a", tmpl, current / "etcd0.etcd"], timeout=600)
    (common / "etcd.conf.yml").write_text(snap_config("etcd0", current / "etcd0.etcd", ip))
    (common / "etcd.conf.2x").write_text(env_2x("etcd0", current / "etcd0.etcd", ip))
    m.sim("exec", "etcd/0", "--", "env", "JUJU_DISPATCH_PATH=hooks/start", "./dispatch")
    wait_for("the legacy etcd healthy", 90,
             lambda: etcdctl(f"http://{ip}:2379", "endpoint", "health").returncode == 0, every=0.2)
    # etcd's own cost of the same: this member stopped and started again, by
    # hand, until it answers (what any upgrade that restarts etcd pays).
    health = f"http://{ip}:2379"
    t0 = time.monotonic()
    stop_direct_etcd(root)
    m.sim("exec", "etcd/0", "--", "env", "JUJU_DISPATCH_PATH=hooks/start", "./dispatch")
    wait_for("the legacy etcd healthy again", 90,
             lambda: etcdctl(health, "endpoint", "health").returncode == 0, every=0.05)
    restart_s = time.monotonic() - t0
    member_bytes = du_bytes(current / "etcd0.etcd" / "member")
    db_bytes = (current / "etcd0.etcd" / "member/snap/db").stat().st_size
    run(["sync"], timeout=300)
    before = {e["context"] for e in m.jsonl("hook-log.jsonl")}
    t0 = time.monotonic()
    out = m.sim("refresh", "etcd", "--path", ours, check=False)
    refresh_s = time.monotonic() - t0
    if not m.all_active("etcd", 1):
        raise RuntimeError(f"after refresh: {m.units('etcd')}\n{out.stderr[-2000:]}")
    if not (current / "member" / "wal").is_dir():
        raise RuntimeError("the member is not in the canonical data dir after the refresh")
    up = [e for e in m.jsonl("hook-log.jsonl") if e["hook"] == "upgrade-charm" and e["context"] not in before]
    ctx = up[-1]["context"]
    hook_s = up[-1]["duration_ms"] / 1000
    steps = step_times(m, ctx, parse_time(up[-1]["time"]))
    m.destroy()
    shutil.rmtree(m.dir, ignore_errors=True)
    return {"member_bytes": member_bytes, "db_bytes": db_bytes, "refresh_s": refresh_s,
            "hook_s": hook_s, "restart_s": restart_s, "steps": steps}


def step_s(steps, pattern):
    return sum(s for text, s in steps if re.search(pattern, text))


def cp_baseline(tmpl):
    """`cp -a` + `sync` of the same member tree, from a fresh copy of it."""
    base = WORK / "cp-baseline"
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    run(["cp", "-a", tmpl, base / "src"], timeout=600)
    run(["sync"], timeout=300)
    t0 = time.monotonic()
    run(["cp", "-a", base / "src" / "member", base / "dst"], timeout=600)
    run(["sync"], timeout=300)
    took = time.monotonic() - t0
    nbytes = du_bytes(base / "dst")
    shutil.rmtree(base)
    return {"s": took, "bytes": nbytes}


def upgrade_bench(results):
    """The migrate module's own measurement (tests/upgrade_bench.rs, by the
    upgrade work): its steps called directly, with the page cache dropped
    before each timed copy, one run per size. Run as it is and read back."""
    log("migrate: tests/upgrade_bench.rs (cold caches, library level)")
    p = run(["cargo", "test", "--release", "--locked", "--test", "upgrade_bench", "--",
             "--ignored", "--nocapture", "--test-threads=1"], timeout=1200, check=False, cwd=REPO)
    text = p.stdout + p.stderr
    out = {"exit": p.returncode, "sizes": []}
    cur = None
    for line in text.splitlines():
        mt = re.match(r"== member of (\d+) x 1 MiB values: (\d+) MiB on disk", line)
        if mt:
            cur = {"values_mib": int(mt.group(1)), "member_mib": int(mt.group(2))}
            out["sizes"].append(cur)
        elif cur is not None:
            mt = re.match(r"cp -a \+ sync: ([\d.]+) s, (\d+) MiB/s \(caches dropped: (\w+)\)", line)
            if mt:
                cur.update(cp_s=float(mt.group(1)), cp_mibs=float(mt.group(2)), cold=mt.group(3) == "true")
            mt = re.match(r"copy path: ([\d.]+) s in all; copy\+fsync ([\d.]+) s = (\d+) MiB/s", line)
            if mt:
                cur.update(copy_total_s=float(mt.group(1)), copy_s=float(mt.group(2)),
                           copy_mibs=float(mt.group(3)))
            mt = re.match(r"rename path: ([\d.]+) s in all", line)
            if mt:
                cur.update(rename_total_s=float(mt.group(1)))
    complete = [x for x in out["sizes"] if {"cp_mibs", "copy_mibs", "rename_total_s"} <= set(x)]
    if p.returncode != 0 or len(complete) < 2:
        out["error"] = text[-3000:]
        log("migrate: tests/upgrade_bench.rs did not give its figures; see the raw data")
    results["upgrade_bench"] = out


def bench_migrate(sizes, runs, copy_size, results):
    legacy, ours = legacy_charm_dir(), etcd_charm_dir()
    probe = Model("migrate")
    probe.deploy(legacy, 1, config=LOOPBACK_CONFIG, env=DIRECT_ENV)
    ip = probe.address("etcd/0")
    probe.destroy()
    out = {"rename": {}, "copy": [], "cp": []}
    for size in sizes:
        tmpl = legacy_template(size, ip)
        for r in range(runs):
            log(f"migrate: rename path, {size // MiB} MiB, run {r + 1}/{runs}")
            out["rename"].setdefault(size, []).append(one_migration(legacy, ours, tmpl, ip, copy=False))
    tmpl = legacy_template(copy_size, ip)
    for r in range(runs):
        log(f"migrate: copy path, {copy_size // MiB} MiB, run {r + 1}/{runs}, and cp -a + sync")
        out["copy"].append(one_migration(legacy, ours, tmpl, ip, copy=True))
        out["cp"].append(cp_baseline(tmpl))
    out["copy_size"] = copy_size
    results["migrate"] = out
    upgrade_bench(results)


# ------------------------------------------------------------ report

def machine():
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    mem = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    fs = run(["stat", "-f", "-c", "%T", WORK], timeout=10).stdout.strip()
    etcd_v = run(["etcd", "--version"], timeout=10).stdout.splitlines()[0].split()[-1]
    ops_v = run([VENV / "bin" / "python3", "-c", "import ops; print(ops.__version__)"], timeout=60).stdout.strip()
    py_v = run([VENV / "bin" / "python3", "--version"], timeout=10).stdout.strip()
    rev = run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], timeout=10).stdout.strip()
    if run(["git", "-C", REPO, "status", "--porcelain", "--", "src", "Cargo.toml", "Cargo.lock",
            "packaging", "templates"], timeout=10).stdout.strip():
        rev += " with uncommitted changes"
    return (f"{os.cpu_count()} × {cpu}, {mem // 1024 // 1024} GiB, Linux {platform.release()}, "
            f"{fs} file system; etcd {etcd_v}; {py_v}, ops {ops_v}; etcd-charm {rev}")


def goal(ok):
    return "**met**" if ok else "**missed**"


def report(results, args):
    lines = []
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    lines.append(f"Measured {today} on {results['machine']}; "
                 f"load average {results['load_before']} before, {results['load_after']} after. "
                 "Median [min–max] (n runs); ratios are etcd-charm ÷ peer, taken pair by pair "
                 "within this run.")
    lines.append("")
    lines.append("| measure | etcd-charm | peer | peer value | ratio | goal |")
    lines.append("|---|---|---|---|---|---|")
    verdicts = []
    h = results.get("hooks")
    if h:
        for hook in ("update-status", "config-changed"):
            a, b = h[f"{hook}|etcd"], h[f"{hook}|etcd-ops"]
            pairs = [x["wall_ms"] / y["wall_ms"] for x, y in zip(a, b)]
            label = hook if hook == "update-status" else "config-changed, nothing to change"
            g = ""
            if hook == "update-status":
                ok = med(pairs) <= 0.05
                g = f"≤ 0.05: {goal(ok)}"
                verdicts.append(("update-status ≤ 1/20 of the ops charm", ok,
                                 f"ratio {ratio(med(pairs))}"))
            lines.append(f"| {label}: hook wall time | {spread([x['wall_ms'] for x in a], ms)} | "
                         f"ops charm | {spread([y['wall_ms'] for y in b], ms)} | "
                         f"{spread(pairs, ratio)} | {g} |")
        for hook in ("update-status", "config-changed"):
            a, b = h[f"{hook}|etcd"], h[f"{hook}|etcd-ops"]
            rss = [x["rss_mib"] for x in a]
            pairs = [x["rss_mib"] / y["rss_mib"] for x, y in zip(a, b)]
            ok = max(rss) <= 20
            verdicts.append((f"{hook} peak RSS ≤ 20 MiB", ok, f"max {mib(max(rss))}"))
            lines.append(f"| {hook}: peak RSS of the hook process | {spread(rss, mib)} | ops charm | "
                         f"{spread([y['rss_mib'] for y in b], mib)} | {spread(pairs, ratio)} | "
                         f"≤ 20 MiB: {goal(ok)} |")
        for hook in ("update-status", "config-changed"):
            a, b = h[f"{hook}|etcd"], h[f"{hook}|etcd-ops"]
            lines.append(f"| {hook}: hook-tool calls | {med([x['tool_calls'] for x in a]):.0f} | ops charm | "
                         f"{med([y['tool_calls'] for y in b]):.0f} | "
                         f"{ratio(med([x['tool_calls'] for x in a]) / med([y['tool_calls'] for y in b]))} | |")
    d = results.get("deploy")
    if d:
        dep = [r["deploy_s"] for r in d]
        boot = [r["bootstrap_s"] for r in d]
        pairs = [r["deploy_s"] / r["bootstrap_s"] for r in d]
        ok = med(pairs) <= 2
        verdicts.append(("deploy -n 3 ≤ 2× etcd's own bootstrap", ok, f"ratio {ratio(med(pairs))}"))
        lines.append(f"| `deploy -n 3` to all active | {spread(dep, secs)} | etcd by hand: static bootstrap "
                     f"of 3 until `endpoint health` passes | {spread(boot, secs)} | {spread(pairs, ratio)} | "
                     f"≤ 2: {goal(ok)} |")
        add = [r["add_unit_s"] for r in d]
        join = [r["join_s"] for r in d]
        pairs = [r["add_unit_s"] / r["join_s"] for r in d]
        ok = med(pairs) <= 2
        verdicts.append(("add-unit ≤ 2× etcd's own join", ok, f"ratio {ratio(med(pairs))}"))
        lines.append(f"| `add-unit` to active (cluster up {SETTLE_S} s) | {spread(add, secs)} | etcd by hand: "
                     f"learner add, start, promote until it succeeds, `endpoint health` | {spread(join, secs)} | "
                     f"{spread(pairs, ratio)} | ≤ 2: {goal(ok)} |")
    mg = results.get("migrate")
    if mg:
        sizes = sorted(mg["rename"])
        own = {size: [(step_s(r["steps"], r"^snapshot") + step_s(r["steps"], r"one rename")) * 1000
                      for r in mg["rename"][size]] for size in sizes}
        for size in sizes:
            rows = mg["rename"][size]
            hook = [r["hook_s"] for r in rows]
            restart = [r["restart_s"] for r in rows]
            member = med([r["member_bytes"] for r in rows]) / MiB
            lines.append(
                f"| rename path, {size // MiB} MiB of values (member dir {member:.0f} MiB): the upgrade-charm "
                f"hook | {spread(hook, secs)} | etcd by hand: stop and start the same member until it answers | "
                f"{spread(restart, secs)} | {spread([a / b for a, b in zip(hook, restart)], ratio)} | |")
            rename = [step_s(r["steps"], r"one rename") * 1000 for r in rows]
            g = ""
            if size != sizes[0]:
                growth = med(own[size]) / med(own[sizes[0]])
                g = f"flat (≤ 1.5× the {sizes[0] // MiB} MiB run): ×{ratio(growth)} {goal(growth <= 1.5)}"
            lines.append(
                f"| … the migration's own steps: db snapshot + rename (the rename alone) | "
                f"{spread(own[size], ms)} ({ms(med(rename))}) | | | | {g} |")
        growth = med(own[sizes[-1]]) / med(own[sizes[0]])
        rename_growth = (med([step_s(r["steps"], r"one rename") for r in mg["rename"][sizes[-1]]])
                         / max(1e-6, med([step_s(r["steps"], r"one rename") for r in mg["rename"][sizes[0]]])))
        verdicts.append(("rename-path migration flat in data size", growth <= 1.5,
                         f"db snapshot + rename ×{ratio(growth)} from {sizes[0] // MiB} MiB to "
                         f"{sizes[-1] // MiB} MiB; the rename alone ×{ratio(rename_growth)}"))
        copy_tp = [r["member_bytes"] / MiB / step_s(r["steps"], r"^copy ") for r in mg["copy"]]
        cp_tp = [c["bytes"] / MiB / c["s"] for c in mg["cp"]]
        pairs = [a / b for a, b in zip(copy_tp, cp_tp)]
        ok = med(pairs) >= 0.8
        verdicts.append(("copy path ≥ 0.8× cp -a + sync, warm caches (through the hook)", ok,
                         f"ratio {ratio(med(pairs))}"))
        member = med([r["member_bytes"] for r in mg["copy"]]) / MiB
        lines.append(f"| copy path, {mg['copy_size'] // MiB} MiB of values (member dir {member:.0f} MiB): "
                     f"throughput of the copy step (copy + fsync) | {spread(copy_tp, mibs)} | `cp -a` + `sync` of "
                     f"the same tree | {spread(cp_tp, mibs)} | {spread(pairs, ratio)} | ≥ 0.8: {goal(ok)} |")
        ub = results.get("upgrade_bench", {})
        done = [x for x in ub.get("sizes", []) if {"cp_mibs", "copy_mibs", "rename_total_s"} <= set(x)]
        if len(done) >= 2 and "error" not in ub:
            lo, hi = done[0], done[-1]
            cold = "caches dropped" if hi.get("cold") else "caches NOT dropped"
            lines.append(f"| tests/upgrade_bench.rs ({cold}, the module's steps called directly, 1 run): "
                         f"rename path (db snapshot + rename), {lo['values_mib']} MiB → {hi['values_mib']} MiB "
                         f"of values | {secs(lo['rename_total_s'])} → {secs(hi['rename_total_s'])} | | | "
                         f"×{ratio(hi['rename_total_s'] / max(lo['rename_total_s'], 1e-3))} | flat: "
                         f"{goal(hi['rename_total_s'] / max(lo['rename_total_s'], 1e-3) <= 1.5)} |")
            r_cold = hi["copy_mibs"] / hi["cp_mibs"]
            lines.append(f"| tests/upgrade_bench.rs ({cold}, 1 run): copy step, {hi['values_mib']} MiB of values "
                         f"(member dir {hi['member_mib']} MiB) | {mibs(hi['copy_mibs'])} | `cp -a` + `sync`, "
                         f"{cold} | {mibs(hi['cp_mibs'])} | {ratio(r_cold)} | ≥ 0.8: {goal(r_cold >= 0.8)} |")
            verdicts.append(("copy path ≥ 0.8× cp -a + sync, cold caches (tests/upgrade_bench.rs, 1 run)",
                             r_cold >= 0.8, f"ratio {ratio(r_cold)}"))
        elif ub:
            lines.append("| tests/upgrade_bench.rs | did not run to the end: see the raw data | | | | |")
        hook = [r["hook_s"] for r in mg["copy"]]
        restart = [r["restart_s"] for r in mg["copy"]]
        lines.append(f"| … the whole upgrade-charm hook on the copy path | {spread(hook, secs)} | etcd by hand: "
                     f"stop and start the same member | {spread(restart, secs)} | "
                     f"{spread([a / b for a, b in zip(hook, restart)], ratio)} | |")
    lines.append("")
    dt = results.get("deploy_tool_calls")
    if dt:
        lines.append("Hook-tool calls per hook during `deploy -n 3` (median over every run of that hook, "
                     "all units, all deploy runs): " + ", ".join(
                         f"{k} {med(v):.0f}" for k, v in sorted(dt.items(), key=lambda kv: -med(kv[1]))) + ".")
        lines.append("")
    lines.append("Goals:")
    for name, ok, why in verdicts:
        lines.append(f"- {name}: {'met' if ok else 'missed'} ({why})")
    lines.append("")
    notes = notes_section(results)
    if notes:
        lines.append("Where etcd-charm's time goes:")
        lines.extend(notes)
        lines.append("")
    lines.append("Method: " + METHOD)
    return today, "\n".join(lines) + "\n"


METHOD = (
    "hook wall time and peak RSS come from a probe preloaded into each benchmarked hook "
    "(bench/probe/): wall time from the dispatch's exec to the hook process's exit, and "
    "peak RSS as the process's VmHWM read at exit: the charm binary or the Python "
    "interpreter alone, never the hook tools, etcdctl or etcd, which are separate processes "
    "(etcd under the direct backend included). jujusim's own `duration_ms` polls the hook "
    "in steps of up to 20 ms, too coarse for hooks of a few tens of ms; it is kept in the raw data. "
    "config-changed is fired with nothing to change by flipping `snapshot_count` between "
    "`auto` and `\"\"`, which both charms read as the same value. Both charms run in one "
    "jujusim model, so their hook tools see the same model file. The ops charm's dispatch "
    "execs Python from a venv (ops from PyPI). deploy/add-unit time runs from the jujusim "
    "command to every unit showing `Healthy with N known peers`. Migration: a stand-in for "
    "the Python charm runs etcd on a legacy `etcd0.etcd` member (values of 1 MiB written "
    "through etcd's gateway), then `jujusim refresh` to etcd-charm; step times come from the "
    "charm's `step:` log lines (ms resolution); the copy path is forced on one file system "
    "with ETCD_CHARM_MIGRATE=copy; page caches are warm, as on a running unit being refreshed. "
    "tests/upgrade_bench.rs, the upgrade work's own measurement, is run as it is for the same "
    "steps called directly with page caches dropped.")


def notes_section(results):
    out = []
    parts = results.get("hook_parts")
    h = results.get("hooks")
    if parts and h:
        call = med(parts["call_spacing_ms"])
        ours = h["update-status|etcd"]
        wall = med([r["wall_ms"] for r in ours])
        n = med([r["tool_calls"] for r in ours])
        stretch = max(0.0, med(parts["longest_stretch_ms"]) - call)
        rest = wall - n * call - stretch

        def share(x):
            return f"{ms(x)} ({100 * x / wall:.0f}%)"
        progs = ", ".join(f"`{p}`" for p in parts["programs"]) or "none"
        out.append(f"- etcd-charm's update-status ({ms(wall)}): {n:.0f} hook-tool calls at {ms(call)} each "
                   f"(the spacing of back-to-back calls; {ms(med(parts['tool_call_ms']))} measured alone: a "
                   f"jujusim tool starts, locks, reads and rewrites the model file) {share(n * call)}; its "
                   f"longest stretch without a tool call, where it asks etcd, {share(stretch)}; the rest "
                   f"(process start, reading files, the dispatch script) {share(rest)}. Programs it runs "
                   f"besides hook tools: {progs}.")
        call = med(parts["tool_call_ms"])
        theirs = h["update-status|etcd-ops"]
        wall = med([r["wall_ms"] for r in theirs])
        n = med([r["tool_calls"] for r in theirs])
        health = med(parts["etcdctl_health_ms"])
        imp = med(parts["import_ops_ms"])
        rest = wall - n * call - health - imp
        out.append(f"- the ops charm's update-status ({ms(wall)}): starting Python and importing ops "
                   f"{share(imp)} (bare Python {ms(med(parts['bare_python_ms']))}); `etcdctl endpoint "
                   f"health` {share(health)}; {n:.0f} hook-tool calls {share(n * call)}; the framework and "
                   f"the charm's code {share(rest)}.")
    d = results.get("deploy")
    if d:
        hooks = med([r["deploy_hooks"] for r in d])
        hook_s = med([r["deploy_hook_ms_sum"] for r in d]) / 1000
        promote = med([r["membership"]["promote_s"] for r in d])
        add = med([r["membership"]["add_s"] for r in d])
        fails = {}
        for r in d:
            for k, v in r["membership"]["failures"].items():
                fails[k] = fails.get(k, 0) + v
        why = "; ".join(f"{k} ×{v}" for k, v in sorted(fails.items(), key=lambda kv: -kv[1]))
        out.append(f"- `deploy -n 3`: {hooks:.0f} hooks, one at a time (jujusim runs one hook at a time; "
                   f"Juju runs units side by side), summing {hook_s:.1f} s of {med([r['deploy_s'] for r in d]):.1f} s. "
                   f"Of that, {promote:.1f} s is the leader's promote retry loop and {add:.1f} s its member-add "
                   f"retry loop (median per run); failed attempts over {len(d)} run(s): {why or 'none'}.")
        new_unit = [sum(ms_ for _, ms_ in r["add_new_unit_hooks"]) / 1000 for r in d]
        n_new = med([len(r["add_new_unit_hooks"]) for r in d])
        out.append(f"- `add-unit`: {med([r['add_hooks'] for r in d]):.0f} hooks summing "
                   f"{med([r['add_hook_ms_sum'] for r in d]) / 1000:.1f} s; {n_new:.0f} of them on the new unit "
                   f"({med(new_unit):.1f} s); promote loop {med([r['add_membership']['promote_s'] for r in d]):.1f} s. "
                   f"The longest hook (run 1): {d[0]['add_longest']['context']}, "
                   f"{d[0]['add_longest']['ms'] / 1000:.2f} s.")
    mg = results.get("migrate")
    if mg:
        for label, rows in ((f"rename path at {max(mg['rename']) // MiB} MiB", mg["rename"][max(mg["rename"])]),
                            (f"copy path at {mg['copy_size'] // MiB} MiB", mg["copy"])):
            keys = []
            for r in rows:
                for text, _ in r["steps"]:
                    k = step_key(text)
                    if k not in keys:
                        keys.append(k)
            parts = []
            for k in keys:
                t = med([sum(x for text, x in r["steps"] if step_key(text) == k) for r in rows])
                parts.append(f"{k} {secs(t) if t >= 0.1 else ms(t * 1000)}")
            out.append(f"- upgrade-charm on the {label} ({secs(med([r['hook_s'] for r in rows]))}), "
                       "step by step (the last step of each pass also holds the next pass's look at the "
                       "model): " + ", ".join(parts) + ".")
    return out


def step_key(text):
    """A step's log text without its paths and IDs: `snapshot the bbolt db`."""
    words = []
    for w in text.split():
        if "/" in w or any(c.isdigit() for c in w) or w.startswith("("):
            break
        words.append(w)
    words = words[:4]
    while len(words) > 1 and words[-1] in ("of", "to", "the", "in", "and", "a"):
        words.pop()
    return " ".join(words) or text[:30]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="hooks,deploy,migrate",
                    help="comma-separated sections (default: all)")
    ap.add_argument("--hook-runs", type=int, default=21)
    ap.add_argument("--deploy-runs", type=int, default=5)
    ap.add_argument("--migrate-runs", type=int, default=3)
    ap.add_argument("--sizes", default="10,100,1024", help="legacy member sizes, MiB of values")
    ap.add_argument("--copy-size", type=int, default=1024, help="MiB of values for the copy path")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: 6 hook runs, 1 deploy run, 10 and 100 MiB, 1 migration run")
    ap.add_argument("--out", default=str(REPO / "bench"), help="where results-<date>.md goes")
    args = ap.parse_args()
    if args.quick:
        args.hook_runs, args.deploy_runs, args.migrate_runs = 6, 1, 1
        args.sizes, args.copy_size = "10,100", 100
    sections = set(args.only.split(","))
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    results = {"machine": machine(), "load_before": os.getloadavg()[0]}
    started = time.monotonic()
    try:
        if "hooks" in sections:
            bench_hooks(args.hook_runs, results)
        if "deploy" in sections:
            bench_deploy(args.deploy_runs, results)
        if "migrate" in sections:
            sizes = [int(s) * MiB for s in args.sizes.split(",")]
            bench_migrate(sizes, args.migrate_runs, args.copy_size * MiB, results)
    finally:
        CLEANUP.all()
    results["load_after"] = os.getloadavg()[0]
    results["minutes"] = (time.monotonic() - started) / 60
    today, text = report(results, args)
    raw = WORK / f"raw-{today}.json"
    raw.write_text(json.dumps(results, indent=1, default=str))
    out = Path(args.out) / f"results-{today}.md"
    command = " ".join(["bench/run"] + sys.argv[1:])
    out.write_text(f"# etcd-charm benchmarks, {today}\n\n`{command}` ({results['minutes']:.1f} min)\n\n" + text)
    print(text)
    log(f"written {out} (raw data: {raw})")


HOOK_TOOLS = ["is-leader", "leader-get", "leader-set", "config-get", "relation-ids", "relation-list",
              "relation-get", "relation-set", "network-get", "unit-get", "status-set", "status-get",
              "application-version-set", "open-port", "close-port", "opened-ports", "goal-state",
              "juju-log", "state-get", "state-set", "state-delete", "storage-get", "storage-list",
              "action-get", "action-set", "action-fail", "action-log"]

if __name__ == "__main__":
    main()
