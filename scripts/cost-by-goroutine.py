#!/usr/bin/env python3
"""Where BenchmarkRF3Put's CPU goes, by the goroutine that spent it
(docs/benchmarks/cost.md, "The request path's share of a write").

usage: scripts/cost-by-goroutine.py WRITES TRACES...

TRACES are `go tool pprof -traces` output of the benchmark's CPU profiles
(-test.cpuprofile), WRITES the writes they cover together. The benchmark
runs three nodes and the client in one process, so a sample's goroutine
(the root of its stack) says whose it is: the client's, a node's request
path, its Raft transport, its raftstore scheduler or log writer. Within a
row, the columns say what the goroutine was doing (the first that matches
the stack): a raftstore stack on a request goroutine is the proposal.
"""
import collections, importlib.util, os, sys

spec = importlib.util.spec_from_file_location('cc', os.path.join(os.path.dirname(__file__), 'cost-components.py'))
cc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cc)
parse, has = cc.parse, cc.has

SCHED = ('runtime.futex', 'runtime.schedule', 'runtime.findRunnable', 'runtime.park_m', 'runtime.mcall', 'runtime.wakep',
         'runtime.goready', 'runtime.ready', 'runtime.notewakeup', 'runtime.stopm', 'runtime.startm', 'runtime.exitsyscall',
         'runtime.entersyscall', 'runtime.gopark', 'runtime.usleep', 'runtime.osyield', 'runtime.lock2', 'runtime.unlock2',
         'runtime.selectgo', 'runtime.chansend', 'runtime.chanrecv', 'runtime.netpoll', 'sync.(*Cond)', 'runtime.semacquire',
         'runtime.semrelease', 'runtime.sellock', 'runtime.casgstatus', 'runtime.nanotime', 'runtime.systemstack_switch',
         'runtime.gogo', 'runtime.newproc', 'runtime.morestack')

# (row, root substrings): the first row whose substring is in the root wins.
ROWS = [
    ('client (in process, not server CPU)', ('testing.', 'tidekv/client.', 'NewHTTP2Client', 'http2Client', 'grpc.(*addrConn)', 'CallbackSerializer')),
    ('GC', ('runtime.gcBgMarkWorker', 'runtime.bgsweep', 'runtime.bgscavenge')),
    ('periodic loops (range sizes, closed timestamps, metrics)', ('sync.(*WaitGroup).Go', 'closedpush', 'prometheus', 'loops.', 'nodereport')),
    ('request path: stream receive (HTTP/2 read, unmarshal, hand to a worker)', ('kvstream.(*Server).Serve', 'handleRawConn', 'http2Server')),
    ('request path: answers (batch sender, HTTP/2 writer)', ('NewServerTransport', 'kvstream.(*batchSender)')),
    ('request path: KV handler on a stream worker', ('kvstream.(*workers)',)),
    ('unary gRPC calls (control plane)', ('grpc.(*Server).serverWorker', 'grpc.(*Server).Serve')),
    ('Raft transport: frames receive', ('transport.(*muxListener)', 'transport.(*GRPC).serveFrames')),
    ('Raft transport: frames send', ('transport.(*GRPC).sendLoop',)),
    ('raftstore scheduler round', ('raftstore.(*Store).run',)),
    ('log writer and Pebble\'s WAL', ('raftstore.(*logWriter)', 'pebble')),
    ('Go scheduler (no root: goroutine switch)', ('runtime.mcall', 'runtime.morestack', 'runtime.systemstack', 'time.now')),
]

COLS = [
    ('fsync', lambda s: has(s, 'Fdatasync', 'SyncData', 'unix.Fsync')),
    ('Pebble', lambda s: has(s, 'pebble/v2')),
    ('Raft step', lambda s: has(s, 'go.etcd.io/raft')),
    ('apply', lambda s: has(s, 'raftstore.(*Replica).applyCommittedLocked', 'raftstore.(*applyBatch)', 'raftstore.applyCommand')),
    ('raftstore', lambda s: has(s, 'tidekv/internal/raftstore')),
    ('syscall', lambda s: s[0].startswith(('internal/runtime/syscall', 'syscall.'))),
    ('Go sched', lambda s: has(s, *SCHED)),
    ('rest', lambda s: True),
]

def row(root):
    for name, subs in ROWS:
        if any(x in root for x in subs):
            return name
    return 'other: ' + root

def col(st):
    return next(name for name, pred in COLS if pred(st))

def main():
    writes = float(sys.argv[1])
    tab = collections.defaultdict(collections.Counter)
    for f in sys.argv[2:]:
        for v, st in parse(f):
            tab[row(st[-1])][col(st)] += v
    server = sum(sum(c.values()) for r, c in tab.items() if not r.startswith('client'))
    us = lambda v: v / writes * 1e6
    print(f'server CPU per write {us(server):.1f} µs')
    names = [n for n, _ in COLS]
    print('| goroutine | µs per write | ' + ' | '.join(names) + ' |')
    print('|---|--:|' + '--:|' * len(names))
    for r, c in sorted(tab.items(), key=lambda x: -sum(x[1].values())):
        print(f'| {r} | {us(sum(c.values())):.1f} | ' + ' | '.join(f'{us(c[n]):.1f}' for n in names) + ' |')

if __name__ == '__main__':
    main()
