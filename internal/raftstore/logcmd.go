package raftstore

import "github.com/tidekv/tidekv/api/tidekvpb"

// The Raft log carries the replication layer's own commands (LogWrite,
// LogCompareAndSet, LogGuard in api/storage.proto), not API messages: the
// API's requests are translated here, once, at proposal. The keys and
// values are shared, not copied.

func logWrites(ops []*tidekvpb.WriteOp) []*tidekvpb.LogWrite {
	out := make([]*tidekvpb.LogWrite, len(ops))
	all := make([]tidekvpb.LogWrite, len(ops))
	for i, op := range ops {
		w := &all[i]
		w.Delete, w.Key, w.Value = op.GetKind() == tidekvpb.WriteOp_DELETE, op.GetKey(), op.GetValue()
		out[i] = w
	}
	return out
}

func logGuard(g *tidekvpb.WriteGuard) *tidekvpb.LogGuard {
	if g == nil {
		return nil
	}
	return &tidekvpb.LogGuard{Key: g.GetKey(), Value: g.GetValue(), ClearStart: g.GetClearStart(), ClearEnd: g.GetClearEnd()}
}

func logCAS(c *tidekvpb.CompareAndSetRequest) *tidekvpb.LogCompareAndSet {
	return &tidekvpb.LogCompareAndSet{Key: c.GetKey(), ExpectExists: c.GetExpectExists(), ExpectedValue: c.GetExpectedValue(),
		NewValue: c.GetNewValue(), Delete: c.GetDelete()}
}
