#!/usr/bin/env python3
"""Where a write's server CPU goes, by component (docs/benchmarks/cost.md,
"Where each microsecond of a write goes").

usage: scripts/cost-components.py DIR A_US_PER_OP C_US_PER_READ

DIR holds `go tool pprof -traces` output of each node's CPU profile:
cpu1.tr..cpu3.tr taken during a YCSB-A run phase, cpuc1.tr..cpuc3.tr during a
YCSB-C run on the same cluster right after. A_US_PER_OP and C_US_PER_READ are
the servers' CPU per operation `tidekv bench` reported for the two runs.
Each sample goes to the first component whose rule matches its stack; the
per-write figure is twice A's per-operation share of a component, less what
a read costs in it (C's per-read share, or for the reads' Pebble lookups
their own stacks under A), so the column sums to 2 x A - a read.
"""
import sys, re, collections

def parse(path):
    out = []
    cur = None
    for line in open(path):
        if line.startswith('-----------+'):
            if cur: out.append(cur)
            cur = None; continue
        m = re.match(r'^\s+(\d+(?:\.\d+)?)(ms|s|us)\s+(\S.*)$', line)
        if m:
            v = float(m.group(1)) * {'ms':1e-3,'s':1,'us':1e-6}[m.group(2)]
            cur = [v, [m.group(3).strip()]]; continue
        if cur is not None and line.strip() and not line.lstrip().startswith('pebble:') and ':' not in line.split()[0][-1:]:
            cur[1].append(line.strip())
    if cur: out.append(cur)
    return out

def sysc(st):
    return st[0].startswith('internal/runtime/syscall') or st[0].startswith('syscall.')

def has(st, *pats):
    return any(p in f for f in st for p in pats)

# Rules in order: first match wins. Each: (component, predicate)
RULES = [
 ('GC (mark, assist, sweep)', lambda s: has(s, 'runtime.gcBgMarkWorker', 'runtime.gcAssistAlloc', 'runtime.bgsweep', 'runtime.bgscavenge', 'runtime.gcMarkDone', 'runtime.gcStart', 'runtime.markroot', 'runtime.sweepone','runtime.(*sweepLocked)', 'runtime.gcDrain')),
 ('periodic loops (range sizes, node reports, closed timestamps, gossip)', lambda s: has(s, 'internal/loops.(*Group).run', 'internal/closedpush', 'internal/nodereport', 'hashicorp/memberlist')),
 ('Pebble flush & compaction', lambda s: has(s, 'pebble/v2.(*DB).flush', 'pebble/v2.(*DB).compact', 'runPickedCompaction', 'runCompaction', 'internal/compact.', 'drainWriteQueue', 'sstable.(*layoutWriter)', 'collectTableStats', 'loadTableStats')),
 ('fdatasync (WAL sync syscall)', lambda s: has(s, 'Fdatasync', 'unix.Fsync', 'syscall.Fsync', 'SyncData')),
 ('WAL write syscalls', lambda s: sysc(s) and has(s, 'pebble/v2/record.(*LogWriter)', 'wal.')),
 ('gRPC send syscalls', lambda s: sysc(s) and has(s, 'net.(*conn).Write', 'net.(*netFD).Write', 'internal/poll.(*FD).Write', 'poll.(*FD).Writev')),
 ('gRPC receive syscalls', lambda s: has(s, 'net.(*conn).Read', 'internal/poll.(*FD).Read', 'net.(*rawConn).Read', 'readyreader.sysRead')),
 ('Pebble file housekeeping (unlink, sync_file_range)', lambda s: has(s, 'pebble/v2/vfs', 'pebble/v2/objstorage', 'openCleanupManager')),
 ('other syscalls (clock reads, misc)', lambda s: sysc(s) and not has(s, 'runtime.netpoll')),
 ('Go scheduler, futex wake/sleep', lambda s: has(s, 'runtime.futex', 'runtime.schedule', 'runtime.findRunnable', 'runtime.park_m', 'runtime.mcall', 'runtime.wakep', 'runtime.goready', 'runtime.ready', 'runtime.notewakeup', 'runtime.stopm', 'runtime.startm', 'runtime.exitsyscall', 'runtime.entersyscall', 'runtime.gopark', 'runtime.goexit0','runtime.usleep','runtime.osyield','runtime.lock2','runtime.unlock2','runtime.selectgo','runtime.chansend','runtime.chanrecv','runtime.sysmon','runtime.newproc','runtime.morestack','runtime.gogo','runtime.systemstack_switch','runtime.casgstatus','runtime.(*waitq)','sync.(*Cond)','runtime.semacquire','runtime.semrelease','runtime.sellock','runtime.selunlock','runtime.netpollblock','runtime.nanotime','time.now','runtime.resetspinning','runtime.netpoll')),
 ('Pebble memtable insert (apply and log-writer commits)', lambda s: has(s, 'arenaskl.(*Skiplist).Add', 'arenaskl.(*Inserter)', 'pebble/v2.(*memTable).apply', 'pebble/v2.(*memTable).prepare', 'pebble/v2.(*DB).commitApply')),
 ('Pebble WAL (CPU: encode, copy)', lambda s: has(s, 'pebble/v2/record.(*LogWriter)', 'pebble/v2.(*DB).commitWrite', 'pebble/v2.(*commitPipeline)', 'pebble/v2.(*DB).Apply', 'pebble/v2.(*Batch).Commit', 'pebble/v2.(*DB).makeRoomForWrite')),
 ('Raft log writer (batch build, marshal)', lambda s: has(s, 'raftstore.(*logWriter)', 'raftstore.persistAppend')),
 ('apply: MVCC reads of written keys', lambda s: has(s, 'raftstore.(*applyBatch)', 'raftstore.(*Replica).apply', 'raftstore.(*Store).apply', 'raftstore.applyCommand', 'raftstore.(*roundApply)') and has(s, 'pebble/v2.(*Iterator)', 'pebble/v2.(*DB).Get', 'pebble/v2.(*DB).NewIter', 'pebble/v2.(*Snapshot)', 'pebble/v2.(*Batch).NewIter', 'pebble/v2.(*Batch).Get', 'storage.')),
 ('apply (decode, batch build, answers)', lambda s: has(s, 'raftstore.(*applyBatch)', 'raftstore.(*Replica).apply', 'raftstore.(*Store).apply', 'raftstore.applyCommand', 'raftstore.(*roundApply)')),
 ('YCSB reads: Pebble lookups', lambda s: has(s, 'pebble/v2.(*Iterator)', 'pebble/v2.(*DB).Get', 'pebble/v2.(*DB).NewIter', 'pebble/v2.(*Snapshot)', 'sstable.', 'pebble/v2.(*tableCacheShard)', 'pebble/v2/internal/cache', 'pebble/v2.(*fileCache', 'genericcache','pebble/v2.(*levelIter)','pebble/v2.(*mergingIter)','pebble/v2/internal/manifest')),
 ('Raft stepping (etcd raft)', lambda s: has(s, 'go.etcd.io/raft')),
 ('gRPC framing, HTTP/2 (CPU)', lambda s: has(s, 'google.golang.org/grpc', 'golang.org/x/net/http2')),
 ('scheduler round (raftstore, non-raft)', lambda s: has(s, 'raftstore.(*Store).run', 'raftstore.(*Store).processRound')),
 ('client batch stream and KV request handling (server)', lambda s: has(s, 'tidekv/internal/server', 'tidekv/internal/kvstream', 'tidekv/internal/kvapi', 'tidekv/internal/transport', 'tidekv/internal/admission', 'tidekv/internal/raftstore', 'tidekv/api/')),
]

def classify(st):
    for name, pred in RULES:
        if pred(st): return name
    return 'other'

def main():
    d, a_us, c_us = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    names = [n for n, _ in RULES] + ['other']
    def sums(files):
        s = {n: 0.0 for n in names}
        for f in files:
            for v, st in parse(f): s[classify(st)] += v
        return s
    A = sums([f'{d}/cpu{n}.tr' for n in (1, 2, 3)])
    C = sums([f'{d}/cpuc{n}.tr' for n in (1, 2, 3)])
    ta, tc = sum(A.values()), sum(C.values())
    # components a read cannot cause: C's share of them is the write phase's leftovers
    writeonly = {'periodic loops (range sizes, node reports, closed timestamps, gossip)', 'Pebble flush & compaction', 'Pebble file housekeeping (unlink, sync_file_range)', 'fdatasync (WAL sync syscall)', 'WAL write syscalls', 'Pebble memtable insert (apply and log-writer commits)', 'Pebble WAL (CPU: encode, copy)', 'Raft log writer (batch build, marshal)', 'apply: MVCC reads of written keys', 'apply (decode, batch build, answers)', 'Raft stepping (etcd raft)'}
    readcost = {n: (0 if n in writeonly else C[n] / tc * c_us) for n in names}
    # a read's Pebble lookups are named by their stacks: take A's own (a memtable full of versions costs more than C's)
    rl = 'YCSB reads: Pebble lookups'
    readcost[rl] = 2 * A[rl] / ta * a_us
    read_total = sum(readcost.values())
    print(f'A sampled {ta:.2f}s, C sampled {tc:.2f}s; read cost subtracted {read_total:.1f} us of {c_us}')
    tot = 0
    rows = []
    for n in names:
        per_op = A[n] / ta * a_us
        w = 2 * per_op - readcost[n]
        tot += w
        rows.append((w, n, per_op, readcost[n]))
    for w, n, per_op, rc in sorted(rows, reverse=True):
        print(f'{n:55s} A {per_op:6.1f} us/op  read(C) {rc:5.1f}  write {w:6.1f} us ({w/ (2*a_us-read_total)*100:4.1f}%)')
    print(f'total per write {tot:.1f} (= 2 x {a_us} - {read_total:.1f})')

if __name__ == '__main__':
    main()
