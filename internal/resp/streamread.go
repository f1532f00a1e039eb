package resp

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// Stream reads (stream.go): XRANGE, XREVRANGE, XREAD (blocking as the
// list pops block, blocked.go) and XINFO STREAM. Outside a transaction
// they read the metadata before and after the entries (consistently), so
// they see one version of the stream.

// scanEntries reads the entries of generation gen of the stream at key in
// [from, to], in ID order, at most limit (<= 0: all), MaxBatchKeys a read.
func (x *call) scanEntries(sc scanner, key []byte, gen uint64, from, to streamID, limit int) ([]streamEntry, error) {
	if to.less(from) {
		return nil, nil // no span: the store refuses a scan of one
	}
	pre := elemPrefix(key, gen)
	start, end := from.append(bytes.Clone(pre)), append(to.append(bytes.Clone(pre)), 0)
	var out []streamEntry
	for limit <= 0 || len(out) < limit {
		n := x.s.cfg.MaxBatchKeys
		if limit > 0 {
			n = min(n, limit-len(out))
		}
		kvs, err := sc.Scan(x.ctx, start, end, n)
		if err != nil {
			return nil, err
		}
		for _, kv := range kvs {
			out = append(out, decodeEntry(decodeStreamID(kv.Key[len(pre):]), kv.Value))
		}
		if len(kvs) < n {
			break
		}
		start = append(bytes.Clone(kvs[len(kvs)-1].Key), 0)
	}
	return out, nil
}

// scanEntriesRev reads the entries in [from, to] from the last down, at
// most limit (<= 0: all). The store scans forward only, so it reads
// windows of IDs below to, each twice as many milliseconds wide as the
// last, until it has limit entries: XREVRANGE + - COUNT 10 of a long
// stream reads the last few milliseconds' entries, not the stream.
func (x *call) scanEntriesRev(sc scanner, key []byte, gen uint64, from, to streamID, limit int) ([]streamEntry, error) {
	var out []streamEntry
	w := uint64(1)
	for !to.less(from) && (limit <= 0 || len(out) < limit) {
		lo := from
		if to.ms-from.ms >= w {
			lo = streamID{to.ms - w + 1, 0}
		}
		es, err := x.scanEntries(sc, key, gen, lo, to, 0)
		if err != nil {
			return nil, err
		}
		for i := len(es) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
			out = append(out, es[i])
		}
		if lo == from {
			break
		}
		to, _ = lo.prev()
		w = min(2*w, math.MaxUint64/2)
	}
	return out, nil
}

// scan reads the entries in [from, to] inside the transaction.
func (t *streamTx) scan(from, to streamID, limit int) ([]streamEntry, error) {
	return t.x.scanEntries(t.tx, t.key, t.m.gen, from, to, limit)
}

// readEntries reads the stream at key outside a transaction and the
// entries read picks: its metadata and those entries; ok false: it
// replied. A missing stream reads no entries.
func (x *call) readEntries(key []byte, read func(m streamMeta) ([]streamEntry, error)) (streamMeta, []streamEntry, bool) {
	var m streamMeta
	var es []streamEntry
	ok := x.consistently(func() (uint64, uint64, bool, bool) {
		var ok bool
		m, ok = x.readStream(key)
		return m.gen, m.ver, m.exists, ok
	}, func() error {
		var err error
		es, err = read(m)
		return err
	})
	return m, es, ok
}

// writeEntry writes one entry as Redis does: [id, [field, value, ...]];
// an entry with no fields (nil: deleted while pending, XREADGROUP's
// history) as [id, nil].
func (x *call) writeEntry(e streamEntry) {
	x.c.WriteArray(2)
	x.c.WriteBulkString(e.id.String())
	if e.fields == nil {
		x.c.WriteArray(-1)
		return
	}
	x.c.WriteArray(len(e.fields))
	for _, f := range e.fields {
		x.c.WriteBulk(f)
	}
}

func (x *call) writeEntries(es []streamEntry) {
	x.c.WriteArray(len(es))
	for _, e := range es {
		x.writeEntry(e)
	}
}

// parseIntervalID reads an end of an XRANGE interval: an ID, "-", "+",
// or "(" and an ID (exclusive: the ID after it for the start, before it
// for the end); ok false: it replied.
func (x *call) parseIntervalID(b []byte, start bool) (streamID, bool) {
	ex := len(b) > 1 && b[0] == '('
	if ex {
		b = b[1:]
	}
	missingSeq, side, step := uint64(math.MaxUint64), "end", streamID.prev
	if start {
		missingSeq, side, step = 0, "start", streamID.next
	}
	id, _, ok := parseStreamID(b, missingSeq, ex, false)
	if !ok {
		x.c.WriteError(errStreamID)
		return id, false
	}
	if ex {
		if id, ok = step(id); !ok {
			x.c.WriteError("ERR invalid " + side + " ID for the interval")
		}
	}
	return id, ok
}

// cmdXRange: XRANGE key start end [COUNT n] and XREVRANGE key end start
// [COUNT n]: a scan of the entries answered (XREVRANGE: windows from the
// end, scanEntriesRev).
func cmdXRange(x *call) {
	rev := x.name == "xrevrange"
	startArg, endArg := x.args[2], x.args[3]
	if rev {
		startArg, endArg = endArg, startArg
	}
	from, ok := x.parseIntervalID(startArg, true)
	if !ok {
		return
	}
	to, ok := x.parseIntervalID(endArg, false)
	if !ok {
		return
	}
	count := int64(-1)
	for j := 4; j < len(x.args); j++ {
		if !strings.EqualFold(string(x.args[j]), "count") || j+1 == len(x.args) {
			x.c.WriteError(errSyntax)
			return
		}
		j++
		n, err := strconv.ParseInt(string(x.args[j]), 10, 64)
		if err != nil {
			x.c.WriteError(errNotInt)
			return
		}
		count = max(n, 0)
	}
	limit := int(min(count, math.MaxInt32))
	m, es, ok := x.readEntries(x.args[1], func(m streamMeta) ([]streamEntry, error) {
		if count == 0 {
			return nil, nil
		}
		if rev {
			// No entry lies past the last ID given out.
			return x.scanEntriesRev(x.kv, x.args[1], m.gen, from, earlier(to, m.last), limit)
		}
		return x.scanEntries(x.kv, x.args[1], m.gen, from, to, limit)
	})
	switch {
	case !ok:
	case m.exists && count == 0:
		x.c.WriteArray(-1) // as Redis answers COUNT 0 of a stream
	default:
		x.writeEntries(es)
	}
}

func earlier(a, b streamID) streamID {
	if b.less(a) {
		return b
	}
	return a
}

// xreadCount is XREAD's count when a client that blocked is served and
// gave none, as in Redis: a low ID must not answer a whole stream.
const xreadCount = 1000

// xreadArgs are XREAD's and XREADGROUP's options: the timeout (< 0: no
// BLOCK), COUNT, GROUP's group and consumer, NOACK, and where the keys
// start (after STREAMS).
type xreadArgs struct {
	timeout         time.Duration
	count           int64
	group, consumer []byte
	noack           bool
	streamsAt       int
}

// parseXRead reads XREAD's options, or XREADGROUP's (group), in Redis's
// order and with its errors; ok false: it replied.
func (x *call) parseXRead(group bool) (a xreadArgs, ok bool) {
	a.timeout = -1
	for i := 1; i < len(x.args) && a.streamsAt == 0; i++ {
		more := len(x.args) - 1 - i
		switch opt := strings.ToLower(string(x.args[i])); {
		case opt == "block" && more > 0:
			i++
			ms, err := strconv.ParseInt(string(x.args[i]), 10, 64)
			switch {
			case err != nil:
				x.c.WriteError("ERR timeout is not an integer or out of range")
				return a, false
			case ms < 0:
				x.c.WriteError(errTimeoutNegative)
				return a, false
			case ms > math.MaxInt64/int64(time.Millisecond):
				a.timeout = 0 // past 292 years: forever
			default:
				a.timeout = time.Duration(ms) * time.Millisecond
			}
		case opt == "count" && more > 0:
			i++
			n, err := strconv.ParseInt(string(x.args[i]), 10, 64)
			if err != nil {
				x.c.WriteError(errNotInt)
				return a, false
			}
			a.count = max(n, 0)
		case opt == "streams" && more > 0:
			a.streamsAt = i + 1
			if (len(x.args)-a.streamsAt)%2 != 0 {
				x.c.WriteError("ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.")
				return a, false
			}
		case !group && (opt == "group" && more >= 2 || opt == "noack"):
			x.c.WriteError("ERR The " + strings.ToUpper(opt) + " option is only supported by XREADGROUP. You called XREAD instead.")
			return a, false
		case opt == "group" && more >= 2:
			a.group, a.consumer = x.args[i+1], x.args[i+2]
			i += 2
		case opt == "noack":
			a.noack = true
		default:
			x.c.WriteError(errSyntax)
			return a, false
		}
	}
	switch {
	case a.streamsAt == 0:
		x.c.WriteError(errSyntax)
		return a, false
	case group && a.group == nil:
		x.c.WriteError("ERR Missing GROUP option for XREADGROUP")
		return a, false
	}
	return a, true
}

// streamRead is what XREAD or XREADGROUP answers of one key.
type streamRead struct {
	key []byte
	es  []streamEntry
}

// writeStreamReads answers XREAD or XREADGROUP: a map of key to entries
// (RESP2: an array of [key, entries]).
func (x *call) writeStreamReads(rs []streamRead) {
	x.header('%', len(rs), len(rs))
	for _, r := range rs {
		if !x.st.resp3 {
			x.c.WriteArray(2)
		}
		x.c.WriteBulk(r.key)
		x.writeEntries(r.es)
	}
}

// cmdXRead: XREAD [COUNT n] [BLOCK ms] STREAMS key [key ...] id [id ...],
// checked in Redis's order. An ID is the last the client has seen: it
// gets the entries after it, and "$" is the stream's last ID now. With
// BLOCK and nothing to read it waits as a blocked list pop does
// (blocked.go), but every client reading a key is woken by an XADD to
// it, since reading takes nothing from the others.
func cmdXRead(x *call) {
	a, ok := x.parseXRead(false)
	if !ok {
		return
	}
	timeout, count, streamsAt := a.timeout, a.count, a.streamsAt
	n := (len(x.args) - streamsAt) / 2
	keys := x.args[streamsAt : streamsAt+n]
	after := make([]streamID, n)
	for i, k := range keys {
		m, ok := x.readStream(k)
		if !ok {
			return
		}
		arg := x.args[streamsAt+n+i]
		if string(arg) == "$" {
			after[i] = m.last
			continue
		}
		if string(arg) == ">" {
			x.c.WriteError("ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")
			return
		}
		id, _, ok := parseStreamID(arg, 0, true, false)
		if !ok {
			x.c.WriteError(errStreamID)
			return
		}
		after[i] = id
	}
	x.answerReads(keys, timeout, count, func(i int, limit int64) ([]streamEntry, bool, bool) {
		es, ok := x.readAfter(keys[i], after[i], limit)
		return es, len(es) > 0, ok
	})
}

// readAfter reads at most limit (0: all) entries of the stream at k
// after ID after, outside a transaction (XREAD); ok false: it replied.
func (x *call) readAfter(k []byte, after streamID, limit int64) (es []streamEntry, ok bool) {
	from, more := after.next()
	if !more {
		return nil, true
	}
	var m streamMeta
	ok = x.consistently(func() (uint64, uint64, bool, bool) {
		v, err := x.kv.Get(x.ctx, encKey(k))
		if err != nil && !errors.Is(err, ErrNotFound) {
			replyErr(x.c, err)
			return 0, 0, false, false
		}
		// A key turned into another type while the client waits is
		// passed over (its first look answered WRONGTYPE), as a
		// missing one is.
		m, _ = decodeStreamMeta(v)
		return m.gen, m.ver, m.exists && m.length > 0, true
	}, func() error {
		var err error
		es, err = x.scanEntries(x.kv, k, m.gen, from, maxStreamID, int(min(limit, math.MaxInt32)))
		return err
	})
	return es, ok
}

// keyRead reads key i of an XREAD or XREADGROUP, at most limit entries
// (0: all): served is whether the key is answered, ok false that it
// replied (an error), which ends the read.
type keyRead func(i int, limit int64) (es []streamEntry, served, ok bool)

// answerReads answers XREAD or XREADGROUP by reading its keys with read:
// at once if timeout < 0 (a nil array if no key is served), else when a
// key is served before the timeout (blocked.go).
func (x *call) answerReads(keys [][]byte, timeout time.Duration, count int64, read keyRead) {
	try := func(_ func([]byte) bool, first bool) bool { return x.tryReads(keys, count, first, read) }
	none := func() { x.c.WriteArray(-1) }
	if timeout < 0 {
		if !try(nil, true) {
			none()
		}
		return
	}
	x.block(keys, timeout, true, try, none)
}

// tryReads reads every key and answers the keys served together; false
// if none was (nothing answered). A try after the first, woken from
// blocking, reads at most xreadCount entries a key when COUNT is 0.
func (x *call) tryReads(keys [][]byte, count int64, first bool, read keyRead) bool {
	limit := count
	if !first && limit == 0 {
		limit = xreadCount
	}
	var gots []streamRead
	for i, k := range keys {
		es, served, ok := read(i, limit)
		if !ok {
			return true
		}
		if served {
			gots = append(gots, streamRead{k, es})
		}
	}
	if len(gots) == 0 {
		return false
	}
	x.writeStreamReads(gots)
	return true
}

// xinfoSubcommands are XINFO's subcommands, as Redis 7.0's HELP lists
// them.
var xinfoSubcommands = subcommandTable{cmd: "XINFO", subs: []subcommand{
	{"consumers", 4, xinfoConsumers, []string{
		"CONSUMERS <key> <groupname>",
		"    Show consumers of <groupname>.",
	}},
	{"groups", 3, xinfoGroups, []string{
		"GROUPS <key>",
		"    Show the stream consumer groups.",
	}},
	{"stream", -3, xinfoStream, []string{
		"STREAM <key> [FULL [COUNT <count>]",
		"    Show information about the stream.",
	}},
}}

// cmdXInfo: XINFO STREAM key [FULL [COUNT n]], XINFO GROUPS key and
// XINFO CONSUMERS key group as Redis 7.0 answers them, the groups and
// consumers read with the entries (streamgroup.go).
func cmdXInfo(x *call) { xinfoSubcommands.run(x) }

// xinfoConsumers: XINFO CONSUMERS key group.
func xinfoConsumers(x *call) {
	key, g := x.args[2], x.args[3]
	var consumers []streamConsumer
	var groupFound bool
	m, _, ok := x.readEntries(key, func(m streamMeta) ([]streamEntry, error) {
		v, err := x.kv.Get(x.ctx, groupKey(key, m.gen, g))
		if groupFound = err == nil; groupFound {
			consumers, err = x.readConsumers(x.kv, key, m.gen, decodeGroup(v).name)
		} else if errors.Is(err, ErrNotFound) {
			err = nil
		}
		return nil, err
	})
	switch {
	case !ok:
		return
	case !m.exists:
		x.c.WriteError("ERR no such key")
		return
	case !groupFound:
		x.c.WriteError(string(errNoGroup(g, key)))
		return
	}
	now := x.s.cfg.Now().UnixMilli()
	x.c.WriteArray(len(consumers))
	for _, c := range consumers {
		x.writeMap(3)
		x.c.WriteBulkString("name")
		x.c.WriteBulk(c.name)
		x.c.WriteBulkString("pending")
		x.c.WriteInt64(int64(c.pending))
		x.c.WriteBulkString("idle")
		x.c.WriteInt64(idle(now, c.seen))
	}
}

// xinfoGroups: XINFO GROUPS key.
func xinfoGroups(x *call) {
	var groups []groupInfo
	m, _, ok := x.readEntries(x.args[2], func(m streamMeta) ([]streamEntry, error) {
		var err error
		groups, err = x.readGroupInfos(m, x.args[2], false, 0)
		return nil, err
	})
	switch {
	case !ok:
	case !m.exists:
		x.c.WriteError("ERR no such key")
	default:
		x.writeGroups(groups)
	}
}

// streamInfo is what XINFO STREAM answers besides the metadata: the
// first and last entries, or (FULL) the first count entries, and the
// groups.
type streamInfo struct {
	first, last, entries []streamEntry
	groups               []groupInfo
}

// xinfoStream: XINFO STREAM key [FULL [COUNT n]]. TideKV keeps no radix
// tree: radix-tree-keys and radix-tree-nodes count runs of
// stream-node-max-entries entries as a "~" trim does (docs/redis.md).
func xinfoStream(x *call) {
	n := len(x.args)
	full := n >= 4 && strings.EqualFold(string(x.args[3]), "full")
	// The options are checked after the key, as Redis does.
	badOptions := n > 3 && !(n == 4 && full) && !(n == 6 && full && strings.EqualFold(string(x.args[4]), "count"))
	count := int64(10) // FULL's entries, as Redis's default
	var badCount error
	if n == 6 && !badOptions {
		count, badCount = strconv.ParseInt(string(x.args[5]), 10, 64)
	}
	m, info, ok := x.readStreamInfo(x.args[2], full, count)
	switch {
	case !ok:
	case !m.exists:
		x.c.WriteError("ERR no such key")
	case badOptions:
		x.c.WriteError(errSubcommandSyntax("XINFO", x.args[1]))
	case badCount != nil:
		x.c.WriteError(errNotInt)
	default:
		x.writeStreamInfo(m, info, full)
	}
}

// readStreamInfo reads what XINFO STREAM answers of the stream at key
// (full: FULL with count); ok false: it replied.
func (x *call) readStreamInfo(key []byte, full bool, count int64) (streamMeta, streamInfo, bool) {
	var info streamInfo
	m, _, ok := x.readEntries(key, func(m streamMeta) ([]streamEntry, error) {
		var err error
		info = streamInfo{}
		if info.groups, err = x.readGroupInfos(m, key, full, count); err != nil {
			return nil, err
		}
		if full {
			info.entries, err = x.scanEntries(x.kv, key, m.gen, streamID{}, maxStreamID, int(min(max(count, 0), math.MaxInt32)))
			info.first = info.entries
			return nil, err
		}
		if info.first, err = x.scanEntries(x.kv, key, m.gen, streamID{}, maxStreamID, 1); err != nil {
			return nil, err
		}
		info.last, err = x.scanEntriesRev(x.kv, key, m.gen, streamID{}, m.last, 1)
		return nil, err
	})
	return m, info, ok
}

// writeStreamInfo answers XINFO STREAM (full: FULL).
func (x *call) writeStreamInfo(m streamMeta, info streamInfo, full bool) {
	node := uint64(x.streamNodeEntries())
	keys := min(m.length, 1)
	if node > 0 {
		keys = (m.length + node - 1) / node
	}
	firstID := streamID{}
	if len(info.first) > 0 {
		firstID = info.first[0].id
	}
	x.writeMap(9 + b2i(!full))
	x.c.WriteBulkString("length")
	x.c.WriteInt64(int64(m.length))
	x.c.WriteBulkString("radix-tree-keys")
	x.c.WriteInt64(int64(keys))
	x.c.WriteBulkString("radix-tree-nodes")
	x.c.WriteInt64(int64(keys + 1))
	x.c.WriteBulkString("last-generated-id")
	x.c.WriteBulkString(m.last.String())
	x.c.WriteBulkString("max-deleted-entry-id")
	x.c.WriteBulkString(m.maxDeleted.String())
	x.c.WriteBulkString("entries-added")
	x.c.WriteInt64(int64(m.added))
	x.c.WriteBulkString("recorded-first-entry-id")
	x.c.WriteBulkString(firstID.String())
	if full {
		x.c.WriteBulkString("entries")
		x.writeEntries(info.entries)
		x.c.WriteBulkString("groups")
		x.writeFullGroups(info.groups)
		return
	}
	x.c.WriteBulkString("groups")
	x.c.WriteInt64(int64(len(info.groups)))
	for i, es := range [][]streamEntry{info.first, info.last} {
		x.c.WriteBulkString([]string{"first-entry", "last-entry"}[i])
		if len(es) == 0 {
			x.c.WriteNull()
		} else {
			x.writeEntry(es[0])
		}
	}
}
