package geo

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// MemNet is the in-memory twin of the network between DCs, on a clock its
// driver sets: messages are due after a per-pair delay, and may be dropped
// at random or cut by a partition. Safe for concurrent use.
type MemNet struct {
	mu    sync.Mutex
	now   time.Time
	delay func(from, to int) time.Duration
	drop  float64 // probability of losing a message
	rng   *rand.Rand
	cut   map[[2]int]bool
	queue []memMsg
}

type memMsg struct {
	due  time.Time
	to   int
	m    *Message
	from int
}

// Delivery is a message due at its receiver.
type Delivery struct {
	To int
	M  *Message
}

// NewMemNet returns a network with the given one-way delays (nil: none)
// that loses each message with probability drop, its randomness from seed.
func NewMemNet(delay func(from, to int) time.Duration, drop float64, seed uint64) *MemNet {
	if delay == nil {
		delay = func(int, int) time.Duration { return 0 }
	}
	return &MemNet{delay: delay, drop: drop, rng: rand.New(rand.NewPCG(seed, 1)), cut: map[[2]int]bool{}}
}

// Endpoint is DC from's Transport.
func (n *MemNet) Endpoint(from int) Transport { return memEndpoint{n, from} }

type memEndpoint struct {
	n    *MemNet
	from int
}

func (e memEndpoint) Send(to int, m *Message) {
	n := e.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut[[2]int{e.from, to}] || (n.drop > 0 && n.rng.Float64() < n.drop) {
		return
	}
	n.queue = append(n.queue, memMsg{due: n.now.Add(n.delay(e.from, to)), to: to, m: m, from: e.from})
}

// Isolate cuts DC dc off from every other of n DCs, both ways, until Heal;
// messages already on the wire to or from it are lost too.
func (n *MemNet) Isolate(dc, dcs int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for p := range dcs {
		n.cut[[2]int{dc, p}], n.cut[[2]int{p, dc}] = true, true
	}
	n.queue = slices.DeleteFunc(n.queue, func(q memMsg) bool { return q.to == dc || q.from == dc })
}

// Heal removes every partition.
func (n *MemNet) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
}

// Due sets the clock to now and returns the messages due by then, in due
// order.
func (n *MemNet) Due(now time.Time) []Delivery {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.now = now
	slices.SortStableFunc(n.queue, func(a, b memMsg) int { return a.due.Compare(b.due) })
	i := 0
	for i < len(n.queue) && !n.queue[i].due.After(now) {
		i++
	}
	out := make([]Delivery, i)
	for k, q := range n.queue[:i] {
		out[k] = Delivery{To: q.to, M: q.m}
	}
	n.queue = slices.Delete(n.queue, 0, i)
	return out
}
