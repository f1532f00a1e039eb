package keys

import (
	"bytes"
	"encoding/binary"
)

// Engine key prefixes. Every key in a node's engine starts with one of these
// bytes, so the classes never interleave and each can be cleared as a span.
const (
	prefixRangeLocal byte = 0x01 // per-replica Raft and applied state
	prefixNodeLocal  byte = 0x02 // node identity and caches
	prefixMeta       byte = 0x03 // data of the meta range
	prefixUser       byte = 0x04 // data of user ranges, unversioned
	prefixEnd        byte = 0x05 // bounds the unversioned user data
	// Versioned user data (internal/mvcc), apart from 0x04 so that a key
	// an unversioned range left can never be read as a version.
	prefixVersioned    byte = 0x06
	prefixVersionedEnd byte = 0x07
)

// Suffixes of range-local keys.
const (
	suffixHardState    byte = 'h'
	suffixReplicaState byte = 's'
	suffixLog          byte = 'l'
	suffixTombstone    byte = 't'
	suffixIncomplete   byte = 'i'
)

// MetaRangeID is the range that holds cluster metadata. It is bootstrapped
// with the cluster and never splits.
const MetaRangeID uint64 = 1

// FirstUserRangeID is the range that initially covers the whole user key space.
const FirstUserRangeID uint64 = 2

func rangeLocalPrefix(rangeID uint64) []byte {
	return appendRangeLocalPrefix(rangeLocalKeyBuf(), rangeID)
}

// rangeLocalKeyBuf has room for the longest range-local key (a log key).
func rangeLocalKeyBuf() []byte { return make([]byte, 0, 1+8+1+8) }

func appendRangeLocalPrefix(dst []byte, rangeID uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, prefixRangeLocal), rangeID)
}

// RangeLocalSpan covers every range-local key of a range.
func RangeLocalSpan(rangeID uint64) (lo, hi []byte) {
	return rangeLocalPrefix(rangeID), rangeLocalPrefix(rangeID + 1)
}

// HardStateKey holds a replica's Raft HardState.
func HardStateKey(rangeID uint64) []byte {
	return AppendHardStateKey(rangeLocalKeyBuf(), rangeID)
}

// AppendHardStateKey appends HardStateKey(rangeID) to dst: the log writer
// builds its keys in one buffer.
func AppendHardStateKey(dst []byte, rangeID uint64) []byte {
	return append(appendRangeLocalPrefix(dst, rangeID), suffixHardState)
}

// ReplicaStateKey holds a replica's applied state.
func ReplicaStateKey(rangeID uint64) []byte {
	return AppendReplicaStateKey(rangeLocalKeyBuf(), rangeID)
}

// AppendReplicaStateKey appends ReplicaStateKey(rangeID) to dst.
func AppendReplicaStateKey(dst []byte, rangeID uint64) []byte {
	return append(appendRangeLocalPrefix(dst, rangeID), suffixReplicaState)
}

// TombstoneKey marks a destroyed replica of the range.
func TombstoneKey(rangeID uint64) []byte {
	return append(rangeLocalPrefix(rangeID), suffixTombstone)
}

// DataIncompleteKey marks a replica whose data a snapshot is replacing:
// written with the clearing of the old data, deleted with the state that
// claims the new. Found at a start, it says the node stopped in between.
func DataIncompleteKey(rangeID uint64) []byte {
	return append(rangeLocalPrefix(rangeID), suffixIncomplete)
}

// LogKey holds the Raft log entry at index.
func LogKey(rangeID, index uint64) []byte {
	return AppendLogKey(rangeLocalKeyBuf(), rangeID, index)
}

// AppendLogKey appends LogKey(rangeID, index) to dst.
func AppendLogKey(dst []byte, rangeID, index uint64) []byte {
	return binary.BigEndian.AppendUint64(append(appendRangeLocalPrefix(dst, rangeID), suffixLog), index)
}

// LogSpan covers all log entries of a range.
func LogSpan(rangeID uint64) (lo, hi []byte) {
	p := append(rangeLocalPrefix(rangeID), suffixLog)
	return p, append(rangeLocalPrefix(rangeID), suffixLog+1)
}

// RangeIDFromLocalKey returns the range ID of a range-local key.
func RangeIDFromLocalKey(key []byte) (uint64, bool) {
	if len(key) < 9 || key[0] != prefixRangeLocal {
		return 0, false
	}
	return binary.BigEndian.Uint64(key[1:9]), true
}

// ReplicaStateSpan covers the ReplicaState keys of all ranges; iterating it
// finds every replica a node holds. Keys of other suffixes are interleaved,
// so callers filter by IsReplicaStateKey.
func ReplicaStateSpan() (lo, hi []byte) {
	return []byte{prefixRangeLocal}, []byte{prefixNodeLocal}
}

// IsReplicaStateKey reports whether key is some range's ReplicaStateKey.
func IsReplicaStateKey(key []byte) bool {
	return len(key) == 10 && key[0] == prefixRangeLocal && key[9] == suffixReplicaState
}

// NodeIdentKey holds the node's cluster and node IDs.
var NodeIdentKey = []byte{prefixNodeLocal, 'i'}

// LogVersionKey holds the highest log version the node has learnt
// (raftstore/logversion.go).
var LogVersionKey = []byte{prefixNodeLocal, 'v'}

// NodeDirectoryKey caches the last known addresses of all nodes, so a
// restarted node can reach its peers before anyone tells it.
var NodeDirectoryKey = []byte{prefixNodeLocal, 'd'}

// GeoGatewayKey marks a node that has run a geo data centre: the geo
// mode keeps its copy in memory only, so a restarted gateway must not
// rejoin (server/geo.go).
var GeoGatewayKey = []byte{prefixNodeLocal, 'g'}

// NodeMemKeySpaceKey records that this node keeps key space id's data in a
// memory engine (its value: the engine's index), so that after a restart
// the node knows that data is gone (internal/keyspaces/mem.go).
func NodeMemKeySpaceKey(id uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{prefixNodeLocal, 'm'}, id)
}

// NodeMemKeySpaceSpan covers every NodeMemKeySpaceKey.
func NodeMemKeySpaceSpan() (lo, hi []byte) {
	return []byte{prefixNodeLocal, 'm'}, []byte{prefixNodeLocal, 'm' + 1}
}

// MemKeySpaceOf returns the key space of a NodeMemKeySpaceKey.
func MemKeySpaceOf(key []byte) (uint32, bool) {
	if len(key) != 6 || key[0] != prefixNodeLocal || key[1] != 'm' {
		return 0, false
	}
	return binary.BigEndian.Uint32(key[2:]), true
}

// DataKey maps a key of the given range's key space to its engine key.
func DataKey(rangeID uint64, key []byte) []byte {
	return AppendDataKey(make([]byte, 0, 1+len(key)), rangeID, key)
}

// AppendDataKey appends the engine data key of key to dst, so a caller can
// reuse one buffer across reads.
func AppendDataKey(dst []byte, rangeID uint64, key []byte) []byte {
	if rangeID == MetaRangeID {
		dst = append(dst, prefixMeta)
	} else {
		dst = append(dst, prefixUser)
	}
	return append(dst, key...)
}

// UserKey strips the prefix from an engine data key or a VersionedKey.
func UserKey(engineKey []byte) []byte { return engineKey[1:] }

// DataSpan is the engine span holding the data of a range with bounds
// [start, end) (empty end: unbounded).
func DataSpan(rangeID uint64, start, end []byte) (lo, hi []byte) {
	lo = DataKey(rangeID, start)
	if len(end) == 0 {
		if rangeID == MetaRangeID {
			return lo, []byte{prefixUser}
		}
		return lo, []byte{prefixEnd}
	}
	return lo, DataKey(rangeID, end)
}

// VersionedKey is the key internal/mvcc versions for user key key of a
// range on the versioned layout: mvcc adds the timestamp and escaping.
func VersionedKey(key []byte) []byte {
	return AppendVersionedKey(make([]byte, 0, 1+len(key)), key)
}

// AppendVersionedKey appends VersionedKey(key) to dst.
func AppendVersionedKey(dst, key []byte) []byte {
	return append(append(dst, prefixVersioned), key...)
}

// VersionedSpan is the span of mvcc keys (VersionedKey) holding the
// versioned data of a range with bounds [start, end) (empty end:
// unbounded); mvcc.EngineSpan turns it into engine bounds.
func VersionedSpan(start, end []byte) (lo, hi []byte) {
	if len(end) == 0 {
		return VersionedKey(start), []byte{prefixVersionedEnd}
	}
	return VersionedKey(start), VersionedKey(end)
}

// Meta-range key space (relative keys; DataKey adds the prefix).
var (
	metaRangePrefix   = []byte("range/")
	metaNodePrefix    = []byte("node/")
	MetaNextNodeIDKey = []byte("counter/node")
	MetaNextRangeKey  = []byte("counter/range")
	MetaClusterIDKey  = []byte("cluster-id")
	// MetaLogVersionKey holds the cluster's log version.
	MetaLogVersionKey = []byte("log-version")
	metaSettingPrefix = []byte("setting/")
	// MetaNextKeySpaceKey is the next key space number to allocate.
	MetaNextKeySpaceKey = []byte("counter/keyspace")
	metaKeySpacePrefix  = []byte("keyspace/")
	// MetaControllerStateKey holds the elasticity controller's state
	// (control.State, docs/design.md).
	MetaControllerStateKey = []byte("controller-state")
	// MetaNextProtectedKey is the next protected timestamp's id.
	MetaNextProtectedKey = []byte("counter/protected")
	metaProtectedPrefix  = []byte("protected/")
)

// MetaProtectedKey is where the meta range stores protected timestamp id.
func MetaProtectedKey(id uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), metaProtectedPrefix...), id)
}

// MetaProtectedSpan covers all protected timestamps.
func MetaProtectedSpan() (lo, hi []byte) { return prefixSpan(metaProtectedPrefix) }

// MetaKeySpaceKey is where the meta range stores key space id's record.
func MetaKeySpaceKey(id uint32) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(nil), metaKeySpacePrefix...), id)
}

// MetaKeySpaceSpan covers all key space records.
func MetaKeySpaceSpan() (lo, hi []byte) { return prefixSpan(metaKeySpacePrefix) }

// MetaSettingKey is where the meta range stores a cluster setting.
func MetaSettingKey(name string) []byte {
	return append(append([]byte(nil), metaSettingPrefix...), name...)
}

// MetaSettingSpan covers all cluster settings.
func MetaSettingSpan() (lo, hi []byte) { return prefixSpan(metaSettingPrefix) }

// MetaRangeKey is where the meta range stores a range's descriptor.
func MetaRangeKey(rangeID uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), metaRangePrefix...), rangeID)
}

// MetaRangeSpan covers all stored range descriptors.
func MetaRangeSpan() (lo, hi []byte) { return prefixSpan(metaRangePrefix) }

// MetaNodeKey is where the meta range stores a node's record.
func MetaNodeKey(nodeID uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(nil), metaNodePrefix...), nodeID)
}

// MetaNodeSpan covers all node records.
func MetaNodeSpan() (lo, hi []byte) { return prefixSpan(metaNodePrefix) }

func prefixSpan(p []byte) (lo, hi []byte) {
	hi = append([]byte(nil), p...)
	hi[len(hi)-1]++
	return p, hi
}

// Contains reports whether key lies in [start, end); an empty end is unbounded.
func Contains(start, end, key []byte) bool {
	return bytes.Compare(key, start) >= 0 && (len(end) == 0 || bytes.Compare(key, end) < 0)
}

// Overlaps reports whether [s1, e1) and [s2, e2) intersect (empty end: unbounded).
func Overlaps(s1, e1, s2, e2 []byte) bool {
	return (len(e2) == 0 || bytes.Compare(s1, e2) < 0) && (len(e1) == 0 || bytes.Compare(s2, e1) < 0)
}
