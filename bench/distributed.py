#!/usr/bin/env python3
"""explore --distributed's speed-up: one exploration run by one process, then by mpirun jobs of
P ranks (P = 1, 2, 4, 8 by default), each timed from launch to exit. Every job must print the
one-process winners (the run fails otherwise). On a machine with fewer cores than ranks the
ranks share them (--oversubscribe) and the speed-up stops at the core count.

Usage: bench/distributed.py [--ranks 1,2,4,8] [--topo a100x16] [--sizes 1G] [--budget 64]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time


def winners_table(out):
    start = out.find("    size  busbw")
    return out[start:out.find("\nx bound:", start)] if start >= 0 else ""


def timed(command, cwd):
    start = time.monotonic()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-2000:]}")
    return seconds, winners_table(done.stdout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optiflow", default="build/release/bin/optiflow")
    parser.add_argument("--ranks", default="1,2,4,8")
    parser.add_argument("--topo", default="a100x16")
    parser.add_argument("--sizes", default="1G")
    parser.add_argument("--budget", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    optiflow = os.path.abspath(args.optiflow)
    mpirun = ["mpirun", "--oversubscribe", "--bind-to", "none"]
    if os.geteuid() == 0:
        mpirun.append("--allow-run-as-root")

    work = tempfile.mkdtemp(prefix="optiflow-distributed-")
    try:
        def explore(name):
            return [optiflow, "explore", "--topo", args.topo, "--sizes", args.sizes,
                    "--budget", str(args.budget), "--seed", str(args.seed), "--threads", "1",
                    "--db", f"{name}.db", "--out", name]

        alone_s, alone = timed(explore("alone"), work)
        print(f"explore --topo {args.topo} --sizes {args.sizes} --budget {args.budget}, "
              f"{os.cpu_count()} cores")
        print(f"{'processes':>10} {'seconds':>9} {'speed-up':>9}  winners")
        print(f"{'1 (plain)':>10} {alone_s:9.1f} {1.0:9.2f}  reference")
        for p in [int(r) for r in args.ranks.split(",")]:
            seconds, table = timed(mpirun + ["-np", str(p)] + explore(f"p{p}") +
                                   ["--distributed"], work)
            same = "same" if table == alone else "DIFFERENT"
            print(f"{p:>10} {seconds:9.1f} {alone_s / seconds:9.2f}  {same}")
            if table != alone:
                sys.exit(f"{p} ranks found other winners:\n{table}\none process:\n{alone}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
