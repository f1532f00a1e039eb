package resp

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// CONFIG SET. Two kinds of parameter can be named:
//
//   - Redis's encoding thresholds (hash-max-listpack-entries and the
//     others in tunables), which choose how Redis lays a small collection
//     out in memory and never change a reply, and its busy threshold for
//     scripts. TideKV has one layout per type and no busy state, so these
//     are accepted, validated as Redis validates them, and
//     reported back by CONFIG GET, and change nothing. Test harnesses and
//     tools set them to reach one of Redis's encodings. They are the
//     node's (not the cluster's) and forgotten at a restart.
//   - The fixed settings CONFIG GET reports (save, appendonly, maxmemory,
//     ...): setting one to the value it has is OK (a harness restores what
//     it read), any other value is refused, saying TideKV fixes it.
//
// Any other name gets Redis's error for an unknown parameter.

// tunable is an encoding threshold: its Redis 7.0 name, the older alias
// Redis still accepts, its default, its bounds, and whether it takes a
// memory size (1gb).
type tunable struct {
	name, alias string
	def         int64
	lo, hi      int64
	memory      bool
}

var tunables = []tunable{
	{"hash-max-listpack-entries", "hash-max-ziplist-entries", 512, 0, math.MaxInt64, false},
	{"hash-max-listpack-value", "hash-max-ziplist-value", 64, 0, math.MaxInt64, true},
	{"zset-max-listpack-entries", "zset-max-ziplist-entries", 128, 0, math.MaxInt64, false},
	{"zset-max-listpack-value", "zset-max-ziplist-value", 64, 0, math.MaxInt64, true},
	{"set-max-intset-entries", "", 512, 0, math.MaxInt64, false},
	{"list-max-listpack-size", "list-max-ziplist-size", -2, math.MinInt32, math.MaxInt32, false},
	{"list-compress-depth", "", 0, 0, math.MaxInt32, false},
	// A "~" trim of a stream removes runs of stream-node-max-entries
	// entries (stream.go); the bytes are kept and inert.
	{"stream-node-max-entries", "", 100, 0, math.MaxInt64, false},
	{"stream-node-max-bytes", "", 4096, 0, math.MaxInt64, true},
	// Past it Redis answers other clients BUSY while a script runs;
	// TideKV's scripts block no other client (docs/redis.md, "No BUSY").
	{"busy-reply-threshold", "lua-time-limit", 5000, 0, math.MaxInt64, false},
}

// tunableValues holds what CONFIG SET gave the tunables, by name.
type tunableValues struct {
	mu sync.Mutex
	v  map[string]int64
}

func (t *tunableValues) get(name string, def int64) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.v[name]; ok {
		return v
	}
	return def
}

// configValues are the parameters CONFIG GET answers, aliases included,
// with their values.
func (x *call) configValues() map[string]string {
	vals := map[string]string{
		"save": "", "appendonly": "no", "databases": "1",
		"maxmemory": "0", "maxmemory-policy": "noeviction", "timeout": "0",
		"maxclients": strconv.Itoa(x.s.cfg.MaxConns), "proto-max-bulk-len": strconv.Itoa(x.s.cfg.MaxBulkLen),
		"cluster-enabled": "no", "notify-keyspace-events": "",
	}
	for _, t := range tunables {
		v := strconv.FormatInt(x.s.tunables.get(t.name, t.def), 10)
		vals[t.name] = v
		if t.alias != "" {
			vals[t.alias] = v
		}
	}
	return vals
}

// cmdConfigSet: CONFIG SET name value [name value ...], all or nothing.
func cmdConfigSet(x *call) {
	switch {
	case len(x.args) < 4:
		x.c.WriteError(errArity("config|set"))
		return
	case len(x.args)%2 != 0:
		x.c.WriteError(errSyntax)
		return
	}
	fixed := x.configValues()
	set := map[string]int64{}
	seen := map[string]bool{}
	for i := 2; i < len(x.args); i += 2 {
		name, val := strings.ToLower(string(x.args[i])), string(x.args[i+1])
		fail := func(why string) {
			x.c.WriteError(fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - %s", trunc(x.args[i]), why))
		}
		t, isTunable := lookupTunable(name)
		// As in Redis, a name twice is refused, a name and its alias are
		// not (the later one counts).
		if seen[name] {
			fail("duplicate parameter")
			return
		}
		seen[name] = true
		if !isTunable {
			cur, known := fixed[name]
			switch {
			case !known:
				x.c.WriteError(fmt.Sprintf("ERR Unknown option or number of arguments for CONFIG SET - '%s'", trunc(x.args[i])))
				return
			case val != cur:
				fail(fmt.Sprintf("TideKV does not change it (it is '%s')", cur))
				return
			}
			continue
		}
		n, why := t.parse(val)
		if why != "" {
			fail(why)
			return
		}
		set[t.name] = n
	}
	x.s.tunables.mu.Lock()
	if x.s.tunables.v == nil {
		x.s.tunables.v = map[string]int64{}
	}
	for k, v := range set {
		x.s.tunables.v[k] = v
	}
	x.s.tunables.mu.Unlock()
	x.c.WriteString("OK")
}

func lookupTunable(name string) (tunable, bool) {
	for _, t := range tunables {
		if name == t.name || (t.alias != "" && name == t.alias) {
			return t, true
		}
	}
	return tunable{}, false
}

// parse reads v as Redis reads the parameter, or says why it cannot in
// Redis's words.
func (t tunable) parse(v string) (int64, string) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && t.memory {
		var ok bool
		if n, ok = memorySize(v); !ok {
			return 0, "argument must be a memory value"
		}
		err = nil
	}
	if err != nil {
		return 0, "argument couldn't be parsed into an integer"
	}
	if n < t.lo || n > t.hi {
		return 0, fmt.Sprintf("argument must be between %d and %d inclusive", t.lo, t.hi)
	}
	return n, ""
}

// memorySize reads a size with one of Redis's units (k=1000, kb=1024,
// m, mb, g, gb; any case).
func memorySize(v string) (int64, bool) {
	units := []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}}
	lv := strings.ToLower(v)
	for _, u := range units {
		if num, ok := strings.CutSuffix(lv, u.suffix); ok {
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil || n < 0 || n > math.MaxInt64/u.mul {
				return 0, false
			}
			return n * u.mul, true
		}
	}
	return 0, false
}
