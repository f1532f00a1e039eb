package queue

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/mvcc"
)

// TestQueues runs the scripts in testdata/, one fresh set of queues per
// file. Times are seconds (now=S, pass-at=S); durations Go's (ttl=1m).
//
//	gc-config [ttl=D] [interval=D] [memory-interval=D] [min-garbage=N] [memory-min-garbage=N]
//	policy [engine=memory|pebble] [gc-ttl=D] [txn-max=D]   GCPolicyFor
//	reason versions=N live=N bytes=N now=S [pass-at=S left=N]   GCReason
//	due range=R now=S every=D
//	look range=R now=S written=N [ttl=D]
//	counted range=R now=S written=N versions=N live=N bytes=N
//	passed range=R now=S written=N garbage=N removed=N
//	failed range=R now=S
//	garbage range=R
//	keep-only [ranges=(R,…)]   (for gc, sizes and eviction)
//	crossed range=R start=K end=K bytes=N limit=N   SizeAlerts
//	sample-from range=R start=K end=K | sampled range=R last=K [full]
//	evicting ks=N [set=true|false]
func TestQueues(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var (
			cfg   = DefaultGCConfig()
			gc    GC
			sizes SizeAlerts
			ev    Eviction
		)
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			a := args{t: t, td: td}
			switch td.Cmd {
			case "gc-config":
				cfg.TTL = a.dur("ttl", cfg.TTL)
				cfg.Interval = a.dur("interval", cfg.Interval)
				cfg.MemoryInterval = a.dur("memory-interval", cfg.MemoryInterval)
				cfg.MinGarbageBytes = int64(a.num("min-garbage", float64(cfg.MinGarbageBytes)))
				cfg.MemoryMinGarbageBytes = int64(a.num("memory-min-garbage", float64(cfg.MemoryMinGarbageBytes)))
				if err := cfg.Validate(); err != nil {
					return "invalid: " + err.Error() + "\n"
				}
				return fmt.Sprintf("tick %v\n", cfg.Tick())
			case "policy":
				var k ksconfig.KeySpace
				k.Name = "docs"
				switch a.str("engine") {
				case "memory":
					k.Engine = ksconfig.Memory
				case "pebble":
					k.Engine = ksconfig.Pebble
				}
				if d := a.dur("gc-ttl", 0); d > 0 {
					k.GCTTL = d
				}
				p := GCPolicyFor(k, cfg, a.dur("txn-max", time.Minute))
				return fmt.Sprintf("every %v, min garbage %d, ttl %v (%s)\n", p.Every, p.MinGarbage, p.TTL, p.Why)
			case "reason":
				var passAt time.Time
				if a.has("pass-at") {
					passAt = a.time("pass-at")
				}
				reason, garbage := GCReason(a.stats(), passAt, int64(a.num("left", 0)), a.time("now"), cfg)
				return decision(reason, garbage)
			case "due":
				if gc.Due(a.id(), a.time("now"), a.dur("every", cfg.Interval), cfg.Tick()) {
					return "due\n"
				}
				return "not due\n"
			case "look":
				if gc.Look(a.id(), a.time("now"), uint64(a.num("written", 0)), a.dur("ttl", cfg.TTL)) {
					return "count\n"
				}
				return "unchanged\n"
			case "counted":
				return decision(gc.Counted(a.id(), a.time("now"), uint64(a.num("written", 0)), a.stats(), cfg))
			case "passed":
				gc.Passed(a.id(), a.time("now"), uint64(a.num("written", 0)), int64(a.num("garbage", 0)), int64(a.num("removed", 0)))
				return fmt.Sprintf("garbage %d\n", gc.Garbage(a.id()))
			case "failed":
				gc.Failed(a.id(), a.time("now"))
				return fmt.Sprintf("garbage %d\n", gc.Garbage(a.id()))
			case "garbage":
				return fmt.Sprintf("garbage %d\n", gc.Garbage(a.id()))
			case "keep-only":
				led := map[uint64]bool{}
				for _, v := range a.vals("ranges") {
					id, _ := strconv.ParseUint(v, 10, 64)
					led[id] = true
				}
				gc.KeepOnly(led)
				sizes.KeepOnly(led)
				ev.KeepOnly(led)
				return fmt.Sprintf("gc %d, sizes %d, cursors %d\n", gc.ranges.Len(), sizes.ranges.Len(), ev.cursors.Len())
			case "crossed":
				if sizes.Crossed(a.id(), []byte(a.str("start")), []byte(a.str("end")), uint64(a.num("bytes", 0)), uint64(a.num("limit", 0))) {
					return "report\n"
				}
				return "quiet\n"
			case "sample-from":
				return fmt.Sprintf("%q\n", ev.SampleFrom(a.id(), []byte(a.str("start")), []byte(a.str("end"))))
			case "sampled":
				ev.Sampled(a.id(), []byte(a.str("last")), a.has("full"))
				return ""
			case "evicting":
				id := keyspace.ID(a.num("ks", 0))
				if a.has("set") {
					ev.SetEvicting(id, a.str("set") == "true")
				}
				return fmt.Sprintf("%v\n", ev.Evicting(id))
			}
			t.Fatalf("unknown command %q", td.Cmd)
			return ""
		})
	})
}

func decision(reason string, garbage int64) string {
	if reason == "" {
		return fmt.Sprintf("keep (garbage %d)\n", garbage)
	}
	return fmt.Sprintf("collect: %s (garbage %d)\n", reason, garbage)
}

// args reads a command's key=value arguments.
type args struct {
	t  *testing.T
	td *datadriven.TestData
}

func (a args) has(k string) bool { return a.td.HasArg(k) }

func (a args) vals(k string) []string {
	for _, arg := range a.td.CmdArgs {
		if arg.Key == k {
			return arg.Vals
		}
	}
	return nil
}

func (a args) str(k string) string {
	if v := a.vals(k); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (a args) num(k string, def float64) float64 {
	s := a.str(k)
	if s == "" {
		return def
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		a.t.Fatalf("%s=%s: %v", k, s, err)
	}
	return v
}

func (a args) dur(k string, def time.Duration) time.Duration {
	s := a.str(k)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		a.t.Fatalf("%s=%s: %v", k, s, err)
	}
	return d
}

func (a args) time(k string) time.Time {
	return time.Unix(0, 0).Add(time.Duration(a.num(k, 0) * float64(time.Second)))
}

func (a args) id() uint64 { return uint64(a.num("range", 0)) }

func (a args) stats() mvcc.Stats {
	return mvcc.Stats{Versions: int64(a.num("versions", 0)), LiveKeys: int64(a.num("live", 0)), TotalBytes: int64(a.num("bytes", 0))}
}
