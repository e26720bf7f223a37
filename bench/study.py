#!/usr/bin/env python3
"""The paper's comparison in one command: writes docs/results.md and its plots from scratch.

For each case (All-Gather on a100x4, a100x4-degraded, dgx1, ndv2x2 and h100x4; Reduce-Scatter
and All-Reduce on a100x4), 1 KiB to 1 GiB: ours (explore, offline proposer, fixed seed and
budget), NCCL's tuner pick and its single algorithms (ring, tree, PAT where NCCL runs them),
ForestColl, TACCL and TE-CCL, each synthesizer at its best setting per size from the sweep its
paper runs (TACCL: chunks per GPU x instances; TE-CCL: chunks x epoch link), every setting
under a solver time limit and a wall-clock cap. Then the scaling table: a100xK from 8 to 1,024
GPUs, ours against TACCL and TE-CCL (and ForestColl) with the same caps.

    bench/study.py [--optiflow build/release/bin/optiflow] [--out docs] [--budget 300]
                   [--seed 5] [--time-limit 30] [--cap 90] [--jobs 2] [--quick]

Prints every table as it goes; writes OUT/results.md and OUT/images/results/*.svg. Nothing in
results.md is typed by hand: rerun this to regenerate it.
"""
import argparse
import concurrent.futures
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

SIZES = "1K:1G"
CASES = [("a100x4", "allgather"), ("a100x4-degraded", "allgather"), ("dgx1", "allgather"),
         ("ndv2x2", "allgather"), ("h100x4", "allgather"), ("a100x4", "reducescatter"),
         ("a100x4", "allreduce")]
NCCL = ["nccl", "nccl-ring", "nccl-tree", "nccl-pat"]
# Ours' floor: explore's default (NCCL's pick, ForestColl) and TACCL with its instances, which
# explore builds node-limited and leaves out over 64 GPUs (docs/explore.md, "The floor").
EXPLORE_FLOOR = "nccl,forestcoll,taccl"
# What each synthesizer's paper sweeps: (label, extra command-line arguments).
SWEEPS = {
    "forestcoll": [("", [])],
    # Instances replicate one synthesis; chunks 2 is a MILP 30 times the size, so it is swept at
    # the ends of the instance range only.
    "taccl": [(f"chunks {c}, instances {i}", ["--taccl-chunks", str(c), "--taccl-instances", str(i)])
              for c, instances in ((1, (1, 2, 4, 8)), (2, (1, 8))) for i in instances],
    "teccl": [(f"chunks {c}, epoch {e}", ["--teccl-chunks", str(c), "--teccl-epoch", e])
              for c in (1, 2, 4) for e in ("fastest", "slowest")],
}
SCALING = [("a100x1", 8), ("a100x2", 16), ("a100x4", 32), ("a100x16", 128), ("a100x64", 512),
           ("a100x128", 1024)]
SCALING_SIZES = ["64M", "1G"]


def log(text):
    print(text, file=sys.stderr, flush=True)


def run(command, timeout=None):
    """(exit code or None on timeout, stdout, stderr, wall seconds)."""
    start = time.monotonic()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        return done.returncode, done.stdout, done.stderr, time.monotonic() - start
    except subprocess.TimeoutExpired:
        return None, "", "", time.monotonic() - start


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1].removeprefix("command line: error: ") if lines else "failed"


def x_bound_column(table):
    """Explore's x bound per size, from its table (size, busbw, x bound, ...)."""
    found = []
    for line in table.splitlines():
        fields = line.split()
        if len(fields) > 2 and fields[0] in SCALING_SIZES:
            found.append(float(fields[2]))
    return found


def best_program_column(table):
    """Explore's winner per size label (its table's last column: `#id program...` or
    `baseline NAME (no program beat it here)`)."""
    found = {}
    for line in table.splitlines():
        fields = line.split(None, 6)
        if len(fields) == 7 and fields[0][:-1].isdigit() and fields[0][-1] in "KMG":
            found[fields[0]] = fields[6].removesuffix(" (no program beat it here)")
    return found


def size_label(size):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return str(size)


class Study:
    def __init__(self, args, work):
        self.args, self.work = args, work

    def optiflow(self, *arguments, timeout=None):
        return run([self.args.optiflow, *arguments], timeout)

    # ---- one case ----------------------------------------------------------------------------
    def explore(self, topo, collective, sizes, budget, floor=()):
        """(explore's stdout, wall seconds, its database, its winners' directory)."""
        db = os.path.join(self.work, f"{topo}-{collective}.db")
        winners = os.path.join(self.work, f"out-{topo}-{collective}")
        code, out, err, wall = self.optiflow(
            "explore", "--topo", topo, "--collective", collective, "--sizes", sizes,
            "--budget", str(budget), "--seed", str(self.args.seed), "--db", db,
            "--out", winners, *floor)
        if code != 0:
            raise SystemExit(f"explore on {topo} ({collective}) failed: {last_line(err)}")
        return out, wall, db, winners

    def compare(self, topo, collective, sizes, with_, db):
        code, out, err, _ = self.optiflow("compare", "--topo", topo, "--collective", collective,
                                          "--sizes", sizes, "--with", with_, "--db", db,
                                          "--json", "--no-store")
        return json.loads(out) if code == 0 else None

    def ours(self, topo, collective):
        """The comparison JSON with ours alone: explore's answer per size, the schedule it
        wrote there (its best program or, where none beat it, its floor's baseline) simulated
        again, named as explore's table names it."""
        table, wall, db, winners = self.explore(topo, collective, SIZES, self.args.budget,
                                                ["--floor", EXPLORE_FLOOR])
        doc = self.compare(topo, collective, SIZES, "nccl", db)
        if doc is None:
            raise SystemExit(f"nccl does not build on {topo} ({collective})")
        choices = best_program_column(table)
        results = []
        for size in doc["sizes"]:
            schedule = os.path.join(winners, f"{collective}-{topo}-{size}.json")
            code, out, err, _ = self.optiflow("sim", schedule, "--topo", topo, "--collective",
                                              collective, "--sizes", str(size), "--json")
            if code != 0:
                raise SystemExit(f"sim {schedule}: {last_line(err)}")
            results.append({"size_bytes": size, "time_us": json.loads(out)["results"][0]["time_us"],
                            "choice": choices.get(size_label(size), "?")})
        doc["contenders"] = [{
            "name": "ours", "synthesis_s": wall, "sweep_s": wall, "results": results,
            "status": f"explore, offline proposer, budget {self.args.budget}, seed {self.args.seed}"}]
        return doc

    def baseline(self, name, topo, collective, sizes, extra):
        """(rows by size, solver seconds, wall seconds) or (None, why, wall seconds)."""
        command = ["baseline", name, "--topo", topo, "--collective", collective, "--sizes", sizes,
                   "--json", "--time-limit", str(self.args.time_limit), *extra]
        code, out, err, wall = self.optiflow(*command, timeout=self.args.cap)
        if code is None:
            return None, f"not finished in the {self.args.cap:g} s cap", wall
        if code != 0:
            return None, last_line(err), wall
        doc = json.loads(out)
        rows = {r["size_bytes"]: r for r in doc["results"]}
        solver = doc.get("solver") or {}
        return rows, solver.get("synthesis_s", wall), wall

    def contender(self, name, topo, collective, sizes, pool):
        """A comparison contender at its best setting per size, or (None, why)."""
        settings = SWEEPS.get(name, [("", [])])
        runs = list(pool.map(lambda s: self.baseline(name, topo, collective, sizes, s[1]),
                             settings))
        built = [(label, r) for (label, _), r in zip(settings, runs) if r[0] is not None]
        sweep_s = sum(r[2] for r in runs)
        if not built:
            return None, runs[0][1]
        results, chosen = [], set()
        for size in sorted(built[0][1][0]):
            label, (rows, _, _) = min(built, key=lambda b: b[1][0][size]["time_us"])
            row = rows[size]
            how = f"{row['algorithm']}/{row['protocol']}" if name in NCCL else row["protocol"]
            results.append({"size_bytes": size, "time_us": row["time_us"],
                            "choice": f"{label} ({how})" if label else how})
            chosen.add(label)
        failed = [f"{label}: {r[1]}" for (label, _), r in zip(settings, runs) if r[0] is None]
        best_solver = max(r[1][1] for r in built if r[0] in chosen)
        status = (f"{len(built)} of {len(settings)} settings built" if len(settings) > 1
                  else "built")
        if failed:
            status += "; " + "; ".join(failed)
        return {"name": name, "synthesis_s": best_solver, "sweep_s": sweep_s, "status": status,
                "results": results}, None

    def case(self, topo, collective, pool):
        log(f"== {collective} on {topo}")
        contenders, missing = [], {}
        for name in NCCL + ["forestcoll", "taccl", "teccl"]:
            c, why = self.contender(name, topo, collective, SIZES, pool)
            if c is None:
                missing[name] = why
                log(f"   {name}: not built: {why}")
                continue
            log(f"   {name}: {c['status']}, {c['sweep_s']:.1f} s")
            contenders.append(c)
        doc = self.ours(topo, collective)
        log(f"   ours: {doc['contenders'][0]['synthesis_s']:.1f} s")
        doc["contenders"] += contenders
        stem = f"{topo}-{collective}"
        path = os.path.join(self.work, stem + ".json")
        with open(path, "w") as f:
            json.dump(doc, f)
        plot = os.path.join(self.args.out, "images", "results", stem + ".svg")
        code, out, err, _ = self.optiflow("compare", "--from", path, "--json", "--plot", plot)
        if code != 0:
            raise SystemExit(f"compare --from {path}: {last_line(err)}")
        full = json.loads(out)  # x bound and vs_nccl as optiflow computes them
        for c, given in zip(full["contenders"], doc["contenders"]):
            c["sweep_s"] = given.get("sweep_s", given["synthesis_s"])
        return {"topo": topo, "collective": collective, "doc": full, "missing": missing,
                "plot": os.path.relpath(plot, self.args.out)}

    # ---- scaling -------------------------------------------------------------------------------
    def scaling(self, pool):
        rows = []
        for topo, gpus in SCALING[: 3 if self.args.quick else None]:
            log(f"== scaling: {topo} ({gpus} GPUs)")
            sizes = ",".join(SCALING_SIZES)
            out, wall, _, _ = self.explore(topo, "allgather", sizes, self.args.scaling_budget)
            row = {"topo": topo, "gpus": gpus, "ours": (x_bound_column(out), wall, wall)}
            jobs = {name: pool.submit(self.baseline, name, topo, "allgather", sizes, [])
                    for name in ("forestcoll", "taccl", "teccl")}
            for name, job in jobs.items():
                rows_by_size, solver, wall = job.result()
                if rows_by_size is None:
                    row[name] = (None, solver, wall)
                else:
                    row[name] = ([rows_by_size[s]["bound_ratio"] for s in sorted(rows_by_size)],
                                 wall, wall)
            log("   " + ", ".join(f"{k} {v[0]}" for k, v in row.items() if isinstance(v, tuple)))
            rows.append(row)
        return rows


# ---- the report ---------------------------------------------------------------------------------
def speedup_table(case):
    doc = case["doc"]
    ours = doc["contenders"][0]["results"]
    others = doc["contenders"][1:]
    lines = ["| size | bound us | ours x bound | " +
             " | ".join(f"vs {c['name']}" for c in others) + " |",
             "|---:|---:|---:|" + "---:|" * len(others)]
    best = {c["name"]: 0.0 for c in others}
    for s, size in enumerate(doc["sizes"]):
        cells = []
        for c in others:
            speedup = c["results"][s]["time_us"] / ours[s]["time_us"]
            best[c["name"]] = max(best[c["name"]], speedup)
            cells.append(f"{speedup:.2f}x")
        lines.append(f"| {size_label(size)} | {doc['bound_us'][s]:.1f} | "
                     f"{ours[s]['x_bound']:.3f} | " + " | ".join(cells) + " |")
    lines.append("| **max** | | | " + " | ".join(f"**{best[c['name']]:.2f}x**" for c in others) +
                 " |")
    return lines


def bandwidth_table(case):
    doc = case["doc"]
    contenders = doc["contenders"]
    lines = ["| size | " + " | ".join(c["name"] for c in contenders) + " |",
             "|---:|" + "---:|" * len(contenders)]
    for s, size in enumerate(doc["sizes"]):
        fastest = min(c["results"][s]["time_us"] for c in contenders)
        cells = []
        for c in contenders:
            r = c["results"][s]
            busbw = r["busbw_GBps"]
            cell = f"{busbw:.1f} ({r['x_bound']:.2f})" if busbw >= 10 else \
                f"{busbw:.3g} ({r['x_bound']:.2f})"
            cells.append(f"**{cell}**" if r["time_us"] <= fastest * (1 + 1e-9) else cell)
        lines.append(f"| {size_label(size)} | " + " | ".join(cells) + " |")
    return lines


def settings_table(case):
    doc = case["doc"]
    swept = [c for c in doc["contenders"] if c["name"] in ("taccl", "teccl")]
    if not swept:
        return []
    lines = ["| size | " + " | ".join(f"{c['name']} best setting" for c in swept) + " |",
             "|---:|" + "---|" * len(swept)]
    for s, size in enumerate(doc["sizes"]):
        lines.append(f"| {size_label(size)} | " +
                     " | ".join(c["results"][s]["choice"] for c in swept) + " |")
    return lines


def synthesis_table(cases):
    names = []
    for case in cases:
        for c in case["doc"]["contenders"]:
            if c["name"] not in names:
                names.append(c["name"])
    lines = ["| case | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for case in cases:
        found = {c["name"]: c for c in case["doc"]["contenders"]}
        cells = []
        for name in names:
            c = found.get(name)
            if c is None:
                cells.append("n/a")
            elif abs(c["sweep_s"] - c["synthesis_s"]) > 0.05:
                cells.append(f"{c['synthesis_s']:.1f} ({c['sweep_s']:.0f})")
            else:
                cells.append(f"{c['synthesis_s']:.2f}")
        lines.append(f"| {case['collective']} on {case['topo']} | " + " | ".join(cells) + " |")
    return lines


def scaling_table(rows):
    names = ["ours", "forestcoll", "taccl", "teccl"]
    lines = ["| GPUs | topology | " + " | ".join(
        f"{n} x bound {s} | {n} s" if s == SCALING_SIZES[-1] else f"{n} x bound {s}"
        for n in names for s in SCALING_SIZES) + " |",
        "|---:|---|" + "---:|" * (len(names) * (len(SCALING_SIZES) + 1))]
    for row in rows:
        cells = []
        for n in names:
            ratios, seconds, _ = row[n]
            if ratios is None:
                cells += ["-"] * len(SCALING_SIZES) + [f"not built: {seconds}"]
            else:
                cells += [f"{x:.3f}" for x in ratios] + [f"{seconds:.1f}"]
        lines.append(f"| {row['gpus']} | {row['topo']} | " + " | ".join(cells) + " |")
    return lines


def report(args, cases, scaling, wall):
    out = ["# Results", "",
           "Generated by `bench/study.py` "
           f"(`{' '.join(sys.argv[1:]) or 'no options'}`); do not edit by hand, rerun it. "
           f"This run: {wall / 60:.1f} minutes on {os.cpu_count()} cores "
           f"({platform.machine()}), all in the alpha-beta cost model (docs/cost-model.md).", "",
           f"Ours is `optiflow explore` with the offline proposer, budget {args.budget}, seed "
           f"{args.seed}, `--floor {EXPLORE_FLOOR}` (NCCL's, ForestColl's and TACCL's schedules, TACCL "
           "node-limited with 1, 2, 4 and 8 instances; a size that no program beats is held by "
           "the floor's baseline and named so; docs/explore.md). Each of ours' figures is the "
           "schedule explore wrote for that size, simulated again. "
           "NCCL's contenders are built as NCCL builds them (channels, protocols, the tuner's "
           "pick per size, docs/baselines.md). The synthesizers run under a "
           f"{args.time_limit:g} s limit per solver call and a {args.cap:g} s wall-clock cap per "
           "setting; TACCL sweeps chunks per GPU 1 x instances {1, 2, 4, 8} and chunks 2 x instances "
           "{1, 8}, TE-CCL chunks "
           "{1, 2, 4} x the epoch's link {fastest, slowest}, as their papers sweep them, and each "
           "size takes its best setting (named in the tables). TACCL and TE-CCL build All-Gather "
           "only; NCCL's tree runs All-Reduce and PAT one GPU per node, so those cells are "
           "absent where the real systems have nothing to run.", "",
           "Each case: bus bandwidth in GB/s and, in brackets, time over the lower bound "
           "(fastest in bold); then ours' speed-up over each contender per size and its maximum; "
           "the plot has bus bandwidth (bound dashed) and speed-up over NCCL's pick.", ""]
    for case in cases:
        out += [f"## {case['collective']} on {case['topo']}", "",
                f"![{case['collective']} on {case['topo']}]({case['plot']})", ""]
        out += bandwidth_table(case) + [""] + speedup_table(case) + [""]
        settings = settings_table(case)
        if settings:
            out += ["Best synthesizer setting per size:", ""] + settings + [""]
        for name, why in case["missing"].items():
            out.append(f"- {name}: not built: {why}")
        if case["missing"]:
            out.append("")
    out += ["## Synthesis time", "",
            "Seconds to build each contender: ours, the whole exploration (proposing, compiling, "
            "verifying and simulating every candidate at every size); NCCL's, construction and "
            "simulation; a synthesizer, its solver time for the slowest setting that is best at "
            "some size, and in brackets its whole sweep's wall time.", ""]
    out += synthesis_table(cases) + [""]
    if scaling:
        out += ["## Scaling", "",
                "All-Gather on a100xK at " + " and ".join(SCALING_SIZES) + ": x bound and seconds "
                f"to build (ours: explore, budget {args.scaling_budget}, both sizes; the others "
                "at their default setting, wall time, under the same caps).", ""]
        out += scaling_table(scaling) + [""]
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optiflow", default="build/release/bin/optiflow")
    parser.add_argument("--out", default="docs", help="where results.md and images/ go")
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--scaling-budget", type=int, default=20)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--time-limit", type=float, default=30,
                        help="synthesizers: seconds per solver call")
    parser.add_argument("--cap", type=float, default=90,
                        help="wall-clock seconds per synthesizer setting")
    parser.add_argument("--jobs", type=int, default=2, help="synthesizer settings run at once")
    parser.add_argument("--quick", action="store_true",
                        help="the first two cases and the scaling table to 32 GPUs (a smoke run)")
    args = parser.parse_args()
    args.optiflow = os.path.abspath(args.optiflow)
    os.makedirs(os.path.join(args.out, "images", "results"), exist_ok=True)
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as work, \
            concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        study = Study(args, work)
        cases = [study.case(topo, collective, pool)
                 for topo, collective in CASES[: 2 if args.quick else None]]
        scaling = study.scaling(pool)
    text = report(args, cases, scaling, time.monotonic() - start)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
