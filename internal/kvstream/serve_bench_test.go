package kvstream

import (
	"context"
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// discardStream is a stream whose answers are counted, not kept.
type discardStream struct {
	fakeStream
}

func (d *discardStream) Send(*tidekvpb.KVBatchResponse) error { return nil }

// BenchmarkServe is a node's cost per stream request outside the KV
// handler (which answers at once here): reading it from its message, its
// context and deadline, the hand-off to a worker and its answer's send.
// Eight writes per message, as a closed loop of 32 clients puts together
// (docs/benchmarks/cost.md); each with the same timeout, or each with its
// own, which shares nothing.
func BenchmarkServe(b *testing.B) {
	for _, c := range []struct {
		name     string
		distinct bool
	}{{"same-timeout", false}, {"distinct-timeouts", true}} {
		b.Run(c.name, func(b *testing.B) {
			st := &discardStream{fakeStream{ctx: context.Background(), in: make(chan *tidekvpb.KVBatchRequest, 64)}}
			stop := make(chan struct{})
			defer close(stop)
			s := New(&fakeNode{}, &fakeKV{}, 4<<20, stop)
			b.ReportAllocs()
			b.ResetTimer()
			go func() {
				for i := 0; i < b.N; i += 8 {
					msg := &tidekvpb.KVBatchRequest{}
					for j := range min(8, b.N-i) {
						r := put(uint64(i+j+1), "k")
						r.TimeoutMs = 10000
						if c.distinct {
							r.TimeoutMs += uint32(j)
						}
						msg.Requests = append(msg.Requests, r)
					}
					st.in <- msg
				}
				close(st.in)
			}()
			if err := s.Serve(st); err != nil {
				b.Fatal(err)
			}
		})
	}
}
