#!/usr/bin/env python3
"""A write's CPU by component from in-process profiles (docs/benchmarks/cost.md,
"The floor of the pieces we keep").

usage: scripts/cost-floor.py US_PER_UNIT TRACES...

TRACES are `go tool pprof -traces` outputs of CPU profiles of one benchmark
(BenchmarkRF3Put: three nodes and the client in one process; or an isolated
floor benchmark), pooled. Each sample goes to the first matching rule of
scripts/cost-components.py, after a rule that takes the in-process client's
stacks (the benchmark's writers, the client package, gRPC's client transport),
and the shares are scaled to US_PER_UNIT, the benchmark's cpu-µs per write (or
per entry). The profile covers the whole run, the cluster's start included,
which the benchmark's own CPU figure does not: at 20,000 writes a few percent.
"""
import importlib.util, os, sys

spec = importlib.util.spec_from_file_location(
    'cc', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'cost-components.py'))
cc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cc)

CLIENT = 'client (benchmark writers, client package, gRPC client transport)'
RULES = [(CLIENT, lambda s: cc.has(s, 'tidekv/client.', 'server.BenchmarkRF3Put', 'testing.(*B).RunParallel',
                                    'transport.(*http2Client)', 'transport.newHTTP2Client'))] + cc.RULES


def main():
    us = float(sys.argv[1])
    sums = {n: 0.0 for n, _ in RULES}
    sums['other'] = 0.0
    for f in sys.argv[2:]:
        for v, st in cc.parse(f):
            name = next((n for n, p in RULES if p(st)), 'other')
            sums[name] += v
    total = sum(sums.values())
    print(f'{total:.2f} s sampled in {len(sys.argv) - 2} profiles, scaled to {us} us')
    for n, v in sorted(sums.items(), key=lambda kv: -kv[1]):
        if v:
            print(f'{n:72s} {v / total * us:7.1f} us ({v / total * 100:4.1f}%)')


if __name__ == '__main__':
    main()
