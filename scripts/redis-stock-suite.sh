#!/bin/bash
# Runs redis-server's own test suite (its Tcl harness, in external mode)
# against one TideKV node and prints a line per unit: tests passed, failed
# (an assertion), errored (an error reply or a Tcl error, which without
# --durable would stop the unit) and skipped, then the most frequent error
# replies. It fetches nothing: give it an unpacked tests tree of the Redis
# release to compare with (the directory holding `runtest` and `tests/`,
# e.g. `git archive 7.0.15 runtest tests` of redis/redis), and tclsh must be
# installed. docs/redis.md ("Redis's own test suite") has the last results.
#
#   scripts/redis-stock-suite.sh /tmp/redis-tests
#   TIDEKV=/tmp/tidekv UNITS="unit/keyspace unit/type/list" OUT=/tmp/stock scripts/redis-stock-suite.sh DIR
#
# Environment: TIDEKV (the binary; default `tidekv` on PATH), UNITS (the
# units to run; default below), OUT (logs and the node's data; default a new
# directory under /tmp), BASE_PORT (the node's gRPC port; its Redis port is
# BASE_PORT+2; default 47700), UNIT_TIMEOUT (seconds a unit may take in all;
# default 600), STOP=1 (leave out --durable: a unit then stops at its first
# error, which is how the harness runs by default), RUNTEST_ARGS (more
# arguments for runtest, e.g. '--skiptest /fuzzing': unit/type/zset's
# "ZDIFF fuzzing" passes the harness's 120 s on a loaded machine).
#
# The node is a one-node cluster (`tidekv up --nodes 1`) on loopback, stopped
# by its PID at the end. The harness runs with --singledb (TideKV's other
# databases are key spaces, not SELECT 9 of a fresh server) and
# --ignore-encoding (TideKV has none of Redis's encodings), and without the
# tests that need replication, DEBUG or CONFIG SET of memory limits.
set -u
TESTS=${1:?usage: $0 REDIS_TESTS_DIR (the directory holding runtest and tests/)}
[ -x "$TESTS/runtest" ] && [ -f "$TESTS/tests/test_helper.tcl" ] || {
	echo "$TESTS has no runtest and tests/test_helper.tcl" >&2
	exit 2
}
command -v tclsh > /dev/null || { echo "tclsh is not installed" >&2; exit 2; }
B=${TIDEKV:-tidekv}
OUT=${OUT:-$(mktemp -d /tmp/redis-stock.XXXXXX)}
PORT=${BASE_PORT:-47700}
UNITS=${UNITS:-"unit/keyspace unit/type/string unit/type/incr unit/type/hash unit/type/list unit/type/set unit/type/zset unit/expire unit/multi unit/info-command unit/scan unit/quit unit/protocol"}
mkdir -p "$OUT"

"$B" up --nodes 1 --base-port "$PORT" --data-dir "$OUT/data" > "$OUT/up.log" 2>&1 &
UP=$!
trap 'kill -INT $UP 2> /dev/null; wait $UP 2> /dev/null' EXIT
for _ in $(seq 1 120); do
	grep -q "cluster up" "$OUT/up.log" && break
	kill -0 $UP 2> /dev/null || break
	sleep 1
done
grep -q "cluster up" "$OUT/up.log" || { echo "the node did not start: $OUT/up.log" >&2; cat "$OUT/up.log" >&2; exit 1; }
RP=$(sed -n 's/.* redis=127\.0\.0\.1:\([0-9]*\).*/\1/p' "$OUT/up.log" | head -1)
[ -n "$RP" ] || { echo "no redis= address in $OUT/up.log" >&2; exit 1; }

DURABLE=--durable
[ "${STOP:-0}" = 1 ] && DURABLE=
echo "redis tests: $TESTS; node: $B redis=127.0.0.1:$RP; $(date -u '+%Y-%m-%d %H:%M UTC'); logs: $OUT"
printf '%-20s %6s %6s %6s %6s  %s\n' unit passed failed errored skipped stopped
for u in $UNITS; do
	log="$OUT/$(echo "$u" | tr / _).log"
	(cd "$TESTS" && timeout "${UNIT_TIMEOUT:-600}" ./runtest --host 127.0.0.1 --port "$RP" \
		--singledb --ignore-encoding $DURABLE --timeout 120 --clients 1 --baseport $((PORT + 200)) \
		--tags -needs:repl --tags -needs:debug --tags -needs:config-maxmemory \
		--tags -needs:save --tags -needs:reset ${RUNTEST_ARGS:-} --single "$u") > "$log" 2>&1
	rc=$?
	# Escape codes colour the harness's tags; the counts read them plain.
	plain=$(sed 's/\x1b\[[0-9;]*m//g' "$log")
	ok=$(grep -c '^\[ok\]:' <<< "$plain")
	bad=$(grep -c '^\[err\]:' <<< "$plain")
	skip=$(grep -cE '^\[(ignore|skip)\]:' <<< "$plain")
	# An error that is no assertion has the Tcl trace after it.
	errd=$(awk '/^\[err\]:/{e=1; next} e && /^    while executing/{n++; e=0} /^\[/{e=0} END{print n+0}' <<< "$plain")
	stopped=-
	# An [err] naming no test is an error between tests: with --durable
	# the rest of that server block is left out.
	abandoned=$(grep '^\[err\]:' <<< "$plain" | grep -v ' in tests/' | head -1)
	if [ -n "$abandoned" ]; then
		stopped="block left at: $(grep -A1 -F -x -- "$abandoned" <<< "$plain" | sed -n 2p | cut -c1-80)"
	fi
	if grep -q '^\[exception\]:' <<< "$plain"; then
		stopped=$(grep -m1 '^\[exception\]:' <<< "$plain" | cut -c1-100)
	elif [ $rc = 124 ]; then
		stopped="timed out after ${UNIT_TIMEOUT:-600}s"
	fi
	printf '%-20s %6d %6d %6d %6d  %s\n' "$u" "$ok" $((bad - errd)) "$errd" "$skip" "$stopped"
done
echo "most frequent error replies (all units; a command's arguments left out):"
# The harness lists each failure again after "The End": count the run's own lines.
for f in "$OUT"/unit_*.log; do sed -n '/The End/q; p' "$f"; done | sed 's/\x1b\[[0-9;]*m//g' | grep -E '^(ERR|WRONGTYPE|NOPROTO|NOSCRIPT|EXECABORT|NOPERM|NOTBUSY) ' |
	sed -E 's/, with args beginning with:.*//' | cut -c1-100 | sort | uniq -c | sort -rn | head -15
