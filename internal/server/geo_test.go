package server

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/transport"
)

// startGeoCluster starts three nodes, one per region, with the geo mode on
// for key space "geo" and a WAN round trip of rtt between the regions; it
// returns one client per region, each sent to its region's gateway.
func startGeoCluster(t *testing.T, rtt time.Duration, more ...func(*Config)) (*testCluster, []*client.Client) {
	regions := []string{"region=a", "region=b", "region=c"}
	delays := &transport.Delays{}
	i := 0
	tc := startClusterWith(t, 3, func(c *Config) {
		c.Locality = regions[i]
		i++
		c.Transport.Delays = delays
		c.Geo.KeySpace = "geo"
		c.Geo.Localities = regions
		c.Geo.Protocol.Epoch = 5 * time.Millisecond
		c.Geo.Protocol.Deadline = 300 * time.Millisecond
		c.Transport.Partition = &transport.Partition{}
		for _, f := range more {
			f(c)
		}
	})
	localities := map[uint64]string{}
	var clients []*client.Client
	for k, s := range tc.nodes {
		localities[s.NodeID()] = regions[k]
		cfg := client.DefaultConfig()
		cfg.Addrs = []string{s.Addr()}
		c, err := client.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	delays.SetLocalities(localities, transport.UniformRTT(rtt))
	eventually(t, 10*time.Second, "every node to run its data centre", func() error {
		for _, s := range tc.nodes {
			if s.geo.Running() == nil {
				return fmt.Errorf("node %d runs no data centre yet", s.NodeID())
			}
		}
		return nil
	})
	return tc, clients
}

func geoAcct(i int) []byte { return fmt.Appendf(nil, "acct/%03d", i) }

// Concurrent transfers from every region are each decided and keep the
// total; every DC ends with the same accounts. A loaded machine delays a
// DC's epoch input past the others' deadline: its transfers are not run,
// a definite outcome. What may not happen is a transfer left undecided:
// the gateway waits as long as the test does, so ErrAmbiguous means the
// protocol stopped deciding, however slow the machine.
func TestGeoBankAcrossRegions(t *testing.T) {
	const budget = time.Minute
	_, clients := startGeoCluster(t, 40*time.Millisecond, func(c *Config) { c.Geo.CommitTimeout = budget })
	ctx, cancel := context.WithTimeout(context.Background(), 2*budget)
	defer cancel()
	const accounts, balance = 20, 100
	var open []*tidekvpb.GeoOp
	for a := range accounts {
		open = append(open, client.GeoPut(geoAcct(a), []byte(strconv.Itoa(balance))))
	}
	if r, err := clients[0].GeoCommit(ctx, "geo", open...); err != nil || !r.Committed {
		t.Fatalf("opening the accounts: %+v, %v", r, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	committed, aborted, notRun := 0, 0, 0
	for w := range 12 {
		c := clients[w%3]
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range 15 {
				from, to := rng.IntN(accounts), rng.IntN(accounts)
				if from == to {
					continue
				}
				amount := 1 + rng.Int64N(60)
				r, err := c.GeoCommit(ctx, "geo", client.GeoDebit(geoAcct(from), amount, 0), client.GeoAdd(geoAcct(to), amount))
				mu.Lock()
				switch {
				case err == nil && r.Committed:
					committed++
				case err == nil:
					aborted++
				case errors.Is(err, client.ErrTxnRetry):
					notRun++ // an epoch without this DC's input: nothing changed
				default:
					t.Errorf("transfer not decided: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if committed == 0 {
		t.Fatal("no transfer committed")
	}
	t.Logf("%d transfers committed, %d aborted below the floor, %d not run (DC input left out)", committed, aborted, notRun)
	eventually(t, 10*time.Second, "every DC to hold the same accounts", func() error {
		var first string
		for k, c := range clients {
			kvs, _, err := c.GeoScan(ctx, "geo", nil, nil)
			if err != nil {
				return err
			}
			total, state := 0, ""
			for _, kv := range kvs {
				n, err := strconv.Atoi(string(kv.GetValue()))
				if err != nil || n < 0 {
					return fmt.Errorf("DC %d: %s holds %q", k, kv.GetKey(), kv.GetValue())
				}
				total += n
				state += fmt.Sprintf("%s=%s ", kv.GetKey(), kv.GetValue())
			}
			if total != accounts*balance || len(kvs) != accounts {
				t.Fatalf("DC %d: %d accounts hold %d, want %d", k, len(kvs), total, accounts*balance)
			}
			if k == 0 {
				first = state
			} else if state != first {
				return fmt.Errorf("DC %d differs from DC 0", k)
			}
		}
		return nil
	})
}

// A transaction the gateway gave up waiting for may still commit: the
// client says its outcome is unknown (ErrAmbiguous), not that it failed.
func TestGeoUndecidedIsAmbiguous(t *testing.T) {
	_, clients := startGeoCluster(t, 40*time.Millisecond, func(c *Config) { c.Geo.CommitTimeout = time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := clients[0].GeoCommit(ctx, "geo", client.GeoPut([]byte("k"), []byte("1")))
	if !errors.Is(err, client.ErrAmbiguous) || !strings.Contains(err.Error(), "may still commit") {
		t.Fatalf("commit the gateway gave up on: %v, want ErrAmbiguous", err)
	}
}

// pacedClock is the DCs' clock in lockstep: it moves on a millisecond
// (never past the real time) only once every DC still on it read the
// current time, so no DC's tick lags its epochs however the machine
// starves the process or one of its goroutines. On the real clock a DC
// whose tick ran more than half the deadline late sent its epoch late and
// its input was left out (the transaction answered "retry": a definite
// outcome, but not the one a test of something else sets up); at a
// twentieth of a CPU that was 3 runs of 4 of TestGeoRestartedGatewayStaysOut.
type pacedClock struct {
	mu   sync.Mutex
	t    time.Time
	on   []bool // on[i]: DC i paces the clock
	read []bool // read[i]: DC i read t
}

func newPacedClock(n int) *pacedClock {
	return &pacedClock{t: time.Now(), on: slices.Repeat([]bool{true}, n), read: make([]bool, n)}
}

// config gives each node started with it the clock of the next DC.
func (c *pacedClock) config() func(*Config) {
	i := 0
	return func(cfg *Config) {
		dc := i
		i++
		cfg.Geo.Now = func() time.Time { return c.now(dc) }
	}
}

func (c *pacedClock) now(dc int) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read[dc] = true
	for i, on := range c.on {
		if on && !c.read[i] {
			return c.t
		}
	}
	if next := c.t.Add(time.Millisecond); !next.After(time.Now()) {
		c.t = next
		clear(c.read)
	}
	return c.t
}

// leave takes DC dc off the clock (it stops, and the others go on).
func (c *pacedClock) leave(dc int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on[dc] = false
}

// A gateway that restarts stays out (its copy was in memory) and says so;
// the two others, a majority, keep committing without it.
func TestGeoRestartedGatewayStaysOut(t *testing.T) {
	clock := newPacedClock(3)
	tc, clients := startGeoCluster(t, 0, clock.config())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if r, err := clients[2].GeoCommit(ctx, "geo", client.GeoPut([]byte("k"), []byte("1"))); err != nil || !r.Committed {
		t.Fatalf("before the restart: %+v, %v", r, err)
	}
	clock.leave(2)
	tc.restartOn(ctx, 2, tc.kill(2, tc.cfgs[2].Transport.Partition))
	eventually(t, 10*time.Second, "the restarted gateway to refuse", func() error {
		_, err := clients[2].GeoCommit(ctx, "geo", client.GeoGet([]byte("k")))
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "restarted") {
			return fmt.Errorf("restarted gateway: %v", err)
		}
		return nil
	})
	r, err := clients[0].GeoCommit(ctx, "geo", client.GeoAdd([]byte("k"), 1), client.GeoGet([]byte("k")))
	if err != nil || !r.Committed || string(r.Reads[0].GetValue()) != "2" {
		t.Fatalf("after the restart, DC 0: %+v, %v", r, err)
	}
}

// Bad input fails with one clear error before anything is ordered.
func TestGeoRefusesBadInput(t *testing.T) {
	_, clients := startGeoCluster(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	many := make([]*tidekvpb.GeoOp, 65)
	for i := range many {
		many[i] = client.GeoGet(geoAcct(i))
	}
	for _, c := range []struct {
		name     string
		keySpace string
		ops      []*tidekvpb.GeoOp
		code     codes.Code
	}{
		{"unknown key space", "nope", []*tidekvpb.GeoOp{client.GeoGet([]byte("k"))}, codes.InvalidArgument},
		{"too many operations", "geo", many, codes.InvalidArgument},
		{"too many bytes", "geo", []*tidekvpb.GeoOp{client.GeoPut([]byte("k"), make([]byte, 65<<10))}, codes.InvalidArgument},
		{"no kind", "geo", []*tidekvpb.GeoOp{{Key: []byte("k")}}, codes.InvalidArgument},
		{"empty key", "geo", []*tidekvpb.GeoOp{client.GeoGet(nil)}, codes.InvalidArgument},
	} {
		_, err := clients[1].GeoCommit(ctx, c.keySpace, c.ops...)
		if status.Code(err) != c.code {
			t.Errorf("%s: %v, want %v", c.name, err, c.code)
		}
	}
	if kvs, _, err := clients[1].GeoScan(ctx, "geo", nil, nil); err != nil || len(kvs) != 0 {
		t.Fatalf("after refused transactions the key space holds %d keys (%v), want none", len(kvs), err)
	}
}
