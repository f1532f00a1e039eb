package linearizability

import (
	"sync"
	"testing"
)

func TestRecorderOutcomes(t *testing.T) {
	rec := NewRecorder()
	rec.Begin(0, PutInput("x", "1")).Ok(Output{Unknown: true}) // Ok is definite whatever out says
	rec.Begin(0, PutInput("x", "2")).Failed()
	rec.Begin(1, PutInput("x", "3")).Unknown()
	rec.Begin(2, GetInput("x")) // never completed

	h := rec.History()
	if len(h) != 3 {
		t.Fatalf("history has %d ops, want 3 (failed op dropped): %+v", len(h), h)
	}
	if h[0].Output.Unknown || h[0].Return < h[0].Call {
		t.Errorf("Ok op recorded as %+v", h[0])
	}
	if h[1].Input.Value != "3" || !h[1].Output.Unknown {
		t.Errorf("Unknown op recorded as %+v", h[1])
	}
	if h[2].Input.Kind != Get || !h[2].Output.Unknown {
		t.Errorf("pending op should be unknown, got %+v", h[2])
	}
	if res := Check(h, testTimeout); !res.Ok || res.Ops != 2 {
		t.Errorf("want Ok with the pending get dropped, got %+v", res)
	}
}

func TestRecorderDoubleCompletionPanics(t *testing.T) {
	p := NewRecorder().Begin(0, GetInput("x"))
	p.Ok(Output{})
	defer func() {
		if recover() == nil {
			t.Fatal("second completion did not panic")
		}
	}()
	p.Unknown()
}

// TestRecorderConcurrent is mostly for the race detector.
func TestRecorderConcurrent(t *testing.T) {
	rec := NewRecorder()
	var wg sync.WaitGroup
	const clients, perClient = 8, 200
	for c := range clients {
		wg.Go(func() {
			var last int64 = -1
			for range perClient {
				p := rec.Begin(c, GetInput("x"))
				p.Ok(Output{})
				// A client's own operations must come out in order on the
				// recorder's monotonic clock.
				h := rec.History()
				op := h[len(h)-1]
				for i := len(h) - 1; i >= 0; i-- {
					if h[i].ClientID == c {
						op = h[i]
						break
					}
				}
				if op.Call < last || op.Return < op.Call {
					t.Errorf("client %d: times went backwards: %+v after %d", c, op, last)
				}
				last = op.Return
			}
		})
	}
	wg.Wait()
	if n := len(rec.History()); n != clients*perClient {
		t.Fatalf("recorded %d ops, want %d", n, clients*perClient)
	}
}
