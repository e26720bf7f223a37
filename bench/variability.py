#!/usr/bin/env python3
"""The variability benchmark: production faults drawn on clusters no template was written for.

For each topology and seed, `optiflow topo vary` draws K faults (K = 1, 2, 3 in turn: slow
NICs and NVLinks, failed links, oversubscribed spines, missing GPUs); then explore (offline
proposer), NCCL's tuner pick, the ForestColl-style packing and TACCL (time-capped) each build
an All-Gather for the varied cluster. Prints each contender's median and worst x bound at
64 MiB and 1 GiB, and explore's wins and losses against each baseline (docs/explore.md).

    bench/variability.py [--optiflow build/release/bin/optiflow] [--seeds 20]
                         [--topologies a100x4,h100x4,a100x3] [--sizes 64M,1G] [--budget 300]
                         [--taccl-time 60] [--explore-seed 5] [--floor default|none|NAMES]
                         [--jobs 1]
"""
import argparse
import concurrent.futures
import os
import statistics
import subprocess
import sys
import tempfile

SIZES = ["64M", "1G"]  # --sizes
BASELINES = ["nccl", "forestcoll", "taccl"]
TIE = 1e-3  # relative: closer than this is neither a win nor a loss


def run(command):
    done = subprocess.run(command, capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


def x_bound_rows(text, column):
    """{size: x bound} from the rows of a size table (column: the x-bound field's index)."""
    found = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > abs(column) and fields[0] in SIZES:
            try:
                found[fields[0]] = float(fields[column])
            except ValueError:
                pass
    return found


def held_rows(text):
    """{size: baseline} for the rows of explore's table that a baseline of its floor holds."""
    held = {}
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] in SIZES and "baseline" in fields:
            # "baseline taccl, 2 instances (no program beat it here)": the name, whole
            name = line.split("baseline ", 1)[1].split(" (", 1)[0]
            held[fields[0]] = name
    return held


def explore(args, topo, work):
    code, out, err = run([args.optiflow, "explore", "--topo", topo, "--sizes", ",".join(SIZES),
                          "--budget", str(args.budget), "--seed", str(args.explore_seed),
                          *([] if args.floor == "default" else ["--floor", args.floor]),
                          # one core each when clusters run at once (results never depend on it)
                          "--threads", "0" if args.jobs == 1 else "1",
                          "--db", os.path.join(work, "explore.db"),
                          "--out", os.path.join(work, "out")])
    if code != 0:
        return None, {}, err.strip().splitlines()[-1:] or ["failed"]
    return x_bound_rows(out, 2), held_rows(out), None  # size, busbw, x bound, ...


def baseline(args, name, topo):
    command = [args.optiflow, "baseline", name, "--topo", topo, "--sizes", ",".join(SIZES)]
    if name == "taccl":
        command += ["--time-limit", str(args.taccl_time)]
    code, out, err = run(command)
    if code != 0:
        return None, (err.strip().splitlines() or ["failed"])[-1]
    return x_bound_rows(out, -1), None


def run_case(args, work, topo_name, seed):
    """One varied cluster: (x bound per contender and size, sizes explore's floor held, report)."""
    faults = 1 + (seed - 1) % 3
    varied = os.path.join(work, f"{topo_name}-{seed}.json")
    code, out, err = run([args.optiflow, "topo", "vary", topo_name, "--seed", str(seed),
                          "--faults", str(faults), "-o", varied])
    if code != 0:
        return None, {}, f"{topo_name} seed {seed}: {err.strip()}"
    drawn = "; ".join(line.strip() for line in out.splitlines()[1:])
    case_dir = os.path.join(work, f"{topo_name}-{seed}")
    os.makedirs(case_dir, exist_ok=True)
    case = {}
    case["explore"], held_here, why = explore(args, varied, case_dir)
    notes = [f"  explore: failed: {' '.join(why)}"] if why else []
    for name in BASELINES:
        case[name], why_b = baseline(args, name, varied)
        if why_b:
            notes.append(f"  {name}: not built: {why_b}")
    line = []
    for c in ["explore"] + BASELINES:
        for s in SIZES:
            value = (case[c] or {}).get(s)
            line.append(f"{c} {s} {value:.3f}" if value is not None else f"{c} {s} -")
    return case, held_here, "\n".join(notes + [f"{topo_name} seed {seed} ({drawn}):\n  " +
                                                ", ".join(line)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optiflow", default="build/release/bin/optiflow")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--topologies", default="a100x4,h100x4,a100x3")
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--taccl-time", type=float, default=60)
    parser.add_argument("--explore-seed", type=int, default=5)
    parser.add_argument("--sizes", default=",".join(SIZES),
                        help="sizes as optiflow takes them, comma-separated")
    parser.add_argument("--floor", default="default",
                        help="explore's --floor (default: explore's own; none: the programs alone)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="clusters built at once (each contender runs on one core)")
    args = parser.parse_args()
    SIZES[:] = args.sizes.split(",")
    contenders = ["explore"] + BASELINES
    results = {c: {s: [] for s in SIZES} for c in contenders}
    record = {b: {"wins": 0, "losses": 0, "ties": 0, "missing": 0} for b in BASELINES}
    held = {}  # baseline of explore's floor -> sizes it held
    with tempfile.TemporaryDirectory() as work:
        cases = [(topo_name, seed) for topo_name in args.topologies.split(",")
                 for seed in range(1, args.seeds + 1)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for case, held_here, report in pool.map(lambda c: run_case(args, work, *c), cases):
                print(report, file=sys.stderr, flush=True)
                if case is None:
                    continue
                for name in held_here.values():
                    held[name] = held.get(name, 0) + 1
                for c in contenders:
                    for s in SIZES:
                        value = (case[c] or {}).get(s)
                        if value is not None:
                            results[c][s].append(value)
                ours = case["explore"] or {}
                for name in BASELINES:
                    theirs = case[name] or {}
                    for s in SIZES:
                        if s not in ours or s not in theirs:
                            record[name]["missing"] += 1
                        elif ours[s] < theirs[s] * (1 - TIE):
                            record[name]["wins"] += 1
                        elif ours[s] > theirs[s] * (1 + TIE):
                            record[name]["losses"] += 1
                        else:
                            record[name]["ties"] += 1

    print(f"variability: {args.topologies}, {args.seeds} seeds each (K = 1..3 faults), "
          f"explore budget {args.budget} (floor {args.floor}), taccl {args.taccl_time:g} s per solve")
    print(f"{'contender':<12}" + "".join(f"{s + ' median':>12}{s + ' worst':>11}{'n':>4}"
                                          for s in SIZES))
    for c in contenders:
        row = f"{c:<12}"
        for s in SIZES:
            values = results[c][s]
            if values:
                row += f"{statistics.median(values):>11.3f}x{max(values):>10.3f}x{len(values):>4}"
            else:
                row += f"{'-':>12}{'-':>11}{0:>4}"
        print(row)
    print("explore against each baseline (per case and size):")
    for name in BASELINES:
        r = record[name]
        print(f"  {name:<11} wins {r['wins']}, losses {r['losses']}, ties {r['ties']}, "
              f"not built {r['missing']}")
    print("sizes where no program beat explore's floor: " +
          ("; ".join(f"{name}: {n}" for name, n in sorted(held.items())) or "none"))


if __name__ == "__main__":
    main()
