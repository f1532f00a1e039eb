package raftstore

import (
	"encoding/binary"

	"google.golang.org/protobuf/proto"

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
	case mc.GetAllocRangeId():
		id, err := nextCounter(ab, mk(keys.MetaNextRangeKey))
		return applyResult{metaID: id}, err
	case mc.GetUpdateRange() != nil:
		// The update iterates the directory, so pending writes are flushed
		// first, together with the applied index they correspond to, so a
		// crash never replays an entry whose effects are already written.
		if err := putProto(ab.b, keys.ReplicaStateKey(r.rangeID), r.mu.state); err != nil {
			return applyResult{}, err
		}
		if err := ab.flush(); err != nil {
			return applyResult{}, err
		}
		return applyResult{}, applyRangeUpdate(ab, mc.GetUpdateRange())
	}
	return applyResult{err: ErrInvalidRequest}, nil
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
	for _, o := range all {
		if o.GetRangeId() == d.GetRangeId() {
			if o.GetGeneration() >= d.GetGeneration() {
				return nil
			}
			continue
		}
		if o.GetGeneration() < d.GetGeneration() && keys.Overlaps(o.GetStartKey(), o.GetEndKey(), d.GetStartKey(), d.GetEndKey()) {
			if err := ab.del(keys.DataKey(keys.MetaRangeID, keys.MetaRangeKey(o.GetRangeId()))); err != nil {
				return err
			}
		}
	}
	b, _ := proto.Marshal(d)
	return ab.set(keys.DataKey(keys.MetaRangeID, keys.MetaRangeKey(d.GetRangeId())), b)
}

// ReadMetaRanges returns the range directory stored in the meta range.
func ReadMetaRanges(rd storage.Reader) ([]*tidekvpb.RangeDescriptor, error) {
	var out []*tidekvpb.RangeDescriptor
	lo, hi := keys.MetaRangeSpan()
	err := scanMeta(rd, lo, hi, func(v []byte) error {
		d := &tidekvpb.RangeDescriptor{}
		if err := proto.Unmarshal(v, d); err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	return out, err
}

// ReadMetaSettings returns the cluster settings stored in the meta range.
func ReadMetaSettings(rd storage.Reader) ([]*tidekvpb.Setting, error) {
	var out []*tidekvpb.Setting
	lo, hi := keys.MetaSettingSpan()
	err := scanMeta(rd, lo, hi, func(v []byte) error {
		st := &tidekvpb.Setting{}
		if err := proto.Unmarshal(v, st); err != nil {
			return err
		}
		out = append(out, st)
		return nil
	})
	return out, err
}

// ReadMetaLogVersion returns the cluster's log version stored in the meta
// range.
func ReadMetaLogVersion(rd storage.Reader) (uint32, error) {
	return ReadLogVersion(rd, keys.DataKey(keys.MetaRangeID, keys.MetaLogVersionKey))
}

// ReadMetaNodes returns the node records stored in the meta range.
func ReadMetaNodes(rd storage.Reader) ([]*tidekvpb.NodeDescriptor, error) {
	var out []*tidekvpb.NodeDescriptor
	lo, hi := keys.MetaNodeSpan()
	err := scanMeta(rd, lo, hi, func(v []byte) error {
		n := &tidekvpb.NodeDescriptor{}
		if err := proto.Unmarshal(v, n); err != nil {
			return err
		}
		out = append(out, n)
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

// BootstrapMeta writes the meta range's initial contents for a new cluster.
func BootstrapMeta(w storage.Writer, node *tidekvpb.NodeDescriptor, descs []*tidekvpb.RangeDescriptor, nextRangeID uint64) error {
	mk := func(k []byte) []byte { return keys.DataKey(keys.MetaRangeID, k) }
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
