package resp

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Command and error statistics, as Redis 7.0 keeps them for INFO's
// commandstats and errorstats sections and Stats' total_error_replies,
// zeroed by CONFIG RESETSTAT. They are the node's: each Server has its own.
//
// Every command of the table, and every subcommand Redis names
// "parent|sub", has a stat id (cmdSpec.stat), so counting a call is an
// atomic add into a slice, never a map lookup. Errors are counted by the
// first word of the reply (ERR, WRONGTYPE, NOSCRIPT), up to
// maxErrorPrefixes distinct ones; later new prefixes are counted under
// errorOverflow, so a client inventing error prefixes (a script's
// redis.error_reply) cannot grow the table without bound.

// cmdStat is one command's counters: calls ran, their total time,
// rejected_calls (refused before running: arity, NOAUTH, NOPERM, an
// admission's TRYAGAIN) and failed_calls (ran and answered an error).
type cmdStat struct{ calls, usec, rejected, failed atomic.Uint64 }

const (
	maxErrorPrefixes = 128
	errorOverflow    = "ERRORSTATS_OVERFLOW"
)

// subcommands are the subcommands Redis 7.0 counts apart, by container
// command: "config get" is counted as "config|get". A subcommand not
// listed is not counted, as Redis counts no unknown subcommand.
var subcommands = map[string][]string{
	"client": {"caching", "getname", "getredir", "help", "id", "info", "kill", "list", "no-evict", "pause",
		"reply", "setinfo", "setname", "tracking", "trackinginfo", "unblock", "unpause"},
	"command":  {"count", "docs", "getkeys", "getkeysandflags", "help", "info", "list"},
	"config":   {"get", "help", "resetstat", "rewrite", "set"},
	"function": {"delete", "dump", "flush", "help", "kill", "list", "load", "restore", "stats"},
	"memory":   {"doctor", "help", "malloc-stats", "purge", "stats", "usage"},
	"object":   {"encoding", "freq", "help", "idletime", "refcount"},
	"script":   {"debug", "exists", "flush", "help", "kill", "load"},
}

// statNames are the names INFO gives the stats, by id.
var statNames []string

// numberStats gives every command and listed subcommand its stat id
// (called once the table is complete).
func numberStats() {
	for _, name := range slices.Sorted(maps.Keys(commands)) {
		spec := commands[name]
		spec.stat = len(statNames)
		statNames = append(statNames, name)
		if subs := subcommands[name]; subs != nil {
			spec.subStats = map[string]int{}
			for _, sub := range subs {
				spec.subStats[sub] = len(statNames)
				statNames = append(statNames, name+"|"+sub)
			}
		}
		commands[name] = spec
	}
}

// statOf is the stat id of a call of a known command: its subcommand's for
// a container given one (-1 for an unknown subcommand), else its own.
func statOf(spec cmdSpec, args [][]byte) int {
	subs := spec.subStats
	if subs == nil || len(args) < 2 {
		return spec.stat
	}
	var lower [24]byte
	if len(args[1]) > len(lower) {
		return -1
	}
	for i, c := range args[1] {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	if id, ok := subs[string(lower[:len(args[1])])]; ok {
		return id
	}
	return -1
}

// serverStats are a Server's command and error statistics.
type serverStats struct {
	cmds []cmdStat // by stat id

	errMu  sync.Mutex
	errs   map[string]uint64 // by prefix
	errAll uint64            // total_error_replies
}

func newServerStats() *serverStats {
	return &serverStats{cmds: make([]cmdStat, len(statNames)), errs: map[string]uint64{}}
}

// outcome is how a call ended.
type outcome uint8

const (
	succeeded outcome = iota
	failed            // it answered an error
	refused           // it answered an admission's TRYAGAIN or OOM
)

// errorMark is what a connection had replied when a call began
// (connState.mark).
type errorMark struct{ errors, refusals uint64 }

func (st *connState) mark() errorMark { return errorMark{st.errors, st.refusals} }

// outcomeSince is how a call that began at m ended, by the error replies
// written since.
func (st *connState) outcomeSince(m errorMark) outcome {
	switch {
	case st.refusals != m.refusals:
		return refused
	case st.errors != m.errors:
		return failed
	}
	return succeeded
}

// called counts a call that ran (stat -1: an unknown subcommand, not
// counted); a refused one counts as rejected, not as a call.
func (t *serverStats) called(stat int, took time.Duration, o outcome) {
	if stat < 0 {
		return
	}
	c := &t.cmds[stat]
	switch o {
	case refused:
		c.rejected.Add(1)
		return
	case failed:
		c.failed.Add(1)
	}
	c.calls.Add(1)
	c.usec.Add(uint64(took.Microseconds()))
}

// refused counts a call refused before it ran.
func (t *serverStats) refused(stat int) {
	if stat >= 0 {
		t.cmds[stat].rejected.Add(1)
	}
}

// errorReplied counts an error reply by its prefix.
func (t *serverStats) errorReplied(msg string) {
	prefix, _, _ := strings.Cut(msg, " ")
	t.errMu.Lock()
	defer t.errMu.Unlock()
	t.errAll++
	if _, ok := t.errs[prefix]; !ok && len(t.errs) >= maxErrorPrefixes {
		prefix = errorOverflow
	}
	t.errs[prefix]++
}

// reset zeroes everything (CONFIG RESETSTAT).
func (t *serverStats) reset() {
	for i := range t.cmds {
		c := &t.cmds[i]
		c.calls.Store(0)
		c.usec.Store(0)
		c.rejected.Store(0)
		c.failed.Store(0)
	}
	t.errMu.Lock()
	defer t.errMu.Unlock()
	clear(t.errs)
	t.errAll = 0
}

// errorTotal is total_error_replies.
func (t *serverStats) errorTotal() uint64 {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	return t.errAll
}

// commandSection is INFO's "# Commandstats": the commands called,
// rejected or failed since the start or the last reset, in name order.
func (t *serverStats) commandSection() string {
	var b strings.Builder
	b.WriteString("# Commandstats\r\n")
	for id, name := range statNames {
		c := &t.cmds[id]
		calls, usec, rejected, failed := c.calls.Load(), c.usec.Load(), c.rejected.Load(), c.failed.Load()
		if calls == 0 && rejected == 0 && failed == 0 {
			continue
		}
		perCall := 0.0
		if calls > 0 {
			// Redis divides in single precision and prints with %.2f.
			perCall = float64(float32(usec) / float32(calls))
		}
		b.WriteString("cmdstat_" + name + ":calls=" + strconv.FormatUint(calls, 10) +
			",usec=" + strconv.FormatUint(usec, 10) + ",usec_per_call=" + strconv.FormatFloat(perCall, 'f', 2, 64) +
			",rejected_calls=" + strconv.FormatUint(rejected, 10) + ",failed_calls=" + strconv.FormatUint(failed, 10) + "\r\n")
	}
	return b.String()
}

// errorSection is INFO's "# Errorstats", prefixes in byte order (Redis's
// radix tree order).
func (t *serverStats) errorSection() string {
	t.errMu.Lock()
	counts := maps.Clone(t.errs)
	t.errMu.Unlock()
	var b strings.Builder
	b.WriteString("# Errorstats\r\n")
	for _, prefix := range slices.Sorted(maps.Keys(counts)) {
		// As Redis, a character that would break INFO's lines is
		// written as '_'.
		b.WriteString("errorstat_" + strings.Map(infoSafe, prefix) + ":count=" + strconv.FormatUint(counts[prefix], 10) + "\r\n")
	}
	return b.String()
}

func infoSafe(r rune) rune {
	if strings.ContainsRune("#:\r\n", r) {
		return '_'
	}
	return r
}
