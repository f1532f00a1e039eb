package raftstore

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"log"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
)

// A range travels as one SST file holding all its keys, built from an
// engine snapshot taken at the Raft snapshot's index and ingested whole on
// the receiver. Raft's own snapshot message carries only the descriptor.

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stagedSST is a received snapshot's SST file and the CRC-32C of the bytes
// written to it.
type stagedSST struct {
	path string
	crc  uint32
}

func (s stagedSST) verify() error {
	f, err := os.Open(s.path)
	if err != nil {
		return err
	}
	defer f.Close()
	sum := crc32.New(castagnoli)
	if _, err := io.Copy(sum, f); err != nil {
		return fmt.Errorf("reading staged snapshot %s: %w", s.path, err)
	}
	if got := sum.Sum32(); got != s.crc {
		return fmt.Errorf("staged snapshot %s is corrupt: CRC-32C %08x on disk, %08x when received", s.path, got, s.crc)
	}
	return nil
}

// sendSnapshotLocked hands a MsgSnap to a sender goroutine.
func (r *Replica) sendSnapshotLocked(rm *tidekvpb.RaftMessage) {
	idx := rm.GetMessage().GetSnapshot().GetMetadata().GetIndex()
	snap := r.mu.outgoingSnaps[idx]
	delete(r.mu.outgoingSnaps, idx)
	to := rm.GetMessage().GetTo()
	if snap == nil || r.lost.Load() {
		// A lost leader has no data to give (volatile.go).
		if snap != nil {
			snap.Close()
		}
		r.mu.raw.ReportSnapshot(to, raft.SnapshotFailure)
		return
	}
	sd := &tidekvpb.SnapshotData{}
	if err := proto.Unmarshal(rm.GetMessage().GetSnapshot().GetData(), sd); err != nil {
		snap.Close()
		r.mu.raw.ReportSnapshot(to, raft.SnapshotFailure)
		return
	}
	s := r.store
	go func() {
		defer snap.Close()
		s.snapSem <- struct{}{}
		defer func() { <-s.snapSem }()
		start := time.Now()
		path := filepath.Join(s.cfg.SnapshotDir, fmt.Sprintf("send-r%d-i%d-n%d.sst", r.rangeID, idx, rm.GetToNodeId()))
		lo, hi := dataSpan(sd.GetDesc(), sd.GetLayout() == tidekvpb.DataLayout_DATA_LAYOUT_MVCC)
		stats, err := s.eng.WriteSST(snap, lo, hi, path)
		var tr *throttledReader
		if err == nil {
			var f *os.File
			if f, err = os.Open(path); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), s.snapshotSendTimeout(stats.Bytes))
				var src io.Reader = f
				if tr = s.throttleSnapshot(ctx, f); tr != nil {
					src = tr
				}
				err = s.transport.SendSnapshot(ctx, rm, src)
				cancel()
				f.Close()
			}
		}
		os.Remove(path)
		status := &raftpb.Message{Type: raftpb.MsgSnapStatus.Enum(), From: new(to), Reject: new(err != nil)}
		if err != nil {
			log.Printf("range %d: snapshot at index %d to node %d failed: %v", r.rangeID, idx, rm.GetToNodeId(), err)
		} else {
			s.stats.SnapshotsSent.Add(1)
			s.stats.SnapshotBytesSent.Add(uint64(stats.Bytes))
			var throttled time.Duration
			if tr != nil {
				throttled = tr.waited
			}
			log.Printf("range %d: sent snapshot at index %d to node %d: %d keys, %d bytes in %v (throttled %v)",
				r.rangeID, idx, rm.GetToNodeId(), stats.Keys, stats.Bytes, time.Since(start).Round(time.Millisecond), throttled.Round(time.Millisecond))
		}
		r.enqueueMsg(status)
	}()
}

// snapshotSendTimeout bounds one snapshot send: ten minutes, plus the time
// the bandwidth cap needs for the file if every concurrent send shares it.
func (s *Store) snapshotSendTimeout(bytes int64) time.Duration {
	d := 10 * time.Minute
	if rate := s.cfg.SnapshotBytesPerSecond; rate > 0 {
		d += time.Duration(float64(bytes) / float64(rate) * float64(s.cfg.MaxConcurrentSnapshotSends) * float64(time.Second))
	}
	return d
}

// SetSnapshotRate changes the bandwidth cap of outgoing snapshots (bytes/s)
// at runtime; it applies to snapshots already streaming. A store started
// without a cap (SnapshotBytesPerSecond 0) stays uncapped.
func (s *Store) SetSnapshotRate(bytesPerSec float64) {
	if s.snapLimiter != nil && bytesPerSec > 0 {
		s.snapLimiter.setRate(bytesPerSec)
	}
}

// SnapshotRate is the current cap of outgoing snapshots (bytes/s; 0:
// uncapped).
func (s *Store) SnapshotRate() float64 {
	if s.snapLimiter == nil {
		return 0
	}
	return s.snapLimiter.currentRate()
}

// throttleSnapshot wraps an outgoing snapshot's SST under the store's
// bandwidth cap (Config.SnapshotBytesPerSecond), shared by all its sends;
// nil when there is no cap.
func (s *Store) throttleSnapshot(ctx context.Context, sst io.Reader) *throttledReader {
	if s.snapLimiter == nil {
		return nil
	}
	return &throttledReader{r: sst, tb: s.snapLimiter, max: snapshotBurst, now: time.Now, total: &s.stats.SnapshotThrottleNanos,
		wait: func(d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			case <-s.stopper:
				return ErrStopped
			}
		}}
}

// HandleSnapshot receives a snapshot from another node: it stages the SST
// and steps the MsgSnap into the replica (created if needed). A snapshot
// that overlaps other local replicas replaces those the range directory
// shows to be stale (gc.go) and is refused if one is still a member: that
// one must first catch up (apply the split that separated them). Replicas
// frozen into the snapshot's range are no obstacle; they go when it is
// applied (Store.dropMergedInto).
func (s *Store) HandleSnapshot(header *tidekvpb.RaftMessage, data io.Reader) error {
	if err := s.misaddressed(header); err != nil {
		return err
	}
	msg := header.GetMessage()
	sd := &tidekvpb.SnapshotData{}
	if err := proto.Unmarshal(msg.GetSnapshot().GetData(), sd); err != nil {
		return fmt.Errorf("decode snapshot data: %w", err)
	}
	desc := sd.GetDesc()
	if desc.GetRangeId() != header.GetRangeId() {
		return fmt.Errorf("snapshot descriptor is for range %d, header for %d", desc.GetRangeId(), header.GetRangeId())
	}
	if err := s.clearOverlapsFor(desc); err != nil {
		s.stats.SnapshotsRefusedOverlap.Add(1)
		return err
	}
	idx := msg.GetSnapshot().GetMetadata().GetIndex()
	path := filepath.Join(s.cfg.SnapshotDir, fmt.Sprintf("recv-r%d-i%d-%d.sst", desc.GetRangeId(), idx, s.nextProposalID()))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	sum := crc32.New(castagnoli)
	n, err := io.Copy(io.MultiWriter(f, sum), data)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		s.stats.SnapshotsReceived.Add(1)
		s.stats.SnapshotBytesReceived.Add(uint64(n))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return err
	}
	r := s.GetReplica(header.GetRangeId())
	if r != nil && s.dropOlderIncarnation(r, msg.GetTo()) {
		r = nil
	}
	if r == nil {
		if r, err = s.createUninitialized(header.GetRangeId(), msg.GetTo()); err != nil || r == nil {
			os.Remove(path)
			return fmt.Errorf("range %d: cannot create replica %d (removed earlier?)", header.GetRangeId(), msg.GetTo())
		}
	}
	r.mu.Lock()
	if r.mu.destroyed || r.mu.replicaID != msg.GetTo() {
		r.mu.Unlock()
		os.Remove(path)
		return fmt.Errorf("range %d: snapshot for replica %d, local replica differs", header.GetRangeId(), msg.GetTo())
	}
	if old, ok := r.mu.incomingSST[idx]; ok {
		os.Remove(old.path)
	}
	r.mu.incomingSST[idx] = stagedSST{path: path, crc: sum.Sum32()}
	r.learnPeerLocked(msg.GetFrom(), header.GetFromNodeId())
	r.mu.Unlock()
	r.enqueueMsg(msg)
	return nil
}

// snapshotSpanTakenLocked drops an incoming snapshot whose span another
// initialized replica here now holds. HandleSnapshot checked the span when
// the snapshot arrived, but another range may have been given part of it
// since (its own snapshot, applied while this one was still streaming).
// User data keys are shared by every range on the node, so applying this
// one would clear that range's data and put older data in its place,
// under that range's current applied index. Only this goroutine applies
// snapshots and splits, so the check holds until the snapshot is applied
// in this same round. Dropping it is a lost message: the leader sends a
// newer snapshot later, or this replica catches up from its log.
func (r *Replica) snapshotSpanTakenLocked(m *raftpb.Message) bool {
	sd := &tidekvpb.SnapshotData{}
	if err := proto.Unmarshal(m.GetSnapshot().GetData(), sd); err != nil {
		return false // Raft's apply reports it
	}
	over := r.store.overlapping(sd.GetDesc())
	if len(over) == 0 {
		return false
	}
	idx := m.GetSnapshot().GetMetadata().GetIndex()
	if st, ok := r.mu.incomingSST[idx]; ok {
		os.Remove(st.path)
		delete(r.mu.incomingSST, idx)
	}
	od := over[0].desc.Load()
	r.store.stats.SnapshotsRefusedOverlap.Add(1)
	log.Printf("range %d: snapshot at index %d dropped: range %d (generation %d) took part of its span on this node while it arrived",
		r.rangeID, idx, od.GetRangeId(), od.GetGeneration())
	return true
}

// applySnapshotLocked installs a snapshot Raft accepted: replace the range's
// data with the staged SST and reset its Raft log and applied state.
// takeStagedSSTLocked returns the verified SST staged for the snapshot at
// idx and drops those staged for it and earlier ones.
func (r *Replica) takeStagedSSTLocked(idx uint64) (string, error) {
	staged, ok := r.mu.incomingSST[idx]
	if !ok {
		return "", fmt.Errorf("no staged SST for snapshot at index %d", idx)
	}
	delete(r.mu.incomingSST, idx)
	for i, st := range r.mu.incomingSST {
		if i <= idx {
			os.Remove(st.path)
			delete(r.mu.incomingSST, i)
		}
	}
	// The file was checked as it arrived; check it again as it is about to
	// become the range's data (a disk can corrupt what it was given).
	return staged.path, staged.verify()
}

func (r *Replica) applySnapshotLocked(snap *raftpb.Snapshot) error {
	idx := snap.GetMetadata().GetIndex()
	path, err := r.takeStagedSSTLocked(idx)
	if err != nil {
		return err
	}
	sd := &tidekvpb.SnapshotData{}
	if err := proto.Unmarshal(snap.GetData(), sd); err != nil {
		return err
	}
	desc := sd.GetDesc()
	eng := r.store.eng
	// Data first, then the state that claims it. A crash in between leaves
	// the old applied state and log over cleared data, so the clearing
	// batch also marks the data incomplete: at the next start the replica
	// is lost (volatile.go), keeping its log and votes but serving nothing
	// until its range replaces it. (Without the mark, a leader whose log
	// still reaches back far enough would append to it instead of sending
	// a snapshot, and it would serve without the data it had applied.)
	// The data may change layout (whole version histories travel): reads
	// wait until it is in place. Both layouts' spans are cleared, of the
	// old bounds and the new, so nothing of another layout stays beside it.
	versioned := sd.GetLayout() == tidekvpb.DataLayout_DATA_LAYOUT_MVCC
	defer r.beginLayoutChangeLocked(versioned)()
	b := eng.NewBatch()
	if old := r.desc.Load(); old != nil {
		_ = clearRangeData(b, old)
	}
	_ = clearRangeData(b, desc)
	_ = b.Set(keys.DataIncompleteKey(r.rangeID), nil)
	err = b.Commit(true)
	b.Close()
	if err != nil {
		return err
	}
	lo, hi := dataSpan(desc, versioned)
	if err := eng.IngestSST(path, lo, hi); err != nil {
		return err
	}
	os.Remove(path)
	b = eng.NewBatch()
	defer b.Close()
	llo, lhi := keys.LogSpan(r.rangeID)
	_ = b.DeleteRange(llo, lhi)
	_ = b.Delete(keys.DataIncompleteKey(r.rangeID))
	st := &tidekvpb.ReplicaState{
		AppliedIndex:   idx,
		Desc:           desc,
		ConfState:      snap.GetMetadata().GetConfState(),
		TruncatedIndex: idx,
		TruncatedTerm:  snap.GetMetadata().GetTerm(),
		Layout:         sd.GetLayout(),
		GcThreshold:    sd.GetGcThreshold(),
		MayHoldIntents: sd.GetMayHoldIntents(),
	}
	// A sender that does not know the bound (an older binary) leaves it
	// unknown here too.
	recordVersionBound(st, versionBound{ts: commandTimestamp(sd.GetVersionBound()), known: sd.GetVersionBoundKnown()})
	if err := putProto(b, keys.ReplicaStateKey(r.rangeID), st); err != nil {
		return err
	}
	if err := b.Commit(true); err != nil {
		return err
	}
	if err := r.mu.storage.ApplySnapshot(snap); err != nil {
		return err
	}
	r.mu.state = st
	r.publishGCThresholdLocked()
	r.mayHoldIntents.Store(st.GetMayHoldIntents())
	r.loadVersionBoundLocked()
	r.setDescLocked(desc)
	r.applied.Store(idx)
	r.lost.Store(false)
	r.snapshots.Add(1)
	r.store.rebuildIndex()
	log.Printf("range %d: applied snapshot at index %d: %s", r.rangeID, idx, FormatReplicas(desc))
	return nil
}
