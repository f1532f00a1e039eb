package resp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// DUMP and RESTORE with a payload of TideKV's own, not Redis's RDB
// format (docs/redis.md): the value by its Redis type, then a version
// byte and a CRC-64 of everything before it, so that a payload corrupted
// on the way, or made by another server (Redis's RDB trailer has another
// version and checksum), is refused with Redis's error for both:
//
//	type byte, then by type:
//	  string  the value
//	  hash    n, then n field/value pairs
//	  list    n, then n elements, head first
//	  set     n, then n members
//	  zset    n, then n members, each followed by its score (8 bytes, IEEE 754)
//	  stream  the last ID, entries added, the greatest ID deleted, then n,
//	          then n entries: ID, ordinal, m, m field/value pairs (an ID: 16
//	          bytes, milliseconds and sequence, big-endian), then its
//	          consumer groups if it has any (dumpgroups.go)
//	dumpVersion, CRC-64 (ECMA) of the above, 8 bytes little-endian
//
// n and every string's length are uvarints. Elements are kept by their
// meaning, not their keys, so a payload does not depend on how TideKV
// lays a type out.

const dumpVersion = 1

const (
	dumpString byte = iota
	dumpHash
	dumpList
	dumpSet
	dumpZSet
	dumpStream
)

var (
	dumpTypes = map[string]byte{"string": dumpString, "hash": dumpHash, "list": dumpList, "set": dumpSet, "zset": dumpZSet, "stream": dumpStream}
	dumpCRC   = crc64.MakeTable(crc64.ECMA)
)

const (
	errDumpPayload = "ERR DUMP payload version or checksum are wrong"
	errBadDump     = "ERR Bad data format"
)

// cmdDump: DUMP key, the key's value in a payload RESTORE takes, read in
// one transaction (a collection whole); nil for a missing key.
func cmdDump(x *call) {
	var payload []byte
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		v := &txView{tx: tx, now: x.s.cfg.Now}
		var err error
		payload, err = x.dumpValue(v, x.args[1])
		return err
	})
	switch {
	case err != nil:
		writeCASErr(x.c, err)
	case payload == nil:
		x.c.WriteNull()
	case len(payload) > x.s.cfg.MaxBulkLen:
		x.c.WriteError(x.dumpTooLarge())
	default:
		x.c.WriteBulk(payload)
	}
}

// dumpTooLarge is DUMP's refusal of a payload RESTORE could not take,
// given as soon as the payload passes it, so that DUMP of a large
// collection reads no further.
func (x *call) dumpTooLarge() string {
	return fmt.Sprintf("ERR DUMP payload of more than %d bytes, the most a RESTORE takes (--redis-max-bulk-len)", x.s.cfg.MaxBulkLen)
}

// dumpValue reads k inside v and encodes it (nil: k is missing).
func (x *call) dumpValue(v *txView, k []byte) ([]byte, error) {
	r, err := v.read(x.ctx, encKey(k))
	if err != nil || !r.Found {
		return nil, err
	}
	typ := dumpTypes[valueType(r.Value)]
	out := []byte{typ}
	if m, ok := decodeStreamMeta(r.Value); ok {
		out = binary.AppendUvarint(m.last.append(out), m.added)
		out = m.maxDeleted.append(out)
	}
	if typ == dumpString {
		out = append(out, r.Value...)
	} else {
		var n uint64
		var body []byte
		start, end := elemSpan(k, r.Value)
		err := x.scanSpan(v, start, end, func(kv KeyValue) error {
			n++
			suffix := kv.Key[len(start):] // a list's: the element's index
			switch typ {
			case dumpList:
				body = appendDumpString(body, kv.Value)
			case dumpSet:
				body = appendDumpString(body, suffix)
			case dumpHash:
				body = appendDumpString(appendDumpString(body, suffix), kv.Value)
			case dumpZSet:
				body = append(appendDumpString(body, suffix), kv.Value...) // the score's 8 bytes
			case dumpStream:
				body = append(append(body, suffix...), kv.Value...) // the ID, the entry (encodeEntry)
			}
			if len(body) > x.s.cfg.MaxBulkLen {
				return replyError(x.dumpTooLarge())
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out = append(binary.AppendUvarint(out, n), body...)
	}
	if m, ok := decodeStreamMeta(r.Value); ok {
		var err error
		if out, err = x.appendGroupsDump(v, k, m, out); err != nil {
			return nil, err
		}
	}
	out = append(out, dumpVersion)
	return binary.LittleEndian.AppendUint64(out, crc64.Checksum(out, dumpCRC)), nil
}

func appendDumpString(b, s []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// elemSpan is the span of the element keys of the collection whose
// metadata is meta at k: a hash's fields, a list's or set's elements of
// its generation, a sorted set's members (not its index).
func elemSpan(k, meta []byte) (start, end []byte) {
	if isZSetMeta(meta) {
		start = append(fieldPrefix(k), zMemberTag)
		return start, prefixEnd(start)
	}
	if gen, ok := generation(meta); ok {
		start = elemPrefix(k, gen)
		return start, prefixEnd(start)
	}
	return fieldPrefix(k), fieldsEnd(k)
}

// scanSpan calls fn on every key of [start, end) inside v, in key order,
// MaxBatchKeys a read.
func (x *call) scanSpan(v *txView, start, end []byte, fn func(KeyValue) error) error {
	for {
		kvs, err := v.Scan(x.ctx, start, end, x.s.cfg.MaxBatchKeys)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			if err := fn(kv); err != nil {
				return err
			}
		}
		if len(kvs) < x.s.cfg.MaxBatchKeys {
			return nil
		}
		start = append(bytes.Clone(kvs[len(kvs)-1].Key), 0)
	}
}

// restoreSpec is RESTORE's arguments but the key and payload.
type restoreSpec struct {
	replace bool
	e       Expiry // none: no TTL
	// ttlErr is the TTL's error reply, given after BUSYKEY as Redis does.
	ttlErr string
}

// restoreOptions parses RESTORE key ttl payload [REPLACE] [ABSTTL]
// [IDLETIME s] [FREQ f] as Redis does; IDLETIME and FREQ are checked and
// then ignored (TideKV keeps no access times or counts). ok false: it
// replied.
func (x *call) restoreOptions() (sp restoreSpec, ok bool) {
	abs, idle, freq := false, false, false
	for j := 4; j < len(x.args); j++ {
		more := j+1 < len(x.args)
		opt := strings.ToLower(string(x.args[j]))
		switch {
		case opt == "replace":
			sp.replace = true
		case opt == "absttl":
			abs = true
		case opt == "idletime" && more && !freq, opt == "freq" && more && !idle:
			n, err := strconv.ParseInt(string(x.args[j+1]), 10, 64)
			switch {
			case err != nil:
				x.c.WriteError(errNotInt)
				return sp, false
			case opt == "idletime" && n < 0:
				x.c.WriteError("ERR Invalid IDLETIME value, must be >= 0")
				return sp, false
			case opt == "freq" && (n < 0 || n > 255):
				x.c.WriteError("ERR Invalid FREQ value, must be >= 0 and <= 255")
				return sp, false
			}
			idle, freq, j = idle || opt == "idletime", freq || opt == "freq", j+1
		default:
			x.c.WriteError(errSyntax)
			return sp, false
		}
	}
	d, rerr := parseTTL(x.args[2], false, "ERR invalid expire time in 'restore' command")
	switch {
	case rerr != "":
		sp.ttlErr = rerr
	case d < 0:
		sp.ttlErr = "ERR Invalid TTL value, must be >= 0"
	case d > 0:
		sp.e = expiryOf(d, abs)
	}
	return sp, true
}

// dumped is a payload decoded.
type dumped struct {
	typ   byte
	value []byte // a string's
	// elems: a list's elements, a set's or sorted set's members, a
	// hash's fields and values in turn.
	elems  [][]byte
	scores []float64 // a sorted set's, one a member
	// A stream's: its metadata (length and generation unset) and
	// entries.
	stream  streamMeta
	entries []streamEntry
	groups  []dumpedGroup // dumpgroups.go
}

// decodeDump checks payload's version and checksum and decodes it; the
// error is the reply.
func decodeDump(p []byte) (dumped, string) {
	if len(p) < 10 || p[len(p)-9] != dumpVersion || binary.LittleEndian.Uint64(p[len(p)-8:]) != crc64.Checksum(p[:len(p)-8], dumpCRC) {
		return dumped{}, errDumpPayload
	}
	d := dumped{typ: p[0]}
	rest := p[1 : len(p)-9]
	if d.typ == dumpString {
		d.value = rest
		if isMarker(rest) {
			return d, errReserved
		}
		return d, ""
	}
	if d.typ == dumpStream {
		return decodeStreamDump(d, rest)
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n == 0 || d.typ > dumpZSet {
		return d, errBadDump
	}
	rest = rest[k:]
	seen := map[string]bool{}
	for i := uint64(0); i < n; i++ {
		var e []byte
		if e, rest = readDumpString(rest); e == nil {
			return d, errBadDump
		}
		if d.typ != dumpList {
			if seen[string(e)] {
				return d, errBadDump
			}
			seen[string(e)] = true
		}
		d.elems = append(d.elems, e)
		switch d.typ {
		case dumpHash:
			if e, rest = readDumpString(rest); e == nil {
				return d, errBadDump
			}
			d.elems = append(d.elems, e)
		case dumpZSet:
			if len(rest) < 8 || math.IsNaN(zScoreOf(rest)) {
				return d, errBadDump
			}
			d.scores, rest = append(d.scores, zScoreOf(rest)), rest[8:]
		}
	}
	if len(rest) != 0 {
		return d, errBadDump
	}
	return d, ""
}

// decodeStreamDump decodes a stream's payload after its type byte: its
// IDs must grow, up to the last ID.
func decodeStreamDump(d dumped, rest []byte) (dumped, string) {
	if len(rest) < 16 {
		return d, errBadDump
	}
	d.stream.last = decodeStreamID(rest)
	added, k := binary.Uvarint(rest[16:])
	if k <= 0 || len(rest) < 16+k+16 {
		return d, errBadDump
	}
	d.stream.added, d.stream.maxDeleted = added, decodeStreamID(rest[16+k:])
	rest = rest[16+k+16:]
	n, k := binary.Uvarint(rest)
	if k <= 0 {
		return d, errBadDump
	}
	rest = rest[k:]
	for i := uint64(0); i < n; i++ {
		if len(rest) < 16 {
			return d, errBadDump
		}
		id := decodeStreamID(rest)
		if (i > 0 && !d.entries[i-1].id.less(id)) || d.stream.last.less(id) {
			return d, errBadDump
		}
		_, k := binary.Uvarint(rest[16:]) // the ordinal
		if k <= 0 {
			return d, errBadDump
		}
		m, k2 := binary.Uvarint(rest[16+k:])
		if k2 <= 0 || m == 0 {
			return d, errBadDump
		}
		start := rest
		rest = rest[16+k+k2:]
		for range 2 * m {
			var f []byte
			if f, rest = readDumpString(rest); f == nil {
				return d, errBadDump
			}
		}
		entry := start[16 : len(start)-len(rest)]
		d.entries = append(d.entries, decodeEntry(id, entry))
	}
	var ok bool
	if d.groups, ok = decodeGroupsDump(rest); !ok {
		return d, errBadDump
	}
	return d, ""
}

// readDumpString reads one length-prefixed string off b: nil if b is short.
func readDumpString(b []byte) (s, rest []byte) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, b
	}
	return b[k : k+int(n) : k+int(n)], b[k+int(n):]
}

// cmdRestore: RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s]
// [FREQ f], one transaction (KV.Txn) whatever the type, so a collection
// appears whole or not at all; what key held is deleted in it
// (REPLACE). A time already past (ABSTTL) creates nothing. A list or
// sorted set restored wakes the clients blocked on it.
func cmdRestore(x *call) {
	sp, ok := x.restoreOptions()
	if !ok {
		return
	}
	k := x.args[1]
	// Decoded once, not on each of the transaction's attempts; its error
	// is still answered after BUSYKEY and the TTL's, as Redis orders them.
	d, bad := decodeDump(x.args[3])
	created := false
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		created = false
		v := &txView{tx: tx, now: x.s.cfg.Now}
		r, err := v.read(x.ctx, encKey(k))
		switch {
		case err != nil:
			return err
		case r.Found && !sp.replace:
			return replyError("BUSYKEY Target key name already exists.")
		case sp.ttlErr != "":
			return replyError(sp.ttlErr)
		case bad != "":
			return replyError(bad)
		}
		if err := x.clearKey(v, k); err != nil {
			return err
		}
		if !sp.e.At.IsZero() && !sp.e.At.After(x.s.cfg.Now()) {
			return nil // expired already: Redis creates nothing either
		}
		created = true
		return x.restoreValue(v, k, d, sp.e)
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	if created && (d.typ == dumpList || d.typ == dumpZSet || d.typ == dumpStream) {
		x.ready(k)
	}
	x.c.WriteString("OK")
}

// restoreValue writes d at k inside v, with expiry e; k is clear.
func (x *call) restoreValue(v *txView, k []byte, d dumped, e Expiry) error {
	switch d.typ {
	case dumpString:
		return v.put(x.ctx, encKey(k), d.value, e, nil)
	case dumpHash:
		if err := v.put(x.ctx, encKey(k), hashMarker, e, nil); err != nil {
			return err
		}
		for i := 0; i < len(d.elems); i += 2 {
			if err := v.Put(x.ctx, fieldKey(k, d.elems[i]), d.elems[i+1]); err != nil {
				return err
			}
		}
		return nil
	case dumpZSet:
		es := make([]zEntry, len(d.elems))
		for i, m := range d.elems {
			es[i] = zEntry{member: m, score: d.scores[i]}
		}
		return x.zwrite(v, k, es, e)
	case dumpStream:
		if !x.setPositions() {
			return replyError(errStreamsUpgrading)
		}
		t := &streamTx{x: x, tx: v.tx, key: k, m: d.stream}
		t.m.gen, t.m.length, t.m.expiry = rand.Uint64(), uint64(len(d.entries)), e
		for _, en := range d.entries {
			if err := v.tx.Put(x.ctx, t.entryKey(en.id), encodeEntry(en.ordinal, en.fields)); err != nil {
				return v.fail(err)
			}
		}
		if err := t.restoreGroups(d.groups); err != nil {
			return v.fail(err)
		}
		return v.fail(t.save())
	}
	marker := setMarker
	if d.typ == dumpList {
		marker = listMarker
	}
	t := x.newColl(v.tx, k, marker)
	t.m.expiry = e
	for _, el := range d.elems {
		var err error
		if d.typ == dumpList {
			err = t.push(el, false)
		} else {
			err = t.add(el)
		}
		if err != nil {
			return v.fail(err)
		}
	}
	return v.fail(t.save())
}
