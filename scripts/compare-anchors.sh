#!/usr/bin/env bash
# compare-anchors.sh: measures the reference systems that docs/benchmarks.md sets
# TideKV beside, on this machine, with go-ycsb and the parameters of `tidekv bench`:
#
#   etcd   3 members on 127.0.0.1, default fsync behaviour (etcd fsyncs its WAL)
#   redis  one unreplicated in-memory server (--save "" --appendonly no)
#   redis-aof  the same with --appendonly yes --appendfsync everysec
#
# For each system and workload it starts a fresh server (fresh data dirs), runs
# `go-ycsb load` then `go-ycsb run`, stops the server by PID, and at the end prints
# one summary table. Everything listens on 127.0.0.1 only; every wait loop and every
# go-ycsb call is bounded; a trap stops what this script started, by PID.
#
# Parameters (as TideKV's benchmark): recordcount=100000, threadcount=32 (load and
# run), requestdistribution=zipfian, fieldcount=10, fieldlength=100, readallfields=true,
# writeallfields=true (TideKV's UPDATE writes the whole record), operationcount=100000
# for A and B, 200000 for C.
#
# Environment (all optional):
#   GO_YCSB       go-ycsb binary (default: <repo>/../shared/tools/go-ycsb/go-ycsb,
#                 built by shared/tools/go-ycsb/build.sh)
#   WORKLOAD_DIR  go-ycsb's workloads/ dir (default: found in the Go module cache from
#                 the binary's module version; if absent, equivalent files are written)
#   OUT_DIR       where raw outputs, logs and the summary go (default /tmp/anchors/<time>)
#   SYSTEMS       default "etcd redis redis-aof"
#   WORKLOADS     default "a c" (any of a b c)
#   RECORDCOUNT THREADS OPS_A OPS_B OPS_C FIELDCOUNT FIELDLENGTH DISTRIBUTION
#   WRITEALLFIELDS (default true)   REDIS_DATATYPE (go-ycsb's, default hash)
#   ETCD_PORT_BASE (default 32379: clients 32379-32381, peers 32389-32391)
#   REDIS_PORT     (default 36379)
#   YCSB_TIMEOUT   seconds allowed for one go-ycsb call (default 1200)
#   ETCD_QUOTA_BYTES (default 8 GiB)
set -euo pipefail

script_dir=$(cd "$(dirname "$0")" && pwd)
repo_root=$(cd "$script_dir/.." && pwd)

GO_YCSB=${GO_YCSB:-$repo_root/../shared/tools/go-ycsb/go-ycsb}
OUT_DIR=${OUT_DIR:-/tmp/anchors/$(date +%Y%m%d-%H%M%S)}
SYSTEMS=${SYSTEMS:-etcd redis redis-aof}
WORKLOADS=${WORKLOADS:-a c}
RECORDCOUNT=${RECORDCOUNT:-100000}
THREADS=${THREADS:-32}
OPS_A=${OPS_A:-100000}
OPS_B=${OPS_B:-100000}
OPS_C=${OPS_C:-200000}
FIELDCOUNT=${FIELDCOUNT:-10}
FIELDLENGTH=${FIELDLENGTH:-100}
DISTRIBUTION=${DISTRIBUTION:-zipfian}
WRITEALLFIELDS=${WRITEALLFIELDS:-true}
REDIS_DATATYPE=${REDIS_DATATYPE:-hash}
ETCD_PORT_BASE=${ETCD_PORT_BASE:-32379}
REDIS_PORT=${REDIS_PORT:-36379}
YCSB_TIMEOUT=${YCSB_TIMEOUT:-1200}
ETCD_QUOTA_BYTES=${ETCD_QUOTA_BYTES:-8589934592}
ETCD_BIN=${ETCD_BIN:-etcd}
ETCDCTL_BIN=${ETCDCTL_BIN:-etcdctl}
REDIS_BIN=${REDIS_BIN:-redis-server}
REDIS_CLI=${REDIS_CLI:-redis-cli}

die() { echo "compare-anchors: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT_DIR/script.log" >&2; }

[[ -x $GO_YCSB ]] || die "go-ycsb not found at $GO_YCSB (build it with shared/tools/go-ycsb/build.sh or set GO_YCSB)"
for sys in $SYSTEMS; do
  case $sys in
    etcd) { command -v "$ETCD_BIN" && command -v "$ETCDCTL_BIN"; } >/dev/null ||
            die "etcd/etcdctl missing (apt-get install etcd-server etcd-client)" ;;
    redis|redis-aof) { command -v "$REDIS_BIN" && command -v "$REDIS_CLI"; } >/dev/null ||
            die "redis-server/redis-cli missing (apt-get install redis-server redis-tools)" ;;
    *) die "unknown system $sys (etcd, redis, redis-aof)" ;;
  esac
done
for w in $WORKLOADS; do
  case $w in a|b|c) ;; *) die "unknown workload $w (a, b, c)" ;; esac
done

mkdir -p "$OUT_DIR"
data_root=$(mktemp -d "${TMPDIR:-/tmp}/anchors-data.XXXXXX")

# ---- process bookkeeping: everything started here is stopped by PID ----------
pids=()
stop_pid() {
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do           # up to 10 s
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}
stop_all() {
  local pid
  for pid in "${pids[@]}"; do stop_pid "$pid"; done
  pids=()
}
cleanup() {
  local rc=$?
  stop_all
  rm -rf "$data_root"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ---- workload property files -------------------------------------------------
if [[ -z ${WORKLOAD_DIR:-} ]]; then
  ver=$(go version -m "$GO_YCSB" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/pingcap/go-ycsb" {print $3}' || true)
  modcache=$(go env GOMODCACHE 2>/dev/null || true)
  if [[ -n $ver && -n $modcache && -d $modcache/github.com/pingcap/go-ycsb@$ver/workloads ]]; then
    WORKLOAD_DIR=$modcache/github.com/pingcap/go-ycsb@$ver/workloads
  fi
fi
if [[ -z ${WORKLOAD_DIR:-} ]]; then
  # Same operation mixes as go-ycsb's workloads/workload{a,b,c}.
  WORKLOAD_DIR=$OUT_DIR/workloads
  mkdir -p "$WORKLOAD_DIR"
  for spec in a:0.5:0.5 b:0.95:0.05 c:1:0; do
    IFS=: read -r w rp up <<<"$spec"
    printf '%s\n' workload=core readallfields=true "readproportion=$rp" "updateproportion=$up" \
      scanproportion=0 insertproportion=0 >"$WORKLOAD_DIR/workload$w"
  done
fi
log "go-ycsb: $GO_YCSB; workloads: $WORKLOAD_DIR; out: $OUT_DIR"

ops_for() {
  case $1 in a) echo "$OPS_A" ;; b) echo "$OPS_B" ;; c) echo "$OPS_C" ;; esac
}

# ---- etcd ------------------------------------------------------------------------
etcd_client_port() { echo $((ETCD_PORT_BASE + $1 - 1)); }
etcd_peer_port() { echo $((ETCD_PORT_BASE + 10 + $1 - 1)); }
etcd_endpoints() {
  local i eps=()
  for i in 1 2 3; do eps+=("127.0.0.1:$(etcd_client_port "$i")"); done
  (IFS=,; echo "${eps[*]}")
}

start_etcd() { # $1 = tag for log names
  local tag=$1 i cluster="" dir=$data_root/etcd-$1
  for i in 1 2 3; do
    { port_free "$(etcd_client_port "$i")" && port_free "$(etcd_peer_port "$i")"; } ||
      die "etcd port $(etcd_client_port "$i") or $(etcd_peer_port "$i") is in use"
    cluster+="${cluster:+,}m$i=http://127.0.0.1:$(etcd_peer_port "$i")"
  done
  for i in 1 2 3; do
    mkdir -p "$dir/m$i"
    "$ETCD_BIN" --name "m$i" --data-dir "$dir/m$i" \
      --listen-client-urls "http://127.0.0.1:$(etcd_client_port "$i")" \
      --advertise-client-urls "http://127.0.0.1:$(etcd_client_port "$i")" \
      --listen-peer-urls "http://127.0.0.1:$(etcd_peer_port "$i")" \
      --initial-advertise-peer-urls "http://127.0.0.1:$(etcd_peer_port "$i")" \
      --initial-cluster "$cluster" --initial-cluster-token "anchors-$tag-$$" \
      --initial-cluster-state new --quota-backend-bytes "$ETCD_QUOTA_BYTES" \
      --logger zap --log-outputs stderr \
      >"$OUT_DIR/etcd-$tag-m$i.log" 2>&1 &
    pids+=($!)
  done
  for ((i = 0; i < 120; i++)); do   # up to ~60 s
    if "$ETCDCTL_BIN" --endpoints="$(etcd_endpoints)" --command-timeout=2s endpoint health >/dev/null 2>&1; then
      "$ETCDCTL_BIN" --endpoints="$(etcd_endpoints)" endpoint status -w table >>"$OUT_DIR/etcd-$tag-status.txt" 2>&1 || true
      return 0
    fi
    sleep 0.5
  done
  die "etcd cluster ($tag) did not become healthy; see $OUT_DIR/etcd-$tag-m*.log"
}

etcd_record_count() {
  # etcdctl 3.4 has no --count-only; the JSON answer carries the range's total count.
  "$ETCDCTL_BIN" --endpoints="$(etcd_endpoints)" --command-timeout=30s get --prefix usertable: --keys-only --limit 1 -w json 2>/dev/null |
    grep -o '"count":[0-9]*' | cut -d: -f2 || true
}

etcd_fsync_stats() { # WAL fsync count and seconds of member 1, from its /metrics
  curl -s --max-time 5 "http://127.0.0.1:$(etcd_client_port 1)/metrics" |
    awk '/^etcd_disk_wal_fsync_duration_seconds_(count|sum)/ {printf "%s=%s ", $1, $2} END {print ""}'
}

# ---- redis -----------------------------------------------------------------------
start_redis() { # $1 = tag, $2 = aof (yes/no)
  local tag=$1 aof=$2 dir=$data_root/redis-$1 i
  port_free "$REDIS_PORT" || die "redis port $REDIS_PORT is in use"
  mkdir -p "$dir"
  local args=(--port "$REDIS_PORT" --bind 127.0.0.1 --protected-mode yes --daemonize no
    --dir "$dir" --save "" --logfile "")
  if [[ $aof == yes ]]; then
    args+=(--appendonly yes --appendfsync everysec)
  else
    args+=(--appendonly no)
  fi
  "$REDIS_BIN" "${args[@]}" >"$OUT_DIR/redis-$tag.log" 2>&1 &
  pids+=($!)
  for ((i = 0; i < 100; i++)); do   # up to ~20 s
    if [[ $("$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]; then
      return 0
    fi
    sleep 0.2
  done
  die "redis ($tag) did not answer PING; see $OUT_DIR/redis-$tag.log"
}

# ---- go-ycsb ---------------------------------------------------------------------
summary_tsv=$OUT_DIR/summary.tsv
printf 'system\tworkload\tphase\top\tcount\tops_per_s\tavg_us\tp50_us\tp95_us\tp99_us\tp999_us\tmax_us\twall_s\n' >"$summary_tsv"

# run_ycsb system workload phase(load|run) db-name [extra -p ...]
run_ycsb() {
  local sys=$1 w=$2 phase=$3 db=$4
  shift 4
  local ops raw t0 t1 wall rc=0
  ops=$(ops_for "$w")
  raw=$OUT_DIR/$sys-$w-$phase.txt
  local cmd=("$GO_YCSB" "$phase" "$db" -P "$WORKLOAD_DIR/workload$w"
    -p "recordcount=$RECORDCOUNT" -p "operationcount=$ops" -p "threadcount=$THREADS"
    -p "requestdistribution=$DISTRIBUTION" -p "fieldcount=$FIELDCOUNT" -p "fieldlength=$FIELDLENGTH"
    -p readallfields=true -p "writeallfields=$WRITEALLFIELDS" "$@")
  printf '%q ' "${cmd[@]}" >"$raw.cmd"; echo >>"$raw.cmd"
  log "$sys workload $w $phase: $(cat "$raw.cmd")"
  t0=$(date +%s.%N)
  timeout --signal=TERM --kill-after=10 "$YCSB_TIMEOUT" "${cmd[@]}" >"$raw" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
  [[ $rc -eq 0 ]] || die "go-ycsb $phase $db (workload $w) exited $rc after ${wall}s; see $raw"
  grep -q '^Run finished' "$raw" || die "go-ycsb $phase $db (workload $w) printed no final summary; see $raw"
  # Final summary lines come after "Run finished"; plain style:
  # OP - Takes(s): x, Count: n, OPS: x, Avg(us): n, Min(us): n, Max(us): n, 50th(us): n, ...
  awk -v sys="$sys" -v w="$w" -v ph="$phase" -v wall="$wall" '
    /^Run finished/ {fin = 1; next}
    fin && / - Takes\(s\): / {
      op = $1; sub(/^[^-]*- /, "")
      n = split($0, kv, ", ")
      delete f
      for (i = 1; i <= n; i++) { split(kv[i], p, ": "); f[p[1]] = p[2] }
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sys, w, ph, op, f["Count"], f["OPS"],
        f["Avg(us)"], f["50th(us)"], f["95th(us)"], f["99th(us)"], f["99.9th(us)"], f["Max(us)"], wall
    }' "$raw" >>"$summary_tsv"
  if awk '/^Run finished/ {fin = 1} fin && /_ERROR +- /' "$raw" | grep -q .; then
    log "WARNING: $sys workload $w $phase reported errors: $(awk '/^Run finished/ {fin = 1} fin && /_ERROR +- / {c = $6; sub(/,$/, "", c); print $1 "=" c}' "$raw" | tr '\n' ';')"
  fi
  log "$sys workload $w $phase done in ${wall}s: $(awk '/^Run finished/ {fin = 1} fin && /^TOTAL/' "$raw")"
}

for sys in $SYSTEMS; do
  for w in $WORKLOADS; do
    case $sys in
      etcd)
        start_etcd "$w"
        run_ycsb etcd "$w" load etcd -p "etcd.endpoints=$(etcd_endpoints)"
        log "etcd records after load: $(etcd_record_count)"
        log "etcd m1 WAL fsyncs after load: $(etcd_fsync_stats)"
        run_ycsb etcd "$w" run etcd -p "etcd.endpoints=$(etcd_endpoints)"
        log "etcd m1 WAL fsyncs after run: $(etcd_fsync_stats)"
        "$ETCDCTL_BIN" --endpoints="$(etcd_endpoints)" endpoint status -w table >>"$OUT_DIR/etcd-$w-status.txt" 2>&1 || true
        ;;
      redis|redis-aof)
        aof=no; [[ $sys == redis-aof ]] && aof=yes
        start_redis "$sys-$w" "$aof"
        run_ycsb "$sys" "$w" load redis -p "redis.addr=127.0.0.1:$REDIS_PORT" -p "redis.datatype=$REDIS_DATATYPE"
        log "$sys keys after load: $("$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" dbsize)"
        run_ycsb "$sys" "$w" run redis -p "redis.addr=127.0.0.1:$REDIS_PORT" -p "redis.datatype=$REDIS_DATATYPE"
        "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" info persistence >"$OUT_DIR/$sys-$w-persistence.txt" 2>&1 || true
        ;;
    esac
    stop_all
    rm -rf "${data_root:?}"/*
  done
done

{
  echo
  echo "Summary (go-ycsb final report; ops/s = go-ycsb's OPS; latencies in microseconds; wall = whole go-ycsb call)"
  echo "records=$RECORDCOUNT threads=$THREADS distribution=$DISTRIBUTION fields=${FIELDCOUNT}x${FIELDLENGTH}B writeallfields=$WRITEALLFIELDS"
  column -t -s $'\t' "$summary_tsv"
} | tee "$OUT_DIR/summary.txt"
