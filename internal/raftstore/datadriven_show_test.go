package raftstore

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/tidekv/tidekv/internal/keys"
)

// The data-driven scenarios' views of the cluster: ranges, data, snapshots.

func (d *ddDriver) showRanges() string {
	var out strings.Builder
	for _, id := range d.tc.nodes {
		s := d.tc.stores[id]
		switch {
		case s == nil:
			fmt.Fprintf(&out, "n%d: down\n", id)
			continue
		case d.isolated[id]:
			fmt.Fprintf(&out, "n%d: isolated\n", id)
			continue
		}
		rs := s.Replicas()
		if len(rs) == 0 {
			fmt.Fprintf(&out, "n%d: no replicas\n", id)
		}
		for _, r := range rs {
			desc := r.Desc()
			if desc == nil {
				fmt.Fprintf(&out, "n%d: r%d uninitialized\n", id, r.RangeID())
				continue
			}
			mark := ""
			if r.IsLeader() {
				mark = " *"
			}
			fmt.Fprintf(&out, "n%d: %s%s\n", id, fmtDesc(desc), mark)
		}
	}
	return out.String()
}

// showData prints the user keys in a node's engine (all running nodes when
// node is 0): what is physically there, whichever replica owns it.
func (d *ddDriver) showData(node uint64) string {
	var out strings.Builder
	for _, id := range d.tc.nodes {
		if node != 0 && id != node {
			continue
		}
		lo, hi := keys.DataSpan(testRangeID, nil, nil)
		it, err := d.tc.engines[id].NewIter(lo, hi)
		if err != nil {
			return err.Error()
		}
		var kvs []string
		for ok := it.First(); ok; ok = it.Next() {
			kvs = append(kvs, fmt.Sprintf("%s=%s", keys.UserKey(it.Key()), it.Value()))
		}
		it.Close()
		if len(kvs) == 0 {
			kvs = []string{"(empty)"}
		}
		fmt.Fprintf(&out, "n%d: %s\n", id, strings.Join(kvs, " "))
	}
	return out.String()
}

// showSnapshots lists the nodes (or just node) that accepted snapshots, with
// how many unless counts is false (where a race decides whether one more is
// sent).
func (d *ddDriver) showSnapshots(node uint64, counts bool) string {
	var ids []uint64
	for id, c := range d.snaps {
		if c.accepted.Load() > 0 && (node == 0 || id == node) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return "none"
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var out bytes.Buffer
	for _, id := range ids {
		if counts {
			fmt.Fprintf(&out, "n%d: %d\n", id, d.snaps[id].accepted.Load())
		} else {
			fmt.Fprintf(&out, "n%d\n", id)
		}
	}
	return out.String()
}
