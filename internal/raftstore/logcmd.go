package raftstore

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// The Raft log carries the replication layer's own commands (LogWrite,
// LogCompareAndSet, LogGuard in api/storage.proto), not API messages: the
// API's requests are translated here, once, at proposal. The keys and
// values are shared, not copied. A TTL becomes an absolute expiry at the
// command's timestamp ts (docs/expiry.md), so every replica applies the
// same expiry whenever it applies the command.

func logWrites(ops []*tidekvpb.WriteOp, ts hlc.Timestamp) ([]*tidekvpb.LogWrite, error) {
	out := make([]*tidekvpb.LogWrite, len(ops))
	all := make([]tidekvpb.LogWrite, len(ops))
	for i, op := range ops {
		if op.GetKind() > tidekvpb.WriteOp_EXPIRE {
			return nil, fmt.Errorf("%w: unknown write op kind %d", ErrInvalidRequest, op.GetKind())
		}
		w := &all[i]
		w.Delete, w.Key, w.Value = op.GetKind() == tidekvpb.WriteOp_DELETE, op.GetKey(), op.GetValue()
		w.Expire, w.KeepTtl = op.GetKind() == tidekvpb.WriteOp_EXPIRE, op.GetKeepTtl()
		if w.Expire && len(w.Value) > 0 {
			return nil, fmt.Errorf("%w: an EXPIRE op of %q carries a value", ErrInvalidRequest, w.Key)
		}
		var err error
		if w.ExpiresAt, err = expiresAt(ts, op.GetTtlMs(), op.GetExpireAtMs(), op.GetKeepTtl(), op.GetKind() == tidekvpb.WriteOp_PUT); err != nil {
			return nil, err
		}
		out[i] = w
	}
	return out, nil
}

func logGuard(g *tidekvpb.WriteGuard) *tidekvpb.LogGuard {
	if g == nil {
		return nil
	}
	return &tidekvpb.LogGuard{Key: g.GetKey(), Value: g.GetValue(), ClearStart: g.GetClearStart(), ClearEnd: g.GetClearEnd()}
}

func logCAS(c *tidekvpb.CompareAndSetRequest, ts hlc.Timestamp) (*tidekvpb.LogCompareAndSet, error) {
	exp, err := expiresAt(ts, c.GetTtlMs(), c.GetExpireAtMs(), c.GetKeepTtl(), !c.GetDelete())
	if err != nil {
		return nil, err
	}
	if c.GetIncrement() && (c.GetExpectExists() || len(c.GetExpectedValue()) > 0 || len(c.GetNewValue()) > 0 || c.GetDelete()) {
		return nil, fmt.Errorf("%w: an increment of %q carries an expected value, a new value or a delete", ErrInvalidRequest, c.GetKey())
	}
	return &tidekvpb.LogCompareAndSet{Key: c.GetKey(), ExpectExists: c.GetExpectExists(), ExpectedValue: c.GetExpectedValue(),
		NewValue: c.GetNewValue(), Delete: c.GetDelete(), ExpiresAt: exp, KeepTtl: c.GetKeepTtl(),
		Increment: c.GetIncrement(), IncrementBy: c.GetIncrementBy()}, nil
}

// incremented is an increment's new value: cur, a decimal int64 in
// canonical form (absent: 0), plus by; ok false when cur is not such an
// integer or the sum overflows. Every replica computes it from the same
// value, so it is the same everywhere.
func incremented(cur []byte, found bool, by int64) (sum []byte, ok bool) {
	var n int64
	if found {
		v, err := strconv.ParseInt(string(cur), 10, 64)
		if err != nil || strconv.FormatInt(v, 10) != string(cur) {
			return nil, false
		}
		n = v
	}
	if (by > 0 && n > math.MaxInt64-by) || (by < 0 && n < math.MinInt64-by) {
		return nil, false
	}
	return strconv.AppendInt(nil, n+by, 10), true
}

// checkTTL refuses an expiry an op cannot have: a negative TTL or time,
// two of a TTL, a time and keep_ttl, keep_ttl on anything but a put.
func checkTTL(ttlMs, atMs int64, keep, put bool) error {
	switch {
	case ttlMs < 0 || atMs < 0:
		return fmt.Errorf("%w: a TTL or expiry time must not be negative, got %d and %d ms", ErrInvalidRequest, ttlMs, atMs)
	case ttlMs != 0 && atMs != 0:
		return fmt.Errorf("%w: ttl_ms and expire_at_ms exclude each other", ErrInvalidRequest)
	case keep && (ttlMs != 0 || atMs != 0 || !put):
		return fmt.Errorf("%w: keep_ttl goes with a put that sets no TTL", ErrInvalidRequest)
	}
	return nil
}

// expiresAt is the expiry of a value written at ts with a TTL of ttlMs or
// at the Unix time atMs (0: neither, no expiry), once checkTTL accepts
// them. A command without a timestamp is proposed below log version 4, so
// it cannot carry one.
func expiresAt(ts hlc.Timestamp, ttlMs, atMs int64, keep, put bool) (int64, error) {
	const ms = int64(time.Millisecond)
	switch err := checkTTL(ttlMs, atMs, keep, put); {
	case err != nil:
		return 0, err
	case ttlMs == 0 && atMs == 0:
		return 0, nil
	case ts.IsZero():
		return 0, expiryVersionErr()
	case ttlMs > (math.MaxInt64-ts.WallTime)/ms || atMs > math.MaxInt64/ms:
		return 0, fmt.Errorf("%w: an expiry %d ms from now or at %d ms is too late", ErrInvalidRequest, ttlMs, atMs)
	case atMs != 0:
		return atMs * ms, nil
	}
	return ts.WallTime + ttlMs*ms, nil
}

func expiryVersionErr() error {
	return fmt.Errorf("%w: a TTL needs log version %d on every node (a node still runs an older binary?)", ErrLogVersion, LogVersionExpiry)
}

// usesExpiry reports whether a write or CAS command sets or changes an
// expiry, which needs log version 5 and the versioned layout. keep_ttl
// alone does not: before version 5 no value has an expiry to keep, so a
// binary that ignores it applies the same put (Redis HSET and INCR keep a
// TTL, and keep working on a cluster still upgrading).
func usesExpiry(cmd *tidekvpb.RaftCommand) bool {
	for _, w := range cmd.GetWrites() {
		if w.GetExpiresAt() != 0 || w.GetExpire() {
			return true
		}
	}
	return cmd.GetCas().GetExpiresAt() != 0
}
