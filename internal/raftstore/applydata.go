package raftstore

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"slices"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/mvcc"
)

// rangeData is a range's user data as an apply batch sees it, in the
// range's layout. Write and CAS commands evaluate against it; engine
// errors are fatal, as for any apply step.
type rangeData interface {
	// get reads key's live value: one that has not expired at the
	// command's timestamp.
	get(key []byte) (value []byte, found bool)
	put(key, value []byte, t ttl)
	del(key []byte)
	// expire rewrites key's live value to expire at expiresAt (0: never)
	// and reports whether it had one.
	expire(key []byte, expiresAt int64) bool
	// clear deletes every key in [start, end), or nothing when one holds
	// a transaction's intent (*IntentError).
	clear(start, end []byte) error
}

// ttl is what a put does with its key's expiry.
type ttl struct {
	expiresAt int64 // HLC wall nanoseconds; 0: the value does not expire
	keep      bool  // keep the live value's expiry instead
}

// dataLocked returns the range's data for applying cmd. A versioned range
// refuses a command without a timestamp (proposed by a node that had not
// learnt log version 4 before the migration applied), and an unversioned
// one a command that uses expiry (proposed while its migration was on its
// way), the same way on every replica.
func (r *Replica) dataLocked(ab *applyBatch, cmd *tidekvpb.RaftCommand) (rangeData, error) {
	if !isMVCC(r.mu.state) {
		if usesExpiry(cmd) {
			return nil, fmt.Errorf("%w: range %d has not moved to the versioned layout, which expiry needs: retry", ErrLogVersion, r.rangeID)
		}
		return unversionedData{ab: ab, r: r}, nil
	}
	ts := commandTimestamp(cmd.GetTimestamp())
	if ts.IsZero() {
		return nil, fmt.Errorf("%w: range %d holds versioned data and the write carries no timestamp (its proposer had not learnt log version %d): retry",
			ErrLogVersion, r.rangeID, LogVersionMVCC)
	}
	if thr := gcThresholdOf(r.mu.state); !thr.Less(ts) && !thr.IsZero() {
		ts = thr.Next() // see mvccgc.go
	}
	// In the batch, not boxed anew: each command's data is done with
	// before the next command's is made.
	ab.data = versionedData{ab: ab, r: r, ts: ts, aboveBound: r.mu.versionBound.below(ts)}
	return &ab.data, nil
}

func (r *Replica) mustWrite(err error) {
	if err != nil {
		log.Fatalf("range %d: write during apply: %v", r.rangeID, err)
	}
}

// unversionedData: one engine key per user key (keys.DataKey).
type unversionedData struct {
	ab *applyBatch
	r  *Replica
}

func (u unversionedData) key(k []byte) []byte { return keys.DataKey(u.r.rangeID, k) }

// Commands that set an expiry never reach it (dataLocked), so its values
// never expire and keeping a TTL is a plain put.
func (u unversionedData) get(k []byte) ([]byte, bool)   { return u.ab.mustGet(u.r, u.key(k)) }
func (u unversionedData) put(k, v []byte, _ ttl)        { u.r.mustWrite(u.ab.set(u.key(k), v)) }
func (u unversionedData) del(k []byte)                  { u.r.mustWrite(u.ab.del(u.key(k))) }
func (u unversionedData) expire(k []byte, _ int64) bool { _, found := u.get(k); return found }
func (u unversionedData) clear(start, end []byte) error {
	u.ab.clearSpan(u.r, u.key(start), u.key(end))
	return nil
}

// versionedData: mvcc versions of keys.VersionedKey, written at the
// command's timestamp ts or, when the key already has a version at or
// above it, just after that version: a write proposed earlier may apply
// later, and "latest" must be what was applied last (a blind write is
// never too old to land, docs/transactions.md "Write timestamp"). Values
// expire as judged at ts's wall time, whatever timestamp the version gets.
type versionedData struct {
	ab *applyBatch
	r  *Replica
	ts hlc.Timestamp
	// aboveBound: when the command began, every version of the range was
	// below ts (versionbound.go), so only its own writes can be newer.
	aboveBound bool
}

// newest is key's newest version as the batch sees it.
func (v versionedData) newest(k []byte) mvcc.Version {
	vk := keys.VersionedKey(k)
	if ver, ok := v.ab.versions[string(vk)]; ok {
		return ver
	}
	if at, ok := v.ab.migrated[v.r.rangeID]; ok {
		// Migrated in this batch: the versions are not in the engine
		// yet, and the unversioned keys as the batch sees them are.
		val, found := v.ab.mustGet(v.r, keys.DataKey(v.r.rangeID, k))
		if !found {
			return mvcc.Version{}
		}
		return mvcc.Version{Timestamp: at, Value: val}
	}
	ver, err := mvcc.Get(v.ab.eng, vk, hlc.MaxTimestamp)
	if err != nil {
		log.Fatalf("range %d: read during apply: %v", v.r.rangeID, err)
	}
	return ver
}

func (v versionedData) get(k []byte) ([]byte, bool) {
	ver := v.newest(k)
	if !ver.LiveAt(v.ts.WallTime) {
		return nil, false
	}
	return ver.Value, true
}

func (v versionedData) put(k, val []byte, t ttl) {
	exp := t.expiresAt
	if t.keep {
		if cur := v.newest(k); cur.LiveAt(v.ts.WallTime) {
			exp = cur.ExpiresAt
		}
	}
	v.write(k, val, exp, false)
}

func (v versionedData) del(k []byte) { v.write(k, nil, 0, true) }

// expire writes the live value again with the new expiry: a new version,
// so it orders with other writes of the key like any put.
func (v versionedData) expire(k []byte, expiresAt int64) bool {
	cur := v.newest(k)
	if !cur.LiveAt(v.ts.WallTime) {
		return false
	}
	v.write(k, cur.Value, expiresAt, false)
	return true
}

func (v versionedData) write(k, val []byte, expiresAt int64, tombstone bool) {
	// Above the range's version bound a put cannot be too old, and needs
	// no read; a delete still reads whether there is anything to delete.
	// vk is the batch's buffer: everything below copies it.
	vk := keys.AppendVersionedKey(slices.Grow(v.ab.vk[:0], 1+len(k)), k)
	v.ab.vk = vk
	cur, inBatch := v.ab.versions[string(vk)]
	if !inBatch && (tombstone || !v.aboveBound) {
		cur = v.newest(k)
	}
	if tombstone && !cur.Found() {
		return // nothing to delete: a tombstone would change no read (an expired value gets one, which GC can use)
	}
	ts := v.ts
	if !cur.Timestamp.Less(ts) {
		ts = cur.Timestamp.Next()
	}
	v.r.mu.versionBound.note(ts)
	if tombstone {
		v.r.mustWrite(mvcc.Delete(v.ab.b, vk, ts))
	} else {
		v.r.mustWrite(mvcc.PutExpiring(v.ab.b, vk, ts, val, expiresAt))
	}
	v.ab.versions[string(vk)] = mvcc.Version{Timestamp: ts, Value: val, Tombstone: tombstone, ExpiresAt: expiresAt}
}

// clear deletes the live keys of [start, end) as the batch sees them:
// those in the engine (or, migrated in this batch, its unversioned keys)
// and those written earlier in the batch.
func (v versionedData) clear(start, end []byte) error {
	var ks [][]byte
	if _, ok := v.ab.migrated[v.r.rangeID]; ok {
		err := v.ab.eachKey(keys.DataKey(v.r.rangeID, start), keys.DataKey(v.r.rangeID, end), func(k, _ []byte) error {
			ks = append(ks, slices.Clone(keys.UserKey(k)))
			return nil
		})
		v.r.mustWrite(err)
	}
	lo, hi := keys.VersionedKey(start), keys.VersionedKey(end)
	for from := lo; from != nil; {
		kvs, resume, err := mvcc.ScanNewest(v.ab.eng, from, hi, v.ts.WallTime, 1024, 1<<20)
		var ie *mvcc.IntentError
		if errors.As(err, &ie) {
			return v.r.foreignIntent(keys.UserKey(ie.Key), mvcc.Version{Timestamp: ie.Timestamp, Txn: ie.Txn}, nil)
		}
		v.r.mustWrite(err)
		for _, kv := range kvs {
			ks = append(ks, keys.UserKey(kv.Key))
		}
		from = resume
	}
	for vk := range v.ab.versions {
		if bytes.Compare([]byte(vk), lo) >= 0 && bytes.Compare([]byte(vk), hi) < 0 {
			ks = append(ks, keys.UserKey([]byte(vk)))
		}
	}
	for _, k := range ks {
		v.del(k) // a key listed twice is a tombstone the second time
	}
	return nil
}
