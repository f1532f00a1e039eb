package scenario

import (
	"bytes"
	"context"
	"math/bits"
	"runtime"
	"testing"
	"time"

	"github.com/tidekv/tidekv/internal/testutil/tier"
)

// The scenario's behaviour on its quick run, not its speed (the p99s are
// logged; docs/security.md records them): during a flood of bad logins
// from many addresses, every request of the user already logged in
// succeeds, the flood costs each address at most its 5 free derivations
// plus one per back-off step that fits in the window (1 s, 2 s, 4 s, ...),
// and the rest of its attempts are refused unchecked. It starts a real
// secure node and derives Argon2id hashes for seconds: it is in the long
// tier.
func TestLoginFloodQuick(t *testing.T) {
	tier.RequireLong(t, "about 30 s over a real secure node, deriving Argon2id hashes")
	if runtime.GOOS != "linux" {
		t.Skip("the attackers bind 127.R.x.y source addresses, which only Linux routes without set-up")
	}
	bin := lrTestBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := Options{Quick: true, Seed: 1, Binary: bin, Progress: lrTestWriter{t}}
	var out bytes.Buffer
	ws, err := loginFlood(ctx, opts, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	cfg := lfDefaults(opts)
	// Back-off steps of 1, 2, 4, ... s after the fifth failure: the k-th
	// ends 2^k - 1 s after it, so floor(log2(W+1)) fit in a window of W s.
	steps := bits.Len(uint(cfg.Window/time.Second)+1) - 1
	bound := float64(cfg.Attackers * (5 + steps))
	for _, w := range ws {
		if a := w.All(); a.Errors > 0 {
			t.Errorf("round %d, flood %v: %d of the logged-in user's requests failed", w.Round, w.Flood, a.Errors)
		}
		if !w.Flood {
			if w.MetricWrong != 0 || w.Backoff != 0 {
				t.Errorf("round %d without a flood: %.0f wrong logins and %.0f refusals", w.Round, w.MetricWrong, w.Backoff)
			}
			continue
		}
		if w.MetricWrong > bound {
			t.Errorf("round %d: the flood cost %.0f derivations, over %d addresses × (5 free + %d back-off steps) = %.0f", w.Round, w.MetricWrong, cfg.Attackers, steps, bound)
		}
		if w.Backoff == 0 || w.Refused == 0 {
			t.Errorf("round %d: no attempt was refused unchecked (node %.0f, attackers %d)", w.Round, w.Backoff, w.Refused)
		}
	}
}
