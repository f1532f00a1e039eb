package resp

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// cmdZRandMember: ZRANDMEMBER key [count [WITHSCORES]], in one read-only
// transaction. A set of up to MaxBatchKeys members is read whole and
// drawn from uniformly, as Redis draws: one member, count distinct ones,
// or -count independent draws. A larger set is not read whole for a few
// members: up to count member keys from a random point of the member
// span on, wrapping around, which favours members after a long gap
// (docs/redis.md); a negative count repeats them in turn.
func cmdZRandMember(x *call) {
	if len(x.args) > 4 || (len(x.args) == 4 && !strings.EqualFold(string(x.args[3]), "withscores")) {
		x.c.WriteError(errSyntax)
		return
	}
	count, ok := x.randCount()
	if !ok {
		return
	}
	if withScores := len(x.args) == 4; withScores && (count > math.MaxInt64/2 || count < -math.MaxInt64/2) {
		// Redis's check: the reply's length, two per member, must fit.
		x.c.WriteError("ERR value is out of range")
		return
	}
	want := int(min(max(count, -count), math.MaxInt32))
	var pool []zEntry
	whole := false
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		var err error
		pool, whole, err = x.zrandPool(&txView{tx: tx, now: x.s.cfg.Now}, x.args[1], want)
		return err
	})
	randN := x.s.cfg.randN
	switch {
	case err != nil:
		x.zreplyErr(err)
	case len(x.args) == 2 && len(pool) == 0:
		x.c.WriteNull()
	case len(x.args) == 2 && whole:
		x.c.WriteBulk(pool[randN(len(pool))].member)
	case len(x.args) == 2:
		x.c.WriteBulk(pool[0].member)
	case count >= 0 && whole:
		x.zreplyEntries(sample(pool, want, randN), len(x.args) == 4)
	case count >= 0 || len(pool) == 0:
		x.zreplyEntries(pool, len(x.args) == 4)
	default:
		// From a whole set each draw is made anew, as Redis draws; else
		// the members read repeat in turn.
		out, ok := repeatedDraws(x, -count, func(i int64) zEntry {
			if whole {
				return pool[randN(len(pool))]
			}
			return pool[i%int64(len(pool))]
		}, func(e zEntry) int { return len(e.member) })
		if ok {
			x.zreplyEntries(out, len(x.args) == 4)
		}
	}
}

// zrandPool reads, inside v, the members of sorted set z to draw want of:
// all of them (whole) when they are at most MaxBatchKeys or want, else
// want from a random point on.
func (x *call) zrandPool(v *txView, z []byte, want int) (pool []zEntry, whole bool, err error) {
	r, err := v.read(x.ctx, encKey(z))
	switch {
	case err != nil || !r.Found:
		return nil, false, err
	case !isZSetMeta(r.Value):
		return nil, false, errZWrongType
	}
	kvs, whole, err := drawKeys(x.ctx, v, append(fieldPrefix(z), zMemberTag), int(zsetCard(r.Value)), want, x.s.cfg.MaxBatchKeys)
	for _, kv := range kvs {
		pool = append(pool, zEntry{member: kv.Key, score: zScoreOf(kv.Value)})
	}
	return pool, whole, err
}

// scanner is what drawKeys and the stream reads (streamread.go) read
// through: a KV or a transaction (TxnKV, txView).
type scanner interface {
	Scan(ctx context.Context, start, end []byte, limit int) ([]KeyValue, error)
}

// drawKeys reads, through s, the keys under pre of a collection of card
// members to draw want of: all of them (whole) when they are at most
// maxWhole or want, for a uniform draw as Redis's; else want from a random
// point of the span on, wrapping around, so that a large collection is
// not read for a few members (members after a long gap are then more
// likely drawn than others). Keys come cut to their suffixes after pre.
func drawKeys(ctx context.Context, s scanner, pre []byte, card, want, maxWhole int) (kvs []KeyValue, whole bool, err error) {
	if whole = want > 0 && (card <= maxWhole || want >= card); whole {
		want = card
	}
	pre = pre[:len(pre):len(pre)]
	from := pre
	if !whole {
		from = append(pre, binaryRand()...)
	}
	for _, span := range [][2][]byte{{from, prefixEnd(pre)}, {pre, from}} {
		if len(kvs) == want {
			break
		}
		more, err := s.Scan(ctx, span[0], span[1], want-len(kvs))
		if err != nil {
			return nil, false, err
		}
		for _, kv := range more {
			kvs = append(kvs, KeyValue{Key: kv.Key[len(pre):], Value: kv.Value})
		}
	}
	return kvs, whole, nil
}

// binaryRand is a random point among member keys.
func binaryRand() []byte {
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.UintN(256))
	}
	return b[:]
}

// repeatedDraws makes the n (> 0) draws of a negative count (ZRANDMEMBER,
// SRANDMEMBER, HRANDFIELD), draw(i) the i-th. n may be far more than a
// reply can hold (near 2^63 wrote for ever), so their reply's bytes are
// counted as they are made (size, and a few of RESP's each: empty members
// still cost a reply): past the output buffer limit it answers that the
// count is too large, writing nothing else, and returns false.
func repeatedDraws[T any](x *call, n int64, draw func(i int64) T, size func(T) int) ([]T, bool) {
	out := make([]T, 0, min(n, 1024))
	total := 0
	for i := int64(0); i < n; i++ {
		d := draw(i)
		if total += size(d) + 16; total > x.s.cfg.MaxOutputBuffer {
			x.c.WriteError(fmt.Sprintf("ERR %s reply of more than %d bytes (the output buffer limit, --redis-max-output-buffer): lower the count", strings.ToUpper(x.name), x.s.cfg.MaxOutputBuffer))
			return nil, false
		}
		out = append(out, d)
	}
	return out, true
}

// sample is n distinct elements of pool drawn uniformly (all of pool,
// shuffled, when n is larger), pool itself shuffled in part to get them.
func sample[T any](pool []T, n int, randN func(int) int) []T {
	n = min(n, len(pool))
	for i := range n {
		j := i + randN(len(pool)-i)
		pool[i], pool[j] = pool[j], pool[i]
	}
	return pool[:n]
}
