#!/usr/bin/env bash
# compare-anchors.sh: measures the reference systems that docs/benchmarks/cost.md sets
# TideKV beside, on this machine, with go-ycsb and the parameters of `tidekv bench`,
# and TideKV itself through its Redis port, in the same run:
#
#   etcd   3 members on 127.0.0.1, default fsync behaviour (etcd fsyncs its WAL)
#   redis  one unreplicated in-memory server (--save "" --appendonly no)
#   redis-aof  the same with --appendonly yes --appendfsync everysec
#   tidekv a 3-node `tidekv up` cluster (replication factor 3); clients talk RESP2
#          to one node's Redis port (node 1 by default; every node routes)
#
# For each system and workload it starts a fresh server (fresh data dirs), runs
# `go-ycsb load` then `go-ycsb run` (etcd: go-ycsb's etcd driver; the others: its
# redis driver), stops the server by PID. Then, for each Redis-protocol system
# (redis, redis-aof, tidekv), it starts one more fresh server and runs
# redis-benchmark (`-t set,get -c 50`, plain and with -P 16). At the end it prints
# the go-ycsb table and one markdown table of everything (summary.md).
# Server CPU per operation: utime+stime (/proc/PID/stat) of the system's server
# processes (etcd's 3 members, redis-server, tidekv's nodes; not `tidekv up` itself)
# over each go-ycsb run phase, divided by its operationcount, and over each
# redis-benchmark call, divided by its requests (every test of -t together).
# Everything listens on 127.0.0.1 only; every wait loop, go-ycsb and
# redis-benchmark call is bounded; a trap stops what this script started, by PID.
#
# Usage:
#   scripts/compare-anchors.sh
#   SYSTEMS="tidekv redis" WORKLOADS="a b c" TIDEKV_BIN=/tmp/tidekv scripts/compare-anchors.sh
#   SYSTEMS="tidekv redis" WORKLOADS="" scripts/compare-anchors.sh     # redis-benchmark only
#   SYSTEMS="etcd redis redis-aof" RB_MODES="" scripts/compare-anchors.sh  # go-ycsb only
#
# Parameters (as TideKV's benchmark): recordcount=100000, threadcount=32 (load and
# run), requestdistribution=zipfian, fieldcount=10, fieldlength=100, readallfields=true,
# writeallfields=true (TideKV's UPDATE writes the whole record), operationcount=100000
# for A and B, 200000 for C.
# redis-benchmark: -t set,get -c 50 -d 3 -r 100000 (random keys over a 100000-key
# space; RB_KEYSPACE=0 drops -r, so every request hits the one key
# "key:__rand_int__"), -n 200000 plain, -n 1000000 with -P 16.
#
# Caveat: go-ycsb's redis driver (v1.0.1) drops HMGET errors (Read with
# redis.datatype=hash returns nil on error), so a READ count says nothing about
# failed reads; after each go-ycsb run the script reads back a sample of records
# with redis-cli (logged as "sample check").
#
# Environment (all optional):
#   GO_YCSB       go-ycsb binary (default: <repo>/../shared/tools/go-ycsb/go-ycsb,
#                 built by shared/tools/go-ycsb/build.sh), unmodified.
#   WORKLOAD_DIR  go-ycsb's workloads/ dir (default: found in the Go module cache from
#                 the binary's module version; if absent, equivalent files are written)
#   OUT_DIR       where raw outputs, logs and the summary go (default /tmp/anchors/<time>)
#   SYSTEMS       default "etcd redis redis-aof tidekv"
#   WORKLOADS     default "a c" (any of a b c; empty: no go-ycsb)
#   RECORDCOUNT THREADS OPS_A OPS_B OPS_C FIELDCOUNT FIELDLENGTH DISTRIBUTION
#   WRITEALLFIELDS (default true)   REDIS_DATATYPE (go-ycsb's, default hash)
#   ETCD_PORT_BASE (default 32379: clients 32379-32381, peers 32389-32391)
#   REDIS_PORT     (default 36379)
#   YCSB_TIMEOUT   seconds allowed for one go-ycsb call (default 1200)
#   ETCD_QUOTA_BYTES (default 8 GiB)
#   TIDEKV_BIN     tidekv binary (default: built from this checkout into OUT_DIR/bin)
#   TIDEKV_PORT_BASE (default 28400: node i uses 28400+10*(i-1) .. +9; Redis = +2)
#   TIDEKV_NODES   (default 3)      TIDEKV_REDIS_NODE  node whose Redis port clients use (1)
#   TIDEKV_READY_TIMEOUT  seconds for `tidekv up` to report the cluster up (default 240)
#   TIDEKV_REPLICATED_TIMEOUT  seconds, after that, for every range (and the meta
#                  range) to have min(3, TIDEKV_NODES) voters (default 180); a fresh
#                  cluster starts with one replica and up-replicates in the background
#   TIDEKV_KEEP_DATA  1 keeps each cluster's data dir (OUT_DIR/tidekv-data/<tag>);
#                  default: node logs are copied to OUT_DIR and the data is removed
#   RB_MODES       redis-benchmark modes, default "plain p16" ("pN" = -P N; empty: none)
#   RB_TESTS (set,get)  RB_CLIENTS (50)  RB_DATASIZE (3)  RB_KEYSPACE (100000; 0: no -r)
#   RB_REQUESTS (200000, plain)  RB_REQUESTS_PIPELINED (1000000, pN modes)
#   RB_TIMEOUT     seconds allowed for one redis-benchmark call (default 900)
#   SAMPLE_CHECK   records read back after each go-ycsb run on Redis-protocol systems (100)
set -euo pipefail

script_dir=$(cd "$(dirname "$0")" && pwd)
repo_root=$(cd "$script_dir/.." && pwd)

GO_YCSB=${GO_YCSB:-$repo_root/../shared/tools/go-ycsb/go-ycsb}
OUT_DIR=${OUT_DIR:-/tmp/anchors/$(date +%Y%m%d-%H%M%S)}
SYSTEMS=${SYSTEMS-etcd redis redis-aof tidekv}
WORKLOADS=${WORKLOADS-a c}
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
REDIS_BENCHMARK_BIN=${REDIS_BENCHMARK_BIN:-redis-benchmark}
TIDEKV_BIN=${TIDEKV_BIN:-}
TIDEKV_PORT_BASE=${TIDEKV_PORT_BASE:-28400}
TIDEKV_NODES=${TIDEKV_NODES:-3}
TIDEKV_REDIS_NODE=${TIDEKV_REDIS_NODE:-1}
TIDEKV_READY_TIMEOUT=${TIDEKV_READY_TIMEOUT:-240}
TIDEKV_REPLICATED_TIMEOUT=${TIDEKV_REPLICATED_TIMEOUT:-180}
TIDEKV_KEEP_DATA=${TIDEKV_KEEP_DATA:-0}
RB_MODES=${RB_MODES-plain p16}
RB_TESTS=${RB_TESTS:-set,get}
RB_CLIENTS=${RB_CLIENTS:-50}
RB_DATASIZE=${RB_DATASIZE:-3}
RB_KEYSPACE=${RB_KEYSPACE:-100000}
RB_REQUESTS=${RB_REQUESTS:-200000}
RB_REQUESTS_PIPELINED=${RB_REQUESTS_PIPELINED:-1000000}
RB_TIMEOUT=${RB_TIMEOUT:-900}
SAMPLE_CHECK=${SAMPLE_CHECK:-100}

die() { echo "compare-anchors: $*" >&2; exit 1; }
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT_DIR/script.log" >&2; }
is_resp() { [[ $1 == redis || $1 == redis-aof || $1 == tidekv ]]; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true; }

need_ycsb=0 need_rb=0
[[ -n ${WORKLOADS// /} ]] && need_ycsb=1
for sys in $SYSTEMS; do
  case $sys in
    etcd) { command -v "$ETCD_BIN" && command -v "$ETCDCTL_BIN"; } >/dev/null ||
            die "etcd/etcdctl missing (apt-get install etcd-server etcd-client)" ;;
    redis|redis-aof) { command -v "$REDIS_BIN" && command -v "$REDIS_CLI"; } >/dev/null ||
            die "redis-server/redis-cli missing (apt-get install redis-server redis-tools)" ;;
    tidekv) command -v "$REDIS_CLI" >/dev/null || die "redis-cli missing (apt-get install redis-tools)"
            [[ -z $TIDEKV_BIN || -x $TIDEKV_BIN ]] || die "TIDEKV_BIN=$TIDEKV_BIN is not executable"
            [[ -n $TIDEKV_BIN ]] || command -v go >/dev/null || die "set TIDEKV_BIN or install go to build it" ;;
    *) die "unknown system $sys (etcd, redis, redis-aof, tidekv)" ;;
  esac
  if is_resp "$sys" && [[ -n ${RB_MODES// /} ]]; then need_rb=1; fi
done
[[ $need_ycsb == 0 || -x $GO_YCSB ]] ||
  die "go-ycsb not found at $GO_YCSB (build it with shared/tools/go-ycsb/build.sh or set GO_YCSB)"
[[ $need_rb == 0 ]] || command -v "$REDIS_BENCHMARK_BIN" >/dev/null ||
  die "redis-benchmark missing (apt-get install redis-tools) or set RB_MODES=\"\""
for w in $WORKLOADS; do
  case $w in a|b|c) ;; *) die "unknown workload $w (a, b, c)" ;; esac
done
for m in $RB_MODES; do
  [[ $m == plain || $m =~ ^p[1-9][0-9]*$ ]] || die "unknown redis-benchmark mode $m (plain, pN)"
done
for v in RECORDCOUNT THREADS OPS_A OPS_B OPS_C TIDEKV_PORT_BASE TIDEKV_NODES TIDEKV_REDIS_NODE \
  TIDEKV_READY_TIMEOUT TIDEKV_REPLICATED_TIMEOUT RB_CLIENTS RB_DATASIZE RB_KEYSPACE RB_REQUESTS RB_REQUESTS_PIPELINED \
  RB_TIMEOUT YCSB_TIMEOUT SAMPLE_CHECK; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer, got '${!v}'"
done
((TIDEKV_REDIS_NODE >= 1 && TIDEKV_REDIS_NODE <= TIDEKV_NODES)) ||
  die "TIDEKV_REDIS_NODE must be in 1..$TIDEKV_NODES"

mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
data_root=$(mktemp -d "${TMPDIR:-/tmp}/anchors-data.XXXXXX")

# ---- process bookkeeping: everything started here is stopped by PID ----------
# Entries are "pid" for this shell's children, or "pid@starttime" for processes
# they started (tidekv servers under `tidekv up`): those are not ours to reap, so
# their kernel start time is checked before every signal in case the PID was reused.
pids=()
server_pids=() # the measured servers among pids (same specs), for server_cpu_ticks
proc_starttime() { # field 22 of /proc/PID/stat (after the parenthesised comm)
  local s f
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  read -ra f <<<"${s##*) }"
  echo "${f[19]}"
}
same_proc() { # spec -> is it (still) running?
  local pid=${1%@*}
  kill -0 "$pid" 2>/dev/null || return 1
  [[ $1 != *@* ]] && return 0
  [[ $(proc_starttime "$pid" || true) == "${1#*@}" ]]
}
stop_pid() { # spec: pid or pid@starttime. SIGTERM, up to 30 s, then SIGKILL.
  local spec=$1 pid=${1%@*} i
  if same_proc "$spec"; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 300; i++)); do           # up to 30 s (`tidekv up` gives each node 10 s)
      same_proc "$spec" || break
      sleep 0.1
    done
    if same_proc "$spec"; then
      echo "compare-anchors: pid $pid did not stop after SIGTERM; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  [[ $spec == *@* ]] || wait "$pid" 2>/dev/null || true
}
stop_all() {
  local spec
  for spec in "${pids[@]}"; do stop_pid "$spec"; done
  pids=() server_pids=()
}
server_cpu_ticks() { # utime+stime of server_pids, in clock ticks
  local spec s f sum=0
  for spec in "${server_pids[@]}"; do
    same_proc "$spec" || die "server process ${spec%@*} is gone"
    s=$(cat "/proc/${spec%@*}/stat") || die "cannot read /proc/${spec%@*}/stat"
    read -ra f <<<"${s##*) }"
    ((sum += f[11] + f[12]))
  done
  echo "$sum"
}
cpu_us_per() { # ticks0 ticks1 operations -> server CPU µs per operation
  awk -v d=$(($2 - $1)) -v n="$3" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", d / hz * 1e6 / n}'
}
# run_bounded secs out cmd...: runs cmd under timeout(1) in the background and waits
# for it, so that a signal to this script acts at once (bash runs traps only after
# a foreground command ends); cleanup stops it (timeout passes SIGTERM on).
fg_pid=""
run_bounded() {
  local secs=$1 out=$2 rc=0
  shift 2
  timeout --signal=TERM --kill-after=10 "$secs" "$@" </dev/null >"$out" 2>&1 &
  fg_pid=$!
  wait "$fg_pid" || rc=$?
  fg_pid=""
  return "$rc"
}
cleanup() {
  local rc=$?
  [[ -z $fg_pid ]] || stop_pid "$fg_pid"
  stop_all
  rm -rf "$data_root"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

{
  echo "date: $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
  echo "host: $(uname -srm); cpus: $(nproc); load: $(loadavg)"
  echo "checkout of this script: $(git -C "$repo_root" rev-parse HEAD 2>/dev/null || echo '?')" \
    "($(git -C "$repo_root" status --porcelain 2>/dev/null | wc -l) changed paths in the working tree;" \
    "a TIDEKV_BIN given from outside may be from another commit)"
  echo "systems: $SYSTEMS; workloads: ${WORKLOADS:-none}; redis-benchmark modes: ${RB_MODES:-none}"
  command -v "$REDIS_BIN" >/dev/null && "$REDIS_BIN" --version
  command -v "$REDIS_BENCHMARK_BIN" >/dev/null && "$REDIS_BENCHMARK_BIN" --version
  [[ -x $GO_YCSB ]] && go version -m "$GO_YCSB" 2>/dev/null | awk '$1 == "mod" {print "go-ycsb", $3}'
} >"$OUT_DIR/env.txt" 2>&1 || true

# ---- tidekv binary ----------------------------------------------------------------
if [[ " $SYSTEMS " == *" tidekv "* && -z $TIDEKV_BIN ]]; then
  TIDEKV_BIN=$OUT_DIR/bin/tidekv
  (cd "$repo_root" && go build -o "$TIDEKV_BIN" ./cmd/tidekv) >"$OUT_DIR/tidekv-build.log" 2>&1 ||
    die "building tidekv failed; see $OUT_DIR/tidekv-build.log"
  echo "tidekv: built from the working tree into $TIDEKV_BIN" >>"$OUT_DIR/env.txt"
elif [[ " $SYSTEMS " == *" tidekv "* ]]; then
  echo "tidekv: $TIDEKV_BIN (sha256 $(sha256sum "$TIDEKV_BIN" | cut -c1-16)…, mtime $(date -u -r "$TIDEKV_BIN" '+%Y-%m-%dT%H:%M:%SZ'))" >>"$OUT_DIR/env.txt"
fi

# ---- workload property files -------------------------------------------------
if [[ $need_ycsb == 1 && -z ${WORKLOAD_DIR:-} ]]; then
  ver=$(go version -m "$GO_YCSB" 2>/dev/null | awk '$1 == "mod" && $2 == "github.com/pingcap/go-ycsb" {print $3}' || true)
  modcache=$(go env GOMODCACHE 2>/dev/null || true)
  if [[ -n $ver && -n $modcache && -d $modcache/github.com/pingcap/go-ycsb@$ver/workloads ]]; then
    WORKLOAD_DIR=$modcache/github.com/pingcap/go-ycsb@$ver/workloads
  fi
fi
if [[ $need_ycsb == 1 && -z ${WORKLOAD_DIR:-} ]]; then
  # Same operation mixes as go-ycsb's workloads/workload{a,b,c}.
  WORKLOAD_DIR=$OUT_DIR/workloads
  mkdir -p "$WORKLOAD_DIR"
  for spec in a:0.5:0.5 b:0.95:0.05 c:1:0; do
    IFS=: read -r w rp up <<<"$spec"
    printf '%s\n' workload=core readallfields=true "readproportion=$rp" "updateproportion=$up" \
      scanproportion=0 insertproportion=0 >"$WORKLOAD_DIR/workload$w"
  done
fi
log "go-ycsb: $GO_YCSB; workloads: ${WORKLOAD_DIR:-none}; out: $OUT_DIR; load: $(loadavg)"

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
    pids+=($!) server_pids+=($!)
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

# ---- Redis protocol helpers (redis and tidekv) -----------------------------------
resp_ping() { # host port -> PONG within a bounded wait (~20 s)
  local i
  for ((i = 0; i < 100; i++)); do
    [[ $(timeout 5 "$REDIS_CLI" -h "$1" -p "$2" ping 2>/dev/null) == PONG ]] && return 0
    sleep 0.2
  done
  return 1
}

resp_key_count() { # host port pattern: SCAN (works on both; TideKV has no DBSIZE)
  { timeout 300 "$REDIS_CLI" -h "$1" -p "$2" --scan --pattern "$3" || echo "scan failed ($?)" >&2; } | wc -l
}

# sample_check host port: reads back SAMPLE_CHECK go-ycsb records (field0..field<n-1>)
# with HMGET and prints "<keys> keys, <missing> missing fields, <errors> error replies".
sample_check() {
  local host=$1 port=$2 keys fields="" i out
  [[ $SAMPLE_CHECK -gt 0 && $REDIS_DATATYPE == hash ]] || { echo "skipped"; return 0; }
  for ((i = 0; i < FIELDCOUNT; i++)); do fields+=" field$i"; done
  keys=$(timeout 120 "$REDIS_CLI" -h "$host" -p "$port" --scan --pattern 'usertable/*' 2>/dev/null |
    head -n "$SAMPLE_CHECK" || true)
  [[ -n $keys ]] || { echo "no keys found"; return 0; }
  out=$(awk -v f="$fields" '{print "HMGET " $0 f}' <<<"$keys" |
    timeout 120 "$REDIS_CLI" -h "$host" -p "$port" 2>&1 || true)
  awk -v k="$(wc -l <<<"$keys")" -v want="$(( $(wc -l <<<"$keys") * FIELDCOUNT ))" '
    /^(ERR|WRONGTYPE|NOPROTO|Error|Could not)/ {e++; next}
    /^$/ {m++; next}
    {v++}
    END {printf "%d keys, %d missing fields, %d error replies (%d of %d values)\n", k, m + 0, e + 0, v, want}' <<<"$out"
}

# ---- redis -----------------------------------------------------------------------
start_redis() { # $1 = tag, $2 = aof (yes/no)
  local tag=$1 aof=$2 dir=$data_root/redis-$1
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
  pids+=($!) server_pids+=($!)
  resp_ping 127.0.0.1 "$REDIS_PORT" || die "redis ($tag) did not answer PING; see $OUT_DIR/redis-$tag.log"
}

# ---- tidekv ----------------------------------------------------------------------
# start_tidekv tag: `tidekv up` on a fresh data dir; sets tidekv_dir, tidekv_grpc
# (node 1) and tidekv_redis_host/tidekv_redis_port (node TIDEKV_REDIS_NODE).
tidekv_dir="" tidekv_grpc="" tidekv_redis_host="" tidekv_redis_port=""
start_tidekv() {
  local tag=$1 i up_pid child st out err addr deadline
  tidekv_dir=$OUT_DIR/tidekv-data/$tag
  out=$OUT_DIR/tidekv-$tag-up.out err=$OUT_DIR/tidekv-$tag-up.err
  for ((i = 0; i < TIDEKV_NODES * 10; i++)); do
    port_free $((TIDEKV_PORT_BASE + i)) || die "tidekv port $((TIDEKV_PORT_BASE + i)) is in use (TIDEKV_PORT_BASE)"
  done
  rm -rf "$tidekv_dir"
  mkdir -p "$tidekv_dir"
  "$TIDEKV_BIN" up --nodes "$TIDEKV_NODES" --base-port "$TIDEKV_PORT_BASE" --data-dir "$tidekv_dir" \
    >"$out" 2>"$err" &
  up_pid=$!
  pids+=("$up_pid")
  deadline=$((SECONDS + TIDEKV_READY_TIMEOUT))
  until grep -q '^cluster up' "$out" 2>/dev/null; do
    kill -0 "$up_pid" 2>/dev/null || die "tidekv up ($tag) exited before the cluster was up; see $err and $tidekv_dir/node*/tidekv.log"
    ((SECONDS < deadline)) || die "tidekv cluster ($tag) not up after ${TIDEKV_READY_TIMEOUT}s; see $err"
    sleep 0.5
  done
  # The servers are children of `tidekv up`; record them (with their start times)
  # so that they are stopped even if `up` itself has to be killed.
  for child in $(ps -o pid= --ppid "$up_pid" 2>/dev/null || true); do
    st=$(proc_starttime "$child" || true)
    [[ -n $st ]] && pids+=("$child@$st") server_pids+=("$child@$st")
  done
  # "node <i> grpc=<addr> http=<addr> redis=<addr>": parse by key.
  node_field() { awk -v n="$1" -v k="$2=" '$1 == "node" && $2 == n {
      for (i = 3; i <= NF; i++) if (index($i, k) == 1) print substr($i, length(k) + 1) }' "$out"; }
  tidekv_grpc=$(node_field 1 grpc)
  addr=$(node_field "$TIDEKV_REDIS_NODE" redis)
  [[ -n $addr ]] || die "tidekv up printed no redis= address for node $TIDEKV_REDIS_NODE; see $out"
  tidekv_redis_host=${addr%:*} tidekv_redis_port=${addr##*:}
  for ((i = 1; i <= TIDEKV_NODES; i++)); do
    addr=$(node_field "$i" redis)
    resp_ping "${addr%:*}" "${addr##*:}" || die "tidekv node $i Redis port $addr did not answer PING"
  done
  log "tidekv ($tag) up: $(tr '\n' ';' <"$out")"
  tidekv_wait_replicated "$tag"
}

# A new cluster's ranges start with one voter on node 1; the meta leaseholder adds
# the others one change at a time. Measuring before that measures no replication,
# so wait (bounded) until `ctl ranges` shows rf voters and no learner in every
# range and `ctl status` counts rf replicas of every range plus the meta range,
# on two polls in a row.
count_of() { awk -v p="$1" '{ n += gsub(p, "&") } END { print n + 0 }'; } # occurrences of regex p in stdin
tidekv_wait_replicated() { # tag
  local tag=$1 rf=$((TIDEKV_NODES < 3 ? TIDEKV_NODES : 3)) deadline t0=$SECONDS ok=0 r st n v l sum
  deadline=$((SECONDS + TIDEKV_REPLICATED_TIMEOUT))
  while :; do
    r=$(tidekv_ctl --json ranges | tr -d ' \n\t')
    st=$(tidekv_ctl --json status | tr -d ' \n\t')
    n=$(count_of '"range_id":' <<<"$r")
    v=$(count_of '"type":"VOTER"' <<<"$r")
    l=$(count_of '"type":"LEARNER"' <<<"$r")
    sum=$(awk '{ while (match($0, /"replicas":[0-9]+/)) { s += substr($0, RSTART + 11, RLENGTH - 11)
      $0 = substr($0, RSTART + RLENGTH) } } END { print s + 0 }' <<<"$st")
    if ((n > 0 && v == rf * n && l == 0 && sum == rf * (n + 1))); then
      ((++ok >= 2)) && break
    else
      ok=0
    fi
    ((SECONDS < deadline)) || die "tidekv ($tag): ranges not at $rf voters after ${TIDEKV_REPLICATED_TIMEOUT}s (ranges=$n voters=$v learners=$l replicas=$sum)"
    sleep 1
  done
  tidekv_ctl ranges >"$OUT_DIR/tidekv-$tag-ranges-start.txt"
  log "tidekv ($tag) replicated ($n range(s) x $rf voters, meta included) after $((SECONDS - t0))s"
}

tidekv_ctl() { timeout 30 "$TIDEKV_BIN" ctl --addr "$tidekv_grpc" --timeout 20s "$@" 2>&1 || true; }

# after stop_all: keep the node logs, drop the data unless asked to keep it
tidekv_collect() { # tag
  local tag=$1 i
  [[ -n $tidekv_dir && -d $tidekv_dir ]] || return 0
  log "tidekv ($tag) data dir size: $(du -sh "$tidekv_dir" 2>/dev/null | cut -f1)"
  for ((i = 1; i <= TIDEKV_NODES; i++)); do
    cp "$tidekv_dir/node$i/tidekv.log" "$OUT_DIR/tidekv-$tag-node$i.log" 2>/dev/null || true
  done
  [[ $TIDEKV_KEEP_DATA == 1 ]] || rm -rf "$tidekv_dir"
  tidekv_dir=""
}

# ---- results ---------------------------------------------------------------------
summary_tsv=$OUT_DIR/summary.tsv
printf 'system\tworkload\tphase\top\tcount\tops_per_s\tavg_us\tp50_us\tp95_us\tp99_us\tp999_us\tmax_us\twall_s\tcpu_us_op\n' >"$summary_tsv"
# every measurement, latencies in ms (go-ycsb's us converted), for summary.md
results_tsv=$OUT_DIR/results.tsv
printf 'system\ttool\ttest\top\tcount\tops_per_s\tavg_ms\tp50_ms\tp95_ms\tp99_ms\tmax_ms\terrors\twall_s\tcpu_us_op\n' >"$results_tsv"

# ---- go-ycsb ---------------------------------------------------------------------
# run_ycsb system workload phase(load|run) db-name [extra -p ...]
run_ycsb() {
  local sys=$1 w=$2 phase=$3 db=$4
  shift 4
  local ops raw t0 t1 wall rc=0 c0 c1 cpu
  ops=$(ops_for "$w")
  raw=$OUT_DIR/$sys-$w-$phase.txt
  local cmd=("$GO_YCSB" "$phase" "$db" -P "$WORKLOAD_DIR/workload$w"
    -p "recordcount=$RECORDCOUNT" -p "operationcount=$ops" -p "threadcount=$THREADS"
    -p "requestdistribution=$DISTRIBUTION" -p "fieldcount=$FIELDCOUNT" -p "fieldlength=$FIELDLENGTH"
    -p readallfields=true -p "writeallfields=$WRITEALLFIELDS" "$@")
  printf '%q ' "${cmd[@]}" >"$raw.cmd"; echo >>"$raw.cmd"
  log "$sys workload $w $phase (load $(loadavg)): $(cat "$raw.cmd")"
  c0=$(server_cpu_ticks)
  t0=$(date +%s.%N)
  run_bounded "$YCSB_TIMEOUT" "$raw" "${cmd[@]}" || rc=$?
  t1=$(date +%s.%N)
  c1=$(server_cpu_ticks)
  # load's operations are its records
  cpu=$(cpu_us_per "$c0" "$c1" "$( [[ $phase == load ]] && echo "$RECORDCOUNT" || echo "$ops")")
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
  [[ $rc -eq 0 ]] || die "go-ycsb $phase $db (workload $w) exited $rc after ${wall}s; see $raw"
  grep -q '^Run finished' "$raw" || die "go-ycsb $phase $db (workload $w) printed no final summary; see $raw"
  # Final summary lines come after "Run finished"; plain style:
  # OP - Takes(s): x, Count: n, OPS: x, Avg(us): n, Min(us): n, Max(us): n, 50th(us): n, ...
  awk -v sys="$sys" -v w="$w" -v ph="$phase" -v wall="$wall" -v cpu="$cpu" -v res="$results_tsv" '
    /^Run finished/ {fin = 1; next}
    fin && / - Takes\(s\): / {
      op = $1; sub(/^[^-]*- /, "")
      n = split($0, kv, ", ")
      delete f
      for (i = 1; i <= n; i++) { split(kv[i], p, ": "); f[p[1]] = p[2] }
      c = (op == "TOTAL" ? cpu : "-") # CPU is measured for the whole run, not per op type
      printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sys, w, ph, op, f["Count"], f["OPS"],
        f["Avg(us)"], f["50th(us)"], f["95th(us)"], f["99th(us)"], f["99.9th(us)"], f["Max(us)"], wall, c
      printf "%s\tgo-ycsb %s\t%s\t%s\t%s\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%s\t%s\n", sys, ph, w, op, f["Count"],
        f["OPS"], f["Avg(us)"] / 1000, f["50th(us)"] / 1000, f["95th(us)"] / 1000, f["99th(us)"] / 1000,
        f["Max(us)"] / 1000, (op ~ /_ERROR$/ ? f["Count"] : 0), wall, c >> res
    }' "$raw" >>"$summary_tsv"
  if awk '/^Run finished/ {fin = 1} fin && /_ERROR +- /' "$raw" | grep -q .; then
    log "WARNING: $sys workload $w $phase reported errors: $(awk '/^Run finished/ {fin = 1} fin && /_ERROR +- / {c = $6; sub(/,$/, "", c); print $1 "=" c}' "$raw" | tr '\n' ';')"
  fi
  # other messages (client errors go-ycsb prints, connection problems), top 3
  local msgs
  msgs=$(grep -iE 'error|refused|unknown command|timeout|NOPROTO' "$raw" | grep -v ' - Takes(s)' |
    sort | uniq -c | sort -rn | head -3 | tr -s ' ' | tr '\n' ';' || true)
  [[ -z $msgs ]] || log "note: $sys workload $w $phase output mentions errors: $msgs"
  log "$sys workload $w $phase done in ${wall}s, server CPU $cpu µs/op: $(awk '/^Run finished/ {fin = 1} fin && /^TOTAL/' "$raw")"
}

# go-ycsb redis driver against host:port (redis, redis-aof, tidekv)
ycsb_resp() { # system workload host port
  local sys=$1 w=$2 host=$3 port=$4
  local props=(-p "redis.addr=$host:$port" -p "redis.datatype=$REDIS_DATATYPE")
  run_ycsb "$sys" "$w" load redis "${props[@]}"
  log "$sys keys after load: $(resp_key_count "$host" "$port" 'usertable/*')"
  run_ycsb "$sys" "$w" run redis "${props[@]}"
  log "$sys sample check after run: $(sample_check "$host" "$port")"
}

# ---- redis-benchmark ---------------------------------------------------------------
# run_rb system mode host port
run_rb() {
  local sys=$1 mode=$2 host=$3 port=$4 pipeline=1 n=$RB_REQUESTS raw t0 t1 wall rc=0 rows errs c0 c1 cpu
  if [[ $mode != plain ]]; then pipeline=${mode#p} n=$RB_REQUESTS_PIPELINED; fi
  local tool_name=redis-benchmark
  ((pipeline > 1)) && tool_name+=" -P $pipeline"
  raw=$OUT_DIR/$sys-rb-$mode.txt
  local cmd=("$REDIS_BENCHMARK_BIN" -h "$host" -p "$port" -t "$RB_TESTS" -c "$RB_CLIENTS" -n "$n"
    -d "$RB_DATASIZE")
  ((RB_KEYSPACE > 0)) && cmd+=(-r "$RB_KEYSPACE")
  ((pipeline > 1)) && cmd+=(-P "$pipeline")
  printf '%q ' "${cmd[@]}" >"$raw.cmd"; echo >>"$raw.cmd"
  log "$sys redis-benchmark $mode (load $(loadavg)): $(cat "$raw.cmd")"
  c0=$(server_cpu_ticks)
  t0=$(date +%s.%N)
  # progress lines end in \r; keep the raw stream and a line-per-line copy
  run_bounded "$RB_TIMEOUT" "$raw.raw" "${cmd[@]}" || rc=$?
  t1=$(date +%s.%N)
  c1=$(server_cpu_ticks)
  local tests
  IFS=, read -ra tests <<<"$RB_TESTS"
  cpu=$(cpu_us_per "$c0" "$c1" $((n * ${#tests[@]})))
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
  tr '\r' '\n' <"$raw.raw" | grep -v -e 'rps=' -e '^ *$' >"$raw" || true
  # A call that fails (redis-benchmark exits at the first error reply, e.g.
  # TRYAGAIN) keeps the tests it completed and adds a row saying it failed,
  # so the other systems and modes still run and the summary shows it.
  local failed=""
  if ((rc != 0)); then
    failed=$(printf '%s	%s	exited %s: %s	-	-	0	-	-	-	-	-	-	%s	%s' "$sys" "$tool_name" "$rc" \
      "$(grep -v '^Summary\|^ ' "$raw" | tail -1 | tr '\t' ' ' | cut -c1-80)" "$wall" "$cpu")
    log "WARNING: redis-benchmark $mode against $sys exited $rc after ${wall}s (last line: $(tail -1 "$raw")); its completed tests are kept, see $raw"
  fi
  # Per test: "====== SET ======", "N requests completed in S seconds", then
  # "Summary:" / "throughput summary: X requests per second" / "latency summary (msec):"
  # / header "avg min p50 p95 p99 max" / values. "Error from server: ..." lines are
  # printed at most once a second, so their count is a lower bound.
  rows=$(awk -v sys="$sys" -v tool="$tool_name" -v wall="$wall" -v cpu="$cpu" '
    function flush() {
      if (test != "" && rps != "")
        printf "%s\t%s\t%s\t-\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", sys, tool, test, count, rps, lat["avg"], lat["p50"], lat["p95"], lat["p99"], lat["max"], errs + 0, wall, cpu
      test = ""; rps = ""; count = ""; errs = 0; delete lat; hdr = 0
    }
    /^====== .* ======$/ { flush(); test = $2; next }
    /requests completed in/ { count = $1; next }
    /throughput summary:/ { rps = $3; next }
    /^Error from server/ { errs++; next }
    hdr == 1 { for (i = 1; i <= NF; i++) lat[name[i]] = $i; hdr = 2; next }
    /^ +avg +min +p50/ { for (i = 1; i <= NF; i++) name[i] = $i; hdr = 1; next }
    END { flush() }' "$raw")
  [[ -n $rows || -n $failed ]] || die "redis-benchmark $mode against $sys printed no summary; see $raw"
  [[ -z $rows ]] || printf '%s\n' "$rows" >>"$results_tsv"
  [[ -z $failed ]] || printf '%s\n' "$failed" >>"$results_tsv"
  errs=$(grep -c '^Error from server' "$raw" || true)
  ((errs == 0)) || log "WARNING: $sys redis-benchmark $mode: $errs 'Error from server' lines (at most 1/s shown): $(grep '^Error from server' "$raw" | sort | uniq -c | sort -rn | head -3 | tr -s ' ' | tr '\n' ';')"
  log "$sys redis-benchmark $mode done in ${wall}s, server CPU $cpu µs/request (all tests): $(awk -F'\t' '{printf "%s %s ops/s p50 %s ms p99 %s ms; ", $3, $6, $8, $10}' <<<"$rows")"
}

# ---- main --------------------------------------------------------------------------
# start_system system tag -> sets host/port for Redis-protocol systems
host="" port=""
start_system() {
  case $1 in
    etcd) start_etcd "$2" ;;
    redis) start_redis "$1-$2" no; host=127.0.0.1 port=$REDIS_PORT ;;
    redis-aof) start_redis "$1-$2" yes; host=127.0.0.1 port=$REDIS_PORT ;;
    tidekv) start_tidekv "$2"; host=$tidekv_redis_host port=$tidekv_redis_port
            tidekv_ctl status >"$OUT_DIR/tidekv-$2-status.txt" ;;
  esac
}
stop_system() { # system tag
  case $1 in
    redis|redis-aof)
      "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" info persistence >"$OUT_DIR/$1-$2-persistence.txt" 2>&1 || true
      "$REDIS_CLI" -h 127.0.0.1 -p "$REDIS_PORT" info errorstats >"$OUT_DIR/$1-$2-errorstats.txt" 2>&1 || true
      [[ -s $OUT_DIR/$1-$2-errorstats.txt ]] && grep -q '^errorstat_' "$OUT_DIR/$1-$2-errorstats.txt" &&
        log "note: $1 ($2) error replies: $(grep '^errorstat_' "$OUT_DIR/$1-$2-errorstats.txt" | tr -d '\r' | tr '\n' ' ')"
      ;;
    tidekv) tidekv_ctl ranges >"$OUT_DIR/tidekv-$2-ranges.txt"
            log "tidekv ($2) ranges at the end: $(awk 'NR > 1 {$1 = $1; print}' "$OUT_DIR/tidekv-$2-ranges.txt" | tr '\n' ';')" ;;
  esac
  stop_all
  [[ $1 == tidekv ]] && tidekv_collect "$2"
  rm -rf "${data_root:?}"/*
}

for sys in $SYSTEMS; do
  for w in $WORKLOADS; do
    start_system "$sys" "$w"
    case $sys in
      etcd)
        run_ycsb etcd "$w" load etcd -p "etcd.endpoints=$(etcd_endpoints)"
        log "etcd records after load: $(etcd_record_count)"
        log "etcd m1 WAL fsyncs after load: $(etcd_fsync_stats)"
        run_ycsb etcd "$w" run etcd -p "etcd.endpoints=$(etcd_endpoints)"
        log "etcd m1 WAL fsyncs after run: $(etcd_fsync_stats)"
        "$ETCDCTL_BIN" --endpoints="$(etcd_endpoints)" endpoint status -w table >>"$OUT_DIR/etcd-$w-status.txt" 2>&1 || true
        ;;
      *) ycsb_resp "$sys" "$w" "$host" "$port" ;;
    esac
    stop_system "$sys" "$w"
  done
  if is_resp "$sys" && [[ -n ${RB_MODES// /} ]]; then
    start_system "$sys" rb
    for m in $RB_MODES; do run_rb "$sys" "$m" "$host" "$port"; done
    log "$sys keys after redis-benchmark: $(resp_key_count "$host" "$port" 'key:*')"
    stop_system "$sys" rb
  fi
done

{
  if [[ $need_ycsb == 1 ]]; then
    echo
    echo "Summary (go-ycsb final report; ops/s = go-ycsb's OPS; latencies in microseconds; wall = whole go-ycsb call)"
    echo "records=$RECORDCOUNT threads=$THREADS distribution=$DISTRIBUTION fields=${FIELDCOUNT}x${FIELDLENGTH}B writeallfields=$WRITEALLFIELDS"
    column -t -s $'\t' "$summary_tsv"
  fi
} | tee "$OUT_DIR/summary.txt"

{
  echo
  echo "## Redis-protocol comparison, $(date -u '+%Y-%m-%d %H:%M UTC') ($(nproc) CPUs, load $(loadavg))"
  echo
  echo "go-ycsb: records=$RECORDCOUNT threads=$THREADS distribution=$DISTRIBUTION fields=${FIELDCOUNT}x${FIELDLENGTH}B" \
    "writeallfields=$WRITEALLFIELDS ops a/b/c=$OPS_A/$OPS_B/$OPS_C datatype=$REDIS_DATATYPE." \
    "redis-benchmark: -t $RB_TESTS -c $RB_CLIENTS -d $RB_DATASIZE $( ((RB_KEYSPACE > 0)) && echo "-r $RB_KEYSPACE")" \
    "-n $RB_REQUESTS (plain) / $RB_REQUESTS_PIPELINED (pipelined)." \
    "tidekv: $TIDEKV_NODES nodes via node $TIDEKV_REDIS_NODE's Redis port. Latencies in ms. Raw outputs: $OUT_DIR"
  echo
  echo "Server CPU µs/op: the servers' processes over the whole go-ycsb run (TOTAL rows) or redis-benchmark call (all its tests)."
  echo
  echo "| system | tool | workload/test | op | count | ops/s | p50 ms | p99 ms | errors | server CPU µs/op |"
  echo "|---|---|---|---|--:|--:|--:|--:|--:|--:|"
  tail -n +2 "$results_tsv" | awk -F'\t' '$2 == "go-ycsb load" && $4 == "TOTAL" {next} {printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $8, $10, $12, $14}'
} | tee "$OUT_DIR/summary.md"
