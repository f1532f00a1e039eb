package resp

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Streams on ordered keys, as lists and sets are (collection.go): the
// metadata at enc(k) and one key per entry under enc(k) 0x00 0x01 gen,
// the entry's ID as two big-endian uint64s (milliseconds, sequence), so
// entries lie in ID order and XRANGE reads only the span it answers:
//
//	stream k     enc(k)                           -> streamMarker gen ver length last(16) added maxDeleted(16)
//	entry id     enc(k) 0x00 0x01 gen ms seq      -> ordinal, n, then n field/value pairs (uvarints, strings length-prefixed)
//
// The last ID, the count of entries ever added and the greatest ID
// deleted live in the metadata, written in the transaction that writes
// the entry, so IDs grow strictly whatever node leads the ranges: an ID is
// never given out twice, nor below one given before. Every change is one
// transaction (keyTxn: batched with the other commands writing the key);
// a stream emptied by XDEL or XTRIM stays, as in Redis. An entry's
// ordinal is the count of entries added before it: it places the entry
// in the node Redis would have put it in, which a "~" trim removes whole
// (trim).

var streamMarker = []byte("\xffTideKV:stream\x00\x01\xfe")

// streamCommands are the stream commands (commands.go adds them).
var streamCommands = map[string]cmdSpec{
	"xadd":      {arity: -5, fn: cmdXAdd},
	"xlen":      {arity: 2, fn: cmdXLen},
	"xrange":    {arity: -4, fn: cmdXRange},
	"xrevrange": {arity: -4, fn: cmdXRange},
	"xdel":      {arity: -3, fn: cmdXDel},
	"xtrim":     {arity: -4, fn: cmdXTrim},
	"xread":     {arity: -4, fn: cmdXRead},
	"xinfo":     {arity: -2, fn: cmdXInfo},
	"xsetid":    {arity: -3, fn: cmdXSetID},
	// consumer groups (streamgroupcmd.go)
	"xgroup":     {arity: -2, fn: cmdXGroup},
	"xreadgroup": {arity: -7, fn: cmdXReadGroup},
	"xack":       {arity: -4, fn: cmdXAck},
	"xpending":   {arity: -3, fn: cmdXPending},
	"xclaim":     {arity: -6, fn: cmdXClaim},     // streamclaim.go
	"xautoclaim": {arity: -6, fn: cmdXAutoClaim}, // streamclaim.go
}

// streamID is an entry's ID.
type streamID struct{ ms, seq uint64 }

var maxStreamID = streamID{math.MaxUint64, math.MaxUint64}

func (a streamID) less(b streamID) bool {
	return a.ms < b.ms || (a.ms == b.ms && a.seq < b.seq)
}

// next is the ID right after a; ok false past the last one.
func (a streamID) next() (streamID, bool) {
	switch {
	case a.seq < math.MaxUint64:
		return streamID{a.ms, a.seq + 1}, true
	case a.ms < math.MaxUint64:
		return streamID{a.ms + 1, 0}, true
	}
	return a, false
}

// prev is the ID right before a; ok false for 0-0.
func (a streamID) prev() (streamID, bool) {
	switch {
	case a.seq > 0:
		return streamID{a.ms, a.seq - 1}, true
	case a.ms > 0:
		return streamID{a.ms - 1, math.MaxUint64}, true
	}
	return a, false
}

func (a streamID) String() string {
	return strconv.FormatUint(a.ms, 10) + "-" + strconv.FormatUint(a.seq, 10)
}

func (a streamID) append(b []byte) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(b, a.ms), a.seq)
}

func decodeStreamID(b []byte) streamID {
	return streamID{binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:])}
}

const errStreamID = "ERR Invalid stream ID specified as stream command argument"

// parseStreamID reads an ID as Redis 7.0 does: "-" and "+" (unless
// strict), ms, ms-seq, and with star ms-* (seqGiven false); a missing
// sequence is missingSeq. Each part is an unsigned 64-bit number as
// Redis's string2ull takes it.
func parseStreamID(b []byte, missingSeq uint64, strict, star bool) (id streamID, seqGiven, ok bool) {
	s := string(b)
	if len(s) > 127 {
		return id, false, false
	}
	switch s {
	case "-", "+":
		if strict {
			return id, false, false
		}
		if s == "+" {
			return maxStreamID, true, true
		}
		return streamID{}, true, true
	}
	msPart, seqPart, dash := strings.Cut(s, "-")
	if id.ms, ok = parseULL(msPart); !ok {
		return id, false, false
	}
	switch {
	case !dash:
		id.seq = missingSeq
	case star && seqPart == "*":
		return id, false, true
	default:
		if id.seq, ok = parseULL(seqPart); !ok {
			return id, false, false
		}
	}
	return id, true, true
}

// parseULL is Redis's string2ull: a canonical int64 (not negative), or
// else what strtoull reads of all of s (leading spaces, a sign: a minus
// negates modulo 2^64; no overflow).
func parseULL(s string) (uint64, bool) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(n, 10) == s {
		return uint64(n), n >= 0
	}
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg, t = t[0] == '-', t[1:]
	}
	if t == "" || strings.TrimLeft(t, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseUint(t, 10, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// streamMeta is a stream's metadata.
type streamMeta struct {
	exists   bool
	gen, ver uint64
	length   uint64
	// last is the last ID given out, added the entries ever added,
	// maxDeleted the greatest ID XDEL removed (XINFO STREAM).
	last, maxDeleted streamID
	added            uint64
	expiry           Expiry
}

const streamMetaLen = 8 * 8

func encodeStreamMeta(m streamMeta) []byte {
	out := append([]byte(nil), streamMarker...)
	for _, u := range []uint64{m.gen, m.ver, m.length} {
		out = binary.BigEndian.AppendUint64(out, u)
	}
	out = m.last.append(out)
	out = binary.BigEndian.AppendUint64(out, m.added)
	return m.maxDeleted.append(out)
}

// decodeStreamMeta reads a value found at a stream's key: ok false if it
// is another type's.
func decodeStreamMeta(v []byte) (streamMeta, bool) {
	if !bytes.HasPrefix(v, streamMarker) || len(v) != len(streamMarker)+streamMetaLen {
		return streamMeta{}, false
	}
	v = v[len(streamMarker):]
	u := func(i int) uint64 { return binary.BigEndian.Uint64(v[8*i:]) }
	return streamMeta{exists: true, gen: u(0), ver: u(1), length: u(2), last: decodeStreamID(v[24:]),
		added: u(5), maxDeleted: decodeStreamID(v[48:])}, true
}

// streamEntry is one entry: its ID, its ordinal and its fields and
// values in turn.
type streamEntry struct {
	id      streamID
	ordinal uint64
	fields  [][]byte
}

func encodeEntry(ordinal uint64, fields [][]byte) []byte {
	out := binary.AppendUvarint(binary.AppendUvarint(nil, ordinal), uint64(len(fields)/2))
	for _, f := range fields {
		out = appendDumpString(out, f)
	}
	return out
}

func decodeEntry(id streamID, v []byte) streamEntry {
	ord, k := binary.Uvarint(v)
	v = v[k:]
	n, k := binary.Uvarint(v)
	v = v[k:]
	e := streamEntry{id: id, ordinal: ord, fields: make([][]byte, 0, 2*n)}
	for range 2 * n {
		var f []byte
		f, v = readDumpString(v)
		e.fields = append(e.fields, f)
	}
	return e
}

// streamTx is one attempt of a change of the stream at key.
type streamTx struct {
	x   *call
	tx  TxnKV
	key []byte
	m   streamMeta
}

// openStream reads the stream's metadata inside tx; a key of another
// type is wrongType.
func (x *call) openStream(tx TxnKV, key []byte) (*streamTx, error) {
	t := &streamTx{x: x, tx: tx, key: key}
	r, err := tx.Get(x.ctx, encKey(key))
	if err != nil {
		return nil, err
	}
	if !r.Found {
		t.m.gen = rand.Uint64()
		return t, nil
	}
	m, ok := decodeStreamMeta(r.Value)
	if !ok {
		return nil, wrongType
	}
	m.expiry = r.Expiry
	t.m = m
	return t, nil
}

// streamTxn runs fn in a transaction over the stream at key (metaTxn);
// the metadata is written back if fn returns nil and changed is true.
func (x *call) streamTxn(key []byte, fn func(t *streamTx) (changed bool, err error)) error {
	return metaTxn(x, key, nil, func(tx TxnKV) (*streamTx, error) { return x.openStream(tx, key) }, fn)
}

// save writes the metadata back: a stream stays when it is empty.
func (t *streamTx) save() error {
	t.m.ver++
	t.m.exists = true
	k, v := encKey(t.key), encodeStreamMeta(t.m)
	if t.m.expiry == (Expiry{}) {
		return t.tx.Put(t.x.ctx, k, v)
	}
	return t.tx.PutExpiring(t.x.ctx, k, v, t.m.expiry)
}

func (t *streamTx) entryKey(id streamID) []byte { return id.append(elemPrefix(t.key, t.m.gen)) }

// remove deletes entries (found by a scan).
func (t *streamTx) remove(es []streamEntry) error {
	for _, e := range es {
		if err := t.tx.Delete(t.x.ctx, t.entryKey(e.id)); err != nil {
			return err
		}
	}
	t.m.length -= uint64(len(es))
	return nil
}

// trimArgs are XADD's and XTRIM's trimming options.
type trimArgs struct {
	strategy string // "", "maxlen", "minid"
	maxlen   int64
	minid    streamID
	approx   bool
	limit    int64 // entries a "~" trim removes at most; 0: no bound
}

// parseAddOrTrim reads XADD's options up to its ID (xadd) or XTRIM's
// (all its arguments), in Redis 7.0's order and with its errors. For
// XADD it returns the ID's position, the ID, whether its sequence was
// given (false: "ms-*"), whether it was given at all (false: "*") and
// NOMKSTREAM; ok false: it replied.
func (x *call) parseAddOrTrim(xadd bool) (tr trimArgs, at int, id streamID, seqGiven, idGiven, noMk, ok bool) {
	fail := func(msg string) (trimArgs, int, streamID, bool, bool, bool, bool) {
		x.c.WriteError(msg)
		return tr, 0, id, false, false, false, false
	}
	limitGiven := false
	i := 2
	for ; i < len(x.args); i++ {
		more := len(x.args) - 1 - i
		opt := strings.ToLower(string(x.args[i]))
		switch {
		case xadd && opt == "*":
			goto done
		case (opt == "maxlen" || opt == "minid") && more > 0:
			if tr.strategy != "" {
				return fail("ERR syntax error, MAXLEN and MINID options at the same time are not compatible")
			}
			tr.approx = false
			if next := string(x.args[i+1]); more >= 2 && (next == "~" || next == "=") {
				tr.approx = next == "~"
				i++
			}
			if opt == "maxlen" {
				n, err := strconv.ParseInt(string(x.args[i+1]), 10, 64)
				if err != nil {
					return fail(errNotInt)
				}
				if n < 0 {
					return fail("ERR The MAXLEN argument must be >= 0.")
				}
				tr.maxlen = n
			} else {
				var good bool
				if tr.minid, _, good = parseStreamID(x.args[i+1], 0, true, false); !good {
					return fail(errStreamID)
				}
			}
			tr.strategy = opt
			i++
		case opt == "limit" && more > 0:
			n, err := strconv.ParseInt(string(x.args[i+1]), 10, 64)
			if err != nil {
				return fail(errNotInt)
			}
			if n < 0 {
				return fail("ERR The LIMIT argument must be >= 0.")
			}
			tr.limit, limitGiven = n, true
			i++
		case xadd && opt == "nomkstream":
			noMk = true
		case xadd:
			var good bool
			if id, seqGiven, good = parseStreamID(x.args[i], 0, true, true); !good {
				return fail(errStreamID)
			}
			idGiven = true
			goto done
		default:
			return fail(errSyntax)
		}
	}
done:
	switch {
	case limitGiven && tr.strategy == "":
		return fail("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy")
	case !xadd && tr.strategy == "":
		return fail("ERR syntax error, XTRIM must be called with a trimming strategy")
	case limitGiven && !tr.approx:
		return fail("ERR syntax error, LIMIT cannot be used without the special ~ option")
	case !limitGiven && tr.approx:
		tr.limit = 100 * x.streamNodeEntries()
		if tr.limit <= 0 || tr.limit > 10000 {
			tr.limit = 10000
		}
	case !limitGiven:
		tr.limit = 0
	}
	return tr, i, id, seqGiven, idGiven, noMk, true
}

// streamNodeEntries is stream-node-max-entries: the entries of one of
// Redis's stream nodes, the unit a "~" trim removes (trim).
func (x *call) streamNodeEntries() int64 {
	return x.s.tunables.get("stream-node-max-entries", 100)
}

// trim removes entries from the front as tr says and returns how many.
// An exact trim removes just those past the threshold. A "~" trim, as
// Redis's, removes only whole nodes, never more than tr.limit entries:
// TideKV has no nodes, and places an entry in the one Redis would have
// put it in, by its ordinal: runs of stream-node-max-entries entries as
// they were added (docs/redis.md).
func (t *streamTx) trim(tr trimArgs) (int64, error) {
	if tr.strategy == "" || t.m.length == 0 {
		return 0, nil
	}
	if !tr.approx {
		var es []streamEntry
		var err error
		switch below, ok := tr.minid.prev(); {
		case tr.strategy == "maxlen" && t.m.length > uint64(tr.maxlen):
			es, err = t.scan(streamID{}, maxStreamID, int(min(t.m.length-uint64(tr.maxlen), math.MaxInt32)))
		case tr.strategy == "minid" && ok:
			es, err = t.scan(streamID{}, below, 0)
		}
		if err == nil {
			err = t.remove(es)
		}
		return int64(len(es)), err
	}
	node := uint64(t.x.streamNodeEntries())
	var deleted uint64
	for t.m.length > 0 {
		if tr.strategy == "maxlen" && t.m.length <= uint64(tr.maxlen) {
			break
		}
		es, err := t.firstNode(node)
		if err != nil {
			return 0, err
		}
		n := uint64(len(es))
		if tr.limit > 0 && deleted+n > uint64(tr.limit) {
			break
		}
		if (tr.strategy == "maxlen" && t.m.length-n < uint64(tr.maxlen)) ||
			(tr.strategy == "minid" && !es[len(es)-1].id.less(tr.minid)) {
			break
		}
		if err := t.remove(es); err != nil {
			return 0, err
		}
		deleted += n
	}
	return int64(deleted), nil
}

// firstNode reads the entries of the stream's first node: those whose
// ordinals fall in the first entry's run of node (0: one node holds all).
func (t *streamTx) firstNode(node uint64) ([]streamEntry, error) {
	if node == 0 {
		return t.scan(streamID{}, maxStreamID, 0)
	}
	es, err := t.scan(streamID{}, maxStreamID, int(min(node, t.m.length)))
	if err != nil || len(es) == 0 {
		return es, err
	}
	run := es[0].ordinal / node
	for i, e := range es {
		if e.ordinal/node != run {
			return es[:i], nil
		}
	}
	return es, nil
}

// cmdXAdd: XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT
// count]] *|id field value [field value ...], one transaction: the entry,
// the trim and the metadata with its new last ID.
func cmdXAdd(x *call) {
	tr, at, given, seqGiven, idGiven, noMk, ok := x.parseAddOrTrim(true)
	if !ok {
		return
	}
	fields := x.args[at+1:]
	if len(fields) < 2 || len(fields)%2 == 1 {
		x.c.WriteError(errArity(x.name))
		return
	}
	if idGiven && seqGiven && given == (streamID{}) {
		x.c.WriteError("ERR The ID specified in XADD must be greater than 0-0")
		return
	}
	var id streamID
	var added bool
	err := x.streamTxn(x.args[1], func(t *streamTx) (bool, error) {
		added = false
		if !t.m.exists && noMk {
			return false, nil
		}
		if !t.m.exists && !x.setPositions() {
			return false, replyError(errStreamsUpgrading)
		}
		if t.m.last == maxStreamID {
			return false, replyError("ERR The stream has exhausted the last possible ID, unable to add more items")
		}
		last := t.m.last
		switch {
		case !idGiven:
			// The node's clock, never below the last ID: a clock behind
			// (another node's, stepped back) continues the sequence.
			now := uint64(max(0, x.s.cfg.Now().UnixMilli()))
			if now > last.ms {
				id = streamID{now, 0}
			} else {
				id, _ = last.next()
			}
		case !seqGiven && given.ms == last.ms:
			if last.seq == math.MaxUint64 {
				return false, replyError(errXAddID)
			}
			id = streamID{last.ms, last.seq + 1}
		default:
			id = given
		}
		if !last.less(id) {
			return false, replyError(errXAddID)
		}
		if err := t.tx.Put(x.ctx, t.entryKey(id), encodeEntry(t.m.added, fields)); err != nil {
			return false, err
		}
		t.m.last, t.m.length, t.m.added = id, t.m.length+1, t.m.added+1
		if _, err := t.trim(tr); err != nil {
			return false, err
		}
		added = true
		return true, nil
	})
	switch {
	case err != nil:
		writeCASErr(x.c, err)
	case !added:
		x.c.WriteNull()
	default:
		x.ready(x.args[1]) // the clients reading it (XREAD BLOCK)
		x.c.WriteBulkString(id.String())
	}
}

// errStreamsUpgrading refuses a new stream until every node's binary
// serves streams (the gate of SetPositioner, log version 13): an older
// front end knows none of the X commands and answers TYPE string for a
// stream, so a stream made while one runs is served by some nodes only.
const errStreamsUpgrading = "ERR streams are served once every node runs a binary that has them; the cluster is upgrading"

const errXAddID = "ERR The ID specified in XADD is equal or smaller than the target stream top item"

// cmdXTrim: XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count].
func cmdXTrim(x *call) {
	tr, _, _, _, _, _, ok := x.parseAddOrTrim(false)
	if !ok {
		return
	}
	var n int64
	err := x.streamTxn(x.args[1], func(t *streamTx) (bool, error) {
		if !t.m.exists {
			n = 0
			return false, nil
		}
		var err error
		n, err = t.trim(tr)
		return n > 0, err
	})
	x.replyCount(n, err)
}

// cmdXDel: XDEL key id [id ...], the IDs checked before any is deleted.
func cmdXDel(x *call) {
	var n int64
	err := x.streamTxn(x.args[1], func(t *streamTx) (bool, error) {
		n = 0
		if !t.m.exists {
			return false, nil
		}
		ids, err := parseStreamIDs(x.args[2:])
		if err != nil {
			return false, err
		}
		for _, id := range ids {
			r, err := t.tx.Get(x.ctx, t.entryKey(id))
			if err != nil {
				return false, err
			}
			if !r.Found {
				continue
			}
			if err := t.remove([]streamEntry{{id: id}}); err != nil {
				return false, err
			}
			if t.m.maxDeleted.less(id) {
				t.m.maxDeleted = id
			}
			n++
		}
		return n > 0, nil
	})
	x.replyCount(n, err)
}

// replyOK answers OK, or err.
func (x *call) replyOK(err error) {
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteString("OK")
}

// replyCount answers n, or err.
func (x *call) replyCount(n int64, err error) {
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteInt64(n)
}

// parseStreamIDs reads the IDs XDEL or XACK names, all before any is
// used, as Redis checks them.
func parseStreamIDs(args [][]byte) ([]streamID, error) {
	ids := make([]streamID, 0, len(args))
	for _, a := range args {
		id, _, ok := parseStreamID(a, 0, true, false)
		if !ok {
			return nil, replyError(errStreamID)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// readStream reads the stream's metadata outside a transaction: ok false
// if it replied (WRONGTYPE, an error).
func (x *call) readStream(key []byte) (streamMeta, bool) {
	var m streamMeta
	ok := x.readMetaOf(key, func(v []byte) bool {
		var good bool
		m, good = decodeStreamMeta(v)
		return good
	})
	return m, ok
}

func cmdXLen(x *call) {
	if m, ok := x.readStream(x.args[1]); ok {
		x.c.WriteInt64(int64(m.length))
	}
}

// cmdXSetID: XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id], with
// Redis 7.0's checks: the last ID may not go below the last entry's, nor
// entries-added below the length.
func cmdXSetID(x *call) {
	id, _, ok := parseStreamID(x.args[2], 0, true, false)
	if !ok {
		x.c.WriteError(errStreamID)
		return
	}
	added := int64(-1)
	var maxDel streamID
	for i := 3; i < len(x.args); i += 2 {
		more := i+1 < len(x.args)
		switch opt := strings.ToLower(string(x.args[i])); {
		case opt == "entriesadded" && more:
			n, err := strconv.ParseInt(string(x.args[i+1]), 10, 64)
			if err != nil {
				x.c.WriteError(errNotInt)
				return
			}
			if n < 0 {
				x.c.WriteError("ERR entries_added must be positive")
				return
			}
			added = n
		case opt == "maxdeletedid" && more:
			if maxDel, _, ok = parseStreamID(x.args[i+1], 0, true, false); !ok {
				x.c.WriteError(errStreamID)
				return
			}
			if id.less(maxDel) {
				x.c.WriteError("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
				return
			}
		default:
			x.c.WriteError(errSyntax)
			return
		}
	}
	err := x.streamTxn(x.args[1], func(t *streamTx) (bool, error) {
		// Redis 7.0 does not hold id to the greatest ID deleted (later
		// versions do).
		if !t.m.exists {
			return false, replyError("ERR no such key")
		}
		if t.m.length > 0 {
			last, err := t.x.scanEntriesRev(t.tx, t.key, t.m.gen, streamID{}, t.m.last, 1)
			if err != nil {
				return false, err
			}
			if len(last) > 0 && id.less(last[0].id) {
				return false, replyError("ERR The ID specified in XSETID is smaller than the target stream top item")
			}
			if added != -1 && t.m.length > uint64(added) {
				return false, replyError("ERR The entries_added specified in XSETID is smaller than the target stream length")
			}
		}
		t.m.last = id
		if added != -1 {
			t.m.added = uint64(added)
		}
		if maxDel != (streamID{}) {
			t.m.maxDeleted = maxDel
		}
		return true, nil
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteString("OK")
}
