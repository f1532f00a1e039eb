#!/bin/bash
# Writes to ONE key from 50 connections (issue 37): redis-benchmark's INCR
# (key "counter:__rand_int__" without -r is one key), LPUSH, SADD and ZADD
# on one collection, and SET on random keys for reference, against node 1's
# Redis port of a 3-node TideKV cluster and against a redis-server (appendonly yes, appendfsync everysec). Prints
# redis-benchmark's CSV line per test with the system and the load average.
# docs/benchmarks/redis.md has the results.
#
#   TIDEKV=/tmp/tidekv scripts/redis-hotkey.sh
#
# Environment: TIDEKV (binary; default tidekv), OUT (default a new /tmp
# dir), BASE_PORT (node 1's gRPC port, its Redis port is +2; default 47900),
# REDIS_PORT (default 47999), N (requests per test; default 20000), TESTS
# (redis-benchmark tests, each run on its own; default incr,lpush,sadd,zadd,set),
# NO_REDIS=1 (TideKV only).
# As root with cgroup v1 the nodes run in /sys/fs/cgroup/cpu/hotkey-nodes and
# redis-benchmark (and redis-server) in /sys/fs/cgroup/cpu/hotkey-gen, both
# cpu.shares 65536 (ahead of other work on the machine, level with each
# other), removed at the end. Everything is stopped by PID.
set -u
B=${TIDEKV:-tidekv}
OUT=${OUT:-$(mktemp -d /tmp/hotkey.XXXXXX)}
BP=${BASE_PORT:-47900}
TP=$((BP + 2))
RP=${REDIS_PORT:-47999}
N=${N:-20000}
TESTS=${TESTS:-incr,lpush,sadd,zadd,set}
mkdir -p "$OUT/redis"
CGN=/sys/fs/cgroup/cpu/hotkey-nodes
CGG=/sys/fs/cgroup/cpu/hotkey-gen
cg=
if [ -w /sys/fs/cgroup/cpu ] && mkdir -p $CGN $CGG 2> /dev/null; then
	echo 65536 > $CGN/cpu.shares
	echo 65536 > $CGG/cpu.shares
	cg=1
fi
PID_UP= PID_R=
cleanup() {
	[ -n "$PID_UP" ] && kill $PID_UP 2> /dev/null
	[ -n "$PID_R" ] && kill $PID_R 2> /dev/null
	sleep 3
	if [ -n "$cg" ]; then
		echo $$ > /sys/fs/cgroup/cpu/tasks
		rmdir $CGN $CGG 2> /dev/null
	fi
}
trap cleanup EXIT

# The nodes inherit the cgroup of `tidekv up`, which starts in the nodes' one.
[ -n "$cg" ] && echo $$ > $CGN/tasks
"$B" up --nodes 3 --base-port "$BP" --data-dir "$OUT/data" > "$OUT/up.log" 2>&1 &
PID_UP=$!
[ -n "$cg" ] && echo $$ > $CGG/tasks
if [ -z "${NO_REDIS:-}" ]; then
	redis-server --port "$RP" --bind 127.0.0.1 --dir "$OUT/redis" --appendonly yes --appendfsync everysec --save '' > "$OUT/redis.log" 2>&1 &
	PID_R=$!
fi
for _ in $(seq 120); do grep -qs "cluster up" "$OUT/up.log" && break; sleep 1; done
grep -q "cluster up" "$OUT/up.log" || { echo "cluster not up: $OUT/up.log" >&2; exit 1; }
echo "# binary $B date $(date -u +%FT%TZ) nproc $(nproc) N $N tests $TESTS out $OUT"

bench() { # SYSTEM PORT
	local load t r
	for t in ${TESTS//,/ }; do
		# INCR's key (counter:__rand_int__) and LPUSH's list are one key
		# without -r; SADD's and ZADD's members vary with it (the set is
		# one key), SET's keys too.
		r=
		case $t in set | sadd | zadd) r="-r 100000" ;; esac
		load=$(uptime | sed 's/.*average: //')
		# redis-benchmark stops at an error reply: each test runs alone.
		timeout 300 redis-benchmark -h 127.0.0.1 -p "$2" -c 50 -n "$N" -t "$t" $r --csv 2>&1 |
			grep -v '^"test"' | tr '\r' '\n' | grep -v '^$' | tail -1 | sed "s/^/$1,/; s/\$/,load=\"$load\",args=\"-t $t $r\"/"
	done
}
bench tidekv "$TP"
[ -n "$PID_R" ] && bench redis "$RP"
exit 0
