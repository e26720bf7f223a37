#!/usr/bin/env python3
"""The executor against Open MPI on the same algorithm: each schedule runs beside Open MPI's own
collective forced to the algorithm the schedule implements (`optiflow run --native-algorithm`),
and the table gives the time of each and their ratio (schedule / Open MPI) per size.

Usage: bench/same_algorithm.py OPTIFLOW [--np N] [--sizes 1M:16M] [--iters 20] [--repeat 3]
Each (schedule, size) keeps the least time of --repeat jobs, for both columns: on a shared
machine noise only adds time. Run it on a quiet machine with at least N idle cores.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, '..', 'datasets', 'programs')
# (program, Open MPI's coll/tuned algorithm for MPI_Allgather)
# (Open MPI's "linear" is a gather and a broadcast, not `direct`'s exchange: no pair.)
PAIRS = [('ring.ofl', 'ring'), ('recursive-doubling.ofl', 'recursive-doubling'),
         ('bruck.ofl', 'bruck')]


def run(binary, program, algorithm, args, out):
    command = [binary, 'run', os.path.join(PROGRAMS, program), '--topo', f'fullmesh{args.np}',
               '--np', str(args.np), '--sizes', args.sizes, '--iters', str(args.iters),
               '--native-algorithm', algorithm, '--no-store', '--results-json', out]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f'{" ".join(command)} failed:\n{done.stdout}{done.stderr}')
    return {r['size_bytes']: (r['time_us'], r['native_time_us']) for r in json.load(open(out))}


def size_name(size):
    for unit, shift in (('G', 30), ('M', 20), ('K', 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f'{size >> shift}{unit}'
    return str(size)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('optiflow')
    parser.add_argument('--np', type=int, default=8)
    parser.add_argument('--sizes', default='1M:16M')
    parser.add_argument('--iters', type=int, default=20)
    parser.add_argument('--repeat', type=int, default=3)
    args = parser.parse_args()
    out = os.path.join(tempfile.mkdtemp(prefix='optiflow-same-'), 'results.json')
    print(f'{"schedule":<20} {"Open MPI":<20} {"size":>6} {"ours us":>10} {"ompi us":>10} {"ratio":>7}')
    ratios = []
    for program, algorithm in PAIRS:
        best = {}
        for _ in range(args.repeat):
            for size, (ours, native) in run(args.optiflow, program, algorithm, args, out).items():
                o, n = best.get(size, (ours, native))
                best[size] = (min(o, ours), min(n, native))
        for size, (ours, native) in sorted(best.items()):
            ratios.append(ours / native)
            print(f'{program[:-4]:<20} {algorithm:<20} {size_name(size):>6} {ours:>10.1f} '
                  f'{native:>10.1f} {ours / native:>6.2f}x')
    print(f'ratio over all rows: median {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x; '
          f'within 10% of Open MPI in {sum(r <= 1.10 for r in ratios)}/{len(ratios)}')


if __name__ == '__main__':
    main()
