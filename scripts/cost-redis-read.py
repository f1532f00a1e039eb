#!/usr/bin/env python3
"""Where a Redis-port read's server CPU goes, node by node, by part
(docs/benchmarks/cost.md, "Issue 33's Redis targets again, and a hash read
by part").

usage: scripts/cost-redis-read.py READS TRACES...

TRACES are `go tool pprof -traces` output of each node's CPU profile, taken
over the same seconds of a go-ycsb C run through one node's Redis port
(HMGET of a hash's fields); READS the reads go-ycsb counted in those
seconds. A sample goes to the part of the first rule matching its stack
(goroutine root first, then what it was doing), so a column says what a
read costs each node for that part, in µs. The gateway's reads of ranges
it leads run in process on the RESP connection's goroutine; the rest are
forwarded over the routing client's Batch stream to the leaseholder,
whose stream receive, workers and sender are the "leaseholder" rows.
"""
import importlib.util, os, sys, collections

spec = importlib.util.spec_from_file_location('cc', os.path.join(os.path.dirname(__file__), 'cost-components.py'))
cc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cc)
parse, has = cc.parse, cc.has

PEBBLE = ('pebble/v2',)
SCHED = ('runtime.futex', 'runtime.schedule', 'runtime.findRunnable', 'runtime.park_m', 'runtime.mcall', 'runtime.wakep',
         'runtime.goready', 'runtime.ready', 'runtime.notewakeup', 'runtime.stopm', 'runtime.startm', 'runtime.exitsyscall',
         'runtime.entersyscall', 'runtime.gopark', 'runtime.usleep', 'runtime.osyield', 'runtime.lock2', 'runtime.unlock2',
         'runtime.selectgo', 'runtime.chansend', 'runtime.chanrecv', 'runtime.netpoll', 'sync.(*Cond)', 'runtime.semacquire',
         'runtime.semrelease', 'runtime.casgstatus', 'runtime.nanotime', 'runtime.gogo', 'runtime.newproc', 'runtime.morestack')
MALLOC = ('runtime.mallocgc', 'runtime.newobject', 'runtime.makeslice', 'runtime.growslice', 'runtime.makemap',
          'runtime.mapassign', 'runtime.convT', 'runtime.concatstring', 'runtime.slicebytetostring')

def sysc(s):
    return s[0].startswith(('internal/runtime/syscall', 'syscall.'))

def root(s):
    return s[-1] if s else ''

def inroot(s, *pats):
    r = ' '.join(s[-3:])
    return any(p in r for p in pats)

# (part, predicate) in order; the first that matches takes the sample.
RULES = [
    ('GC', lambda s: has(s, 'runtime.gcBgMarkWorker', 'runtime.gcAssistAlloc', 'runtime.bgsweep', 'runtime.bgscavenge', 'runtime.gcDrain', 'runtime.markroot')),
    ('periodic loops, gossip, Raft ticks (not per read)', lambda s: has(s, 'internal/loops.', 'internal/closedpush', 'internal/nodereport', 'memberlist', 'prometheus', 'sync.(*WaitGroup).Go', 'raftstore.(*Store).run', 'transport.(*GRPC)', 'raftstore.(*logWriter)', 'pebble/v2.(*DB).compact', 'pebble/v2.(*DB).flush')),
    # RESP connection goroutine (the gateway)
    ('gateway: RESP socket read (syscall)', lambda s: inroot(s, 'resp.(*Server).serveConn') and sysc(s) and has(s, 'Read')),
    ('gateway: RESP socket write (syscall)', lambda s: inroot(s, 'resp.(*Server).serveConn') and sysc(s) and has(s, 'Write')),
    ('gateway: Pebble lookups (reads it leads)', lambda s: inroot(s, 'resp.(*Server).serveConn') and has(s, *PEBBLE)),
    ('gateway: in-process KV (kvapi, raftstore, outside Pebble)', lambda s: inroot(s, 'resp.(*Server).serveConn') and has(s, 'redisLocal', 'internal/kvapi.', 'internal/raftstore.')),
    ('gateway: routing client send and wait (forwarded reads)', lambda s: inroot(s, 'resp.(*Server).serveConn') and has(s, 'tidekv/client.', 'redisgw.clientKV', 'redisgw.(*Gateway).viaRemote')),
    ('gateway: RESP parse (reader)', lambda s: inroot(s, 'resp.(*Server).serveConn') and has(s, 'resp.(*reader)', 'resp.header', 'resp.(*frameScanner)')),
    ('gateway: replies (output)', lambda s: inroot(s, 'resp.(*Server).serveConn') and has(s, 'resp.(*replyBuffer)', 'resp.append')),
    ('gateway: Go scheduler (connection waits)', lambda s: inroot(s, 'resp.(*Server).serveConn') and has(s, *SCHED)),
    ('gateway: command (HMGET, keys, routing by range, rest)', lambda s: inroot(s, 'resp.(*Server).serveConn')),
    # routing client's own goroutines on the gateway
    ('gateway: routing client stream (HTTP/2 client send/receive)', lambda s: has(s, 'tidekv/client.', 'http2Client', 'NewHTTP2Client', 'grpc.(*addrConn)') and not has(s, 'kvstream.', 'NewServerTransport')),
    # leaseholder side of a forwarded read
    ('leaseholder: Batch stream receive (HTTP/2 read, unmarshal)', lambda s: has(s, 'kvstream.(*Server).Serve', 'handleRawConn', 'http2Server') and not has(s, 'kvstream.(*workers)')),
    ('leaseholder: Pebble lookups (forwarded reads)', lambda s: has(s, 'kvstream.(*workers)') and has(s, *PEBBLE)),
    ('leaseholder: KV handler (kvapi, raftstore, outside Pebble)', lambda s: has(s, 'kvstream.(*workers)')),
    ('leaseholder: answers (batch sender, HTTP/2 writer)', lambda s: has(s, 'kvstream.(*batchSender)', 'NewServerTransport')),
    ('unary gRPC (control plane)', lambda s: has(s, 'grpc.(*Server).serverWorker', 'grpc.(*Server).Serve')),
    ('Go scheduler, no root (goroutine switches)', lambda s: has(s, *SCHED) or inroot(s, 'runtime.mcall', 'runtime.morestack', 'runtime.systemstack')),
    ('other', lambda s: True),
]

def classify(st):
    for name, f in RULES:
        if f(st):
            return name

def main():
    reads = float(sys.argv[1])
    files = sys.argv[2:]
    parts = [n for n, _ in RULES]
    tab = collections.defaultdict(lambda: [0.0] * len(files))
    tot = [0.0] * len(files)
    for j, f in enumerate(files):
        for v, st in parse(f):
            tab[classify(st)][j] += v
            tot[j] += v
    us = lambda x: x / reads * 1e6
    print('| part | ' + ' | '.join(os.path.basename(f) for f in files) + ' | all |')
    print('|---|' + '--:|' * (len(files) + 1))
    for p in parts:
        if p in tab:
            row = tab[p]
            print('| %s | %s | %.1f |' % (p, ' | '.join('%.1f' % us(x) for x in row), us(sum(row))))
    print('| **total** | %s | **%.1f** |' % (' | '.join('%.1f' % us(x) for x in tot), us(sum(tot))))
    print('sampled s: %s' % ', '.join('%.2f' % x for x in tot))

if __name__ == '__main__':
    main()
