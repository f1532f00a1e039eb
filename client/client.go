package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
)

// Client is a routing TideKV client. It is safe for concurrent use; share one
// per process.
type Client struct {
	cfg    Config
	cache  *rangeCache
	conns  *connPool
	sus    suspects
	ctx    context.Context // canceled by Close; bounds background refreshes
	cancel context.CancelFunc
	closed atomic.Bool
	// clock is the client's hybrid logical clock: Batch messages carry it
	// and their answers move it on, so that what the client does after an
	// answer is ordered after it (reads at timestamps will need it).
	clock *hlc.Clock

	refreshMu   sync.Mutex
	refreshing  *flight // the full refresh in progress, if any
	lastRefresh time.Time

	// Replica choice for BOUNDED and ANY reads (choice.go).
	peers sync.Map                 // addr -> *peerStats
	loads atomic.Pointer[loadView] // latest node scores
	tune  readTuning
	pollState

	// pause waits between a request's attempts (sleep: d, or until ctx
	// ends, reporting whether d elapsed). Tests replace it to see which
	// waits a request took rather than time the request.
	pause func(ctx context.Context, d time.Duration) bool

	// increments is set once the cluster's log version was seen to apply
	// increments (Increment).
	increments atomic.Bool
}

// wallClock is the system clock the client's HLC reads.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// New returns a client for the cluster at cfg.Addrs. It validates cfg but does
// not contact the cluster: connections and the range cache are filled in on
// first use.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	var phys hlc.PhysicalClock = wallClock{}
	if cfg.WallClock != nil {
		phys = cfg.WallClock
	}
	clock, err := hlc.NewClock(phys, cfg.MaxClockOffset)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{
		clock:  clock,
		cfg:    cfg,
		cache:  newRangeCache(cfg.Addrs),
		ctx:    ctx,
		cancel: cancel,
		tune:   defaultReadTuning(),
		pause:  sleep,
	}
	c.conns = newConnPool(ctx, cfg, c.peer, clock)
	c.loads.Store(emptyLoadView)
	return c, nil
}

// Close releases the client's connections and stops its background load
// polling. Requests in flight fail; later requests return ErrClosed.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.cancel()
	c.pollMu.Lock()
	done := c.pollDone
	c.pollMu.Unlock()
	if done != nil {
		<-done
	}
	return c.conns.close()
}
