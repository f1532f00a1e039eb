package resp

import (
	"bytes"
	"encoding/binary"
)

// A stream's consumer groups in a DUMP payload (dump.go), after its
// entries and only if it has groups, so a payload of a stream without
// any is as before; by meaning, as the rest:
//
//	g, then g groups: name, last ID, entries read + 1 (0: unknown),
//	  c, then c consumers: name, seen time (8 bytes)
//	  p, then p pending entries: ID, consumer, delivery time (8 bytes), delivery count
//
// The counts the keys keep (streamgroup.go) are not in it: RESTORE
// counts them again.

// dumpedGroup is a group as a payload holds it.
type dumpedGroup struct {
	group     streamGroup
	consumers []streamConsumer
	pel       []pendingEntry
}

// appendGroupsDump appends the groups of stream m at k, read inside v.
func (x *call) appendGroupsDump(v *txView, k []byte, m streamMeta, out []byte) ([]byte, error) {
	grs, err := x.readGroups(v, k, m.gen)
	if err != nil || len(grs) == 0 {
		return out, err
	}
	out = binary.AppendUvarint(out, uint64(len(grs)))
	for _, gr := range grs {
		out = gr.last.append(appendDumpString(out, gr.name))
		out = binary.AppendUvarint(out, uint64(gr.entriesRead+1))
		cs, err := x.readConsumers(v, k, m.gen, gr.name)
		if err != nil {
			return nil, err
		}
		out = binary.AppendUvarint(out, uint64(len(cs)))
		for _, c := range cs {
			out = binary.BigEndian.AppendUint64(appendDumpString(out, c.name), uint64(c.seen))
		}
		out = binary.AppendUvarint(out, gr.pending)
		pre := pendingPrefix(k, m.gen, gr.name)
		if err := x.scanSpan(v, pre, prefixEnd(pre), func(kv KeyValue) error {
			p := decodePending(decodeStreamID(kv.Key[len(pre):]), kv.Value)
			out = appendDumpString(p.id.append(out), p.consumer)
			out = binary.AppendUvarint(binary.BigEndian.AppendUint64(out, uint64(p.delivered)), p.count)
			if len(out) > x.s.cfg.MaxBulkLen {
				return replyError(x.dumpTooLarge())
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// decodeGroupsDump decodes the groups after a stream's entries: none if
// rest is empty; ok false if it is malformed (a pending entry of a
// consumer the group lacks, IDs out of order, bytes left over).
func decodeGroupsDump(rest []byte) ([]dumpedGroup, bool) {
	if len(rest) == 0 {
		return nil, true
	}
	uv := func() (uint64, bool) {
		n, k := binary.Uvarint(rest)
		if k <= 0 {
			return 0, false
		}
		rest = rest[k:]
		return n, true
	}
	str := func() ([]byte, bool) {
		var s []byte
		s, rest = readDumpString(rest)
		return s, s != nil
	}
	u64 := func() (uint64, bool) {
		if len(rest) < 8 {
			return 0, false
		}
		n := binary.BigEndian.Uint64(rest)
		rest = rest[8:]
		return n, true
	}
	id := func() (streamID, bool) {
		if len(rest) < 16 {
			return streamID{}, false
		}
		i := decodeStreamID(rest)
		rest = rest[16:]
		return i, true
	}
	ng, ok := uv()
	if !ok || ng == 0 {
		return nil, false
	}
	var out []dumpedGroup
	for range ng {
		var g dumpedGroup
		var read, nc, np uint64
		var ok1, ok2, ok3, ok4 bool
		g.group.name, ok1 = str()
		g.group.last, ok2 = id()
		read, ok3 = uv()
		nc, ok4 = uv()
		if !ok1 || !ok2 || !ok3 || !ok4 || (len(out) > 0 && bytes.Compare(out[len(out)-1].group.name, g.group.name) >= 0) {
			return nil, false
		}
		g.group.entriesRead = int64(read) - 1
		names := map[string]int{}
		for range nc {
			name, ok1 := str()
			seen, ok2 := u64()
			if !ok1 || !ok2 {
				return nil, false
			}
			if _, dup := names[string(name)]; dup {
				return nil, false
			}
			names[string(name)] = len(g.consumers)
			g.consumers = append(g.consumers, streamConsumer{name: name, seen: int64(seen)})
		}
		if np, ok = uv(); !ok {
			return nil, false
		}
		for range np {
			var p pendingEntry
			var ok1, ok2, ok3, ok4 bool
			p.id, ok1 = id()
			p.consumer, ok2 = str()
			delivered, ok3 := u64()
			p.count, ok4 = uv()
			i, known := names[string(p.consumer)]
			if !ok1 || !ok2 || !ok3 || !ok4 || !known || (len(g.pel) > 0 && !g.pel[len(g.pel)-1].id.less(p.id)) {
				return nil, false
			}
			p.delivered = int64(delivered)
			g.consumers[i].pending++
			g.pel = append(g.pel, p)
		}
		g.group.pending, g.group.consumers = np, nc
		out = append(out, g)
	}
	return out, len(rest) == 0
}

// restoreGroups writes the groups of a stream RESTORE makes.
func (t *streamTx) restoreGroups(gs []dumpedGroup) error {
	for _, g := range gs {
		gr := g.group
		if err := t.putGroup(&gr); err != nil {
			return err
		}
		for i := range g.consumers {
			if err := t.putConsumer(&gr, &g.consumers[i]); err != nil {
				return err
			}
		}
		for _, p := range g.pel {
			if err := t.tx.Put(t.x.ctx, p.id.append(pendingPrefix(t.key, t.m.gen, gr.name)), encodePending(p)); err != nil {
				return err
			}
			if err := t.tx.Put(t.x.ctx, p.id.append(ownedPrefix(t.key, t.m.gen, gr.name, p.consumer)), nil); err != nil {
				return err
			}
		}
	}
	return nil
}
