package geo

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Node drives one DC with a real clock: it ticks it, hands it peers'
// messages and answers each Commit when its transaction is decided. Safe
// for concurrent use.
type Node struct {
	mu      sync.Mutex
	dc      *DC
	now     func() time.Time
	waiters map[TxnID]chan Decision
}

// NewNode returns the node of DC id of n, sending through tr and reading
// the time from now.
func NewNode(cfg Config, id, n int, tr Transport, now func() time.Time) (*Node, error) {
	nd := &Node{now: now, waiters: map[TxnID]chan Decision{}}
	dc, err := NewDC(cfg, id, n, tr, nd.decided)
	if err != nil {
		return nil, err
	}
	// Sequences start at the clock so that a restarted gateway never
	// reuses the id of a transaction its peers already settled (they
	// would ignore results for it, and validation would wait forever).
	dc.seq = uint64(now().UnixNano())
	nd.dc = dc
	return nd, nil
}

// decided is the DC's callback, called with mu held.
func (nd *Node) decided(d Decision) {
	if ch := nd.waiters[d.ID]; ch != nil {
		ch <- d
		delete(nd.waiters, d.ID)
	}
}

// tick is how often Run ticks the DC: an epoch closes at most this late.
const tick = time.Millisecond

// Run ticks the DC until ctx ends.
func (nd *Node) Run(ctx context.Context) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			nd.mu.Lock()
			nd.dc.Tick(nd.now())
			nd.mu.Unlock()
		}
	}
}

// Receive hands the DC a peer's message.
func (nd *Node) Receive(m *Message) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	nd.dc.Receive(m)
}

// ErrUndecided: the caller stopped waiting; the transaction may still
// commit.
var ErrUndecided = errors.New("geo transaction not decided before the deadline: it may still commit")

// Commit submits ops and waits for their decision.
func (nd *Node) Commit(ctx context.Context, ops []Op) (Decision, error) {
	ch := make(chan Decision, 1)
	nd.mu.Lock()
	id, err := nd.dc.Submit(ops)
	if err == nil {
		nd.waiters[id] = ch
	}
	nd.mu.Unlock()
	if err != nil {
		return Decision{}, err
	}
	select {
	case d := <-ch:
		return d, nil
	case <-ctx.Done():
		nd.mu.Lock()
		delete(nd.waiters, id)
		nd.mu.Unlock()
		return Decision{}, errors.Join(ErrUndecided, ctx.Err())
	}
}

// Validated returns a copy of the DC's validated state.
func (nd *Node) Validated() (map[string][]byte, uint64) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return nd.dc.Validated(), nd.dc.Position()
}
