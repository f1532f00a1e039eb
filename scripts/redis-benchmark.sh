#!/bin/bash
# Runs redis-benchmark against a 3-node TideKV cluster (node 1's Redis port)
# and against a redis-server (appendonly yes, appendfsync everysec) in the
# same run, issue 37: the list/set/hash/zset commands, SPOP and ZPOPMIN of
# the large sets they leave, the default mix, SET and GET with -P 16, then ZRANGEBYSCORE ... LIMIT 0 10 over a 100-member
# sorted set, and over a large one at 100k members and at BIG (filled by
# pipelined ZADDs of ZADD_PAIRS members each, bounded by FILL_SECONDS). Each test prints a CSV line per command with
# the load average before it and the server CPU (utime+stime from
# /proc/PID/stat, summed over TideKV's three nodes) per request.
# docs/benchmarks/redis.md has the results.
#
#   TIDEKV=/tmp/tidekv-rb scripts/redis-benchmark.sh
#
# Environment: TIDEKV (binary; default tidekv), OUT (default a new /tmp dir),
# BASE_PORT (TideKV node 1's gRPC port, its Redis port is +2; default 47800),
# REDIS_PORT (default 47899), N (requests per test; default 20000),
# BIG (members of the large set; default 1000000), FILL_SECONDS (bound on the
# fill of each system; default 900), ZADD_PAIRS (members a fill ZADD; default 400), NODE_CPUS (passed to --node-cpus; default 0),
# ZSET_ONLY=1 (only the sorted-set fill and ZRANGEBYSCORE).
# As root with cgroup v1 the whole run goes into /sys/fs/cgroup/cpu/rbench
# (cpu.shares 65536), removed at the end. Everything is stopped by PID.
set -u
B=${TIDEKV:-tidekv}
OUT=${OUT:-$(mktemp -d /tmp/rbench.XXXXXX)}
BP=${BASE_PORT:-47800}
TP=$((BP + 2))
RP=${REDIS_PORT:-47899}
N=${N:-20000}
BIG=${BIG:-1000000}
FILL=${FILL_SECONDS:-900}
mkdir -p "$OUT/redis"
CG=/sys/fs/cgroup/cpu/rbench
if [ -w /sys/fs/cgroup/cpu ] && mkdir -p $CG 2> /dev/null; then
	echo 65536 > $CG/cpu.shares
	echo $$ > $CG/tasks
fi
PIDS_UP= PID_R=
cleanup() {
	[ -n "$PIDS_UP" ] && kill $PIDS_UP 2> /dev/null
	[ -n "$PID_R" ] && kill $PID_R 2> /dev/null
	sleep 3
	if [ -d $CG ]; then
		echo $$ > /sys/fs/cgroup/cpu/tasks
		rmdir $CG 2> /dev/null
	fi
}
trap cleanup EXIT

"$B" up --nodes 3 --base-port "$BP" --data-dir "$OUT/data" --node-cpus "${NODE_CPUS:-0}" > "$OUT/up.log" 2>&1 &
PIDS_UP=$!
redis-server --port "$RP" --bind 127.0.0.1 --dir "$OUT/redis" --appendonly yes --appendfsync everysec --save '' > "$OUT/redis.log" 2>&1 &
PID_R=$!
for _ in $(seq 120); do grep -q "cluster up" "$OUT/up.log" && break; sleep 1; done
grep -q "cluster up" "$OUT/up.log" || { echo "cluster not up: $OUT/up.log" >&2; exit 1; }
# The nodes are the children of `tidekv up`.
NODES=$(cat /proc/$PIDS_UP/task/*/children)
echo "# commit $(git -C "$(dirname "$0")" rev-parse --short HEAD) date $(date -u +%FT%TZ) nodes $NODES redis $PID_R"

cpu() { # ticks of utime+stime summed over the PIDs given
	local t=0 p
	for p in "$@"; do
		t=$((t + $(awk '{print $14+$15}' /proc/$p/stat)))
	done
	echo $t
}
# bench SYSTEM PORT PIDS -- redis-benchmark arguments
bench() {
	local sys=$1 port=$2 pids=$3 c0 c1 csv reqs n
	shift 4
	n=$(echo "$*" | sed -n 's/.*-n \([0-9]*\).*/\1/p')
	local load
	load=$(uptime | sed 's/.*average: //')
	c0=$(cpu $pids)
	csv=$(timeout 240 redis-benchmark -h 127.0.0.1 -p "$port" -c 50 --csv "$@" 2>&1 | grep -v '^"test"')
	c1=$(cpu $pids)
	reqs=$(echo "$csv" | wc -l)
	# CPU per request over the whole test: with several commands in one test it is
	# their mean, and a test redis-benchmark stopped at an error reply overstates it.
	echo "$csv" | while IFS= read -r l; do
		echo "$sys,$l,cpu_us_per_req=$(awk -v d=$((c1 - c0)) -v r="$reqs" -v n="$n" -v hz="$(getconf CLK_TCK)" 'BEGIN{printf "%.1f", d/hz*1e6/(r*n)}'),load=\"$load\",args=\"$*\""
	done
}
each() { # runs one test against both systems
	bench tidekv $TP "$NODES" -- "$@"
	bench redis $RP "$PID_R" -- "$@"
}
echo "system,test,rps,avg_ms,min_ms,p50_ms,p95_ms,p99_ms,max_ms,cpu,load,args"
if [ "${ZSET_ONLY:-0}" != 1 ]; then
each -n "$N" -r 100000 -t lpush,lpop,sadd,hset,zadd
each -n "$N" -r 100000 zadd myzset __rand_int__ m:__rand_int__
each -n "$N" zrange myzset 0 9
# SPOP and ZPOPMIN of the large sets the tests above left (myset about
# 0.95 N members, myzset about 1.9 N), N/2 pops each from 50 connections:
# a pop reads drawn positions (SPOP) or starts at the index's start hint
# (ZPOPMIN), so its cost grows neither with the set nor with the pops
# before it (it did: 34-204 SPOPs/s, docs/benchmarks/redis.md).
each -n $((N / 2)) spop myset
each -n $((N / 2)) zpopmin myzset
# The default mix, whose ZADD makes a sorted set where myzset (about N
# members left) was just deleted, as the run that stopped at that ZADD with
# ERR timeout had it.
for p in $TP $RP; do redis-cli -p $p del myzset > /dev/null; done
each -n "$N"
each -n $((N * 5)) -P 16 -t set,get
fi

# resp prints ZADDs of KEY i m:i for i in [FROM,TO) as RESP, PAIRS pairs a
# command: a command is one transaction, so a fill of one key runs PAIRS
# members a Raft round instead of one (TideKV writes at most 1,000 keys a
# transaction, two a new member: PAIRS <= 499).
PAIRS=${ZADD_PAIRS:-400}
resp() {
	awk -v k="$1" -v a="$2" -v b="$3" -v p="$PAIRS" 'BEGIN{for(i=a;i<b;i+=p){n=(b-i<p)?b-i:p; printf "*%d\r\n$4\r\nZADD\r\n$%d\r\n%s\r\n", 2+2*n, length(k), k; for(j=i;j<i+n;j++){m="m:" j; printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(j ""), j, length(m), m}}}'
}
# fill SYSTEM PORT TO: ZADDs to big up to TO members, within FILL seconds
# of filling that system in all (spent).
declare -A spent=([tidekv]=0 [redis]=0)
fill() {
	local start done
	start=$(($(date +%s) - spent[$1]))
	done=$(redis-cli -p "$2" zcard big)
	while [ "$done" -lt "$3" ] && [ $(($(date +%s) - start)) -lt "$FILL" ]; do
		# --pipe gives up after 120 s without a reply: a stall ends the fill.
		resp big "$done" $((done + 10000)) | redis-cli -p "$2" --pipe --pipe-timeout 120 > /dev/null || break
		done=$((done + 10000))
	done
	spent[$1]=$(($(date +%s) - start))
	echo "# fill $1: ZCARD big $(redis-cli -p "$2" zcard big) in ${spent[$1]} s, load $(uptime | sed 's/.*average: //')"
}
resp small 0 100 | redis-cli -p $TP --pipe > /dev/null
resp small 0 100 | redis-cli -p $RP --pipe > /dev/null
each -n "$N" zrangebyscore small 40 60 LIMIT 0 10
# The 10-member window at 100k members and at BIG: its cost should not
# grow with the set.
for to in 100000 "$BIG"; do
	fill tidekv $TP "$to"
	fill redis $RP "$to"
	SZ=$(redis-cli -p $TP zcard big) # the smaller fill, so the window holds members on both
	LO=$((SZ / 2))
	each -n "$N" zrangebyscore big $LO $((LO + 100)) LIMIT 0 10
done
echo "# done $(date -u +%FT%TZ) load $(uptime | sed 's/.*average: //')"
