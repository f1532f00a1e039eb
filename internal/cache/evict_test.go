package cache

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// evictSim is a node leading one range of one key space, with the
// recency memory and the state between rounds the server keeps.
type evictSim struct {
	cfg      Config
	now      time.Time
	sizes    map[string]uint64
	rec      *Recency
	evicting bool
}

// TestEvict runs testdata/evict: sequences of writes and reads (each one
// second after the previous), then eviction rounds, printing which keys go.
//
//	config low=0.9 max-evict=10 tracked=100 (resets the node)
//	put KEY BYTES | get KEY | del KEY
//	evict capacity=N [held=N] [led=N] [sample=k1,k2]   (default: every key)
//	tracked
func TestEvict(t *testing.T) {
	var sim *evictSim
	datadriven.RunTest(t, "testdata/evict", func(t *testing.T, d *datadriven.TestData) string {
		if sim == nil || d.Cmd == "config" {
			sim = &evictSim{cfg: DefaultConfig(), now: time.Unix(1000, 0), sizes: map[string]uint64{}}
		}
		return evictStep(t, sim, d)
	})
}

func evictStep(t *testing.T, sim *evictSim, d *datadriven.TestData) string {
	args := map[string]string{}
	var words []string
	for _, a := range d.CmdArgs {
		if len(a.Vals) > 0 {
			args[a.Key] = strings.Join(a.Vals, ",")
		} else {
			words = append(words, a.Key)
		}
	}
	num := func(k string, def uint64) uint64 {
		v, ok := args[k]
		if !ok {
			return def
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("%s: %s=%q: %v", d.Pos, k, v, err)
		}
		return uint64(n)
	}
	switch d.Cmd {
	case "config":
		if v, ok := args["low"]; ok {
			fmt.Sscan(v, &sim.cfg.LowWater)
		}
		sim.cfg.MaxEvictKeys = int(num("max-evict", uint64(sim.cfg.MaxEvictKeys)))
		sim.cfg.TrackedKeys = int(num("tracked", uint64(sim.cfg.TrackedKeys)))
		if err := sim.cfg.Validate(); err != nil {
			return err.Error()
		}
		sim.rec = NewRecency(sim.cfg.TrackedKeys)
		return "ok"
	case "put", "get", "del":
		return sim.access(t, d.Cmd, words)
	case "evict":
		return sim.round(d, num)
	case "tracked":
		var ks []string
		for k := range sim.sizes {
			if !sim.rec.LastUsed([]byte(k)).IsZero() {
				ks = append(ks, k)
			}
		}
		sort.Strings(ks)
		return fmt.Sprintf("%d remembered: %s", sim.rec.Len(), strings.Join(ks, " "))
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

func (s *evictSim) access(t *testing.T, cmd string, words []string) string {
	if s.rec == nil {
		s.rec = NewRecency(s.cfg.TrackedKeys)
	}
	s.now = s.now.Add(time.Second)
	k := words[0]
	switch cmd {
	case "put":
		n, err := strconv.ParseUint(words[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		s.sizes[k] = n
	case "get":
		if _, ok := s.sizes[k]; !ok {
			return "miss"
		}
	case "del":
		delete(s.sizes, k)
		s.rec.Forget([]byte(k))
		return "ok"
	}
	s.rec.Touch([]byte(k), s.now)
	return "ok"
}

func (s *evictSim) round(d *datadriven.TestData, num func(string, uint64) uint64) string {
	var held uint64
	var keys []string
	for k, n := range s.sizes {
		held += n
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if v := d.CmdArgs; len(v) > 0 {
		for _, a := range v {
			if a.Key == "sample" {
				keys = a.Vals
			}
		}
	}
	sp := Space{Name: "cache", Capacity: num("capacity", 0), Held: num("held", held), Evicting: s.evicting}
	sp.Led = num("led", sp.Held)
	for _, k := range keys {
		sp.Sample = append(sp.Sample, Candidate{Key: []byte(k), Range: 1, Bytes: s.sizes[k], LastUsed: s.rec.LastUsed([]byte(k))})
	}
	p := Decide(sp, s.cfg, s.now)
	s.evicting = p.Evicting
	var out []string
	for _, c := range p.Evict {
		out = append(out, string(c.Key))
		delete(s.sizes, string(c.Key))
		s.rec.Forget(c.Key)
	}
	var left uint64
	for _, n := range s.sizes {
		left += n
	}
	if !p.Evicting {
		return fmt.Sprintf("not evicting; holds %d", left)
	}
	return fmt.Sprintf("evicted: %s\nstarted: %t\nholds: %d\nreason: %s", strings.Join(out, " "), p.Started, left, p.Reason)
}
