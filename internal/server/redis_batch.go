package server

import (
	"context"
	"errors"
	"slices"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/internal/kvapi"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/resp"
)

// WriteEach writes a pipeline's ops: those of each range this node leads
// in one Write (one Raft proposal, atomic, which is allowed: each op only
// needs to apply once), split where the node's batch limits require; the
// ops of ranges led elsewhere, and of groups the store refused without
// applying them (the lease moved, the range split), through the routing
// client. An op that fails validation fails alone, before grouping.
//
// Order per key is kept: every op on one key joins the same group, a group
// is written chunk by chunk in order and, once a chunk is refused, its
// later chunks are routed too, after it.
func (k *redisKV) WriteEach(ctx context.Context, ops []resp.Op) []resp.OpResult {
	out := make([]resp.OpResult, len(ops))
	k.writePlanned(ctx, ops, k.plan(ops, out), out)
	return out
}

// writePlan is where a WriteEach's ops go: groups of ops (indexes) per
// range this node leads, in first-seen order, and the ops to route.
type writePlan struct {
	groups   [][]int
	replicas []*raftstore.Replica // of each group
	routed   []int
}

// plan validates ops (an invalid op's error goes to out) and groups the
// valid ones by the led range holding their key.
func (k *redisKV) plan(ops []resp.Op, out []resp.OpResult) writePlan {
	var p writePlan
	group := map[*raftstore.Replica]int{} // replica → index in p.groups
	byKey := make(map[string]*raftstore.Replica, len(ops))
	for i, op := range ops {
		if err := k.checkOp(op); err != nil {
			out[i].Err = err
			continue
		}
		r, seen := byKey[string(op.Key)]
		if !seen {
			if r = k.s.store.LookupKey(op.Key); r != nil && !r.IsLeader() {
				r = nil
			}
			byKey[string(op.Key)] = r
		}
		if r == nil {
			p.routed = append(p.routed, i)
			continue
		}
		g, ok := group[r]
		if !ok {
			g = len(p.groups)
			group[r] = g
			p.groups = append(p.groups, nil)
			p.replicas = append(p.replicas, r)
		}
		p.groups[g] = append(p.groups[g], i)
	}
	return p
}

// writePlanned writes each group in process, chunk by chunk, and routes
// what is left.
func (k *redisKV) writePlanned(ctx context.Context, ops []resp.Op, p writePlan, out []resp.OpResult) {
	routed := p.routed
	for gi, g := range p.groups {
		chunks := k.chunks(ops, g)
		for c, idx := range chunks {
			if !k.writeLocal(ctx, p.replicas[gi], ops, idx, out) {
				for _, rest := range chunks[c:] {
					routed = append(routed, rest...)
				}
				break
			}
		}
	}
	if len(routed) == 0 {
		return
	}
	ctx = k.toRemote(ctx)
	slices.Sort(routed)
	sub := make([]resp.Op, len(routed))
	for j, i := range routed {
		sub[j] = ops[i]
	}
	for j, res := range k.remote.WriteEach(ctx, sub) {
		out[routed[j]] = res
	}
}

// checkOp applies the KV service's key and value limits to one op, so
// that an invalid op fails alone instead of failing its group's Write.
func (k *redisKV) checkOp(op resp.Op) error {
	err := k.s.kv.CheckKey(op.Key)
	if err == nil {
		err = k.s.kv.CheckValue(op.Value)
	}
	if err == nil {
		err = k.checkExpiry(op)
	}
	mapped, _ := outcome(err, true)
	return mapped
}

// chunks cuts a group's ops (indexes into ops) into Writes within the
// node's limits on ops and bytes per Write.
func (k *redisKV) chunks(ops []resp.Op, idx []int) [][]int {
	lim := k.s.cfg.Limits
	var out [][]int
	start, bytes := 0, 0
	for j, i := range idx {
		n := len(ops[i].Key) + len(ops[i].Value)
		if j > start && (j-start >= lim.MaxBatchKeys || bytes+n > lim.MaxWriteBytes) {
			out = append(out, idx[start:j])
			start, bytes = j, 0
		}
		bytes += n
	}
	return append(out, idx[start:])
}

// writeLocal writes the ops idx of one range (r) in one Write and fills their
// results; it returns false, having applied nothing, when the store
// refused the Write in a way the routing client handles.
func (k *redisKV) writeLocal(ctx context.Context, r *raftstore.Replica, ops []resp.Op, idx []int, out []resp.OpResult) bool {
	sub := make([]resp.Op, len(idx))
	wantExisted := false
	for j, i := range idx {
		sub[j] = ops[i]
		wantExisted = wantExisted || reportsExisted(ops[i])
	}
	// Only deletes and SetTTL ops report whether their key existed; asking
	// costs a read per op at apply, so a group of puts does not.
	w, err := k.s.kv.GuardedWrite(k.in(ctx), writeOps(sub), nil, wantExisted, kvapi.Options{KeySpace: keyspace.NameFrom(ctx), Replica: r})
	err, route := outcome(err, true)
	// Every op passed checkOp and the chunk is within the limits, so an
	// invalid argument here can only be the KV service finding the keys
	// outside the range: it split since plan. Nothing was applied.
	if route || errors.Is(err, resp.ErrInvalidArgument) {
		return false
	}
	for j, i := range idx {
		out[i].Err = err
		if err == nil && reportsExisted(ops[i]) && j < len(w.GetExisted()) {
			out[i].Existed = w.GetExisted()[j]
		}
	}
	return true
}

// reportsExisted: the op's result says whether its key held a value.
func reportsExisted(op resp.Op) bool { return op.Delete || op.SetTTL }
