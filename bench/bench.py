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
  avail    the longest write gap and failed writes under a writer on every
           member during a refresh, a config change needing restarts, the
           rolling defrag, the raft leader killed, the legacy migration
           of 3 units and an etcd 3.4 → 3.5 channel upgrade (systemd
           machines), each beside its floors from the same cluster (a
           member restarted by hand, a move-leader):
           tests/availability_bench.rs; and a CA rotation (the easyrsa-like
           stand-in's rotate-ca, tests/charm_tls_rotation.rs) beside the
           routine cluster's floors.

Layout: this file parses the options and runs the sections; each section
is its own module (hooks.py, deploy.py, migration.py with copy_path.py,
availability.py),
all on harness.py (commands with bounds, statistics and their formats,
cleanup, the jujusim model, charm dirs, etcd by hand); report.py makes the
table.

Everything lives under target/bench/; every etcd started here listens on
loopback only (jujusim's 127.X.Y.N, or 127.88.x.y for etcd run by hand) and
is stopped on the way out, also on failure or Ctrl-C.
"""

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from harness import CLEANUP, MiB, REPO, WORK, log, on_signal
from hooks import bench_hooks
from deploy import bench_deploy
from migration import bench_migrate
from availability import bench_avail
from report import machine, report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="hooks,deploy,migrate,avail",
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
        if "avail" in sections:
            bench_avail(results)
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


if __name__ == "__main__":
    main()
