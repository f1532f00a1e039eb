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
		if *co, _, err = t.ensureConsumer(gr, name, now); err != nil {
			return c, false, false, err
		}
		(*co).seen = now
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

// cmdXClaim: XCLAIM key group consumer min-idle-time id [id ...] [IDLE
// ms] [TIME ms] [RETRYCOUNT n] [FORCE] [JUSTID] [LASTID id].
func cmdXClaim(x *call) {
	key, g, name := x.args[1], x.args[2], x.args[3]
	var out []claimed
	var justID bool
	err := x.streamTxn(key, func(t *streamTx) (bool, error) {
		out, justID = nil, false
		gr, err := t.group(g)
		if err != nil {
			return false, err
		}
		if gr == nil {
			return false, errNoKeyOrGroup(key, g)
		}
		minIdle, perr := strconv.ParseInt(string(x.args[4]), 10, 64)
		if perr != nil {
			return false, replyError("ERR Invalid min-idle-time argument for XCLAIM")
		}
		minIdle = max(minIdle, 0)
		j := 5
		var ids []streamID
		for ; j < len(x.args); j++ {
			id, _, ok := parseStreamID(x.args[j], 0, true, false)
			if !ok {
				break
			}
			ids = append(ids, id)
		}
		now := x.s.cfg.Now().UnixMilli()
		at, retry, force := int64(-1), int64(-1), false
		var lastID streamID
		for ; j < len(x.args); j++ {
			more := j+1 < len(x.args)
			num := func(what string) (int64, error) {
				j++
				n, err := strconv.ParseInt(string(x.args[j]), 10, 64)
				if err != nil {
					return 0, replyError("ERR Invalid " + what + " option argument for XCLAIM")
				}
				return n, nil
			}
			switch opt := strings.ToLower(string(x.args[j])); {
			case opt == "force":
				force = true
			case opt == "justid":
				justID = true
			case opt == "idle" && more:
				n, err := num("IDLE")
				if err != nil {
					return false, err
				}
				at = now - n
			case opt == "time" && more:
				if at, err = num("TIME"); err != nil {
					return false, err
				}
			case opt == "retrycount" && more:
				if retry, err = num("RETRYCOUNT"); err != nil {
					return false, err
				}
			case opt == "lastid" && more:
				j++
				id, _, ok := parseStreamID(x.args[j], 0, true, false)
				if !ok {
					return false, replyError(errStreamID)
				}
				lastID = id
			default:
				return false, replyError("ERR Unrecognized XCLAIM option '" + string(x.args[j]) + "'")
			}
		}
		changed := false
		if gr.last.less(lastID) {
			gr.last, changed = lastID, true
		}
		// A time in the future or before the epoch is now, as in Redis:
		// clients compute it with their own clocks.
		if at < 0 || at > now {
			at = now
		}
		var co *streamConsumer
		for _, id := range ids {
			p, err := t.pending(gr, id)
			if err != nil {
				return false, err
			}
			if p == nil && !force {
				continue
			}
			count := uint64(1) // Redis's FORCE makes an entry delivered once
			eligible := true
			if p != nil {
				eligible = minIdle == 0 || now-p.delivered >= minIdle
				count = p.count
			}
			switch {
			case retry >= 0:
				count = uint64(retry)
			case !justID:
				count++
			}
			c, gone, ok, err := t.claimOne(gr, &co, name, id, p, eligible, at, count, now)
			if err != nil {
				return false, err
			}
			changed = changed || (gone && p != nil) || ok
			if ok {
				out = append(out, c)
			}
		}
		if !changed {
			return false, nil
		}
		return true, t.putConsumerAndGroup(gr, co)
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.writeClaimed(out, justID)
}

// cmdXAutoClaim: XAUTOCLAIM key group consumer min-idle-time start
// [COUNT n] [JUSTID]: claims up to n entries idle for min-idle-time from
// start, looking at no more than 10n PEL entries, and answers the next
// ID to start from (0-0 at the end), the entries claimed and the IDs
// dropped because their entries were deleted.
func cmdXAutoClaim(x *call) {
	minIdle, err := strconv.ParseInt(string(x.args[4]), 10, 64)
	if err != nil {
		x.c.WriteError("ERR Invalid min-idle-time argument for XAUTOCLAIM")
		return
	}
	minIdle = max(minIdle, 0)
	start, ok := x.parseIntervalID(x.args[5], true)
	if !ok {
		return
	}
	count, justID := int64(100), false
	for j := 6; j < len(x.args); j++ {
		switch opt := strings.ToLower(string(x.args[j])); {
		case opt == "count" && j+1 < len(x.args):
			j++
			n, err := strconv.ParseInt(string(x.args[j]), 10, 64)
			if err != nil || n < 1 || n > math.MaxInt64/16 {
				x.c.WriteError("ERR COUNT must be > 0")
				return
			}
			count = n
		case opt == "justid":
			justID = true
		default:
			x.c.WriteError(errSyntax)
			return
		}
	}
	key, g, name := x.args[1], x.args[2], x.args[3]
	var out []claimed
	var deleted []streamID
	var cursor streamID
	err = x.streamTxn(key, func(t *streamTx) (bool, error) {
		out, deleted, cursor = nil, nil, streamID{}
		gr, err := t.group(g)
		if err != nil {
			return false, err
		}
		if gr == nil {
			return false, errNoKeyOrGroup(key, g)
		}
		attempts := int(min(count*10, math.MaxInt32-1))
		ps, err := t.pendings(gr, start, maxStreamID, attempts+1, func(pendingEntry) bool { return true })
		if err != nil {
			return false, err
		}
		now := x.s.cfg.Now().UnixMilli()
		left := count
		var co *streamConsumer
		i := 0
		for ; i < len(ps) && i < attempts && left > 0; i++ {
			p := ps[i]
			n := p.count
			if !justID {
				n++
			}
			c, gone, ok, err := t.claimOne(gr, &co, name, p.id, &p, minIdle == 0 || now-p.delivered >= minIdle, now, n, now)
			switch {
			case err != nil:
				return false, err
			case gone:
				deleted = append(deleted, p.id)
			case ok:
				out = append(out, c)
			default:
				continue
			}
			left--
		}
		if i < len(ps) {
			cursor = ps[i].id
		}
		if len(out) == 0 && len(deleted) == 0 {
			return false, nil
		}
		return true, t.putConsumerAndGroup(gr, co)
	})
	if err != nil {
		writeCASErr(x.c, err)
		return
	}
	x.c.WriteArray(3)
	x.c.WriteBulkString(cursor.String())
	x.writeClaimed(out, justID)
	x.c.WriteArray(len(deleted))
	for _, id := range deleted {
		x.c.WriteBulkString(id.String())
	}
}
