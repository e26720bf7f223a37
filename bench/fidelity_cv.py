#!/usr/bin/env python3
"""How well a host model fitted to stored hardware runs predicts runs it was not fitted on.

Leave one program family out: for each family F (the program name without its "-channelsN" /
"-pipelineN" variants), `optiflow calibrate --from-db` fits the model on every other family and
`optiflow fidelity --only F --only F-*` simulates F's schedules on that model. The held-out
predictions of all families are pooled and scored as `fidelity` scores a database: median and
worst |simulated/measured - 1|, Kendall tau between simulated and measured order per
(collective, ranks, size), how often the simulator's first choice is the measured best or within
10% of it, and its regret. The in-sample fit (every family) is printed for comparison.

The noise floor comes from the schedules measured more than once at the same size (in different
runs): how far two runs of the same schedule differ, and the Kendall tau between the two runs'
orders. No model can be expected to order schedules better than the machine repeats itself.

Usage: bench/fidelity_cv.py OPTIFLOW --ranks N DB [DB...]
e.g.   bench/fidelity_cv.py build/release/bin/optiflow --ranks 8 ../shared/measured/quiet16-mpi8/*.db
"""
import argparse
import collections
import itertools
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile

PICK_TOLERANCE = 0.10


def family(name):
    return re.sub(r'-(channels\d+|pipeline\d+)+$', '', name.split('#')[0])


def run(binary, *args):
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f'{os.path.basename(binary)} {" ".join(args)} failed:\n{done.stderr}')
    return done.stdout


def kendall_tau(pairs):
    """Tau-a, as `optiflow fidelity` computes it: a tie counts as neither agreeing nor not."""
    agree = disagree = 0
    for (s1, m1), (s2, m2) in itertools.combinations(pairs, 2):
        product = (s1 - s2) * (m1 - m2)
        agree += product > 0
        disagree += product < 0
    return (agree - disagree) / max(1, len(pairs) * (len(pairs) - 1) // 2)


def score(points):
    """points: dicts with collective, ranks, size_bytes, simulated_us, measured_us."""
    errors = [abs(p['simulated_us'] / p['measured_us'] - 1) for p in points]
    groups = collections.defaultdict(list)
    for p in points:
        groups[(p['collective'], p['ranks'], p['size_bytes'])].append(p)
    groups = {k: g for k, g in groups.items() if len(g) >= 2}
    taus, regrets = [], []
    for g in groups.values():
        taus.append(kendall_tau([(p['simulated_us'], p['measured_us']) for p in g]))
        pick = min(g, key=lambda p: p['simulated_us'])  # ties: the first, as `fidelity` does
        regrets.append(pick['measured_us'] / min(p['measured_us'] for p in g))
    return {
        'points': len(points),
        'median_abs_error': statistics.median(errors),
        'worst_abs_error': max(errors),
        'groups': len(groups),
        'median_kendall_tau': statistics.median(taus),
        'picks_best': sum(r <= 1.0 for r in regrets),
        'picks_within_10pct': sum(r <= 1 + PICK_TOLERANCE for r in regrets),
        'median_regret': statistics.median(regrets),
        'worst_regret': max(regrets),
    }


def line(label, s):
    return (f'{label:<34} {s["points"]:>6} {100 * s["median_abs_error"]:>7.1f}% '
            f'{100 * s["worst_abs_error"]:>7.1f}% {s["median_kendall_tau"]:>6.2f} '
            f'{s["picks_best"]:>3}/{s["groups"]:<3} {s["picks_within_10pct"]:>3}/{s["groups"]:<3} '
            f'{s["median_regret"]:>6.2f}x {s["worst_regret"]:>6.2f}x')


def repeated_runs(dbs):
    """Schedules measured in more than one run: (collective, size) -> name -> [times]."""
    runs = collections.defaultdict(lambda: collections.defaultdict(list))
    for db in dbs:
        c = sqlite3.connect(f'file:{db}?mode=ro', uri=True)
        for js, size, t in c.execute('select s.json, r.size_bytes, r.time_us '
                                     'from hw_results r join schedules s on s.id = r.schedule_id'):
            schedule = json.loads(js)
            runs[(schedule['collective'], size)][schedule['name']].append(t)
    return {key: {n: ts for n, ts in by_name.items() if len(ts) >= 2}
            for key, by_name in runs.items()}


def order_against(predicted, runs):
    """Median tau, and how often the pick is within 10% of the best, of `predicted` ((collective,
    size, name) -> time; None: run 1) ordering run 2 (a model: each run), per group of two or
    more schedules."""
    taus, good = [], []
    for (collective, size), by_name in runs.items():
        if len(by_name) < 2:
            continue
        names = sorted(by_name)
        against = [1] if predicted is None else [0, 1]
        for run in against:
            guess = [by_name[n][0] if predicted is None else predicted[(collective, size, n)]
                     for n in names]
            truth = [by_name[n][run] for n in names]
            taus.append(kendall_tau(list(zip(guess, truth))))
            pick = min(range(len(names)), key=lambda i: guess[i])
            good.append(truth[pick] <= (1 + PICK_TOLERANCE) * min(truth))
    return statistics.median(taus), sum(good), len(good)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('optiflow')
    parser.add_argument('--ranks', type=int, required=True)
    parser.add_argument('--bands', help="message-size band edges for calibrate (default: calibrate's)")
    parser.add_argument('dbs', nargs='+')
    args = parser.parse_args()
    db_args = [a for db in args.dbs for a in ('--db', db)]
    from_db = [a for db in args.dbs for a in ('--from-db', db)]
    if args.bands:
        from_db += ['--bands', args.bands]
    work = tempfile.mkdtemp(prefix='optiflow-cv-')

    everything = f'{work}/all.json'
    run(args.optiflow, 'calibrate', *from_db, '--ranks', str(args.ranks), '-o', everything)
    in_sample = json.loads(run(args.optiflow, 'fidelity', *db_args, '--topo', everything, '--json'))
    names = sorted({p['schedule'] for p in in_sample['by_point']})
    families = sorted({family(n) for n in names})

    held_out = []
    per_family = {}
    for f in families:
        globs = ['--exclude', f, '--exclude', f + '-*']
        topo = f'{work}/without-{f}.json'
        print(f'fitting without {f} ...', file=sys.stderr)
        run(args.optiflow, 'calibrate', *from_db, '--ranks', str(args.ranks), '-o', topo, *globs)
        report = json.loads(run(args.optiflow, 'fidelity', *db_args, '--topo', topo, '--json',
                                '--only', f, '--only', f + '-*'))
        points = [p for p in report['by_point'] if family(p['schedule']) == f]
        per_family[f] = points
        held_out += points
    order = {name: i for i, name in enumerate(p['schedule'] for p in in_sample['by_point'])}
    held_out.sort(key=lambda p: order[p['schedule']])

    header = f'{"model":<34} {"points":>6} {"median":>8} {"worst":>8} {"tau":>6} {"best":>7} {"<=10%":>7} {"regret":>7} {"worst":>7}'
    print(header)
    print(line('in-sample (all families)', score(in_sample['by_point'])))
    print(line('leave one family out (pooled)', score(held_out)))
    print()
    print(f'{"held-out family":<34} {"points":>6} {"median |error|":>15} {"worst":>8}')
    for f, points in per_family.items():
        errors = [abs(p['simulated_us'] / p['measured_us'] - 1) for p in points]
        print(f'{f:<34} {len(points):>6} {100 * statistics.median(errors):>14.1f}% {100 * max(errors):>7.1f}%')

    runs = repeated_runs(args.dbs)
    spread = [max(ts) / min(ts) - 1 for by_name in runs.values() for ts in by_name.values()]
    if not spread:
        return
    print(f'\nnoise floor: {len(spread)} (schedule, size) pairs measured in two runs, which differ '
          f'by {100 * statistics.median(spread):.1f}% (median), {100 * max(spread):.0f}% (worst)')
    tau, good, groups = order_against(None, runs)
    print(f'  run 1 ordering run 2, per (collective, size): median tau {tau:.2f}, '
          f'run 1\'s best within 10% of run 2\'s in {good}/{groups}')
    predicted = {(p['collective'], p['size_bytes'], p['schedule']): p['simulated_us'] for p in held_out}
    tau, good, groups = order_against(predicted, runs)
    print(f'  the held-out model ordering each run, same groups: median tau {tau:.2f}, '
          f'its pick within 10% of the run\'s best in {good}/{groups}')


if __name__ == '__main__':
    main()
