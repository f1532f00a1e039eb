#!/bin/bash
# GET/SET through RESP (redis-benchmark): memory key spaces (B+-tree, SELECT
# 1; extendible hashing, SELECT 3) and a Pebble key space (SELECT 2) of one
# 3-node cluster (`tidekv up`, node 1's Redis port), and redis-server on
# loopback, in three rounds (docs/benchmarks/cost.md, issue 14). Every process
# started here is stopped by its PID.
#   TIDEKV=/path/to/tidekv OUT=/tmp/dir scripts/bench-memks.sh
set -u
B=${TIDEKV:-tidekv}
D=${OUT:-/tmp}/memks-data-$(date +%s)
A=127.0.0.1:47400
$B up --data-dir $D --base-port 47400 > ${OUT:-/tmp}/memks-up.log 2>&1 &
UP=$!
for i in $(seq 1 60); do grep -q "cluster up" ${OUT:-/tmp}/memks-up.log && break; sleep 1; done
grep "cluster up" ${OUT:-/tmp}/memks-up.log || { kill -INT $UP; exit 1; }
$B ctl --addr $A keyspace create mem --mode hashed --engine memory --index btree
$B ctl --addr $A keyspace create peb --mode hashed --engine pebble
$B ctl --addr $A keyspace create eh --mode hashed --engine memory --index exthash
sleep 8  # boundary splits
$B ctl --addr $A keyspace list
redis-server --port 47600 --save "" --appendonly no > ${OUT:-/tmp}/memks-redis.log 2>&1 &
RS=$!
sleep 1
run() { # name port db
  echo "== $1"
  redis-benchmark -p $2 --dbnum $3 -t set -n 30000 -c 50 -d 100 -r 20000 -q | grep -v "^$"
  redis-benchmark -p $2 --dbnum $3 -t get -n 100000 -c 50 -d 100 -r 20000 -q | grep -v "^$"
  redis-benchmark -p $2 --dbnum $3 -t set -n 100000 -c 50 -d 100 -r 20000 -P 16 -q | grep -v "^$"
  redis-benchmark -p $2 --dbnum $3 -t get -n 300000 -c 50 -d 100 -r 20000 -P 16 -q | grep -v "^$"
}
for round in 1 2 3; do
  echo "### round $round $(date -u +%H:%M:%S) load: $(cut -d' ' -f1-3 /proc/loadavg)"
  if [ $round = 2 ]; then
    run "tidekv pebble (SELECT 2), node 1" 47402 2
    run "tidekv memory exthash (SELECT 3), node 1" 47402 3
    run "tidekv memory btree (SELECT 1), node 1" 47402 1
  else
    run "tidekv memory btree (SELECT 1), node 1" 47402 1
    run "tidekv pebble (SELECT 2), node 1" 47402 2
    run "tidekv memory exthash (SELECT 3), node 1" 47402 3
  fi
  run "redis-server" 47600 0
  $B ctl --addr $A keyspace list | cut -c1-90
done
$B ctl --addr $A keyspace list
$B ctl --addr $A ranges | head -20
kill $RS; wait $RS
kill -INT $UP; wait $UP
echo stopped
