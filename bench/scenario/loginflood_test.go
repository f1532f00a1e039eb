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
// from many addresses, the user already logged in is never refused, the
// flood costs each address at most its 5 free derivations plus one per
// back-off step that fits in the window (1 s, 2 s, 4 s, ...), and an
// attacker's attempt after its 5th wrong guess is refused unchecked; the
// attempts beyond the node's derivation budget are refused as busy and
// counted so. It starts a real
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
		// Timeouts on a loaded machine are speed; a refused login is not.
		if w.RedisAuthRefused+w.GRPCAuthRefused > 0 {
			t.Errorf("round %d, flood %v: the logged-in user was refused %d times over Redis and %d over gRPC", w.Round, w.Flood, w.RedisAuthRefused, w.GRPCAuthRefused)
		}
		if !w.Flood {
			if w.MetricWrong != 0 || w.Backoff != 0 || w.MBusy != 0 {
				t.Errorf("round %d without a flood: %.0f wrong logins, %.0f refusals in back-off and %.0f busy", w.Round, w.MetricWrong, w.Backoff, w.MBusy)
			}
			continue
		}
		if w.MetricWrong > bound {
			t.Errorf("round %d: the flood cost %.0f derivations, over %d addresses × (5 free + %d back-off steps) = %.0f", w.Round, w.MetricWrong, cfg.Attackers, steps, bound)
		}
		// The 5th failure starts the address's back-off (1 s), and its
		// attacker's next attempt comes 10 ms after the answer.
		if w.RefusedAfterFive != w.PastFive {
			t.Errorf("round %d: of %d attackers answered after their 5th wrong guess, only %d were refused unchecked next", w.Round, w.PastFive, w.RefusedAfterFive)
		}
		if float64(w.Refused) > w.Backoff || float64(w.Busy) > w.MBusy {
			t.Errorf("round %d: attackers saw %d refusals in back-off and %d busy, the node counted %.0f and %.0f", w.Round, w.Refused, w.Busy, w.Backoff, w.MBusy)
		}
	}
}
