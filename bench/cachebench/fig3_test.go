package cachebench

import (
	"testing"
)

// smallFig3 is the experiment scaled down: 8K keys (about 1 MB), 128 KiB
// nodes, so static-2 holds about a quarter of the keys.
func smallFig3() Fig3Config {
	c := DefaultFig3Config()
	c.Keys, c.Steps, c.BucketSteps, c.Rates = 8<<10, 300, 30, []int{100}
	c.CapacityPerNode = 128 << 10
	c.StaticNodes = []int{2}
	return c
}

// A cold cache misses every query: one step of 50 queries over 256K keys
// draws no key twice (with this seed).
func TestFig3ColdCacheMissesAll(t *testing.T) {
	c := smallFig3()
	c.Keys, c.Steps, c.BucketSteps, c.Rates = 256<<10, 1, 1, []int{50}
	runs, err := RunFig3(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if len(r.MissRate) != 1 || r.MissRate[0] != 1 || r.Misses != 50 {
			t.Fatalf("%s: miss rates %v, %d misses", r.Variant, r.MissRate, r.Misses)
		}
	}
}

// The miss rate falls as the cache warms. Static-2, holding a quarter of
// the keys, levels off near three quarters and evicts throughout; the
// growing key space ends far below it, on more nodes, evicting only while
// it fills faster than nodes join.
func TestFig3ElasticBeatsStatic(t *testing.T) {
	runs, err := RunFig3(smallFig3())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Variant != "static-2" || runs[1].Variant != "elastic" {
		t.Fatalf("runs %+v", runs)
	}
	st, el := runs[0], runs[1]
	for _, r := range runs {
		if len(r.MissRate) != 10 || r.MissRate[0] < 0.8 || r.MissRate[9] >= r.MissRate[0] {
			t.Errorf("%s: miss rate %.2f does not fall as it warms", r.Variant, r.MissRate)
		}
	}
	stEnd, elEnd := st.MissRate[9], el.MissRate[9]
	if stEnd < 0.6 || st.Evicted == 0 {
		t.Errorf("static-2 ends at %.2f with %d evictions; it holds a quarter of the keys", stEnd, st.Evicted)
	}
	if elEnd > 0.1 || el.Evicted > st.Evicted/10 {
		t.Errorf("elastic ends at %.2f with %d evictions, static-2 at %.2f with %d", elEnd, el.Evicted, stEnd, st.Evicted)
	}
	if n := el.Nodes[9]; n <= 2 || len(el.JoinedSteps) != n-2 {
		t.Errorf("elastic ends on %d nodes, joined at %v", n, el.JoinedSteps)
	}
	if st.NodeSteps != 2*300 || el.NodeSteps <= st.NodeSteps {
		t.Errorf("node-steps: static-2 %d, elastic %d", st.NodeSteps, el.NodeSteps)
	}
}

func TestFig3ConfigValidate(t *testing.T) {
	if err := DefaultFig3Config().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Fig3Config){
		"no keys":        func(c *Fig3Config) { c.Keys = 0 },
		"bucket > steps": func(c *Fig3Config) { c.BucketSteps = c.Steps + 1 },
		"no rate":        func(c *Fig3Config) { c.Rates = nil },
		"zero rate":      func(c *Fig3Config) { c.Rates = []int{0} },
		"no capacity":    func(c *Fig3Config) { c.CapacityPerNode = 0 },
		"static > range": func(c *Fig3Config) { c.StaticNodes = []int{c.Ranges + 1} },
		"max < start":    func(c *Fig3Config) { c.MaxNodes = c.ElasticNodes - 1 },
		"bad eviction":   func(c *Fig3Config) { c.Cache.LowWater = 0 },
		"bad overflow":   func(c *Fig3Config) { c.Overflow.ShedAt = 0 },
	} {
		c := DefaultFig3Config()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
