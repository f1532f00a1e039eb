#!/usr/bin/env bash
# How a real 3-node cluster batches writes under the native YCSB-A closed
# loop (docs/benchmarks/cost.md, "The floor of the pieces we keep"): a
# fresh `tidekv up`, a load phase of 20,000 records, then DURATION of
# YCSB-A with 32 threads; the nodes' batching counters (/metrics) are read
# before and after the run phase and their differences printed, summed over
# the three nodes, beside the bench's report. Divide by the report's
# UPDATE count for per-write figures. Run it in a cgroup of its own on a
# shared machine. Usage:
#   scripts/batching-counts.sh BINARY [BASE_PORT] [DURATION]
set -euo pipefail
bin=${1:?tidekv binary}
port=${2:-28460}
dur=${3:-20s}
dir=$(mktemp -d)
"$bin" up --data-dir "$dir" --base-port "$port" >"$dir/up.log" 2>&1 &
up=$!
trap 'kill -INT $up 2>/dev/null; wait $up 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 60); do grep -q "cluster up" "$dir/up.log" && break; sleep 1; done
grep -q "cluster up" "$dir/up.log" || { cat "$dir/up.log"; exit 1; }
scrape() {
  for n in 0 1 2; do
    curl -s "http://127.0.0.1:$((port + 1 + 10 * n))/metrics"
  done | grep -E '^tidekv_raft_(readies|log_batches|apply_batches|commands_proposed|entries_proposed|entries_appended|messages_sent|syncs)_total ' |
    awk '{s[$1] += $2} END {for (k in s) printf "%s %.0f\n", k, s[k]}' | sort
}
"$bin" bench --addr "127.0.0.1:$port" --workload a --records 20000 --threads 32 --ops 1 --out "" >/dev/null
scrape >"$dir/before"
"$bin" bench --addr "127.0.0.1:$port" --workload a --records 20000 --threads 32 --ops 0 --duration "$dur" --skip-load --out "" 2>/dev/null
scrape >"$dir/after"
join "$dir/before" "$dir/after" | awk '{printf "%s %d\n", $1, $3 - $2}'
