package elastic

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestThreshold runs testdata/threshold: each case gives the rule's terms
// and prints T, raw and clamped, as shares of the capacity and in bytes.
//
//	threshold c=BYTES nodes=N rate=R low=δL high=δH [lead=DURATION] [min=F max=F]
//
// Rates are bytes/s; lead defaults to 1s, so δH reads as bytes per step
// as in the seed paper's example.
func TestThreshold(t *testing.T) {
	datadriven.RunTest(t, "testdata/threshold", func(t *testing.T, d *datadriven.TestData) string {
		if d.Cmd != "threshold" {
			t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
		}
		cfg := DefaultOverflowConfig()
		cfg.MinRate = 1e-9
		terms := Terms{Lead: time.Second}
		for _, a := range d.CmdArgs {
			if a.Key == "lead" {
				lead, err := time.ParseDuration(a.Vals[0])
				if err != nil {
					t.Fatalf("%s: %v", d.Pos, err)
				}
				terms.Lead = lead
				continue
			}
			v, err := strconv.ParseFloat(a.Vals[0], 64)
			if err != nil {
				t.Fatalf("%s: %s: %v", d.Pos, a.Key, err)
			}
			switch a.Key {
			case "c":
				terms.Capacity = v
			case "nodes":
				terms.Nodes = int(v)
			case "rate":
				terms.Rate = v
			case "low":
				terms.Low = v
			case "high":
				terms.High = v
			case "min":
				cfg.MinThreshold = v
			case "max":
				cfg.MaxThreshold = v
			default:
				t.Fatalf("%s: unknown argument %q", d.Pos, a.Key)
			}
		}
		if err := cfg.Validate(); err != nil {
			return "error: " + err.Error()
		}
		clamped, raw := Threshold(terms, cfg)
		return fmt.Sprintf("raw %.0f (%.3f of c)\nT %.0f (%.3f of c)\n", raw, raw/terms.Capacity, clamped, clamped/terms.Capacity)
	})
}
