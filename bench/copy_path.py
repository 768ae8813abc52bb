"""Section `migrate`, the copy figures: `cp -a` + `sync` of the same member,
and tests/upgrade_bench.rs (the copy engine at library level, cold caches)."""

import re
import shutil
import time

from harness import REPO, WORK, du_bytes, log, run


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
