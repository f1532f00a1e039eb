package raftstore

import (
	"encoding/binary"

	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// The meta range's state machine: node records, ID counters and the range
// directory. Range descriptors arrive from each range's leaseholder; the
// directory keeps, per range ID, the newest generation, and drops older
// descriptors a newer one overlaps (a split's parent before the split).

func (r *Replica) applyMetaLocked(ab *applyBatch, mc *tidekvpb.MetaCommand) (applyResult, error) {
	if r.rangeID != keys.MetaRangeID {
		return applyResult{err: ErrInvalidRequest}, nil
	}
	mk := func(k []byte) []byte { return keys.DataKey(keys.MetaRangeID, k) }
	switch {
	case mc.GetAddNode() != nil:
		id, err := nextCounter(ab, mk(keys.MetaNextNodeIDKey))
		if err != nil {
			return applyResult{}, err
		}
		n := proto.Clone(mc.GetAddNode()).(*tidekvpb.NodeDescriptor)
		n.NodeId = id
		b, _ := proto.Marshal(n)
		return applyResult{metaID: id}, ab.set(mk(keys.MetaNodeKey(id)), b)
	case mc.GetUpdateNode() != nil:
		n := mc.GetUpdateNode()
		b, _ := proto.Marshal(n)
		return applyResult{}, ab.set(mk(keys.MetaNodeKey(n.GetNodeId())), b)
	case mc.GetSetSetting() != nil:
		st := mc.GetSetSetting()
		if st.GetValue() == "" {
			return applyResult{}, ab.del(mk(keys.MetaSettingKey(st.GetKey())))
		}
		b, _ := proto.Marshal(st)
		return applyResult{}, ab.set(mk(keys.MetaSettingKey(st.GetKey())), b)
	case mc.GetRaiseLogVersion() != 0:
		key := mk(keys.MetaLogVersionKey)
		cur, err := decodeLogVersion(ab.get(key))
		if err != nil || mc.GetRaiseLogVersion() <= cur {
			return applyResult{}, err
		}
		return applyResult{}, ab.set(key, binary.BigEndian.AppendUint32(nil, mc.GetRaiseLogVersion()))
	case mc.GetCreateKeyspace() != nil:
		// The creation reads the catalogue, so pending writes are
		// flushed first.
		if err := r.flushAppliedLocked(ab); err != nil {
			return applyResult{}, err
		}
		return applyCreateKeySpace(ab, mc.GetCreateKeyspace())
	case mc.GetPutControllerState() != nil:
		return applyResult{}, ab.set(mk(keys.MetaControllerStateKey), mc.GetPutControllerState())
	case mc.GetProtectTimestamp() != nil:
		return applyProtect(ab, mc.GetProtectTimestamp())
	case mc.GetReleaseProtectedTimestamp() != 0:
		return applyResult{}, ab.del(mk(keys.MetaProtectedKey(mc.GetReleaseProtectedTimestamp())))
	case len(mc.GetPublishKeyspaces()) > 0:
		if err := r.flushAppliedLocked(ab); err != nil {
			return applyResult{}, err
		}
		return applyPublishKeySpaces(ab, mc.GetPublishKeyspaces())
	case mc.GetAllocRangeId():
		id, err := nextCounter(ab, mk(keys.MetaNextRangeKey))
		return applyResult{metaID: id}, err
	case mc.GetUpdateRange() != nil:
		// The update iterates the directory, so pending writes are flushed
		// first.
		if err := r.flushAppliedLocked(ab); err != nil {
			return applyResult{}, err
		}
		return applyResult{}, applyRangeUpdate(ab, mc.GetUpdateRange())
	}
	return applyResult{err: ErrInvalidRequest}, nil
}

// applyCreateKeySpace stores a new key space under the next number, unless
// one of that name exists (result 0): two creations of one name racing
// through different proposers end with one key space, the same on every
// replica.
func applyCreateKeySpace(ab *applyBatch, rec *tidekvpb.KeySpaceRecord) (applyResult, error) {
	all, err := ReadMetaKeySpaces(ab.eng)
	if err != nil {
		return applyResult{}, err
	}
	for _, o := range all {
		if o.GetName() == rec.GetName() {
			return applyResult{}, nil
		}
	}
	id, err := nextCounter(ab, keys.DataKey(keys.MetaRangeID, keys.MetaNextKeySpaceKey))
	if err != nil {
		return applyResult{}, err
	}
	stored := proto.Clone(rec).(*tidekvpb.KeySpaceRecord)
	stored.Id = uint32(id)
	b, _ := proto.Marshal(stored)
	return applyResult{metaID: id}, ab.set(keys.DataKey(keys.MetaRangeID, keys.MetaKeySpaceKey(stored.Id)), b)
}

// applyPublishKeySpaces renames each staged key space to its name, all or
// none (result 1: done; 0: one is not staged under that name, or its name
// is taken).
func applyPublishKeySpaces(ab *applyBatch, pub []*tidekvpb.KeySpaceRecord) (applyResult, error) {
	all, err := ReadMetaKeySpaces(ab.eng)
	if err != nil {
		return applyResult{}, err
	}
	byID, names := map[uint32]*tidekvpb.KeySpaceRecord{}, map[string]bool{}
	for _, o := range all {
		byID[o.GetId()], names[o.GetName()] = o, true
	}
	for _, p := range pub {
		if o := byID[p.GetId()]; o == nil || o.GetName() != keyspace.StagingName(p.GetName()) || names[p.GetName()] {
			return applyResult{}, nil
		}
		names[p.GetName()] = true
	}
	for _, p := range pub {
		rec := proto.Clone(byID[p.GetId()]).(*tidekvpb.KeySpaceRecord)
		rec.Name = p.GetName()
		b, _ := proto.Marshal(rec)
		if err := ab.set(keys.DataKey(keys.MetaRangeID, keys.MetaKeySpaceKey(rec.GetId())), b); err != nil {
			return applyResult{}, err
		}
	}
	return applyResult{metaID: 1}, nil
}

// applyProtect stores a new protected timestamp under the next id, or
// sets an existing one's expiry. A renewal of one already released (or
// purged once expired) stores nothing (result 0): GC may have passed its
// timestamp since.
func applyProtect(ab *applyBatch, p *tidekvpb.ProtectedTimestamp) (applyResult, error) {
	stored := proto.Clone(p).(*tidekvpb.ProtectedTimestamp)
	if p.GetId() == 0 {
		id, err := nextCounter(ab, keys.DataKey(keys.MetaRangeID, keys.MetaNextProtectedKey))
		if err != nil {
			return applyResult{}, err
		}
		stored.Id = id
	} else {
		b, ok, err := ab.get(keys.DataKey(keys.MetaRangeID, keys.MetaProtectedKey(p.GetId())))
		if err != nil || !ok {
			return applyResult{}, err
		}
		old := &tidekvpb.ProtectedTimestamp{}
		if err := proto.Unmarshal(b, old); err != nil {
			return applyResult{}, err
		}
		stored.Timestamp, stored.Owner = old.GetTimestamp(), old.GetOwner()
	}
	b, _ := proto.Marshal(stored)
	return applyResult{metaID: stored.Id}, ab.set(keys.DataKey(keys.MetaRangeID, keys.MetaProtectedKey(stored.Id)), b)
}

func nextCounter(ab *applyBatch, key []byte) (uint64, error) {
	v, ok, err := ab.get(key)
	if err != nil {
		return 0, err
	}
	id := uint64(1)
	if ok && len(v) == 8 {
		id = binary.BigEndian.Uint64(v)
	}
	return id, ab.set(key, binary.BigEndian.AppendUint64(nil, id+1))
}

func applyRangeUpdate(ab *applyBatch, d *tidekvpb.RangeDescriptor) error {
	all, err := ReadMetaRanges(ab.eng)
	if err != nil {
		return err
	}
	version, err := decodeLogVersion(ab.get(keys.DataKey(keys.MetaRangeID, keys.MetaLogVersionKey)))
	if err != nil {
		return err
	}
	drop, store := DirectoryUpdate(all, d, version)
	for _, id := range drop {
		if err := ab.del(keys.DataKey(keys.MetaRangeID, keys.MetaRangeKey(id))); err != nil {
			return err
		}
	}
	if !store {
		return nil
	}
	b, _ := proto.Marshal(d)
	return ab.set(keys.DataKey(keys.MetaRangeID, keys.MetaRangeKey(d.GetRangeId())), b)
}

// DirectoryUpdate decides what a range report does to the directory all:
// which descriptors it drops and whether d is stored. It is evaluated at
// apply, so it depends only on replicated state (the directory and the
// cluster's log version).
//
// A descriptor's generation grows along every split, merge and replica
// change, so of two overlapping descriptors the newer layout has the higher
// generation. Before LogVersionDirectory a report was stored unless its own
// range had a newer one, which let the late report of a range merged away
// come back after the merge and stay for good; and the meta range, whose
// empty bounds span its own key space, counted as overlapping every user
// range, so a newer user range dropped the meta range's entry and the meta
// range's next report dropped every older user range (until each reported
// again).
func DirectoryUpdate(all []*tidekvpb.RangeDescriptor, d *tidekvpb.RangeDescriptor, version uint32) (drop []uint64, store bool) {
	if version < LogVersionDirectory {
		return directoryUpdateV2(all, d)
	}
	if Superseded(all, d) {
		return nil, false
	}
	store = true
	for _, o := range all {
		switch {
		case o.GetRangeId() == d.GetRangeId():
			store = store && o.GetGeneration() < d.GetGeneration()
		case o.GetGeneration() < d.GetGeneration() && descsOverlap(o, d):
			drop = append(drop, o.GetRangeId())
		}
	}
	return drop, store
}

// directoryUpdateV2 is the rule binaries before LogVersionDirectory apply,
// to the letter: it stops at the range's own entry if that is as new,
// keeping what it dropped before it, and it takes the meta range's span
// (every key) as overlapping every user range.
func directoryUpdateV2(all []*tidekvpb.RangeDescriptor, d *tidekvpb.RangeDescriptor) (drop []uint64, store bool) {
	for _, o := range all {
		switch {
		case o.GetRangeId() == d.GetRangeId():
			if o.GetGeneration() >= d.GetGeneration() {
				return drop, false
			}
		case o.GetGeneration() < d.GetGeneration() && keys.Overlaps(o.GetStartKey(), o.GetEndKey(), d.GetStartKey(), d.GetEndKey()):
			drop = append(drop, o.GetRangeId())
		}
	}
	return drop, true
}

// Superseded reports whether the directory all holds a newer layout of
// any part of d: another range over d's span at a higher generation.
func Superseded(all []*tidekvpb.RangeDescriptor, d *tidekvpb.RangeDescriptor) bool {
	for _, o := range all {
		if o.GetRangeId() != d.GetRangeId() && o.GetGeneration() > d.GetGeneration() && descsOverlap(o, d) {
			return true
		}
	}
	return false
}

// descsOverlap reports whether two ranges share keys. The meta range's
// span is every key of its own key space, which no user range shares.
func descsOverlap(a, b *tidekvpb.RangeDescriptor) bool {
	if (a.GetRangeId() == keys.MetaRangeID) != (b.GetRangeId() == keys.MetaRangeID) {
		return false
	}
	return keys.Overlaps(a.GetStartKey(), a.GetEndKey(), b.GetStartKey(), b.GetEndKey())
}

// ReadMetaRanges returns the range directory stored in the meta range.
func ReadMetaRanges(rd storage.Reader) ([]*tidekvpb.RangeDescriptor, error) {
	lo, hi := keys.MetaRangeSpan()
	return readMetaRecords[tidekvpb.RangeDescriptor](rd, lo, hi)
}

// ReadMetaKeySpaces returns the key spaces stored in the meta range, by id.
func ReadMetaKeySpaces(rd storage.Reader) ([]*tidekvpb.KeySpaceRecord, error) {
	lo, hi := keys.MetaKeySpaceSpan()
	return readMetaRecords[tidekvpb.KeySpaceRecord](rd, lo, hi)
}

// ReadMetaSettings returns the cluster settings stored in the meta range.
func ReadMetaSettings(rd storage.Reader) ([]*tidekvpb.Setting, error) {
	lo, hi := keys.MetaSettingSpan()
	return readMetaRecords[tidekvpb.Setting](rd, lo, hi)
}

// ReadMetaProtected returns the protected timestamps stored in the meta
// range.
func ReadMetaProtected(rd storage.Reader) ([]*tidekvpb.ProtectedTimestamp, error) {
	lo, hi := keys.MetaProtectedSpan()
	return readMetaRecords[tidekvpb.ProtectedTimestamp](rd, lo, hi)
}

// ReadMetaLogVersion returns the cluster's log version stored in the meta
// range.
func ReadMetaLogVersion(rd storage.Reader) (uint32, error) {
	return ReadLogVersion(rd, keys.DataKey(keys.MetaRangeID, keys.MetaLogVersionKey))
}

// ReadMetaControllerState returns the elasticity controller's state the
// meta range stores (nil if none was stored).
func ReadMetaControllerState(rd storage.Reader) ([]byte, error) {
	v, ok, err := rd.Get(keys.DataKey(keys.MetaRangeID, keys.MetaControllerStateKey))
	if !ok {
		return nil, err
	}
	return v, err
}

// ReadMetaNodes returns the node records stored in the meta range.
func ReadMetaNodes(rd storage.Reader) ([]*tidekvpb.NodeDescriptor, error) {
	lo, hi := keys.MetaNodeSpan()
	return readMetaRecords[tidekvpb.NodeDescriptor](rd, lo, hi)
}

// readMetaRecords decodes every record the meta range stores in [lo, hi).
func readMetaRecords[T any, P interface {
	*T
	proto.Message
}](rd storage.Reader, lo, hi []byte) ([]P, error) {
	var out []P
	err := scanMeta(rd, lo, hi, func(v []byte) error {
		m := P(new(T))
		if err := proto.Unmarshal(v, m); err != nil {
			return err
		}
		out = append(out, m)
		return nil
	})
	return out, err
}

func scanMeta(rd storage.Reader, lo, hi []byte, fn func(v []byte) error) error {
	it, err := rd.NewIter(keys.DataKey(keys.MetaRangeID, lo), keys.DataKey(keys.MetaRangeID, hi))
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if err := fn(it.Value()); err != nil {
			return err
		}
	}
	return nil
}

// BootstrapMeta writes the meta range's initial contents for a new cluster,
// which starts at log version (Store.Bootstrap): its one node's binary
// applies it, so the first heartbeat would raise the cluster to it anyway.
func BootstrapMeta(w storage.Writer, node *tidekvpb.NodeDescriptor, descs []*tidekvpb.RangeDescriptor, nextRangeID uint64, version uint32) error {
	mk := func(k []byte) []byte { return keys.DataKey(keys.MetaRangeID, k) }
	if err := w.Set(mk(keys.MetaLogVersionKey), binary.BigEndian.AppendUint32(nil, version)); err != nil {
		return err
	}
	for _, d := range descs {
		if err := putProto(w, mk(keys.MetaRangeKey(d.GetRangeId())), d); err != nil {
			return err
		}
	}
	if err := putProto(w, mk(keys.MetaNodeKey(node.GetNodeId())), node); err != nil {
		return err
	}
	if err := w.Set(mk(keys.MetaNextNodeIDKey), binary.BigEndian.AppendUint64(nil, node.GetNodeId()+1)); err != nil {
		return err
	}
	return w.Set(mk(keys.MetaNextRangeKey), binary.BigEndian.AppendUint64(nil, nextRangeID))
}
