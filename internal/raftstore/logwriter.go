package raftstore

import (
	"log"
	"sync"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// logWriter is the store's log-writer stage: one goroutine that makes the
// replicas' Raft log entries and HardStates durable, so that the scheduler
// never waits on the disk. Raft runs with AsyncStorageWrites: each Ready
// carries its log writes as a MsgStorageAppend (to raft.LocalAppendThread),
// which the scheduler queues here and forgets. While one batch syncs, the
// writes of later rounds (of every range) pile up and go out together in
// the next batch: one engine write and at most one fsync for everything
// pending. Once a batch is durable the writer hands each message back to
// its replica (Replica.logWritten); the scheduler then moves the entries
// into the in-memory log and steps or sends the message's responses: the
// replica's own MsgStorageAppendResp (a leader counts its own copy towards
// the commit quorum only then) and its acknowledgements to the leader.
// Messages to one replica are written and handed back in the order queued,
// as raft requires of its append thread.
//
// One goroutine and no pool: the machine this was measured on has two
// cores and the servers are CPU-bound, so the stage is sized to take the
// fsync off the scheduler, not to write in parallel (docs/design.md,
// "The log writer").
type logWriter struct {
	eng   storage.Engine
	stats *Stats
	// stopper is the store's: once it is closed, batches still written
	// send nothing (the store stopped, as if it had died).
	stopper <-chan struct{}
	// testingHook is Config.testingLogWrite for this node.
	testingHook func(logWriteStage, []logWrite)
	// enc is write's: only the writer's goroutine writes.
	enc encoder

	mu sync.Mutex
	// work wakes the writer when pending grows or it must stop; idle
	// wakes flush when done moves.
	work, idle sync.Cond
	pending    []logWrite
	// queued counts the writes queued, done those durable and handed back.
	queued, done uint64
	stopping     bool
	exited       bool
}

// logWriteStage names the points of a batch's write a test may stop at.
type logWriteStage int

const (
	// logBeforeCommit: the batch is built and not yet written: a crash
	// here loses it (torn WAL records of a batch are discarded whole).
	logBeforeCommit logWriteStage = iota
	// logDurable: the batch is synced and nothing of it is acknowledged
	// or applied yet.
	logDurable
)

// logWrite is one replica's MsgStorageAppend, queued for the writer.
type logWrite struct {
	r *Replica
	m *raftpb.Message
	// truncate: the entries end before the log's last index written or
	// queued (a new leader overwrote a suffix); the rest is dropped so a
	// restart cannot resurrect it.
	truncate bool
	sync     bool
	// hardState: m's HardState is written (hardStateDurableLocked).
	hardState bool
	// acks are m's responses to other replicas (a follower's
	// acknowledgements, votes), addressed when queued: the writer sends
	// them as soon as the batch is durable, without a round trip through
	// the scheduler; m keeps those to its own replica. Values, so the
	// envelopes of a write are one allocation.
	acks []tidekvpb.RaftMessage
}

func newLogWriter(eng storage.Engine, stats *Stats, stopper <-chan struct{}) *logWriter {
	w := &logWriter{eng: eng, stats: stats, stopper: stopper}
	w.work.L, w.idle.L = &w.mu, &w.mu
	return w
}

// enqueue hands a round's writes to the writer.
func (w *logWriter) enqueue(ws []logWrite) {
	if len(ws) == 0 {
		return
	}
	w.mu.Lock()
	w.pending = append(w.pending, ws...)
	w.queued += uint64(len(ws))
	w.mu.Unlock()
	w.work.Signal()
}

// flush waits until every write queued so far is durable and handed back
// to its replica (or the writer has stopped). The scheduler calls it only
// before it rewrites a range's Raft state itself (a snapshot, a replica's
// destruction): rare steps that must not race the writer.
func (w *logWriter) flush() {
	w.mu.Lock()
	target := w.queued
	for w.done < target && !w.exited {
		w.idle.Wait()
	}
	w.mu.Unlock()
}

// stop writes what is pending and ends the goroutine.
func (w *logWriter) stop() {
	w.mu.Lock()
	w.stopping = true
	w.work.Signal()
	for !w.exited {
		w.idle.Wait()
	}
	w.mu.Unlock()
}

func (w *logWriter) run() {
	var spare []logWrite
	for {
		w.mu.Lock()
		for len(w.pending) == 0 && !w.stopping {
			w.work.Wait()
		}
		if len(w.pending) == 0 {
			w.exited = true
			w.idle.Broadcast()
			w.mu.Unlock()
			return
		}
		ws, upto := w.pending, w.queued
		w.pending = spare[:0]
		w.mu.Unlock()

		w.write(ws)
		stopped := false
		select {
		case <-w.stopper:
			stopped = true
		default:
		}
		for _, lw := range ws {
			for i := range lw.acks {
				if !stopped {
					lw.r.store.countSent(lw.r.store.transport.Send(&lw.acks[i]))
				}
			}
			lw.r.logWritten(lw.m)
		}
		w.mu.Lock()
		w.done = upto
		w.idle.Broadcast()
		w.mu.Unlock()
		clear(ws)
		spare = ws
	}
}

// write makes ws durable in one batch, synced if any of them must be.
func (w *logWriter) write(ws []logWrite) {
	b := w.eng.NewBatch()
	defer b.Close()
	sync := false
	for _, lw := range ws {
		if err := persistAppend(b, &w.enc, lw.r.rangeID, lw.m, lw.truncate, lw.hardState); err != nil {
			log.Fatalf("range %d: persisting raft state: %v", lw.r.rangeID, err)
		}
		sync = sync || lw.sync
	}
	if w.testingHook != nil {
		w.testingHook(logBeforeCommit, ws)
	}
	start := time.Now()
	if err := b.Commit(sync); err != nil {
		// Losing Raft state silently would break durability; stop hard.
		// Pebble reports a failed WAL write or fsync through its logger's
		// Fatalf, which exits, and never returns it here: a Fatalf that
		// returned would make this commit look durable (docs/design.md,
		// "A failed disk stops the node"; TestFailedDiskStopsTheNode).
		log.Fatalf("raft state commit: %v", err)
	}
	w.stats.LogBatches.Add(1)
	if sync {
		w.stats.Syncs.Add(1)
		w.stats.SyncNanos.Add(uint64(time.Since(start)))
	}
	if w.testingHook != nil {
		w.testingHook(logDurable, ws)
	}
}

// persistAppend adds a MsgStorageAppend's log entries to b, and its
// HardState if hardState.
func persistAppend(b storage.Writer, enc *encoder, rangeID uint64, m *raftpb.Message, truncate, hardState bool) error {
	if n := len(m.GetEntries()); n > 0 {
		if truncate {
			_, hi := keys.LogSpan(rangeID)
			if err := b.DeleteRange(keys.LogKey(rangeID, m.GetEntries()[n-1].GetIndex()+1), hi); err != nil {
				return err
			}
		}
		for _, e := range m.GetEntries() {
			enc.key = keys.AppendLogKey(enc.key[:0], rangeID, e.GetIndex())
			if err := enc.put(b, enc.key, e); err != nil {
				return err
			}
		}
	}
	if hardState { // appendHardState's, in the encoder's own
		enc.hs.Term, enc.hs.Vote, enc.hs.Commit = m.Term, m.Vote, m.Commit
		enc.key = keys.AppendHardStateKey(enc.key[:0], rangeID)
		return enc.put(b, enc.key, &enc.hs)
	}
	return nil
}

// appendHardState is the HardState a MsgStorageAppend carries, nil if none
// (raft sets Term, Vote and Commit together or not at all).
func appendHardState(m *raftpb.Message) *raftpb.HardState {
	if m.Term == nil {
		return nil
	}
	return &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
}

// hardStateDurableLocked says whether the HardState of the
// MsgStorageAppend m must be written: only if its term or vote differs from
// the last one written or queued. Raft needs the term and the vote durable
// (a node must never vote twice in a term), not the commit index, which is
// volatile state in Raft: a node restarted with an older one learns the
// current one from the leader, and loadRaftState raises it to the applied
// index (applied entries were committed). Every write moves the commit
// index, a term or vote rarely changes: the commit alone was a Pebble key
// per round of each replica, and a batch of its own (a WAL write) when no
// entries came with it. The term and vote of successive HardStates never
// go back, so one equal to the last queued equals what is on disk once
// the writes queued before it are, and those are written first.
func (r *Replica) hardStateDurableLocked(m *raftpb.Message) bool {
	if m.Term == nil {
		return false
	}
	tv := [2]uint64{m.GetTerm(), m.GetVote()}
	if tv == r.mu.termVote {
		return false
	}
	r.mu.termVote = tv
	return true
}

// logWriteLocked prepares rd's MsgStorageAppend m for the writer.
func (r *Replica) logWriteLocked(m *raftpb.Message, rd *raft.Ready) logWrite {
	lw := logWrite{r: r, m: m, sync: rd.MustSync, hardState: r.hardStateDurableLocked(m)}
	others := 0
	for _, resp := range m.GetResponses() {
		if resp.GetTo() != r.mu.replicaID {
			others++
		}
	}
	if others > 0 {
		lw.acks = make([]tidekvpb.RaftMessage, others)
	}
	own, n := m.Responses[:0], 0
	var held heldOnce
	for _, resp := range m.GetResponses() {
		if resp.GetTo() == r.mu.replicaID {
			own = append(own, resp)
		} else if r.envelopeLocked(&lw.acks[n], resp, &held) {
			n++
		}
	}
	lw.acks = lw.acks[:n]
	m.Responses = own
	if n := len(m.GetEntries()); n > 0 {
		last := m.GetEntries()[n-1].GetIndex()
		lw.truncate = r.mu.logLast > last
		r.mu.logLast = last
	}
	return lw
}

// logWritten is called by the writer once m is durable: the scheduler
// takes it from there (logDurableLocked).
func (r *Replica) logWritten(m *raftpb.Message) {
	r.in.Lock()
	if r.in.closed {
		r.in.Unlock()
		return
	}
	r.in.written = append(r.in.written, m)
	r.in.Unlock()
	r.store.schedule(r.rangeID)
}

// logDurableLocked finishes a durable MsgStorageAppend: its entries and
// HardState go into the in-memory log (raft reads them from there once the
// response below marks them stable), then its responses are delivered.
func (r *Replica) logDurableLocked(m *raftpb.Message) {
	if len(m.GetEntries()) > 0 {
		if err := r.mu.storage.Append(m.GetEntries()); err != nil {
			log.Fatalf("range %d: append: %v", r.rangeID, err)
		}
	}
	if hs := appendHardState(m); hs != nil {
		_ = r.mu.storage.SetHardState(hs)
	}
	bufs := &r.store.roundBufs // only the scheduler finishes appends
	remote := bufs.durable[:0]
	for _, resp := range m.GetResponses() {
		if resp.GetTo() == r.mu.replicaID {
			_ = r.mu.raw.Step(resp)
		} else {
			remote = append(remote, resp)
		}
	}
	r.sendMessagesLocked(remote)
	bufs.durable = emptiedSlice(remote)
}
