package resp

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The consumer-group commands (streamgroup.go keeps the state): XGROUP,
// XREADGROUP, XACK and XPENDING, with Redis 7.0's checks in its order and
// its errors. Each changes one stream in its transaction (streamTxn).

const errNoKeyForGroup = "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically."

func errNoGroup(g, key []byte) replyError {
	return replyError("NOGROUP No such consumer group '" + string(g) + "' for key name '" + string(key) + "'")
}

// xgroupSubcommands are XGROUP's subcommands, as Redis 7.0's HELP lists
// them.
var xgroupSubcommands = subcommandTable{cmd: "XGROUP", subs: []subcommand{
	{"create", -5, xgroupCreate, []string{
		"CREATE <key> <groupname> <id|$> [option]",
		"    Create a new consumer group. Options are:",
		"    * MKSTREAM",
		"      Create the empty stream if it does not exist.",
		"    * ENTRIESREAD entries_read",
		"      Set the group's entries_read counter (internal use).",
	}},
	{"createconsumer", 5, xgroupCreateConsumer, []string{
		"CREATECONSUMER <key> <groupname> <consumer>",
		"    Create a new consumer in the specified group.",
	}},
	{"delconsumer", 5, xgroupDelConsumer, []string{
		"DELCONSUMER <key> <groupname> <consumer>",
		"    Remove the specified consumer.",
	}},
	{"destroy", 4, xgroupDestroy, []string{
		"DESTROY <key> <groupname>",
		"    Remove the specified group.",
	}},
	{"setid", -5, xgroupSetID, []string{
		"SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
		"    Set the current group ID and entries_read counter.",
	}},
}}

// cmdXGroup: XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n],
// SETID key group id|$ [ENTRIESREAD n], DESTROY key group,
// CREATECONSUMER key group consumer, DELCONSUMER key group consumer, HELP.
func cmdXGroup(x *call) { xgroupSubcommands.run(x) }

// parseGroupOptions reads the options of XGROUP CREATE (MKSTREAM,
// ENTRIESREAD n) or SETID (ENTRIESREAD n), in Redis's order: each option
// as it comes, then their number; ok false: it replied.
func (x *call) parseGroupOptions(create bool) (mkstream bool, entriesRead int64, ok bool) {
	n := len(x.args)
	badSyntax := errSubcommandSyntax("XGROUP", x.args[1])
	entriesRead = noEntriesRead
	for i := 5; i < n; {
		switch opt := strings.ToLower(string(x.args[i])); {
		case create && opt == "mkstream":
			mkstream = true
			i++
		case opt == "entriesread" && i+1 < n:
			v, err := strconv.ParseInt(string(x.args[i+1]), 10, 64)
			if err != nil {
				x.c.WriteError(errNotInt)
				return false, 0, false
			}
			if v < 0 && v != noEntriesRead {
				x.c.WriteError("ERR value for ENTRIESREAD must be positive or -1")
				return false, 0, false
			}
			entriesRead = v
			i += 2
		default:
			x.c.WriteError(badSyntax)
			return false, 0, false
		}
	}
	if (create && n > 8) || (!create && n != 5 && n != 7) {
		x.c.WriteError(badSyntax)
		return false, 0, false
	}
	return mkstream, entriesRead, true
}

// groupTxn runs fn on the group XGROUP names (key args[2], group
// args[3]) in the stream's transaction, after XGROUP's checks in Redis's
// order: the stream must exist (unless mkstream: CREATE may make it),
// and the group too unless mayLack (CREATE, DESTROY: gr is nil then).
func (x *call) groupTxn(mkstream, mayLack bool, fn func(t *streamTx, gr *streamGroup) (changed bool, err error)) error {
	key, g := x.args[2], x.args[3]
	return x.streamTxn(key, func(t *streamTx) (bool, error) {
		if !t.m.exists && !mkstream {
			return false, replyError(errNoKeyForGroup)
		}
		gr, err := t.group(g)
		if err != nil {
			return false, err
		}
		if gr == nil && !mayLack {
			return false, errNoGroup(g, key)
		}
		return fn(t, gr)
	})
}

// groupStart is the ID XGROUP CREATE or SETID gives (args[4]): "$" the
// stream's last; CREATE takes a strict ID, SETID "-" and "+" too.
func (t *streamTx) groupStart(arg []byte, strict bool) (streamID, error) {
	if string(arg) == "$" {
		return t.m.last, nil
	}
	id, _, ok := parseStreamID(arg, 0, strict, false)
	if !ok {
		return streamID{}, replyError(errStreamID)
	}
	return id, nil
}

// xgroupCreate: XGROUP CREATE key group id|$ [MKSTREAM] [ENTRIESREAD n].
func xgroupCreate(x *call) {
	mkstream, entriesRead, ok := x.parseGroupOptions(true)
	if !ok {
		return
	}
	x.replyOK(x.groupTxn(mkstream, true, func(t *streamTx, gr *streamGroup) (bool, error) {
		id, err := t.groupStart(x.args[4], true)
		switch {
		case err != nil:
			return false, err
		case gr != nil:
			return false, replyError("BUSYGROUP Consumer Group name already exists")
		case !t.m.exists && !x.setPositions():
			return false, replyError(errStreamsUpgrading)
		}
		return true, t.putGroup(&streamGroup{name: x.args[3], last: id, entriesRead: entriesRead})
	}))
}

// xgroupSetID: XGROUP SETID key group id|$ [ENTRIESREAD n].
func xgroupSetID(x *call) {
	_, entriesRead, ok := x.parseGroupOptions(false)
	if !ok {
		return
	}
	x.replyOK(x.groupTxn(false, false, func(t *streamTx, gr *streamGroup) (bool, error) {
		id, err := t.groupStart(x.args[4], false)
		if err != nil {
			return false, err
		}
		gr.last, gr.entriesRead = id, entriesRead
		return true, t.putGroup(gr)
	}))
}

// xgroupDestroy: XGROUP DESTROY key group, answering 1 if the group was,
// else 0.
func xgroupDestroy(x *call) {
	var n int64
	err := x.groupTxn(false, true, func(t *streamTx, gr *streamGroup) (bool, error) {
		n = 0
		if gr == nil {
			return false, nil
		}
		n = 1
		return true, t.destroyGroup(gr.name)
	})
	x.replyCount(n, err)
}

// xgroupCreateConsumer: XGROUP CREATECONSUMER key group consumer,
// answering 1 if it made the consumer, 0 if it was.
func xgroupCreateConsumer(x *call) {
	var n int64
	err := x.groupTxn(false, false, func(t *streamTx, gr *streamGroup) (bool, error) {
		now := x.s.cfg.Now().UnixMilli()
		co, made, err := t.ensureConsumer(gr, x.args[4], now)
		n = int64(b2i(made))
		if err != nil || !made {
			return false, err
		}
		return true, t.putConsumerAndGroup(gr, co)
	})
	x.replyCount(n, err)
}

// xgroupDelConsumer: XGROUP DELCONSUMER key group consumer, answering how
// many entries it had pending (0 if there was none).
func xgroupDelConsumer(x *call) {
	var n int64
	err := x.groupTxn(false, false, func(t *streamTx, gr *streamGroup) (bool, error) {
		n = 0
		co, err := t.consumer(gr, x.args[4])
		if err != nil || co == nil {
			return false, err
		}
		p, err := t.delConsumer(gr, co)
		if err != nil {
			return false, err
		}
		n = int64(p)
		return true, t.putGroup(gr)
	})
	x.replyCount(n, err)
}

// cmdXReadGroup: XREADGROUP GROUP group consumer [COUNT n] [BLOCK ms]
// [NOACK] STREAMS key [key ...] id [id ...]. ">" reads the entries no
// consumer of the group was given, each becoming pending for this one
// (NOACK: not); another ID reads the consumer's own pending entries after
// it (an entry deleted since as [id, nil]), and is answered at once. With
// nothing new and BLOCK it waits as XREAD does (blocked.go). Each key is
// read and changed in its own transaction.
func cmdXReadGroup(x *call) {
	a, ok := x.parseXRead(true)
	if !ok {
		return
	}
	n := (len(x.args) - a.streamsAt) / 2
	keys := x.args[a.streamsAt : a.streamsAt+n]
	starts, ok := x.groupReadStarts(keys, x.args[a.streamsAt+n:], a.group)
	if !ok {
		return
	}
	timeout := a.timeout
	if slices.ContainsFunc(starts, func(s groupReadStart) bool { return s.history }) {
		timeout = -1 // a history read is answered at once
	}
	x.answerReads(keys, timeout, a.count, func(i int, limit int64) ([]streamEntry, bool, bool) {
		es, served, err := x.readGroupKey(keys[i], starts[i], a, limit)
		if err != nil {
			writeCASErr(x.c, err)
			return nil, false, false
		}
		return es, served, true
	})
}

// groupReadStart is where XREADGROUP reads a key from: new entries (">"),
// or the consumer's history after an ID.
type groupReadStart struct {
	history bool
	after   streamID
}

// groupReadStarts checks, key by key as Redis does, that the stream has
// the group and its ID is ">" or an ID; ok false: it replied.
func (x *call) groupReadStarts(keys, ids [][]byte, group []byte) ([]groupReadStart, bool) {
	starts := make([]groupReadStart, len(keys))
	for i, k := range keys {
		found := false
		_, _, ok := x.readEntries(k, func(m streamMeta) ([]streamEntry, error) {
			_, err := x.kv.Get(x.ctx, groupKey(k, m.gen, group))
			if found = err == nil; errors.Is(err, ErrNotFound) {
				err = nil
			}
			return nil, err
		})
		if !ok {
			return nil, false
		}
		if !found {
			x.c.WriteError("NOGROUP No such key '" + string(k) + "' or consumer group '" + string(group) + "' in XREADGROUP with GROUP option")
			return nil, false
		}
		switch string(ids[i]) {
		case "$":
			x.c.WriteError("ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.")
			return nil, false
		case ">":
		default:
			id, _, ok := parseStreamID(ids[i], 0, true, false)
			if !ok {
				x.c.WriteError(errStreamID)
				return nil, false
			}
			starts[i] = groupReadStart{history: true, after: id}
		}
	}
	return starts, true
}

// readGroupKey reads key k for XREADGROUP in its transaction, at most
// limit entries (0: all): the consumer's history after st's ID, or the
// entries new to the group. served is whether the key is answered: a
// history always is, new entries when there are some.
func (x *call) readGroupKey(k []byte, st groupReadStart, a xreadArgs, limit int64) (es []streamEntry, served bool, err error) {
	n := int(min(limit, math.MaxInt32))
	err = x.streamTxn(k, func(t *streamTx) (bool, error) {
		es, served = nil, false
		gr, err := t.readingGroup(a.group)
		if err != nil {
			return false, err
		}
		now := x.s.cfg.Now().UnixMilli()
		if st.history {
			served = true
			es, err = t.readHistory(gr, a.consumer, st.after, n, now)
		} else {
			es, err = t.readNew(gr, a.consumer, n, a.noack, now)
			served = len(es) > 0
		}
		return served && err == nil, err
	})
	if errors.Is(err, wrongType) {
		err = replyError(errStreamGone)
	}
	return es, served, err
}

// readingGroup is group g of the stream XREADGROUP reads, or Redis 7.0's
// error for a stream or group gone while the client waited (DEL,
// FLUSHALL, XGROUP DESTROY).
func (t *streamTx) readingGroup(g []byte) (*streamGroup, error) {
	gr, err := t.group(g)
	switch {
	case err != nil:
		return nil, err
	case !t.m.exists:
		return nil, replyError(errStreamGone)
	case gr == nil:
		return nil, replyError("NOGROUP the consumer group this client was blocked on no longer exists")
	}
	return gr, nil
}

// consumerSeen is consumer c of gr, made if there is none, seen at now;
// the caller writes it back.
func (t *streamTx) consumerSeen(gr *streamGroup, c []byte, now int64) (*streamConsumer, error) {
	co, _, err := t.ensureConsumer(gr, c, now)
	if err != nil {
		return nil, err
	}
	co.seen = now
	return co, nil
}

// readHistory reads consumer c's pending entries after after, at most
// limit (<= 0: all), delivered again at now (history), and writes the
// consumer back seen, entries or none.
func (t *streamTx) readHistory(gr *streamGroup, c []byte, after streamID, limit int, now int64) ([]streamEntry, error) {
	co, err := t.consumerSeen(gr, c, now)
	if err != nil {
		return nil, err
	}
	var es []streamEntry
	if from, more := after.next(); more {
		if es, err = t.history(gr, co, from, limit, now); err != nil {
			return nil, err
		}
	}
	return es, t.putConsumerAndGroup(gr, co)
}

// readNew gives consumer c of gr at most limit (<= 0: all) entries after
// the group's last ID, moving the group past them and making each
// pending for c unless noack; none if there is no new entry, and then
// it changes nothing.
func (t *streamTx) readNew(gr *streamGroup, c []byte, limit int, noack bool, now int64) ([]streamEntry, error) {
	from, more := gr.last.next()
	if t.m.length == 0 || !more || !gr.last.less(t.m.last) {
		return nil, nil
	}
	es, err := t.scan(from, maxStreamID, limit)
	if err != nil || len(es) == 0 {
		return nil, err
	}
	co, err := t.consumerSeen(gr, c, now)
	if err != nil {
		return nil, err
	}
	first, err := t.x.firstEntry(t.tx, t.key, t.m)
	if err != nil {
		return nil, err
	}
	for _, e := range es {
		gr.advance(t.m, first, e.id)
		if noack {
			continue
		}
		if err := t.deliver(gr, co, e.id, now, 1); err != nil {
			return nil, err
		}
	}
	return es, t.putConsumerAndGroup(gr, co)
}

const errStreamGone = "UNBLOCKED the stream key no longer exists"

// putConsumerAndGroup writes back consumer co (none if nil: a claim that
// made and gained none) and its group.
func (t *streamTx) putConsumerAndGroup(gr *streamGroup, co *streamConsumer) error {
	if co != nil {
		if err := t.putConsumer(gr, co); err != nil {
			return err
		}
	}
	return t.putGroup(gr)
}

// history reads consumer co's pending entries from from, at most limit
// (<= 0: all), each delivered again at now; an entry deleted since is
// answered as its ID with no fields, and not counted delivered.
func (t *streamTx) history(gr *streamGroup, co *streamConsumer, from streamID, limit int, now int64) ([]streamEntry, error) {
	ids, err := t.owned(gr, co.name, from, maxStreamID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]streamEntry, 0, len(ids))
	for _, id := range ids {
		r, err := t.tx.Get(t.x.ctx, t.entryKey(id))
		if err != nil {
			return nil, err
		}
		if !r.Found {
			out = append(out, streamEntry{id: id})
			continue
		}
		out = append(out, decodeEntry(id, r.Value))
		p, err := t.pending(gr, id)
		if err != nil {
			return nil, err
		}
		p.delivered, p.count = now, p.count+1
		if err := t.tx.Put(t.x.ctx, id.append(pendingPrefix(t.key, t.m.gen, gr.name)), encodePending(*p)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cmdXAck: XACK key group id [id ...], the IDs checked before any is
// acknowledged.
func cmdXAck(x *call) {
	var n int64
	err := x.streamTxn(x.args[1], func(t *streamTx) (bool, error) {
		n = 0
		gr, err := t.group(x.args[2])
		if err != nil || gr == nil {
			return false, err
		}
		ids, err := parseStreamIDs(x.args[3:])
		if err != nil {
			return false, err
		}
		for _, id := range ids {
			p, err := t.pending(gr, id)
			if err != nil {
				return false, err
			}
			if p == nil {
				continue
			}
			if err := t.ack(gr, p, nil); err != nil {
				return false, err
			}
			n++
		}
		if n == 0 {
			return false, nil
		}
		return true, t.putGroup(gr)
	})
	x.replyCount(n, err)
}

// cmdXPending: XPENDING key group, the summary (count, first and last
// IDs, each consumer with entries pending and how many), or XPENDING key
// group [IDLE ms] start end count [consumer], the entries (ID, consumer,
// idle ms, deliveries), read in one transaction that changes nothing.
func cmdXPending(x *call) {
	switch n := len(x.args); {
	case n != 3 && (n < 6 || n > 9):
		x.c.WriteError(errSyntax)
	case n == 3:
		x.xpendingSummary()
	default:
		if a, ok := x.parseXPending(); ok {
			x.xpendingEntries(a)
		}
	}
}

// xpendingSummary answers XPENDING key group.
func (x *call) xpendingSummary() {
	var gr *streamGroup
	var first, last pendingEntry
	var cs []streamConsumer
	err := x.streamTxn(x.args[1], func(t *streamTx) (bool, error) {
		cs = nil
		var err error
		if gr, err = t.existingGroup(x.args[2]); err != nil || gr.pending == 0 {
			return false, err
		}
		// lastPending fails if gr counts entries pending and has none, so
		// the first is there after it.
		if last, err = t.lastPending(gr); err != nil {
			return false, err
		}
		ps, err := t.pendings(gr, streamID{}, maxStreamID, 1, func(pendingEntry) bool { return true })
		if err != nil {
			return false, err
		}
		first = ps[0]
		cs, err = x.readConsumers(t.tx, t.key, t.m.gen, gr.name)
		return false, err
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteArray(4)
	x.c.WriteInt64(int64(gr.pending))
	if gr.pending == 0 {
		x.c.WriteNull()
		x.c.WriteNull()
		x.c.WriteArray(-1)
		return
	}
	x.c.WriteBulkString(first.id.String())
	x.c.WriteBulkString(last.id.String())
	busy := 0
	for _, c := range cs {
		busy += b2i(c.pending > 0)
	}
	x.c.WriteArray(busy)
	for _, c := range cs {
		if c.pending > 0 {
			x.c.WriteArray(2)
			x.c.WriteBulk(c.name)
			x.c.WriteBulkString(strconv.FormatUint(c.pending, 10))
		}
	}
}

// xpendingArgs are the arguments of XPENDING's entries form.
type xpendingArgs struct {
	minIdle  int64
	from, to streamID
	count    int64
	consumer []byte // nil: every consumer's
}

// parseXPending reads XPENDING key group [IDLE ms] start end count
// [consumer]; ok false: it replied.
func (x *call) parseXPending() (a xpendingArgs, ok bool) {
	at := 3
	if strings.EqualFold(string(x.args[3]), "idle") {
		v, err := strconv.ParseInt(string(x.args[4]), 10, 64)
		if err != nil {
			x.c.WriteError(errNotInt)
			return a, false
		}
		a.minIdle = v
		if len(x.args) < 8 {
			x.c.WriteError(errSyntax)
			return a, false
		}
		at += 2
	}
	c, err := strconv.ParseInt(string(x.args[at+2]), 10, 64)
	if err != nil {
		x.c.WriteError(errNotInt)
		return a, false
	}
	a.count = max(c, 0)
	if a.from, ok = x.parseIntervalID(x.args[at], true); !ok {
		return a, false
	}
	if a.to, ok = x.parseIntervalID(x.args[at+1], false); !ok {
		return a, false
	}
	if at+3 < len(x.args) {
		a.consumer = x.args[at+3]
	}
	return a, true
}

// xpendingEntries answers XPENDING's entries form.
func (x *call) xpendingEntries(a xpendingArgs) {
	var ps []pendingEntry
	var now int64
	err := x.streamTxn(x.args[1], func(t *streamTx) (bool, error) {
		gr, err := t.existingGroup(x.args[2])
		if err != nil {
			return false, err
		}
		now = x.s.cfg.Now().UnixMilli()
		ps, err = t.pendingIn(gr, a, now)
		return false, err
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteArray(len(ps))
	for _, p := range ps {
		x.c.WriteArray(4)
		x.c.WriteBulkString(p.id.String())
		x.c.WriteBulk(p.consumer)
		x.c.WriteInt64(idle(now, p.delivered))
		x.c.WriteInt64(int64(p.count))
	}
}

// pendingIn reads the pending entries of gr XPENDING's entries form asks
// for: in [a.from, a.to], of a.consumer if given, idle at least
// a.minIdle at now, at most a.count.
func (t *streamTx) pendingIn(gr *streamGroup, a xpendingArgs, now int64) ([]pendingEntry, error) {
	if a.count == 0 {
		return nil, nil
	}
	keep := func(p pendingEntry) bool { return p.idleFor(a.minIdle, now) }
	if a.consumer == nil {
		return t.pendings(gr, a.from, a.to, int(min(a.count, math.MaxInt32)), keep)
	}
	ids, err := t.owned(gr, a.consumer, a.from, a.to, 0)
	var ps []pendingEntry
	for _, id := range ids {
		if err != nil || int64(len(ps)) == a.count {
			break
		}
		var p *pendingEntry
		if p, err = t.pending(gr, id); err == nil && keep(*p) {
			ps = append(ps, *p)
		}
	}
	return ps, err
}

// lastPending is gr's greatest pending ID's entry (gr has one). No ID
// past the stream's last is pending unless its entry was deleted and the
// last ID set back (XSETID), so one scan of that span, usually empty,
// comes first; then windows below it, each twice as many milliseconds
// wide as the last, as scanEntriesRev reads entries.
func (t *streamTx) lastPending(gr *streamGroup) (pendingEntry, error) {
	all := func(pendingEntry) bool { return true }
	to, w := t.m.last, uint64(1)
	if above, ok := to.next(); ok {
		ps, err := t.pendings(gr, above, maxStreamID, 0, all)
		if err != nil {
			return pendingEntry{}, err
		}
		if len(ps) > 0 {
			return ps[len(ps)-1], nil
		}
	}
	for {
		lo := streamID{}
		if to.ms >= w {
			lo = streamID{to.ms - w + 1, 0}
		}
		ps, err := t.pendings(gr, lo, to, 0, all)
		if err != nil {
			return pendingEntry{}, err
		}
		if len(ps) > 0 {
			return ps[len(ps)-1], nil
		}
		if lo == (streamID{}) {
			return pendingEntry{}, errors.New("resp: a group counts entries pending and has none")
		}
		to, _ = lo.prev()
		w = min(2*w, math.MaxUint64/2)
	}
}
