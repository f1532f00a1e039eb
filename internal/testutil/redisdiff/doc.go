// Package redisdiff is the differential test of TideKV's Redis protocol:
// it runs the same command sequences against a real redis-server (started
// with internal/testutil/redisserver) and against a TideKV Redis listener,
// and requires identical replies, step by step, apart from the differences
// docs/redis.md lists, which a script marks where it meets them.
//
// The sequences are the scripts in scripts/ (one file per data type or
// area, embedded) and sequences drawn from a seed, one kind of commands
// each (random.go: string and keyspace commands, lists, sets). Check runs them all; the test that calls it owns the
// TideKV side (the resp package's in-memory KV, or a node).
//
// Script format, one command a line: the command and its arguments
// separated by spaces; an argument in double quotes is a Go string literal
// (empty strings, spaces, \x00). '#' starts a comment line. A line
// starting with "shape:" is compared by shape only: the same kinds of
// reply and array lengths, any values (TIME, a clock's reading); in one
// starting with "ttl:" any two positive integers agree (a TTL however
// long, since the two servers run a step at different times; -2 and -1
// must match); in one starting with "ids:" any two stream IDs of a
// clock's milliseconds agree (XADD *); in one starting with "set:" or "unordered:" an array's
// elements may come in any order (a set's members, KEYS); in one
// starting with "stats:" an INFO reply agrees on its cmdstat_, errorstat_
// and total_error_replies lines, usec fields masked. Both servers
// start every script with new connections and FLUSHALL, as standard Redis
// test harnesses do.
//
// Knobs: TIDEKV_REDIFF_KIND (one kind of drawn sequences: strings,
// lists, sets, or moves: SORT, RENAME/RENAMENX/COPY and ZMPOP over keys
// of every type; streams; default all), TIDEKV_REDIFF_SEED (the first seed, default 1),
// TIDEKV_REDIFF_RUNS (how many seeds, default 4) and
// TIDEKV_REDIFF_STEPS (commands per seed, default 300).
//
// Imports: the standard library and internal/testutil/redisserver.
package redisdiff
