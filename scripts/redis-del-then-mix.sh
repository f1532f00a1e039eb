#!/bin/bash
# Issue 37: a DEL of a large sorted set, then ZADDs to the same key and
# redis-benchmark's default mix (whose ZADD makes the set anew), against one
# `tidekv up` node. It fills myzset with MEMBERS members (ZADDs of 400),
# deletes it (the reply and its time printed), runs `-t zadd` (-r 100000),
# fills and deletes it again, then runs the default mix; -n N, 50 clients,
# each redis-benchmark bounded by `timeout`. docs/benchmarks/redis.md has the
# results.
#
#   TIDEKV=/tmp/tidekv scripts/redis-del-then-mix.sh
#
# Environment: TIDEKV (binary; default tidekv), OUT (default a new /tmp dir),
# BASE_PORT (the node's gRPC port, its Redis port is +2; default 48500),
# MEMBERS (default 38000), N (default 2000). The node is stopped by PID.
set -u
B=${TIDEKV:-tidekv}
OUT=${OUT:-$(mktemp -d /tmp/rdelmix.XXXXXX)}
BP=${BASE_PORT:-48500}
RP=$((BP + 2))
mkdir -p "$OUT"
MEMBERS=${MEMBERS:-38000}
N=${N:-2000}
"$B" up --nodes 1 --base-port "$BP" --data-dir "$OUT/data" > "$OUT/up.log" 2>&1 &
PID=$!
trap 'kill -INT $PID 2> /dev/null; wait $PID' EXIT
for _ in $(seq 60); do grep -q "cluster up" "$OUT/up.log" && break; sleep 1; done
grep -q "cluster up" "$OUT/up.log" || { echo "node not up: $OUT/up.log" >&2; exit 1; }
load() { uptime | sed 's/.*average: //'; }
echo "# commit $(git -C "$(dirname "$0")" rev-parse --short HEAD) date $(date -u +%FT%TZ) load $(load)"
fill() { # ZADDs of 400 members m:i with score i, MEMBERS in all
	awk -v n="$MEMBERS" 'BEGIN{for(i=0;i<n;i+=400){c=(n-i<400)?n-i:400; printf "*%d\r\n$4\r\nZADD\r\n$6\r\nmyzset\r\n", 2+2*c; for(j=i;j<i+c;j++){m="m:" j; printf "$%d\r\n%d\r\n$%d\r\n%s\r\n", length(j ""), j, length(m), m}}}' |
		redis-cli -p "$RP" --pipe --pipe-timeout 120 | tail -1
}
del() {
	local s r
	s=$(date +%s.%N)
	r=$(timeout 120 redis-cli -p "$RP" del myzset)
	echo "DEL myzset: $r in $(echo "$(date +%s.%N) - $s" | bc) s, load $(load)"
}
bench() { # redis-benchmark's -q lines (and its error, if it stopped at one)
	timeout 240 redis-benchmark -p "$RP" -c 50 -n "$N" -q "$@" 2>&1 | tr '\r' '\n' | grep -v -e 'rps=' -e '^ *$'
}
fill
del
bench -r 100000 -t zadd
echo "ZCARD myzset: $(redis-cli -p "$RP" zcard myzset)"
fill
del
bench
echo "# done $(date -u +%FT%TZ) load $(load)"
