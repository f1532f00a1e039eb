package client

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// TestRangeCache drives the range cache through installs (Admin.Ranges
// answers) and updates (error details) and prints what it holds.
//
//	install            input: one range per line, see parseRange
//	update [leader=N addr=A]   input: at most one range
//	lookup key=K
func TestRangeCache(t *testing.T) {
	rc := newRangeCache([]string{"seed:1"})
	datadriven.RunTest(t, "testdata/cache", func(t *testing.T, d *datadriven.TestData) string {
		return runRangeCache(t, rc, d)
	})
}

// parseRange parses "r<id> <start> <end> [gen=G] [leader=L] [replicas=1,2,3]",
// with "-" for an empty key.
func parseRange(t *testing.T, line string) (*tidekvpb.RangeDescriptor, uint64) {
	f := strings.Fields(line)
	if len(f) < 3 || !strings.HasPrefix(f[0], "r") {
		t.Fatalf("bad range %q", line)
	}
	id, err := strconv.ParseUint(f[0][1:], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	key := func(s string) []byte {
		if s == "-" {
			return nil
		}
		return []byte(s)
	}
	d := &tidekvpb.RangeDescriptor{RangeId: id, StartKey: key(f[1]), EndKey: key(f[2]), Generation: 1}
	var leader uint64
	replicas := "1,2,3"
	for _, kv := range f[3:] {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "gen":
			d.Generation, _ = strconv.ParseUint(v, 10, 64)
		case "leader":
			leader, _ = strconv.ParseUint(v, 10, 64)
		case "replicas":
			replicas = v
		default:
			t.Fatalf("unknown field %q", kv)
		}
	}
	for i, n := range strings.Split(replicas, ",") {
		id, _ := strconv.ParseUint(n, 10, 64)
		d.Replicas = append(d.Replicas, &tidekvpb.ReplicaDescriptor{NodeId: id, ReplicaId: uint64(i + 1)})
	}
	return d, leader
}

func showEntry(s *snapshot, e *rangeEntry) string {
	key := func(b []byte) string {
		if len(b) == 0 {
			return "-"
		}
		return string(b)
	}
	var reps []string
	for _, r := range e.desc.Replicas {
		reps = append(reps, fmt.Sprintf("n%d", r.NodeId))
	}
	leader := "?"
	if id := e.leader.Load(); id != 0 {
		leader = fmt.Sprintf("n%d@%s", id, s.nodes[id])
	}
	return fmt.Sprintf("r%d [%s, %s) gen=%d leader=%s replicas=%s",
		e.desc.RangeId, key(e.desc.StartKey), key(e.desc.EndKey), e.desc.Generation, leader, strings.Join(reps, ","))
}

func showCache(s *snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch=%d\n", s.epoch)
	for _, e := range s.ranges {
		b.WriteString(showEntry(s, e))
		b.WriteByte('\n')
	}
	return b.String()
}

func runRangeCache(t *testing.T, rc *rangeCache, d *datadriven.TestData) string {
	switch d.Cmd {
	case "install":
		resp := &tidekvpb.RangesResponse{}
		for id := uint64(1); id <= 3; id++ {
			resp.Nodes = append(resp.Nodes, &tidekvpb.NodeDescriptor{NodeId: id, GrpcAddr: fmt.Sprintf("h%d:1", id)})
		}
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			if line == "" {
				continue
			}
			desc, leader := parseRange(t, line)
			resp.Ranges = append(resp.Ranges, &tidekvpb.RangeInfo{Desc: desc, LeaderNodeId: leader})
		}
		return showCache(rc.install(resp))
	case "update":
		var desc *tidekvpb.RangeDescriptor
		if in := strings.TrimSpace(d.Input); in != "" {
			desc, _ = parseRange(t, in)
		}
		var leader uint64
		var addr string
		d.MaybeScanArgs(t, "leader", &leader)
		d.MaybeScanArgs(t, "addr", &addr)
		rc.update(desc, leader, addr)
		return showCache(rc.load())
	case "lookup":
		var key string
		d.ScanArgs(t, "key", &key)
		s := rc.load()
		if e := s.lookup([]byte(key)); e != nil {
			return showEntry(s, e)
		}
		return "miss"
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return ""
}
