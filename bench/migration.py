"""Section `migrate`: a legacy member moved by `jujusim refresh` (rename and
copy paths) beside a plain restart of the same member."""

import base64
import json
import os
import shutil
import time
import urllib.request

from harness import (
    CLEANUP, DIRECT_ENV, LOOPBACK_CONFIG, MiB, Model, WORK, du_bytes, etcd_charm_dir,
    etcdctl, hand_etcd, legacy_charm_dir, log, parse_time, run, stop_direct_etcd, wait_for,
)
from copy_path import cp_baseline, upgrade_bench


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
