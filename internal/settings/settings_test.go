package settings

import (
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/queue"
)

// A set of settings applies all or nothing: an unknown key, a bad value or
// a result that does not validate leaves the base as it was.
func TestApply(t *testing.T) {
	base := Config{Placement: placement.DefaultConfig(), Autoscale: elastic.DefaultPolicy(), GC: queue.DefaultGCConfig()}
	set := func(kv ...string) []*tidekvpb.Setting {
		var out []*tidekvpb.Setting
		for i := 0; i < len(kv); i += 2 {
			out = append(out, &tidekvpb.Setting{Key: kv[i], Value: kv[i+1]})
		}
		return out
	}
	c, err := Apply(base, set("gc-ttl", "2h", "merges", "false", "autoscale.min-nodes", "3"))
	if err != nil || c.GC.TTL != 2*time.Hour || c.Placement.Merges || c.Autoscale.MinNodes != 3 {
		t.Fatalf("Apply = %+v, %v; want gc-ttl 2h, no merges, at least 3 nodes", c, err)
	}
	for _, bad := range [][]*tidekvpb.Setting{set("merges", "false", "no-such-key", "1"), set("merges", "false", "gc-ttl", "soon")} {
		if c, err := Apply(base, bad); err == nil || c.Placement.Merges != base.Placement.Merges {
			t.Errorf("Apply(%v) = merges %v, %v; want an error and the base unchanged", bad, c.Placement.Merges, err)
		}
	}
	if _, err := Apply(base, set("range-split-fill", "2")); err == nil {
		t.Error("Apply(range-split-fill 2): want the result refused by validation")
	}
	if c, err := Apply(base, set("autoscale.ignore-interference", "true")); err != nil || !c.Autoscale.IgnoreInterference {
		t.Errorf("Apply(autoscale.ignore-interference true) = %v, %v; want the plain planner", c.Autoscale.IgnoreInterference, err)
	}
	if names := strings.Join(Names(), " "); !strings.Contains(names, "gc-ttl") || !strings.Contains(names, "autoscale.min-nodes") || !Known("range-max-bytes") {
		t.Errorf("Names() = %s: want every placement, autoscale and gc key", names)
	}
}
