"""The markdown table (and its method and notes) from the sections' results."""

import datetime
import os
import platform

from harness import (
    MiB, REPO, SETTLE_S, VENV, WORK, med, mib, mibs, ms, ratio, run, secs, spread, step_key,
    step_s,
)


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
        pr = results.get("hooks_priced")
        if pr:
            # Calls per hook kind, and wall time with calls at jujusim's cost
            # and re-priced at a real controller's (hooks.REAL_CALL_MS).
            real, sim = pr["real_call_ms"], pr["sim_call_ms"]
            for hook in ("update-status", "config-changed", "cluster-relation-changed"):
                a, b = pr.get(f"{hook}|etcd"), pr.get(f"{hook}|etcd-ops")
                if not (a and b):
                    continue
                if hook == "cluster-relation-changed":
                    lines.append(f"| {hook}, nothing to change: hook-tool calls | {a['calls']:.0f} | ops charm | "
                                 f"{b['calls']:.0f} | {ratio(a['calls'] / b['calls'])} | |")
                lines.append(f"| {hook}: wall time, calls at jujusim's {ms(sim)} | {ms(a['wall_sim_ms'])} | "
                             f"ops charm | {ms(b['wall_sim_ms'])} | {ratio(a['wall_sim_ms'] / b['wall_sim_ms'])} | |")
                lines.append(f"| {hook}: wall time, calls at a controller's {ms(real)} | {ms(a['wall_real_ms'])} | "
                             f"ops charm | {ms(b['wall_real_ms'])} | {ratio(a['wall_real_ms'] / b['wall_real_ms'])} | |")
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
        seq = [r["sequential_s"] for r in d if "sequential_s" in r]
        if seq:
            pairs = [r["deploy_s"] / r["sequential_s"] for r in d if "sequential_s" in r]
            lines.append(f"| `deploy -n 3` to all active | {spread(dep, secs)} | etcd by hand: 1 member, then 2 "
                         f"learner joins back to back (add, start, promote, `endpoint health`) | {spread(seq, secs)} | "
                         f"{spread(pairs, ratio)} | |")
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
        # While etcd is down: the offline db snapshot (only when etcd was not
        # running; a running member is snapshotted online before the stop)
        # and the rename.
        own = {size: [(step_s(r["steps"], r"^snapshot the bbolt db") + step_s(r["steps"], r"one rename")) * 1000
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
                g = (f"flat (≤ 1.5× the {sizes[0] // MiB} MiB run or ≤ {FLAT_MS:.0f} ms more): "
                     f"×{ratio(growth)} {goal(flat(own[size], own[sizes[0]]))}")
            lines.append(
                f"| … the migration's own steps while etcd is down: offline db snapshot, if any, + rename "
                f"(the rename alone) | "
                f"{spread(own[size], ms)} ({ms(med(rename))}) | | | | {g} |")
        growth = med(own[sizes[-1]]) / med(own[sizes[0]])
        rename_growth = (med([step_s(r["steps"], r"one rename") for r in mg["rename"][sizes[-1]]])
                         / max(1e-6, med([step_s(r["steps"], r"one rename") for r in mg["rename"][sizes[0]]])))
        verdicts.append(("rename-path migration flat in data size", flat(own[sizes[-1]], own[sizes[0]]),
                         f"steps while etcd is down ×{ratio(growth)} from {sizes[0] // MiB} MiB to "
                         f"{sizes[-1] // MiB} MiB ({ms(med(own[sizes[0]]))} → {ms(med(own[sizes[-1]]))}); "
                         f"the rename alone ×{ratio(rename_growth)}"))
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
            # No etcd runs here, so this is the offline path (the db copied
            # while nothing serves it), for reference: a hook on a running
            # member takes its snapshot online, before the stop (row above).
            lines.append(f"| tests/upgrade_bench.rs ({cold}, the module's steps called directly, 1 run): "
                         f"rename path with etcd NOT running (offline db snapshot + rename), "
                         f"{lo['values_mib']} MiB → {hi['values_mib']} MiB "
                         f"of values | {secs(lo['rename_total_s'])} → {secs(hi['rename_total_s'])} | | | "
                         f"×{ratio(hi['rename_total_s'] / max(lo['rename_total_s'], 1e-3))} | (reference) |")
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
    if lines[-1] == "|---|---|---|---|---|---|":
        del lines[-3:]  # no section of the main table ran
    lines.append("")
    av = results.get("avail")
    if av:
        lines.extend(avail_table(av, verdicts))
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


# Operations that take one member down at a time: the goal (a
# write gap of at most 1.5 s and no failed write) applies to them.
SINGLE_MEMBER_OPS = ("refresh", "config", "defrag", "migration", "upgrade", "ca-rotation")
GAP_GOAL_S = 1.5
# Flat migration downtime: within 1.5× of the smallest size, or a few tens
# of ms more (a rename is ms; a ratio of two ms figures is noise).
FLAT_MS = 50.0


def flat(big_ms, small_ms):
    a, b = med(big_ms), med(small_ms)
    return a <= 1.5 * b or a - b <= FLAT_MS


def avail_table(av, verdicts):
    """The availability rows, each beside the floors of its own cluster."""
    rows = av["rows"]
    out = []
    if rows:
        r0 = rows[0]
        out.append(f"Availability (tests/availability_bench.rs, 1 run each): a writer on every member, one put "
                   f"every {r0['put_every_ms']} ms, each bounded by {r0['put_timeout_ms']} ms (connecting "
                   "included, over every member it is tried on: a put a member refuses or drops goes to the next one "
                   "within the same budget, as an etcd client's balancer does), from 2 s before the operation "
                   "until 2 s after every member answers and every unit is active again. Gap: the longest "
                   "time between two acknowledged writes' invocations (at least one put plus the 20 ms "
                   "pause, ~50 ms). Floors from the same cluster in the same run.")
        out.append("")
    out.append("| operation | longest write gap | failed writes (timed out) | lost | most members down | "
               "to healthy | floor: a member restarted by hand | floor: an election | goal |")
    out.append("|---|---|---|---|---|---|---|---|---|")

    def fig(r):
        return f"{r['gap_s']:.3f} s, {r['failed']} failed"
    routine = [r for r in rows if r["test"] == "routine_operations"]
    for test in ("routine_operations", "legacy_migration", "version_upgrade", "ca_rotation"):
        mine = [r for r in rows if r["test"] == test]
        # The CA rotation's TLS cluster has no floors of its own: the
        # routine cluster's (same raft timings) stand beside it.
        floors_from = routine if test == "ca_rotation" else mine
        restart = next((r for r in floors_from if r["kind"] == "floor-restart"), None)
        election = next((r for r in floors_from if r["kind"] == "floor-election"), None)
        for r in mine:
            if r["kind"].startswith("floor"):
                continue
            ok = r["gap_s"] <= GAP_GOAL_S and r["failed"] == 0
            if r["kind"] in SINGLE_MEMBER_OPS:
                g = f"≤ {GAP_GOAL_S} s, 0 failed: {goal(ok)}"
                floor = f"; floor {fig(restart)}" if restart else ""
                verdicts.append((f"{r['row']}: gap ≤ {GAP_GOAL_S} s and 0 failed writes", ok,
                                 f"gap {r['gap_s']:.3f} s, {r['failed']} failed{floor}"))
            else:
                g = (f"a failure, not an operation (etcd's election timeout bounds it): gap ≤ {GAP_GOAL_S} s "
                     f"{'yes' if r['gap_s'] <= GAP_GOAL_S else 'no'}")
            out.append(f"| {r['row']} | {r['gap_s']:.3f} s | {r['failed']} ({r['timeouts']}) | {r['lost']} | "
                       f"{r['max_down']} | {r['took_s']:.1f} s | {fig(restart) if restart else '—'} | "
                       f"{fig(election) if election else '—'} | {g} |")
        for r in (restart, election) if test != "ca_rotation" else ():
            if r:
                out.append(f"| {r['row']} | {r['gap_s']:.3f} s | {r['failed']} ({r['timeouts']}) | {r['lost']} | "
                           f"{r['max_down']} | {r['took_s']:.1f} s | | | floor |")
    for what, why in av["not_measured"]:
        out.append(f"| {what} | not measured: {why} | | | | | | | |")
    for e in av["errors"]:
        out.append(f"| (error) | {e.splitlines()[0]}: see the raw data | | | | | | | |")
    ops = [r for r in rows if not r["kind"].startswith("floor")]
    if ops:
        refused = sum(r["failed"] - r["timeouts"] for r in rows)
        timed = sum(r["timeouts"] for r in rows)
        out.append("")
        where = ", ".join(f"{r['kind']} {r['timeouts']}" for r in rows if r["timeouts"]) or "none"
        out.append(f"Failed writes: {refused} failed with an error before the timeout, {timed} ran out of the "
                   f"{rows[0]['put_timeout_ms']} ms timeout (by row: {where}). A member being stopped fails "
                   "the put in flight on it or refuses the connection (the writer then moves to the next "
                   "member), by hand as well as by the charm, so a rolling restart costs a client up to one "
                   "failed put per member it is on when that member goes down; the gap shows whether "
                   "anything waited.")
    return out


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
        out.append(f"- `deploy -n 3`: {hooks:.0f} hooks (jujusim, like Juju, runs one hook at a time per unit "
                   f"and the units side by side), summing {hook_s:.1f} s of {med([r['deploy_s'] for r in d]):.1f} s "
                   f"wall time. Of that, {promote:.1f} s is the leader's promote retry loop and {add:.1f} s its "
                   f"member-add retry loop (median per run); failed attempts over {len(d)} run(s): {why or 'none'}.")
        seq = [r for r in d if "sequential_s" in r]
        if seq:
            refused = {}
            for r in seq:
                for k, v in r["sequential_refused"].items():
                    refused[k] = refused.get(k, 0) + v
            why = "; ".join(f"{k} ×{v}" for k, v in sorted(refused.items(), key=lambda kv: -kv[1]))
            out.append(f"- What bounds `deploy -n 3`: the charm grows the cluster one learner at a time (a unit "
                       f"cannot join before it is a member), and etcd refuses a member add until its leader has "
                       f"been connected to every voting member for 5 s (HealthInterval, strict-reconfig-check on "
                       f"by default): the second join waits for it. etcd by hand doing the same, back to back, "
                       f"takes {secs(med([r['sequential_s'] for r in seq]))} (refused adds: {why or 'none'}); the "
                       f"static bootstrap of 3 does not pay it (every member is in initial-cluster) but needs every "
                       f"address known before any member starts, which a deploy does not have.")
        out.append(f"- What bounds `add-unit` (a cluster settled for {SETTLE_S} s, so no 5 s wait): the chain "
                   f"of hooks that must follow one another across two units (the new unit publishing its peer "
                   f"URL, a leader hook adding it as a learner and publishing the initial-cluster, the new "
                   f"unit's hook starting etcd, a leader hook promoting it once it has caught up), each a "
                   f"process with its hook-tool round trips; etcd by hand makes the same three etcdctl calls "
                   f"and one start.")
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
