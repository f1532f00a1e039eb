package raftstore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// Log versions gate changes to what a Raft entry may contain. Every
// replica of a range applies the same entries, so a binary must not
// propose an entry some replica's binary would apply differently (an older
// binary ignores RaftCommand.batch and would apply a shared entry as
// empty). The cluster's log version lives in the meta range; the meta
// leaseholder raises it once every node that can hold replicas reports a
// binary that supports the next one, and nodes learn it from their
// heartbeats. A node proposes at the version it has learnt, never higher.
const (
	// LogVersionBase: one write or CAS per entry, no write guards.
	LogVersionBase uint32 = 1
	// LogVersionShared: writes and CAS commands share entries
	// (RaftCommand.batch) and writes may carry a guard (WriteGuard).
	LogVersionShared uint32 = 2
	// LogVersionDirectory: the meta range's directory ignores a range
	// report that an overlapping newer descriptor supersedes (the late
	// report of a range merged away), and every report clears the older
	// descriptors it overlaps even when its own is already stored.
	LogVersionDirectory uint32 = 3
	// LogVersionMVCC: writes and CAS commands carry the HLC timestamp
	// their leaseholder chose (RaftCommand.timestamp), and MigrateLayout
	// moves a range's data to the versioned layout (layout.go), where they
	// apply as versions. An older binary would ignore both.
	LogVersionMVCC uint32 = 4
	// LogVersionGC: GC entries (GCCommand, mvccgc.go) raise a range's GC
	// threshold and remove old versions. A binary at 4 would apply one as
	// an empty write: its replica would keep the versions the others
	// removed, and its threshold, so it would serve reads the others
	// refuse (and answer them from versions they no longer have).
	LogVersionGC uint32 = 5
	// LogVersionExpiry: writes and CAS commands may set, keep or change
	// a value's expiry (LogWrite.expires_at, keep_ttl, expire), which an
	// older binary would ignore, writing the value without it or an
	// EXPIRE as an empty value. It came with GC, in the same version.
	LogVersionExpiry = LogVersionGC
	// LogVersionKeySpaces: the meta range applies MetaCommand
	// create_keyspace (a key space in its catalogue). A binary at 5 would
	// refuse the entry, and its copy of the meta range would lack the key
	// space the others hold.
	LogVersionKeySpaces uint32 = 6
	// LogVersionTxn: transactions (RaftCommand.txn: intents, records,
	// pushes, resolution; txnapply.go). A binary at 6 would apply a
	// TxnCommand as an empty write, and its replica would lack the
	// intents and records the others hold.
	LogVersionTxn uint32 = 7
	// LogVersionOnePhase: a transaction within one range commits in one
	// command (TxnCommand ONE_PHASE, txnonephase.go), and a final record
	// whose intents are resolved is removed (FORGET). A binary at 7 would
	// refuse either at apply while the others wrote its values or removed
	// the record.
	LogVersionOnePhase uint32 = 8
	// LogVersionTxnExpiry: a transaction's puts may carry an expiry
	// (LogWrite.expires_at in WRITE_INTENTS and ONE_PHASE), which a binary
	// at 7 refuses at apply. It came with the one-phase commit.
	LogVersionTxnExpiry = LogVersionOnePhase
	// LogVersionResetLost: a memory range whose voters all lost its data
	// with a restart empties it at a ResetLostCommand (volatile.go). A
	// binary at 8 would apply the command as an empty write, and its
	// replica would keep data the others dropped.
	LogVersionResetLost uint32 = 9
	// LogVersionControllerState: the meta range applies MetaCommand
	// put_controller_state (the elasticity controller's state, resumed
	// by the next meta leaseholder). A binary at 9 would refuse the
	// entry, and its copy of the meta range would lack the state the
	// others hold.
	LogVersionControllerState uint32 = 10
	// LogVersionProtectedTS: the meta range applies MetaCommand
	// protect_timestamp and release_protected_timestamp (timestamps MVCC
	// GC keeps readable while a backup reads at them) and
	// publish_keyspaces (a restore's staged key spaces take their names).
	// A binary at 10 would refuse the entries, and its copy of the meta
	// range would lack the protection or the names the others hold.
	LogVersionProtectedTS uint32 = 11
	// LogVersionIncrement: a CAS command may add to a decimal integer
	// value instead of comparing (LogCompareAndSet.increment, Redis INCR).
	// A binary at 11 would apply it as a CAS expecting the key absent and
	// write an empty value where the others wrote the sum.
	LogVersionIncrement uint32 = 12
	// LogVersionSetPositions: no new entry contents; the Redis front end
	// may write the layouts an older binary's front end breaks or
	// misreads (internal/resp): a set's member positions, which its writes
	// would leave out of step (an SADD giving no position, an SREM
	// leaving a hole) so that later draws fail, and a sorted set's start
	// hint, which makes its metadata a string to an older binary. Raised
	// like the others once every node's binary has the front end that
	// keeps them; below 13 the front end writes sets and sorted sets as
	// a binary at 12 does.
	LogVersionSetPositions uint32 = 13
	// LogVersionHeartbeatRefresh: a HEARTBEAT may only refresh a record
	// (TxnCommand.refresh), failing where the record is missing. A binary
	// at 13 would ignore the field and create the record PENDING where
	// the others left it missing: the record of a transaction cleaned up
	// already, which nothing would ever remove.
	LogVersionHeartbeatRefresh uint32 = 14
	// LatestLogVersion is the newest version this binary applies.
	LatestLogVersion = LogVersionHeartbeatRefresh
)

// ErrLogVersion: a request needs a log version the cluster has not reached
// yet (some node still runs an older binary).
var ErrLogVersion = errors.New("the cluster has not finished upgrading")

// LogVersion is the log version this store proposes at.
func (s *Store) LogVersion() uint32 { return s.logVersion.Load() }

// RaiseLogVersion moves the store to version v if that is higher than its
// own, and persists it so that a restart starts there and an older binary
// refuses the data directory. It refuses a version this binary does not
// apply (a newer binary raised the cluster past it).
func (s *Store) RaiseLogVersion(v uint32) error {
	if v > s.cfg.MaxLogVersion {
		return fmt.Errorf("the cluster runs at log version %d, newer than this binary's %d: run a newer binary", v, s.cfg.MaxLogVersion)
	}
	s.versionMu.Lock()
	defer s.versionMu.Unlock()
	if v <= s.logVersion.Load() {
		return nil
	}
	b := s.eng.NewBatch()
	defer b.Close()
	if err := WriteLogVersion(b, v); err != nil {
		return err
	}
	if err := b.Commit(true); err != nil {
		return err
	}
	s.logVersion.Store(v)
	return nil
}

// WriteLogVersion persists v as the version a store on this engine starts
// at (NewStore refuses one its binary does not apply). A joining node
// writes its cluster's with its identity, before its store exists.
func WriteLogVersion(w storage.Writer, v uint32) error {
	return w.Set(keys.LogVersionKey, binary.BigEndian.AppendUint32(nil, v))
}

// loadLogVersion reads the persisted version (LogVersionBase if none).
func (s *Store) loadLogVersion() error {
	v, err := ReadLogVersion(s.eng, keys.LogVersionKey)
	if err != nil {
		return err
	}
	if v > s.cfg.MaxLogVersion {
		return fmt.Errorf("this data directory is at log version %d, newer than this binary's %d: run the newer binary it was written by", v, s.cfg.MaxLogVersion)
	}
	s.logVersion.Store(max(v, s.cfg.InitialLogVersion))
	return nil
}

// ReadLogVersion reads a log version stored under key (LogVersionBase if
// none is).
func ReadLogVersion(rd storage.Reader, key []byte) (uint32, error) {
	return decodeLogVersion(rd.Get(key))
}

func decodeLogVersion(b []byte, ok bool, err error) (uint32, error) {
	if err != nil || !ok {
		return LogVersionBase, err
	}
	if len(b) != 4 {
		return 0, fmt.Errorf("log version record of %d bytes, want 4", len(b))
	}
	return binary.BigEndian.Uint32(b), nil
}

// NeedVersion refuses a request that needs log version v before the
// cluster has reached it (ErrLogVersion, with one sentence).
func (s *Store) NeedVersion(v uint32, what string) error { return s.needVersion(v, what) }

func (s *Store) needVersion(v uint32, what string) error {
	if s.logVersion.Load() >= v {
		return nil
	}
	return fmt.Errorf("%w: %s needs log version %d on every node, and this node has learnt %d (a node still runs an older binary?)", ErrLogVersion, what, v, s.logVersion.Load())
}
