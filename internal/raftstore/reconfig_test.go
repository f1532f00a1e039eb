package raftstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
)

// TestRandomReconfigurationInProcess runs seeded random splits, replica
// moves and lease transfers on a 4-node in-process cluster while nodes
// crash and restart or are cut off by the transport (fault injection), and
// writes go on. The replica GC runs against a directory of the newest
// descriptors, as the server runs it against the meta range. After the faults heal: every range has at least 3 voters
// and all its members agree on its descriptor, and every acknowledged
// write reads back. TIDEKV_RECONFIG_ROUNDS sets the rounds (default 60),
// TIDEKV_RECONFIG_SEEDS the seeds, comma-separated (default 1,2).
func TestRandomReconfigurationInProcess(t *testing.T) {
	rounds := 60
	if v := os.Getenv("TIDEKV_RECONFIG_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TIDEKV_RECONFIG_ROUNDS=%q: want a positive integer", v)
		}
		rounds = n
	}
	seeds := []uint64{1, 2}
	if v := os.Getenv("TIDEKV_RECONFIG_SEEDS"); v != "" {
		seeds = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("TIDEKV_RECONFIG_SEEDS=%q: want comma-separated integers", v)
			}
			seeds = append(seeds, n)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { randomReconfig(t, seed, rounds) })
	}
}

// rcCluster wraps the test cluster with what the random run needs: which
// nodes are down or cut off, routing around them, and the range directory
// the server would keep in the meta range (published from the reachable
// replicas, for the stores' replica GC and snapshot overlap checks).
type rcCluster struct {
	*testCluster
	cut map[uint64]bool
	dir ddDirectory
}

// publish refreshes the directory from the reachable replicas.
func (c *rcCluster) publish() []*tidekvpb.RangeDescriptor {
	var seen []*tidekvpb.RangeDescriptor
	for _, id := range c.nodes {
		if c.up(id) {
			for _, r := range c.stores[id].Replicas() {
				if d := r.Desc(); d != nil && r.RangeID() != keys.MetaRangeID {
					seen = append(seen, d)
				}
			}
		}
	}
	descs := directoryOf(seen)
	c.dir.publish(descs)
	return descs
}

// gc runs every reachable store's replica GC, as the server's loop does.
func (c *rcCluster) gc() {
	descs := c.publish()
	for _, id := range c.nodes {
		if c.up(id) {
			c.stores[id].RemoveStale(descs)
		}
	}
}

// restart brings a crashed node back with the directory wired in.
func (c *rcCluster) restart(id uint64) {
	c.testCluster.restart(id)
	c.stores[id].SetRangeDirectory(&c.dir)
}

func (c *rcCluster) up(id uint64) bool { return c.stores[id] != nil && !c.cut[id] }

// await retries find for up to 2 s (an election may be under way).
func await(find func() *Replica) *Replica {
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if r := find(); r != nil || time.Now().After(deadline) {
			return r
		}
	}
}

// write writes k=k as a client would, within 2 s: a replica that is
// leader but does not hold the lease yet (just elected, or handing it on)
// refuses with NotLeaderError, and the client tries the range's leaseholder
// again. How many writes a run gets acknowledged then depends on the faults,
// not on how often a loaded machine catches a lease between holders.
func (c *rcCluster) write(k string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		r := await(func() *Replica { return c.leaderFor([]byte(k)) })
		if r == nil {
			return false
		}
		_, err := r.Write(ctx, []*tidekvpb.WriteOp{{Key: []byte(k), Value: []byte(k)}})
		var nl *NotLeaderError
		if !errors.As(err, &nl) {
			return err == nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// leaderOf returns a reachable leaseholder of rangeID, or nil.
func (c *rcCluster) leaderOf(rangeID uint64) *Replica {
	for _, id := range c.nodes {
		if c.up(id) {
			if r := c.stores[id].GetReplica(rangeID); r != nil && r.IsLeader() {
				return r
			}
		}
	}
	return nil
}

// leaderFor returns a reachable leaseholder of the range holding key.
func (c *rcCluster) leaderFor(key []byte) *Replica {
	for _, id := range c.nodes {
		if !c.up(id) {
			continue
		}
		if r := c.stores[id].LookupKey(key); r != nil && r.IsLeader() {
			return r
		}
	}
	return nil
}

// ranges returns the newest descriptor of every range a reachable node
// holds.
func (c *rcCluster) ranges() map[uint64]*tidekvpb.RangeDescriptor {
	out := map[uint64]*tidekvpb.RangeDescriptor{}
	for _, id := range c.nodes {
		if !c.up(id) {
			continue
		}
		for _, r := range c.stores[id].Replicas() {
			if d := r.Desc(); d != nil && r.RangeID() != keys.MetaRangeID && (out[d.GetRangeId()] == nil || d.GetGeneration() > out[d.GetRangeId()].GetGeneration()) {
				out[d.GetRangeId()] = d
			}
		}
	}
	return out
}

func randomReconfig(t *testing.T, seed uint64, rounds int) {
	tc := newTestCluster(t, 3)
	tc.leader(testRangeID)
	tc.addNode()
	c := &rcCluster{testCluster: tc, cut: map[uint64]bool{}}
	for _, id := range tc.nodes {
		tc.stores[id].SetRangeDirectory(&c.dir)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	acked := map[string]string{}
	nextID := uint64(100)
	var down uint64
	var downKind string
	var downUntil int
	ops := map[string]int{}
	for round := 0; round < rounds; round++ {
		for i := range 4 {
			k := fmt.Sprintf("k%03d/%d-%d", rng.IntN(1000), round, i)
			if c.write(k) {
				acked[k] = k
			}
		}
		ops[c.reconfigure(t, rng, &nextID)]++
		if round%3 == 0 {
			c.gc()
		}

		switch {
		case down != 0 && round >= downUntil:
			if downKind == "crash" {
				c.restart(down)
			} else {
				tc.net.Isolate(down, tc.nodes, false)
				c.cut[down] = false
			}
			down = 0
		case down == 0 && round%8 == 7:
			down = tc.nodes[rng.IntN(len(tc.nodes))]
			downUntil = round + 3
			if rng.IntN(2) == 0 {
				downKind = "crash"
				tc.crash(down)
			} else {
				downKind = "isolate"
				tc.net.Isolate(down, tc.nodes, true)
				c.cut[down] = true
			}
			ops[downKind]++
		}
	}
	if down != 0 {
		if downKind == "crash" {
			c.restart(down)
		} else {
			tc.net.Isolate(down, tc.nodes, false)
			c.cut[down] = false
		}
	}
	t.Logf("seed %d: %d rounds: %v; %d writes acknowledged", seed, rounds, ops, len(acked))
	if len(acked) < rounds || ops["split"]+ops["move"] < rounds/6 {
		t.Fatalf("only %d writes acknowledged and %d splits and moves done in %d rounds: the run proves too little", len(acked), ops["split"]+ops["move"], rounds)
	}

	// Every range settles: at least 3 voters, and every member applied the
	// newest descriptor.
	var why string
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.gc()
		why = c.unsettled()
		if why == "" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if why != "" {
		t.Fatalf("not settled 30 s after the faults healed: %s", why)
	}
	lost := 0
	for k, v := range acked {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var got []byte
		var ok bool
		var err error
		for ctx.Err() == nil {
			if r := c.leaderFor([]byte(k)); r != nil {
				if got, ok, err = r.Get(ctx, []byte(k), ReadOptions{}); err == nil {
					break
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		if err != nil || !ok || string(got) != v {
			if lost++; lost <= 5 {
				t.Errorf("acknowledged write %s: got %q (found %v, %v)", k, got, ok, err)
			}
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged writes lost", lost, len(acked))
	}
}

// reconfigure makes one random split, move or lease transfer and says
// which (with "-failed" when the store refused or gave up: the random
// choice may be invalid, and faults interrupt changes).
func (c *rcCluster) reconfigure(t *testing.T, rng *rand.Rand, nextID *uint64) string {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var op string
	var err error
	switch rng.IntN(3) {
	case 0:
		op = "split"
		key := fmt.Sprintf("k%03d", rng.IntN(1000))
		r := await(func() *Replica { return c.leaderFor([]byte(key)) })
		if r == nil {
			return op + "-no-leader"
		}
		*nextID++
		_, err = r.Split(ctx, []byte(key), *nextID)
	default:
		rs := c.ranges()
		ids := make([]uint64, 0, len(rs))
		for id := range rs {
			ids = append(ids, id)
		}
		if len(ids) == 0 {
			return "none"
		}
		id := ids[rng.IntN(len(ids))]
		r := await(func() *Replica { return c.leaderOf(id) })
		if r == nil {
			return "no-leader"
		}
		d := r.Desc()
		var in, out []uint64
		for _, n := range c.nodes {
			if replicaOnNode(d, n) != nil {
				in = append(in, n)
			} else {
				out = append(out, n)
			}
		}
		if rng.IntN(2) == 0 && len(out) > 0 {
			op = "move"
			_, err = r.ChangeReplicas(ctx, out[rng.IntN(len(out))], in[rng.IntN(len(in))])
		} else {
			op = "transfer"
			err = r.TransferLease(in[rng.IntN(len(in))])
		}
	}
	var nl *NotLeaderError
	if err != nil && !errors.As(err, &nl) {
		t.Logf("%s: %v", op, err)
		op += "-failed"
	}
	return op
}

// unsettled says why the cluster has not settled, or "".
func (c *rcCluster) unsettled() string {
	for id, d := range c.ranges() {
		voters := 0
		for _, rd := range d.GetReplicas() {
			if rd.GetType() == tidekvpb.ReplicaType_VOTER {
				voters++
			}
			s := c.stores[rd.GetNodeId()]
			if s == nil {
				return fmt.Sprintf("range %d lists node %d, which is down", id, rd.GetNodeId())
			}
			r := s.GetReplica(id)
			if r == nil || r.Desc() == nil || r.Desc().GetGeneration() != d.GetGeneration() {
				return fmt.Sprintf("node %d has not applied range %d generation %d (%s)", rd.GetNodeId(), id, d.GetGeneration(), FormatReplicas(d))
			}
		}
		if voters < 3 {
			return fmt.Sprintf("range %d has %d voters: %s", id, voters, FormatReplicas(d))
		}
	}
	return ""
}
