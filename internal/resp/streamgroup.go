package resp

import (
	"bytes"
	"encoding/binary"
	"math"
)

// Consumer groups of a stream (stream.go), kept under the stream's other
// generation, posGen(gen) (the span sets keep positions in), so entry
// scans never meet them and DEL, RENAME and COPY take them with the
// stream's key span:
//
//	group g          enc(k) 0x00 0x01 posGen(gen) 0x01 enc(g)                      -> name, last(16), entries-read, pending, consumers
//	consumer c of g  enc(k) 0x00 0x01 posGen(gen) 0x02 enc(g) 0x00 0x01 enc(c)     -> name, seen time, pending
//	pending id of g  enc(k) 0x00 0x01 posGen(gen) 0x03 enc(g) 0x00 0x01 id         -> delivery time, delivery count, consumer
//	id pending of c  enc(k) 0x00 0x01 posGen(gen) 0x04 enc(g) 0x00 0x01 enc(c) 0x00 0x01 id -> (empty)
//
// enc escapes 0x00 as 0x00 0xff, so 0x00 0x01 ends a name and names keep
// their byte order (XINFO lists groups and consumers in it, as Redis's
// radix trees do). The last key is a consumer's own PEL: XREADGROUP's
// history and XPENDING of one consumer read only its entries. Every
// change is made in the stream's transaction (streamTxn), which writes
// the metadata (its version) too, so reads outside one see one version.
const (
	groupTag    = 0x01
	consumerTag = 0x02
	pendingTag  = 0x03
	ownedTag    = 0x04
)

// noEntriesRead is a group's entries-read when it is unknown (Redis's
// SCG_INVALID_ENTRIES_READ).
const noEntriesRead = -1

// streamGroup is a consumer group's state.
type streamGroup struct {
	name []byte
	// last is the last ID delivered, entriesRead the entries the group
	// has read (noEntriesRead: unknown).
	last               streamID
	entriesRead        int64
	pending, consumers uint64
}

// streamConsumer is a consumer's state: seen is when it last read
// (milliseconds of the server's clock).
type streamConsumer struct {
	name    []byte
	seen    int64
	pending uint64
}

// pendingEntry is an entry of a group's PEL: delivered but not
// acknowledged.
type pendingEntry struct {
	id        streamID
	consumer  []byte
	delivered int64 // milliseconds
	count     uint64
}

func groupsSpan(key []byte, gen uint64, tag byte) []byte {
	return append(elemPrefix(key, posGen(gen)), tag)
}

// nameEnd appends enc(name) and the 0x00 0x01 that ends it.
func nameEnd(b, name []byte) []byte { return append(append(b, encKey(name)...), 0x00, 0x01) }

func groupKey(key []byte, gen uint64, g []byte) []byte {
	return append(groupsSpan(key, gen, groupTag), encKey(g)...)
}

func consumersPrefix(key []byte, gen uint64, g []byte) []byte {
	return nameEnd(groupsSpan(key, gen, consumerTag), g)
}

func pendingPrefix(key []byte, gen uint64, g []byte) []byte {
	return nameEnd(groupsSpan(key, gen, pendingTag), g)
}

func ownedPrefix(key []byte, gen uint64, g, c []byte) []byte {
	return nameEnd(nameEnd(groupsSpan(key, gen, ownedTag), g), c)
}

func encodeGroup(g streamGroup) []byte {
	out := g.last.append(appendDumpString(nil, g.name))
	for _, u := range []uint64{uint64(g.entriesRead), g.pending, g.consumers} {
		out = binary.BigEndian.AppendUint64(out, u)
	}
	return out
}

func decodeGroup(v []byte) streamGroup {
	name, v := readDumpString(v)
	return streamGroup{name: name, last: decodeStreamID(v), entriesRead: int64(binary.BigEndian.Uint64(v[16:])),
		pending: binary.BigEndian.Uint64(v[24:]), consumers: binary.BigEndian.Uint64(v[32:])}
}

func encodeConsumer(c streamConsumer) []byte {
	out := binary.BigEndian.AppendUint64(appendDumpString(nil, c.name), uint64(c.seen))
	return binary.BigEndian.AppendUint64(out, c.pending)
}

func decodeConsumer(v []byte) streamConsumer {
	name, v := readDumpString(v)
	return streamConsumer{name: name, seen: int64(binary.BigEndian.Uint64(v)), pending: binary.BigEndian.Uint64(v[8:])}
}

func encodePending(p pendingEntry) []byte {
	out := binary.BigEndian.AppendUint64(nil, uint64(p.delivered))
	return append(binary.BigEndian.AppendUint64(out, p.count), p.consumer...)
}

func decodePending(id streamID, v []byte) pendingEntry {
	return pendingEntry{id: id, delivered: int64(binary.BigEndian.Uint64(v)), count: binary.BigEndian.Uint64(v[8:]),
		consumer: bytes.Clone(v[16:])}
}

// scanEach calls fn on the keys of [start, end) through sc in key order,
// MaxBatchKeys a read, until fn reports false or limit keys (<= 0: all).
func (x *call) scanEach(sc scanner, start, end []byte, limit int, fn func(KeyValue) (bool, error)) error {
	seen := 0
	for limit <= 0 || seen < limit {
		n := x.s.cfg.MaxBatchKeys
		if limit > 0 {
			n = min(n, limit-seen)
		}
		kvs, err := sc.Scan(x.ctx, start, end, n)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			seen++
			if more, err := fn(kv); err != nil || !more {
				return err
			}
		}
		if len(kvs) < n {
			return nil
		}
		start = append(bytes.Clone(kvs[len(kvs)-1].Key), 0)
	}
	return nil
}

// readGroups reads the stream's groups in name order.
func (x *call) readGroups(sc scanner, key []byte, gen uint64) ([]streamGroup, error) {
	var out []streamGroup
	pre := groupsSpan(key, gen, groupTag)
	err := x.scanEach(sc, pre, prefixEnd(pre), 0, func(kv KeyValue) (bool, error) {
		out = append(out, decodeGroup(kv.Value))
		return true, nil
	})
	return out, err
}

// readConsumers reads group g's consumers in name order.
func (x *call) readConsumers(sc scanner, key []byte, gen uint64, g []byte) ([]streamConsumer, error) {
	var out []streamConsumer
	pre := consumersPrefix(key, gen, g)
	err := x.scanEach(sc, pre, prefixEnd(pre), 0, func(kv KeyValue) (bool, error) {
		out = append(out, decodeConsumer(kv.Value))
		return true, nil
	})
	return out, err
}

// group reads group g inside the transaction; nil if there is none.
func (t *streamTx) group(g []byte) (*streamGroup, error) {
	if !t.m.exists {
		return nil, nil
	}
	r, err := t.tx.Get(t.x.ctx, groupKey(t.key, t.m.gen, g))
	if err != nil || !r.Found {
		return nil, err
	}
	gr := decodeGroup(r.Value)
	return &gr, nil
}

func (t *streamTx) putGroup(gr *streamGroup) error {
	return t.tx.Put(t.x.ctx, groupKey(t.key, t.m.gen, gr.name), encodeGroup(*gr))
}

// consumer reads consumer c of gr; nil if there is none.
func (t *streamTx) consumer(gr *streamGroup, c []byte) (*streamConsumer, error) {
	r, err := t.tx.Get(t.x.ctx, append(consumersPrefix(t.key, t.m.gen, gr.name), encKey(c)...))
	if err != nil || !r.Found {
		return nil, err
	}
	co := decodeConsumer(r.Value)
	return &co, nil
}

// ensureConsumer reads consumer c of gr, making it (seen now) if there is
// none; made reports that it did.
func (t *streamTx) ensureConsumer(gr *streamGroup, c []byte, now int64) (co *streamConsumer, made bool, err error) {
	if co, err = t.consumer(gr, c); err != nil || co != nil {
		return co, false, err
	}
	gr.consumers++
	return &streamConsumer{name: c, seen: now}, true, nil
}

func (t *streamTx) putConsumer(gr *streamGroup, co *streamConsumer) error {
	return t.tx.Put(t.x.ctx, append(consumersPrefix(t.key, t.m.gen, gr.name), encKey(co.name)...), encodeConsumer(*co))
}

// pending reads id's PEL entry of gr; nil if it is not pending.
func (t *streamTx) pending(gr *streamGroup, id streamID) (*pendingEntry, error) {
	r, err := t.tx.Get(t.x.ctx, id.append(pendingPrefix(t.key, t.m.gen, gr.name)))
	if err != nil || !r.Found {
		return nil, err
	}
	p := decodePending(id, r.Value)
	return &p, nil
}

// deliver records id as delivered to co at now (XREADGROUP, XCLAIM): a
// new PEL entry delivered once, or one already pending moved from its
// consumer (counts kept right in both, the group's too) with the count
// given. The caller writes gr and co back.
func (t *streamTx) deliver(gr *streamGroup, co *streamConsumer, id streamID, now int64, count uint64) error {
	old, err := t.pending(gr, id)
	if err != nil {
		return err
	}
	switch {
	case old == nil:
		gr.pending++
		co.pending++
	case !bytes.Equal(old.consumer, co.name):
		if err := t.disown(gr, old.consumer, id, nil); err != nil {
			return err
		}
		co.pending++
	}
	if old == nil || !bytes.Equal(old.consumer, co.name) {
		if err := t.tx.Put(t.x.ctx, id.append(ownedPrefix(t.key, t.m.gen, gr.name, co.name)), nil); err != nil {
			return err
		}
	}
	p := pendingEntry{id: id, consumer: co.name, delivered: now, count: count}
	return t.tx.Put(t.x.ctx, id.append(pendingPrefix(t.key, t.m.gen, gr.name)), encodePending(p))
}

// disown takes id from consumer c's own PEL, and one from its count:
// held's if it is c (a consumer the caller holds and writes back), else
// the stored one's.
func (t *streamTx) disown(gr *streamGroup, c []byte, id streamID, held *streamConsumer) error {
	if err := t.tx.Delete(t.x.ctx, id.append(ownedPrefix(t.key, t.m.gen, gr.name, c))); err != nil {
		return err
	}
	if held != nil && bytes.Equal(held.name, c) {
		held.pending--
		return nil
	}
	co, err := t.consumer(gr, c)
	if err != nil || co == nil {
		return err
	}
	co.pending--
	return t.putConsumer(gr, co)
}

// ack removes pending entry p from gr's PEL and its consumer's (XACK;
// held as disown's); the caller writes gr back.
func (t *streamTx) ack(gr *streamGroup, p *pendingEntry, held *streamConsumer) error {
	if err := t.tx.Delete(t.x.ctx, p.id.append(pendingPrefix(t.key, t.m.gen, gr.name))); err != nil {
		return err
	}
	gr.pending--
	return t.disown(gr, p.consumer, p.id, held)
}

// owned reads the IDs pending for consumer c of gr in [from, to], at most
// limit (<= 0: all).
func (t *streamTx) owned(gr *streamGroup, c []byte, from, to streamID, limit int) ([]streamID, error) {
	if to.less(from) {
		return nil, nil
	}
	pre := ownedPrefix(t.key, t.m.gen, gr.name, c)
	var out []streamID
	err := t.x.scanEach(t.tx, from.append(bytes.Clone(pre)), append(to.append(bytes.Clone(pre)), 0), limit, func(kv KeyValue) (bool, error) {
		out = append(out, decodeStreamID(kv.Key[len(pre):]))
		return true, nil
	})
	return out, err
}

// pendings reads gr's PEL entries in [from, to] for which keep is true,
// at most limit (<= 0: all).
func (t *streamTx) pendings(gr *streamGroup, from, to streamID, limit int, keep func(pendingEntry) bool) ([]pendingEntry, error) {
	if to.less(from) {
		return nil, nil
	}
	pre := pendingPrefix(t.key, t.m.gen, gr.name)
	var out []pendingEntry
	err := t.x.scanEach(t.tx, from.append(bytes.Clone(pre)), append(to.append(bytes.Clone(pre)), 0), 0, func(kv KeyValue) (bool, error) {
		p := decodePending(decodeStreamID(kv.Key[len(pre):]), kv.Value)
		if keep(p) {
			out = append(out, p)
		}
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// delConsumer removes consumer co of gr and its pending entries, and
// reports how many were pending (XGROUP DELCONSUMER); the caller writes
// gr back.
func (t *streamTx) delConsumer(gr *streamGroup, co *streamConsumer) (uint64, error) {
	ids, err := t.owned(gr, co.name, streamID{}, maxStreamID, 0)
	if err != nil {
		return 0, err
	}
	for _, id := range ids {
		for _, k := range [][]byte{id.append(pendingPrefix(t.key, t.m.gen, gr.name)), id.append(ownedPrefix(t.key, t.m.gen, gr.name, co.name))} {
			if err := t.tx.Delete(t.x.ctx, k); err != nil {
				return 0, err
			}
		}
	}
	gr.pending -= uint64(len(ids))
	gr.consumers--
	return uint64(len(ids)), t.tx.Delete(t.x.ctx, append(consumersPrefix(t.key, t.m.gen, gr.name), encKey(co.name)...))
}

// destroyGroup removes group g with its consumers and PEL.
func (t *streamTx) destroyGroup(g []byte) error {
	if err := t.tx.Delete(t.x.ctx, groupKey(t.key, t.m.gen, g)); err != nil {
		return err
	}
	for _, pre := range [][]byte{consumersPrefix(t.key, t.m.gen, g), pendingPrefix(t.key, t.m.gen, g),
		nameEnd(groupsSpan(t.key, t.m.gen, ownedTag), g)} {
		if err := t.x.scanEach(t.tx, pre, prefixEnd(pre), 0, func(kv KeyValue) (bool, error) {
			return true, t.tx.Delete(t.x.ctx, kv.Key)
		}); err != nil {
			return err
		}
	}
	return nil
}

// firstEntry is the stream's first entry's ID (0-0 if it is empty).
func (x *call) firstEntry(sc scanner, key []byte, m streamMeta) (streamID, error) {
	es, err := x.scanEntries(sc, key, m.gen, streamID{}, maxStreamID, 1)
	if err != nil || len(es) == 0 {
		return streamID{}, err
	}
	return es[0].id, nil
}

// hasTombstones is Redis's streamRangeHasTombstones from start to the
// end: whether an entry deleted may lie at or after start.
func hasTombstones(m streamMeta, first, start streamID) bool {
	if m.length == 0 || m.maxDeleted == (streamID{}) || m.maxDeleted.less(first) {
		return false
	}
	return !m.maxDeleted.less(start)
}

// entriesBefore is Redis's streamEstimateDistanceFromFirstEverEntry: the
// entries read by a group whose last ID is id, or noEntriesRead if it
// cannot be known (a stream with deleted entries ahead).
func entriesBefore(m streamMeta, first, id streamID) int64 {
	switch {
	case m.added == 0:
		return 0
	case m.length == 0 && !m.last.less(id):
		return int64(m.added)
	case id == m.last:
		return int64(m.added)
	case m.last.less(id):
		return noEntriesRead
	}
	if m.maxDeleted == (streamID{}) || m.maxDeleted.less(first) {
		switch {
		case id.less(first):
			return int64(m.added - m.length)
		case id == first:
			return int64(m.added-m.length) + 1
		}
	}
	return noEntriesRead
}

// lag is the entries of the stream the group has yet to read, as Redis's
// XINFO computes it; ok false if it cannot be known.
func lag(m streamMeta, first streamID, gr streamGroup) (int64, bool) {
	switch {
	case m.added == 0:
		return 0, true
	case gr.entriesRead != noEntriesRead && !hasTombstones(m, first, gr.last):
		return int64(m.added) - gr.entriesRead, true
	}
	if n := entriesBefore(m, first, gr.last); n != noEntriesRead {
		return int64(m.added) - n, true
	}
	return 0, false
}

// advance moves gr past entry id delivered (XREADGROUP '>'), counting it
// read as Redis does.
func (gr *streamGroup) advance(m streamMeta, first, id streamID) {
	if !gr.last.less(id) {
		return
	}
	switch {
	case gr.entriesRead != noEntriesRead && !hasTombstones(m, first, id):
		gr.entriesRead++
	case m.added > 0:
		gr.entriesRead = entriesBefore(m, first, id)
	}
	gr.last = id
}

// idle is the milliseconds since t at now, never below 0.
func idle(now, t int64) int64 { return max(0, now-t) }

// groupInfo is what XINFO answers of a group: its state and lag and, for
// XINFO STREAM FULL, its first pending entries and its consumers with
// theirs.
type groupInfo struct {
	streamGroup
	lag      int64
	lagKnown bool
	pel      []pendingEntry
	members  []consumerInfo
}

type consumerInfo struct {
	streamConsumer
	pel []pendingEntry
}

// readGroupInfos reads the groups of the stream m at key outside a
// transaction (inside readEntries' consistent read); full: with count
// (0: all) pending entries of each group and of each consumer.
func (x *call) readGroupInfos(m streamMeta, key []byte, full bool, count int64) ([]groupInfo, error) {
	grs, err := x.readGroups(x.kv, key, m.gen)
	if err != nil || len(grs) == 0 {
		return nil, err
	}
	first, err := x.firstEntry(x.kv, key, m)
	if err != nil {
		return nil, err
	}
	limit := int(min(max(count, 0), math.MaxInt32))
	out := make([]groupInfo, len(grs))
	for i, gr := range grs {
		out[i].streamGroup = gr
		out[i].lag, out[i].lagKnown = lag(m, first, gr)
		if !full {
			continue
		}
		pre := pendingPrefix(key, m.gen, gr.name)
		if err := x.scanEach(x.kv, pre, prefixEnd(pre), limit, func(kv KeyValue) (bool, error) {
			out[i].pel = append(out[i].pel, decodePending(decodeStreamID(kv.Key[len(pre):]), kv.Value))
			return true, nil
		}); err != nil {
			return nil, err
		}
		cs, err := x.readConsumers(x.kv, key, m.gen, gr.name)
		if err != nil {
			return nil, err
		}
		for _, c := range cs {
			ci := consumerInfo{streamConsumer: c}
			own := ownedPrefix(key, m.gen, gr.name, c.name)
			if err := x.scanEach(x.kv, own, prefixEnd(own), limit, func(kv KeyValue) (bool, error) {
				id := decodeStreamID(kv.Key[len(own):])
				v, err := x.kv.Get(x.ctx, id.append(pre))
				if err == nil {
					ci.pel = append(ci.pel, decodePending(id, v))
				}
				return true, err
			}); err != nil {
				return nil, err
			}
			out[i].members = append(out[i].members, ci)
		}
	}
	return out, nil
}

func (x *call) writeGroupHead(g groupInfo, name string) {
	x.c.WriteBulkString("name")
	x.c.WriteBulk(g.name)
	if name == "groups" {
		x.c.WriteBulkString("consumers")
		x.c.WriteInt64(int64(g.consumers))
		x.c.WriteBulkString("pending")
		x.c.WriteInt64(int64(g.pending))
	}
	x.c.WriteBulkString("last-delivered-id")
	x.c.WriteBulkString(g.last.String())
	x.c.WriteBulkString("entries-read")
	if g.entriesRead == noEntriesRead {
		x.c.WriteNull()
	} else {
		x.c.WriteInt64(g.entriesRead)
	}
	x.c.WriteBulkString("lag")
	if g.lagKnown {
		x.c.WriteInt64(g.lag)
	} else {
		x.c.WriteNull()
	}
}

// writeGroups answers XINFO GROUPS.
func (x *call) writeGroups(gs []groupInfo) {
	x.c.WriteArray(len(gs))
	for _, g := range gs {
		x.writeMap(6)
		x.writeGroupHead(g, "groups")
	}
}

// writeFullGroups answers XINFO STREAM FULL's groups.
func (x *call) writeFullGroups(gs []groupInfo) {
	x.c.WriteArray(len(gs))
	for _, g := range gs {
		x.writeMap(7)
		x.writeGroupHead(g, "full")
		x.c.WriteBulkString("pel-count")
		x.c.WriteInt64(int64(g.pending))
		x.c.WriteBulkString("pending")
		x.c.WriteArray(len(g.pel))
		for _, p := range g.pel {
			x.c.WriteArray(4)
			x.c.WriteBulkString(p.id.String())
			x.c.WriteBulk(p.consumer)
			x.c.WriteInt64(p.delivered)
			x.c.WriteInt64(int64(p.count))
		}
		x.c.WriteBulkString("consumers")
		x.c.WriteArray(len(g.members))
		for _, c := range g.members {
			x.writeMap(4)
			x.c.WriteBulkString("name")
			x.c.WriteBulk(c.name)
			x.c.WriteBulkString("seen-time")
			x.c.WriteInt64(c.seen)
			x.c.WriteBulkString("pel-count")
			x.c.WriteInt64(int64(c.pending))
			x.c.WriteBulkString("pending")
			x.c.WriteArray(len(c.pel))
			for _, p := range c.pel {
				x.c.WriteArray(3)
				x.c.WriteBulkString(p.id.String())
				x.c.WriteInt64(p.delivered)
				x.c.WriteInt64(int64(p.count))
			}
		}
	}
}
