"""What every bench section shares: paths, commands with bounds, the
statistics and their formats, cleanup of everything started, a jujusim
model, the charm dirs, etcd run by hand, and log parsing."""

import datetime
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
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


def tool_calls_by_context(m):
    counts = {}
    for c in m.jsonl("tool-calls.jsonl"):
        counts[c["context"]] = counts.get(c["context"], 0) + 1
    return counts


def parse_time(s):
    return datetime.datetime.strptime(s.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


# ------------------------------------------------------------ 3, 5: deploy

SETTLE_S = 10  # a cluster this old takes membership changes at once


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


def du_bytes(path):
    return int(run(["du", "-sb", path], timeout=300).stdout.split()[0])


def step_s(steps, pattern):
    return sum(s for text, s in steps if re.search(pattern, text))


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
