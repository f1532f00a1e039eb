package linearizability

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// simStore is an in-memory store whose every operation is atomic under one
// mutex, hence linearizable, unless staleReads injects the classic bug of a
// read served from a lagging replica.
type simStore struct {
	mu   sync.Mutex
	cur  map[string]register
	prev map[string]register // state before the latest write to the key

	staleReads float64 // probability that a get returns prev
}

func (s *simStore) apply(rng *rand.Rand, in Input) Output {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.cur[in.Key]
	set := func(r register) {
		if r != cur {
			s.prev[in.Key] = cur
			s.cur[in.Key] = r
		}
	}
	switch in.Kind {
	case Get:
		r := cur
		if rng.Float64() < s.staleReads {
			r = s.prev[in.Key]
		}
		return Output{Found: r.found, Value: r.value}
	case Put:
		set(register{found: true, value: in.Value})
	case Delete:
		set(register{})
	case CAS:
		match := !cur.found
		if in.ExpectExists {
			match = cur.found && cur.value == in.Expected
		}
		if match {
			set(register{found: true, value: in.Value})
		}
		return Output{Swapped: match}
	}
	return Output{}
}

type simConfig struct {
	clients, opsPerClient, keys int
	staleReads                  float64
	// unknownWrites is the probability that a write's outcome is reported
	// as unknown; such a write is applied or not at random.
	unknownWrites float64
	seed          uint64
}

// simulate drives a simStore from concurrent clients through a Recorder.
// Random sleeps around the atomic step make invocation and response
// straddle other clients' operations, as network latency would.
func simulate(cfg simConfig) History {
	store := &simStore{cur: map[string]register{}, prev: map[string]register{}, staleReads: cfg.staleReads}
	rec := NewRecorder()
	var wg sync.WaitGroup
	for c := range cfg.clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(cfg.seed, uint64(c)))
			seen := make(map[string]register) // what this client last saw, to aim CAS at
			pause := func() {
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
				}
			}
			for i := range cfg.opsPerClient {
				key := fmt.Sprintf("k%d", rng.IntN(cfg.keys))
				// Unique values make any misordering observable.
				val := fmt.Sprintf("c%d-%d", c, i)
				var in Input
				switch p := rng.IntN(100); {
				case p < 50:
					in = GetInput(key)
				case p < 75:
					in = PutInput(key, val)
				case p < 90:
					if r := seen[key]; r.found {
						in = CASInput(key, r.value, val)
					} else {
						in = CASAbsentInput(key, val)
					}
				default:
					in = DeleteInput(key)
				}
				p := rec.Begin(c, in)
				pause()
				if in.Kind != Get && rng.Float64() < cfg.unknownWrites {
					if rng.IntN(2) == 0 {
						store.apply(rng, in)
					}
					p.Unknown()
					continue
				}
				out := store.apply(rng, in)
				pause()
				p.Ok(out)
				if in.Kind == Get {
					seen[key] = register{found: out.Found, value: out.Value}
				}
			}
		})
	}
	wg.Wait()
	return rec.History()
}

var sim10k = simConfig{clients: 8, opsPerClient: 1250, keys: 5, seed: 1}

func TestSimulatedStoreLinearizable(t *testing.T) {
	cfg := sim10k
	cfg.unknownWrites = 0.002
	h := simulate(cfg)
	start := time.Now()
	res := checkT(t, h)
	t.Logf("%s (checked in %v)", res.Describe, time.Since(start))
	if !res.Ok {
		t.Fatal("linearizable store rejected")
	}
	if res.Ops < 9900 {
		t.Fatalf("only %d ops checked", res.Ops)
	}
}

func TestSimulatedStoreStaleReadsDetected(t *testing.T) {
	cfg := sim10k
	cfg.staleReads = 0.01
	h := simulate(cfg)
	start := time.Now()
	res := checkT(t, h)
	t.Logf("%s (checked in %v)", res.Describe, time.Since(start))
	if res.Ok {
		t.Fatal("stale reads not detected")
	}
	if len(res.FailedKeys) == 0 {
		t.Error("no failing key identified")
	}
}

func BenchmarkCheck10k(b *testing.B) {
	h := simulate(sim10k)
	b.ResetTimer()
	for b.Loop() {
		if res := Check(h, 0); !res.Ok {
			b.Fatal(res.Describe)
		}
	}
}
