#!/usr/bin/env bash
# Issue 18's measurement: a fresh 3-node cluster, 90 s of YCSB-A (zipfian,
# 16 threads) with rebalancing on, the lease transfers of its last 60 s,
# then the same run with rebalancing off in the same session. With
# ORDER=off-first the off run comes first (from the fresh cluster, so
# placement never acts during it) and the on run second; with
# ORDER=on-off-on a second on run follows the off run (the first run after
# the load phase pays for the load's compactions). Usage:
#   [ORDER=off-first|on-off-on] scripts/lease-pingpong.sh BINARY [BASE_PORT] [DURATION_SECONDS]
# Prints both bench reports, "transfers-last-60s=N" and the lease-transfer
# and split events.
set -euo pipefail
bin=${1:?tidekv binary}
port=${2:-17400}
dur=${3:-90}
dir=$(mktemp -d)
addr=127.0.0.1:$port
"$bin" up --data-dir "$dir" --base-port "$port" >"$dir/up.log" 2>&1 &
up=$!
trap 'kill -INT $up 2>/dev/null; wait $up 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 120); do
  [ "$(grep -c '^node ' "$dir/up.log" || true)" -ge 3 ] && break
  sleep 0.5
done
bench() { "$bin" bench --addr "$addr" --workload a --records 50000 --threads 16 --ops 0 --duration "${dur}s" --seed 1 "$@"; }
transfers() {
  "$bin" ctl --addr "$addr" --json events --limit 0 >"$dir/events.json"
  python3 - "$dir/events.json" <<'PY'
import json, sys, datetime
es = json.load(open(sys.argv[1]))["events"]
ts = lambda e: datetime.datetime.fromisoformat(e["time"].replace("Z", "+00:00"))
end = datetime.datetime.now(datetime.timezone.utc)  # the bench just ended
last = [e for e in es if e["kind"] == "lease-transfer" and (end - ts(e)).total_seconds() <= 60]
print("transfers-last-60s=%d (all: %d, splits: %d)" % (len(last), sum(e["kind"] == "lease-transfer" for e in es),
      sum(e["kind"] == "split" for e in es)))
for e in es:
    if e["kind"] in ("lease-transfer", "split"):
        print("  ", e["time"], e["kind"], e["subject"], e["reason"][:200])
PY
}
if [ "${ORDER:-}" = off-first ]; then
  "$bin" ctl --addr "$addr" config rebalance false
  bench
  "$bin" ctl --addr "$addr" config rebalance true
  bench --skip-load
  transfers
else
  bench
  transfers
  "$bin" ctl --addr "$addr" config rebalance false
  bench --skip-load
  if [ "${ORDER:-}" = on-off-on ]; then
    "$bin" ctl --addr "$addr" config rebalance true
    bench --skip-load
    transfers
  fi
fi
