package scenario

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"
)

// The quick meteorshower runs end to end; linearizable reads never miss an
// acknowledged write, and bounded reads never miss one older than θ.
func TestMeteorShowerQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("scenario benchmark (about 20 s)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	if err := Run(ctx, "meteorshower", Options{Quick: true, Seed: 1, Progress: lrTestWriter{t}}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("took %v\n%s", time.Since(start).Round(time.Millisecond), out.String())
	for _, rtt := range []string{"0", "100"} {
		rows := lrTableRows(&out, rtt, 12)
		if len(rows) != 3 {
			t.Fatalf("RTT %s: %d rows, want 3", rtt, len(rows))
		}
		for _, r := range rows {
			// | RTT | mode | p50 | p99 | reads/s | errors | stale | max stale | writes/s | lease | to b, c | scores |
			if r[4] == "0" {
				t.Errorf("RTT %s %s: no reads", rtt, r[1])
			}
			switch {
			case r[1] == "linearizable" && r[6] != "0":
				t.Errorf("RTT %s: linearizable reads missed acknowledged writes: %s", rtt, r[6])
			case r[1] == "bounded(500ms)":
				if ms, err := strconv.ParseFloat(r[7], 64); err != nil || ms > 500 {
					t.Errorf("RTT %s: bounded read staleness %s ms exceeds θ", rtt, r[7])
				}
			}
		}
	}
}
