package resp

import (
	"fmt"
	"math"
	"strings"
)

// cmdZRandMember: ZRANDMEMBER key [count [WITHSCORES]] draws as
// SRANDMEMBER does (pick): up to count member keys from a random point of
// the member span on, wrapping around, in one read-only transaction, so
// it never reads the whole set for a few members; a negative count
// repeats the drawn members up to its size.
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
	z := x.args[1]
	want := int(min(max(count, -count), math.MaxInt32))
	var drawn []zEntry
	err := x.kv.Txn(x.ctx, func(tx TxnKV) error {
		drawn = nil
		v := &txView{tx: tx, now: x.s.cfg.Now}
		r, err := v.read(x.ctx, encKey(z))
		switch {
		case err != nil || !r.Found:
			return err
		case !isZSetMeta(r.Value):
			return errZWrongType
		}
		want = min(want, int(zsetCard(r.Value)))
		pre := append(fieldPrefix(z), zMemberTag)
		from := append(pre[:len(pre):len(pre)], binaryRand()...)
		for _, span := range [][2][]byte{{from, prefixEnd(pre)}, {pre, from}} {
			if len(drawn) == want {
				break
			}
			kvs, err := v.Scan(x.ctx, span[0], span[1], want-len(drawn))
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				drawn = append(drawn, zEntry{member: kv.Key[len(pre):], score: zScoreOf(kv.Value)})
			}
		}
		return nil
	})
	switch {
	case err != nil:
		x.zreplyErr(err)
	case len(x.args) == 2 && len(drawn) == 0:
		x.c.WriteNull()
	case len(x.args) == 2:
		x.c.WriteBulk(drawn[0].member)
	default:
		out := drawn
		if count < 0 && len(drawn) > 0 {
			// -count repeats may be far more than a reply can hold: count
			// their bytes (a member, its score, a few of RESP's) before
			// making them, as HRANDFIELD does.
			out = nil
			size := 0
			for i := int64(0); i < -count; i++ {
				e := drawn[i%int64(len(drawn))]
				if size += len(e.member) + 16; size > x.s.cfg.MaxOutputBuffer {
					x.c.WriteError(fmt.Sprintf("ERR ZRANDMEMBER reply of more than %d bytes (the output buffer limit, --redis-max-output-buffer): lower the count", x.s.cfg.MaxOutputBuffer))
					return
				}
				out = append(out, e)
			}
		}
		x.zreplyEntries(out, len(x.args) == 4)
	}
}
