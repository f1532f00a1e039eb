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
// rest is empty; ok false if it is malformed (a group out of name order,
// a consumer twice, a pending entry of a consumer the group lacks, IDs
// out of order, bytes left over).
func decodeGroupsDump(rest []byte) ([]dumpedGroup, bool) {
	if len(rest) == 0 {
		return nil, true
	}
	r := &dumpReader{rest: rest}
	n := r.uvarint()
	if r.bad || n == 0 {
		return nil, false
	}
	var out []dumpedGroup
	for range n {
		g, ok := r.group()
		if !ok || (len(out) > 0 && bytes.Compare(out[len(out)-1].group.name, g.group.name) >= 0) {
			return nil, false
		}
		out = append(out, g)
	}
	return out, len(r.rest) == 0
}

// dumpReader reads a payload's fields in turn: the first one short or
// malformed makes it bad, and the reads after it read nothing.
type dumpReader struct {
	rest []byte
	bad  bool
}

func (r *dumpReader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	n, k := binary.Uvarint(r.rest)
	if k <= 0 {
		r.bad = true
		return 0
	}
	r.rest = r.rest[k:]
	return n
}

// str reads a length-prefixed string (readDumpString).
func (r *dumpReader) str() []byte {
	if r.bad {
		return nil
	}
	s, rest := readDumpString(r.rest)
	r.rest, r.bad = rest, s == nil
	return s
}

// take reads n bytes.
func (r *dumpReader) take(n int) []byte {
	if r.bad || len(r.rest) < n {
		r.bad = true
		return nil
	}
	b := r.rest[:n]
	r.rest = r.rest[n:]
	return b
}

func (r *dumpReader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (r *dumpReader) id() streamID {
	if b := r.take(16); b != nil {
		return decodeStreamID(b)
	}
	return streamID{}
}

// group reads one group: its name, last ID and entries read, then its
// consumers and its PEL, counting each consumer's pending entries.
func (r *dumpReader) group() (dumpedGroup, bool) {
	var g dumpedGroup
	g.group.name, g.group.last = r.str(), r.id()
	g.group.entriesRead = int64(r.uvarint()) - 1
	names, ok := r.consumers(&g)
	if !ok || !r.pel(&g, names) {
		return g, false
	}
	g.group.pending, g.group.consumers = uint64(len(g.pel)), uint64(len(g.consumers))
	return g, true
}

// consumers reads g's consumers, and answers each one's place in
// g.consumers by name; false if one comes twice.
func (r *dumpReader) consumers(g *dumpedGroup) (map[string]int, bool) {
	n := r.uvarint()
	names := map[string]int{}
	for i := uint64(0); i < n && !r.bad; i++ {
		name, seen := r.str(), r.u64()
		if _, dup := names[string(name)]; dup || r.bad {
			return nil, false
		}
		names[string(name)] = len(g.consumers)
		g.consumers = append(g.consumers, streamConsumer{name: name, seen: int64(seen)})
	}
	return names, !r.bad
}

// pel reads g's pending entries, IDs growing, each of a consumer in
// names.
func (r *dumpReader) pel(g *dumpedGroup, names map[string]int) bool {
	n := r.uvarint()
	for i := uint64(0); i < n && !r.bad; i++ {
		p := pendingEntry{id: r.id(), consumer: r.str()}
		p.delivered, p.count = int64(r.u64()), r.uvarint()
		c, known := names[string(p.consumer)]
		if r.bad || !known || (len(g.pel) > 0 && !g.pel[len(g.pel)-1].id.less(p.id)) {
			return false
		}
		g.consumers[c].pending++
		g.pel = append(g.pel, p)
	}
	return !r.bad
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
