package raftstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// powerLoss crashes a node as a power cut would: of the writes its engine
// had not synced, only a random prefix survives (a write-ahead log reaches
// the disk in order, in part or not at all). Applied state is written
// without fsync and commands are applied (and acknowledged) before the
// round's own fsync, so this is what exercises the replay path.
func (tc *testCluster) powerLoss(id uint64) {
	tc.crash(id)
	eng := tc.engines[id]
	tc.engines[id] = eng.CrashCloneKeeping(tc.rng.IntN(eng.UnsyncedBatches() + 1))
}

func TestPowerLossKeepsAcknowledgedWrites(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	tc := newTestCluster(t, 3, func(c *Config) { c.LogKeepEntries = 20 })
	tc.rng = rand.New(rand.NewPCG(seed, seed))
	acked := map[string]string{}
	for round := 0; round < 6; round++ {
		for i := 0; i < 40; i++ {
			k, v := fmt.Sprintf("k%02d", i%15), fmt.Sprintf("r%d-%d", round, i)
			tc.put(k, v)
			acked[k] = v
		}
		victim := tc.leader(testRangeID).store.nodeID // the leaseholder on even rounds
		if round%2 == 1 {
			for _, id := range tc.nodes {
				if id != victim {
					victim = id
					break
				}
			}
		}
		tc.powerLoss(victim)
		tc.put("during", fmt.Sprint(round))
		acked["during"] = fmt.Sprint(round)
		tc.restart(victim)
	}
	// Every node loses power at once; only synced state survives anywhere.
	for _, id := range tc.nodes {
		tc.powerLoss(id)
	}
	for _, id := range tc.nodes {
		tc.restart(id)
	}
	for k, want := range acked {
		if got, ok := tc.get(k); !ok || got != want {
			t.Fatalf("after power loss %s = %q (found %v), acknowledged %q", k, got, ok, want)
		}
	}
	// All replicas converge on the same data.
	tc.put("final", "x")
	acked["final"] = "x"
	tc.waitReplicated(acked)
}

// waitReplicated waits until every node's engine (the one its store was
// last started on) holds each key of kvs with its value.
func (tc *testCluster) waitReplicated(kvs map[string]string) {
	tc.t.Helper()
	for _, id := range tc.nodes {
		eng := tc.running[id]
		waitFor(tc.t, func() bool {
			for k, want := range kvs {
				if v, ok, _ := eng.Get(dataKey(k)); !ok || string(v) != want {
					return false
				}
			}
			return true
		})
	}
}
