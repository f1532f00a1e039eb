package linearizability

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// The random client workload shared by the linearizability tests of the
// raftstore and of the real binary. The transport is not its business: a
// test turns an Input into a request to the system under test with a Do
// callback, and reports what it learned as a Reply.

// Outcome is what a client learned about one operation.
type Outcome int

const (
	// OutcomeOk: a definite result, recorded with its Output.
	OutcomeOk Outcome = iota
	// OutcomeUnknown: the operation may or may not have taken effect (an
	// ambiguous error, a timeout); recorded as unknown.
	OutcomeUnknown
	// OutcomeFailed: the operation definitely had no effect (refused up
	// front); dropped from the history.
	OutcomeFailed
)

func (o Outcome) String() string {
	switch o {
	case OutcomeOk:
		return "ok"
	case OutcomeUnknown:
		return "unknown"
	case OutcomeFailed:
		return "failed"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Reply is what a Do callback reports about one operation.
type Reply struct {
	Outcome Outcome
	// Output is the observed result; only meaningful with OutcomeOk.
	Output Output
	// Current is, for a CAS that did not swap, the value the key held
	// instead (nil: the key was absent). The client's next CAS on the key
	// expects it. Ignored for other operations.
	Current *string
	// Err is the error the operation ended with, if any, for logs. It does
	// not affect what is recorded: Outcome does.
	Err error
}

// Do performs in against the system under test and reports the result. It
// returns only once the operation has finished or been abandoned.
type Do func(in Input) Reply

// Finish records res as p's outcome.
func (p Pending) Finish(res Reply) {
	switch res.Outcome {
	case OutcomeOk:
		p.Ok(res.Output)
	case OutcomeFailed:
		p.Failed()
	default:
		p.Unknown()
	}
}

// Run records the invocation of in by clientID, performs it with do and
// records its result.
func (r *Recorder) Run(clientID int, in Input, do Do) Reply {
	p := r.Begin(clientID, in)
	res := do(in)
	p.Finish(res)
	return res
}

// Keys returns n workload keys, linz/k0 … linz/k<n-1>.
func Keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("linz/k%d", i)
	}
	return ks
}

// Client is one client of the random workload. Each Step picks one of the
// keys uniformly at random and runs a get (40%), a put (30%) or a CAS
// (30%) on it. Written values are unique ("c<id>-<seq>"), so that any
// misordering is observable, and a CAS expects the state the client last
// observed for the key (by a get or a CAS), so that CAS often succeeds.
// Every operation is recorded in the Recorder.
//
// A Client is used by one goroutine at a time. Its random choices derive
// from (seed, id) alone, so a seed reproduces each client's choices (not
// the interleaving).
type Client struct {
	id   int
	rec  *Recorder
	keys []string
	rng  *rand.Rand
	seen map[string]*string // last observed state per key; nil: absent
	seq  int

	// OnReply, if set, is called after every operation with its input,
	// the wall-clock time just before its invocation, and its result (for
	// progress statistics; see Stats.Record).
	OnReply func(in Input, start time.Time, res Reply)
}

// NewClient returns the workload client id, recording into rec.
func NewClient(id int, rec *Recorder, keys []string, seed uint64) *Client {
	return &Client{id: id, rec: rec, keys: keys, rng: rand.New(rand.NewPCG(seed, uint64(id))), seen: map[string]*string{}}
}

// ID returns the client's id, the ClientID of its operations.
func (c *Client) ID() int { return c.id }

// Rand returns the client's random source, for choices the test makes on
// its behalf (where to send an operation, how long to pause).
func (c *Client) Rand() *rand.Rand { return c.rng }

// RandomKey returns one of the keys, uniformly at random.
func (c *Client) RandomKey() string { return c.keys[c.rng.IntN(len(c.keys))] }

// Step runs one random operation on a random key.
func (c *Client) Step(do Do) Reply {
	key := c.RandomKey()
	switch p := c.rng.IntN(10); {
	case p < 4:
		return c.Get(key, do)
	case p < 7:
		return c.Put(key, do)
	default:
		return c.CAS(key, do)
	}
}

// Get reads key.
func (c *Client) Get(key string, do Do) Reply {
	res := c.run(GetInput(key), do)
	if res.Outcome == OutcomeOk {
		if res.Output.Found {
			v := res.Output.Value
			c.seen[key] = &v
		} else {
			c.seen[key] = nil
		}
	}
	return res
}

// Put writes a fresh value to key.
func (c *Client) Put(key string, do Do) Reply {
	return c.run(PutInput(key, c.value()), do)
}

// CAS swaps a fresh value for the state the client last observed for key.
func (c *Client) CAS(key string, do Do) Reply {
	val := c.value()
	in := CASAbsentInput(key, val)
	if exp := c.seen[key]; exp != nil {
		in = CASInput(key, *exp, val)
	}
	res := c.run(in, do)
	if res.Outcome == OutcomeOk {
		// Aim the next CAS at what is there now.
		switch {
		case res.Output.Swapped:
			c.seen[key] = &val
		case res.Current != nil:
			cur := *res.Current
			c.seen[key] = &cur
		default:
			c.seen[key] = nil
		}
	}
	return res
}

func (c *Client) value() string {
	c.seq++
	return fmt.Sprintf("c%d-%d", c.id, c.seq)
}

func (c *Client) run(in Input, do Do) Reply {
	start := time.Now()
	res := c.rec.Run(c.id, in, do)
	if c.OnReply != nil {
		c.OnReply(in, start, res)
	}
	return res
}

// Stats counts a workload's outcomes and remembers when its successful
// operations were invoked, so that a test can show the workload kept
// making progress after every nemesis step. It is safe for concurrent use.
type Stats struct {
	mu      sync.Mutex
	ok      []time.Time // invocation times of operations with a definite result
	okKinds map[OpKind]int
	unknown int
	failed  int
	events  []Event
}

// Event is a nemesis step, with the progress the workload made after it.
type Event struct {
	At   time.Time
	What string
	// Ok is the number of successful operations invoked from At until the
	// next event, or until the end of the nemesis phase (see Events).
	Ok int
}

// Record counts one operation; its signature fits Client.OnReply.
func (s *Stats) Record(in Input, start time.Time, res Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch res.Outcome {
	case OutcomeOk:
		s.ok = append(s.ok, start)
		if s.okKinds == nil {
			s.okKinds = map[OpKind]int{}
		}
		s.okKinds[in.Kind]++
	case OutcomeUnknown:
		s.unknown++
	default:
		s.failed++
	}
}

// OkBetween counts the successful operations invoked in [from, to).
func (s *Stats) OkBetween(from, to time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.ok {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// Mark records that the nemesis does what now.
func (s *Stats) Mark(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, Event{At: time.Now(), What: what})
}

// Events returns the marked events in order, each with the number of
// successful operations invoked from it until the next one, or until end
// (the end of the nemesis phase) for the last.
func (s *Stats) Events(end time.Time) []Event {
	s.mu.Lock()
	evs := append([]Event(nil), s.events...)
	s.mu.Unlock()
	for i := range evs {
		to := end
		if i+1 < len(evs) {
			to = evs[i+1].At
		}
		evs[i].Ok = s.OkBetween(evs[i].At, to)
	}
	return evs
}

func (s *Stats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d ok (%d get, %d put, %d cas), %d unknown, %d failed (dropped)",
		len(s.ok), s.okKinds[Get], s.okKinds[Put], s.okKinds[CAS], s.unknown, s.failed)
}
