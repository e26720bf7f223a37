#!/usr/bin/env python3
"""The pre-screen against real runs: every schedule that `optiflow run` stored in DB... simulated on
TOPOLOGY, then the median and worst |simulated / measured - 1|, the median Kendall tau between the
simulated and the measured order of the schedules at each (collective, size), and the pick regret
(measured time of the simulator's first choice over the measured best).
Usage: bench/measured_fidelity.py OPTIFLOW TOPOLOGY DB... (e.g. ../shared/measured/quiet16-mpi8/*.db)"""
import json, sqlite3, subprocess, sys, os, statistics, itertools, collections
binary, topo = sys.argv[1], sys.argv[2]
dbs = sys.argv[3:]
import tempfile
work = tempfile.mkdtemp(prefix='optiflow-fidelity-')
meas = collections.defaultdict(dict)   # (db, schedule hash, collective) -> size -> time
for db in dbs:
    c = sqlite3.connect(db)
    for h, js, size, t in c.execute('select s.hash, s.json, r.size_bytes, r.time_us from hw_results r join schedules s on s.id = r.schedule_id'):
        coll = json.loads(js)['collective']
        path = f'{work}/{h}.json'
        if not os.path.exists(path): open(path, 'w').write(js)
        meas[(h, coll)][size] = t
points = []  # (coll, size, hash, sim, meas)
for (h, coll), by_size in meas.items():
    sizes = ','.join(str(s) for s in sorted(by_size))
    out = subprocess.run([binary, 'sim', f'{work}/{h}.json', '--topo', topo, '--sizes', sizes, '--json'], capture_output=True, text=True)
    if out.returncode != 0: print('sim failed', h, out.stderr[:200]); continue
    for r in json.loads(out.stdout)['results']:
        points.append((coll, r['size_bytes'], h, r['time_us'], by_size[r['size_bytes']]))
errs = [abs(s / m - 1) for _, _, _, s, m in points]
groups = collections.defaultdict(list)
for coll, size, h, s, m in points: groups[(coll, size)].append((s, m))
def tau(pairs):
    c = d = 0
    for (s1, m1), (s2, m2) in itertools.combinations(pairs, 2):
        x = (s1 - s2) * (m1 - m2)
        c += x > 0; d += x < 0
    return (c - d) / max(1, c + d)
taus = [tau(p) for p in groups.values() if len(p) > 2]
regret = [min(p)[1] / min(m for _, m in p) for p in groups.values() if len(p) > 2]
hits = sum(r == 1 for r in regret)
print(f'{os.path.basename(topo)}: {len(points)} points, {len(taus)} (collective,size) groups; '
      f'median |error| {100*statistics.median(errs):.1f}%, worst {100*max(errs):.0f}%; '
      f'median Kendall tau {statistics.median(taus):.2f}; sim pick is measured best in {hits}/{len(regret)}; '
      f'median pick regret {statistics.median(regret):.2f}x, worst {max(regret):.2f}x')
