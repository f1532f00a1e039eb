package resp

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
)

// batchCountKV counts BatchGet calls.
type batchCountKV struct {
	*fakeKV
	gets atomic.Int32
}

func (k *batchCountKV) BatchGet(ctx context.Context, keys [][]byte) ([]Result, error) {
	k.gets.Add(1)
	return k.fakeKV.BatchGet(ctx, keys)
}

// SORT's BY and GET patterns read their keys in batches, one BatchGet per
// pattern (a BY of hash fields two: the keys, then the fields), not a read
// per element (at a transaction's read a key, a 10,000-element SORT BY
// timed out in Redis's own suite).
func TestSortReadsPatternsInBatches(t *testing.T) {
	kv := &batchCountKV{fakeKV: newFakeKV()}
	s, _ := start(t, kv, nil, nil)
	const n = 200
	push := []string{"RPUSH", "l"}
	var sets [][]string
	for i := range n {
		e := strconv.Itoa(i)
		push = append(push, e)
		sets = append(sets, []string{"SET", "w_" + e, strconv.Itoa(n - i)}, []string{"HSET", "h_" + e, "f", strconv.Itoa(n - i)})
	}
	pipeline(t, s, push)
	pipeline(t, s, sets...)
	for _, c := range []struct {
		cmd   []string
		reads int32
	}{
		{[]string{"SORT", "l", "BY", "w_*", "LIMIT", "0", "3"}, 1},
		{[]string{"SORT", "l", "BY", "h_*->f", "LIMIT", "0", "3"}, 2},
		{[]string{"SORT", "l", "BY", "w_*", "LIMIT", "0", "3", "GET", "#", "GET", "w_*"}, 2},
	} {
		before := kv.gets.Load()
		got := pipeline(t, s, c.cmd)[0]
		if c.cmd[len(c.cmd)-1] == "w_*" {
			eq(t, got, "*[$199 $1 $198 $2 $197 $3]")
		} else {
			eq(t, got, "*[$199 $198 $197]")
		}
		if reads := kv.gets.Load() - before; reads != c.reads {
			t.Errorf("%v: %d BatchGets, want %d", c.cmd, reads, c.reads)
		}
	}
}
