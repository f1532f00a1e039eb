package raftstore

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// BenchmarkRaftFloor is etcd raft on its own: three RawNodes in this
// goroutine, each on a raft.MemoryStorage, configured as the store
// configures its replicas (newRaftConfig, AsyncStorageWrites included),
// messages handed from one to the other in memory: no encoding, no
// socket, no disk, no other goroutine. It runs in passes, as the nodes'
// schedulers run rounds under a steady closed loop: each pass the leader
// takes perPass proposals of entryBytes (each its own Propose, as one
// range's drained queue or several ranges' are: a marshaled one-write
// command with a 1,000-byte value is about that size), then each node
// steps what the last pass sent it and takes one Ready; storage
// responses arrive in the next pass, as the log writer hands appends
// back. Entries in flight overlap, so one Ready carries one entry's
// append and an earlier one's commit. cpu-µs/entry is the process's CPU
// (getrusage) per committed entry, the three nodes together;
// msgs/entry the messages between nodes per entry (what the transport
// would carry), readies/entry the Readies taken. BenchmarkRF3Put reports
// the closed loop's own (cmds/entry, readies/op, msgs/op) to pick the
// pass size against (docs/benchmarks/cost.md, "The floor of the pieces
// we keep").
//
//	go test -run '^$' -bench RaftFloor -benchtime 20000x -count 3 ./internal/raftstore/
func BenchmarkRaftFloor(b *testing.B) {
	const entryBytes = 1040
	for _, perPass := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("perPass=%d", perPass), func(b *testing.B) {
			g := newFloorGroup(b)
			data := make([]byte, entryBytes)
			g.msgs, g.readies = 0, 0
			start := g.applied[0]
			b.ReportAllocs()
			b.ResetTimer()
			cpu := floorCPU()
			for done := 0; done < b.N; done += perPass {
				for range min(perPass, b.N-done) {
					if err := g.nodes[0].Propose(data); err != nil {
						b.Fatal(err)
					}
				}
				g.pass(b)
				g.compact()
			}
			for g.pass(b) {
			}
			b.ReportMetric(float64(floorCPU()-cpu)/float64(b.N)/float64(time.Microsecond), "cpu-µs/entry")
			b.StopTimer()
			if got := g.applied[2] - start; got < uint64(b.N) {
				b.Fatalf("%d entries applied on node 3, want %d", got, b.N)
			}
			b.ReportMetric(float64(g.msgs)/float64(b.N), "msgs/entry")
			b.ReportMetric(float64(g.readies)/float64(b.N), "readies/entry")
		})
	}
}

// floorGroup is three RawNodes and the messages in flight between them.
type floorGroup struct {
	nodes   [3]*raft.RawNode
	stores  [3]*raft.MemoryStorage
	applied [3]uint64
	inbox   [3][]*raftpb.Message
	spare   [3][]*raftpb.Message
	// msgs counts messages between nodes, readies the Readies taken.
	msgs, readies int
}

func newFloorGroup(b *testing.B) *floorGroup {
	cfg := DefaultConfig()
	g := &floorGroup{}
	for i := range g.nodes {
		// Started as a range's replicas are: from a snapshot naming the
		// three voters.
		g.stores[i] = raft.NewMemoryStorage()
		if err := g.stores[i].ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
			ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}, Index: proto.Uint64(1), Term: proto.Uint64(1)}}); err != nil {
			b.Fatal(err)
		}
		rn, err := raft.NewRawNode(newRaftConfig(&cfg, uint64(i+1), g.stores[i], 1))
		if err != nil {
			b.Fatal(err)
		}
		g.nodes[i] = rn
	}
	if err := g.nodes[0].Campaign(); err != nil {
		b.Fatal(err)
	}
	g.settle(b)
	if st := g.nodes[0].BasicStatus(); st.RaftState != raft.StateLeader {
		b.Fatalf("node 1 is %v, not leader", st.RaftState)
	}
	return g
}

// settle runs passes until no node has anything left to do: every
// proposal committed and applied on all three.
func (g *floorGroup) settle(b *testing.B) {
	for g.pass(b) {
	}
}

// pass steps each node's inbox and takes its Ready, if any, and reports
// whether any node had something to do.
func (g *floorGroup) pass(b *testing.B) bool {
	busy := false
	for i, rn := range g.nodes {
		in := g.inbox[i]
		g.inbox[i] = g.spare[i][:0]
		for _, m := range in {
			if err := rn.Step(m); err != nil && err != raft.ErrStepPeerNotFound {
				b.Fatal(err)
			}
		}
		clear(in)
		g.spare[i] = in[:0]
		if len(in) > 0 {
			busy = true
		}
		if !rn.HasReady() {
			continue
		}
		busy = true
		g.readies++
		rd := rn.Ready()
		for _, m := range rd.Messages {
			switch m.GetTo() {
			case raft.LocalAppendThread:
				// The log writer's work, in memory: entries and
				// HardState stored, then the responses.
				if err := g.stores[i].Append(m.GetEntries()); err != nil {
					b.Fatal(err)
				}
				if hs := appendHardState(m); hs != nil {
					if err := g.stores[i].SetHardState(hs); err != nil {
						b.Fatal(err)
					}
				}
				g.respond(i, m.Responses)
			case raft.LocalApplyThread:
				if n := len(m.GetEntries()); n > 0 {
					g.applied[i] = m.GetEntries()[n-1].GetIndex()
				}
				g.respond(i, m.Responses)
			default:
				g.send(m)
			}
		}
	}
	return busy
}

// respond delivers a storage message's responses: to its own node or, a
// follower's acknowledgement, to another.
func (g *floorGroup) respond(i int, resps []*raftpb.Message) {
	for _, r := range resps {
		if r.GetTo() == uint64(i+1) {
			g.inbox[i] = append(g.inbox[i], r)
		} else {
			g.send(r)
		}
	}
}

func (g *floorGroup) send(m *raftpb.Message) {
	g.msgs++
	g.inbox[m.GetTo()-1] = append(g.inbox[m.GetTo()-1], m)
}

// compact drops applied entries from the logs now and then, as the store
// truncates its log, so memory stays bounded over a long run.
func (g *floorGroup) compact() {
	const keep = 1000
	for i, st := range g.stores {
		first, _ := st.FirstIndex()
		if g.applied[i] > first+10*keep {
			_ = st.Compact(g.applied[i] - keep)
		}
	}
}

func floorCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
