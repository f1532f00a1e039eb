package resp

import (
	"math"
	"strconv"
	"strings"
)

// XCLAIM and XAUTOCLAIM: pending entries of a group given to another
// consumer (streamgroup.go), in the stream's transaction, with Redis
// 7.0's options, errors and replies. A pending entry whose stream entry
// was deleted is dropped from the PEL, as Redis 7.0 drops it.

// claimed is one entry a claim answers: its ID, and its fields unless
// JUSTID.
type claimed struct {
	id     streamID
	fields [][]byte
}

// claimOne gives id of gr to consumer name (made on the first claim, its
// seen time now) as delivered at, with delivery count count: old is its
// PEL entry (nil: a new one, XCLAIM FORCE). It reads the stream entry
// first, as Redis: gone reports it was deleted, and the PEL entry is then
// dropped instead; else an entry not idle (eligible false) is left as it
// is (ok false).
func (t *streamTx) claimOne(gr *streamGroup, co **streamConsumer, name []byte, id streamID, old *pendingEntry, eligible bool, at int64, count uint64, now int64) (c claimed, gone, ok bool, err error) {
	r, err := t.tx.Get(t.x.ctx, t.entryKey(id))
	if err != nil {
		return c, false, false, err
	}
	if !r.Found {
		if old != nil {
			err = t.ack(gr, old, *co)
		}
		return c, true, false, err
	}
	if !eligible {
		return c, false, false, nil
	}
	if *co == nil {
		if *co, err = t.consumerSeen(gr, name, now); err != nil {
			return c, false, false, err
		}
	}
	if err := t.deliver(gr, *co, id, at, count); err != nil {
		return c, false, false, err
	}
	return claimed{id: id, fields: decodeEntry(id, r.Value).fields}, false, true, nil
}

// writeClaimed answers claimed entries: IDs (justID) or entries.
func (x *call) writeClaimed(cs []claimed, justID bool) {
	x.c.WriteArray(len(cs))
	for _, c := range cs {
		if justID {
			x.c.WriteBulkString(c.id.String())
		} else {
			x.writeEntry(streamEntry{id: c.id, fields: c.fields})
		}
	}
}

func errNoKeyOrGroup(key, g []byte) replyError {
	return replyError("NOGROUP No such key '" + string(key) + "' or consumer group '" + string(g) + "'")
}

// existingGroup is group g of the stream, or NOGROUP's error (XCLAIM,
// XAUTOCLAIM, XPENDING).
func (t *streamTx) existingGroup(g []byte) (*streamGroup, error) {
	gr, err := t.group(g)
	if err == nil && gr == nil {
		err = errNoKeyOrGroup(t.key, g)
	}
	return gr, err
}

// idleFor reports whether p was delivered at least minIdle milliseconds
// before now (any p if minIdle is 0).
func (p *pendingEntry) idleFor(minIdle, now int64) bool {
	return minIdle == 0 || now-p.delivered >= minIdle
}

// xclaimArgs are XCLAIM's arguments after the consumer.
type xclaimArgs struct {
	minIdle int64
	ids     []streamID
	// at is when the entries count as delivered: TIME's, or (idle)
	// IDLE's milliseconds before now; -1: now.
	at            int64
	idle          bool
	retry         int64 // RETRYCOUNT; -1: none
	force, justID bool
	lastID        streamID
}

// parseXClaim reads XCLAIM's min-idle-time, IDs and options; the caller
// answers its error once the group is found, as Redis checks them.
func parseXClaim(args [][]byte) (a xclaimArgs, err error) {
	a.at, a.retry = -1, -1
	if a.minIdle, err = strconv.ParseInt(string(args[4]), 10, 64); err != nil {
		return a, replyError("ERR Invalid min-idle-time argument for XCLAIM")
	}
	a.minIdle = max(a.minIdle, 0)
	j := 5
	for ; j < len(args); j++ {
		id, _, ok := parseStreamID(args[j], 0, true, false)
		if !ok {
			break
		}
		a.ids = append(a.ids, id)
	}
	for ; j < len(args); j++ {
		more := j+1 < len(args)
		num := func(what string) (int64, error) {
			j++
			n, err := strconv.ParseInt(string(args[j]), 10, 64)
			if err != nil {
				return 0, replyError("ERR Invalid " + what + " option argument for XCLAIM")
			}
			return n, nil
		}
		switch opt := strings.ToLower(string(args[j])); {
		case opt == "force":
			a.force = true
		case opt == "justid":
			a.justID = true
		case opt == "idle" && more:
			a.at, err = num("IDLE")
			a.idle = true
		case opt == "time" && more:
			a.at, err = num("TIME")
			a.idle = false
		case opt == "retrycount" && more:
			a.retry, err = num("RETRYCOUNT")
		case opt == "lastid" && more:
			j++
			id, _, ok := parseStreamID(args[j], 0, true, false)
			if !ok {
				return a, replyError(errStreamID)
			}
			a.lastID = id
		default:
			return a, replyError("ERR Unrecognized XCLAIM option '" + string(args[j]) + "'")
		}
		if err != nil {
			return a, err
		}
	}
	return a, nil
}

// deliveryTime is when entries claimed at now count as delivered. A time
// in the future or before the epoch is now, as in Redis: clients compute
// it with their own clocks.
func (a *xclaimArgs) deliveryTime(now int64) int64 {
	at := a.at
	if a.idle {
		at = now - a.at
	}
	if at < 0 || at > now {
		return now
	}
	return at
}

// deliveries is the delivery count of an entry claimed whose PEL entry
// is p (nil: FORCE makes one, which Redis counts delivered once): the
// RETRYCOUNT, else one more than it had unless JUSTID.
func (a *xclaimArgs) deliveries(p *pendingEntry) uint64 {
	count := uint64(1)
	if p != nil {
		count = p.count
	}
	switch {
	case a.retry >= 0:
		count = uint64(a.retry)
	case !a.justID:
		count++
	}
	return count
}

// cmdXClaim: XCLAIM key group consumer min-idle-time id [id ...] [IDLE
// ms] [TIME ms] [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id].
func cmdXClaim(x *call) {
	key, g, name := x.args[1], x.args[2], x.args[3]
	a, perr := parseXClaim(x.args)
	var out []claimed
	err := x.streamTxn(key, func(t *streamTx) (bool, error) {
		out = nil
		gr, err := t.existingGroup(g)
		if err != nil {
			return false, err
		}
		if perr != nil {
			return false, perr
		}
		var changed bool
		out, changed, err = t.claimIDs(gr, name, &a, x.s.cfg.Now().UnixMilli())
		return changed && err == nil, err
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.writeClaimed(out, a.justID)
}

// claimIDs gives XCLAIM's pending IDs (and with FORCE those not pending)
// of gr to consumer name, those idle enough, and moves the group's last
// ID up to LASTID; it writes the group back if it changed, and answers
// the entries claimed.
func (t *streamTx) claimIDs(gr *streamGroup, name []byte, a *xclaimArgs, now int64) (out []claimed, changed bool, err error) {
	if gr.last.less(a.lastID) {
		gr.last, changed = a.lastID, true
	}
	at := a.deliveryTime(now)
	var co *streamConsumer
	for _, id := range a.ids {
		p, err := t.pending(gr, id)
		if err != nil {
			return nil, false, err
		}
		if p == nil && !a.force {
			continue
		}
		eligible := p == nil || p.idleFor(a.minIdle, now)
		c, gone, ok, err := t.claimOne(gr, &co, name, id, p, eligible, at, a.deliveries(p), now)
		if err != nil {
			return nil, false, err
		}
		changed = changed || (gone && p != nil) || ok
		if ok {
			out = append(out, c)
		}
	}
	if !changed {
		return out, false, nil
	}
	return out, true, t.putConsumerAndGroup(gr, co)
}

// xautoclaimArgs are XAUTOCLAIM's arguments after the consumer.
type xautoclaimArgs struct {
	minIdle int64
	start   streamID
	count   int64
	justID  bool
}

// parseXAutoClaim reads XAUTOCLAIM's min-idle-time, start and options;
// ok false: it replied.
func (x *call) parseXAutoClaim() (a xautoclaimArgs, ok bool) {
	minIdle, err := strconv.ParseInt(string(x.args[4]), 10, 64)
	if err != nil {
		x.c.WriteError("ERR Invalid min-idle-time argument for XAUTOCLAIM")
		return a, false
	}
	a.minIdle, a.count = max(minIdle, 0), 100
	if a.start, ok = x.parseIntervalID(x.args[5], true); !ok {
		return a, false
	}
	for j := 6; j < len(x.args); j++ {
		switch opt := strings.ToLower(string(x.args[j])); {
		case opt == "count" && j+1 < len(x.args):
			j++
			n, err := strconv.ParseInt(string(x.args[j]), 10, 64)
			if err != nil || n < 1 || n > math.MaxInt64/16 {
				x.c.WriteError("ERR COUNT must be > 0")
				return a, false
			}
			a.count = n
		case opt == "justid":
			a.justID = true
		default:
			x.c.WriteError(errSyntax)
			return a, false
		}
	}
	return a, true
}

// autoClaimed is what XAUTOCLAIM answers: the ID to start the next call
// from (0-0: the PEL's end), the entries claimed and the IDs dropped
// because their entries were deleted.
type autoClaimed struct {
	cursor  streamID
	out     []claimed
	deleted []streamID
}

// cmdXAutoClaim: XAUTOCLAIM key group consumer min-idle-time start
// [COUNT n] [JUSTID]: claims up to n entries idle for min-idle-time from
// start, looking at no more than 10n PEL entries.
func cmdXAutoClaim(x *call) {
	a, ok := x.parseXAutoClaim()
	if !ok {
		return
	}
	key, g, name := x.args[1], x.args[2], x.args[3]
	var r autoClaimed
	err := x.streamTxn(key, func(t *streamTx) (bool, error) {
		r = autoClaimed{}
		gr, err := t.existingGroup(g)
		if err != nil {
			return false, err
		}
		var changed bool
		r, changed, err = t.autoClaim(gr, name, &a, x.s.cfg.Now().UnixMilli())
		return changed && err == nil, err
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteArray(3)
	x.c.WriteBulkString(r.cursor.String())
	x.writeClaimed(r.out, a.justID)
	x.c.WriteArray(len(r.deleted))
	for _, id := range r.deleted {
		x.c.WriteBulkString(id.String())
	}
}

// autoClaim gives consumer name the entries of gr's PEL from a.start
// idle enough, up to a.count, looking at no more than 10 times as many;
// it writes the group back if it changed.
func (t *streamTx) autoClaim(gr *streamGroup, name []byte, a *xautoclaimArgs, now int64) (r autoClaimed, changed bool, err error) {
	attempts := int(min(a.count*10, math.MaxInt32-1))
	ps, err := t.pendings(gr, a.start, maxStreamID, attempts+1, func(pendingEntry) bool { return true })
	if err != nil {
		return r, false, err
	}
	left := a.count
	var co *streamConsumer
	i := 0
	for ; i < len(ps) && i < attempts && left > 0; i++ {
		p := ps[i]
		n := p.count
		if !a.justID {
			n++
		}
		c, gone, ok, err := t.claimOne(gr, &co, name, p.id, &p, p.idleFor(a.minIdle, now), now, n, now)
		switch {
		case err != nil:
			return r, false, err
		case gone:
			r.deleted = append(r.deleted, p.id)
		case ok:
			r.out = append(r.out, c)
		default:
			continue
		}
		left--
	}
	if i < len(ps) {
		r.cursor = ps[i].id
	}
	if len(r.out) == 0 && len(r.deleted) == 0 {
		return r, false, nil
	}
	return r, true, t.putConsumerAndGroup(gr, co)
}
