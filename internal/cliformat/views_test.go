package cliformat

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// The status JSON is an interface for scripts: these names must not change.
func TestStatusJSONShape(t *testing.T) {
	var b bytes.Buffer
	if err := WriteJSON(&b, StatusOf(sampleStatus())); err != nil {
		t.Fatal(err)
	}
	var got struct {
		ClusterID string `json:"cluster_id"`
		Nodes     []map[string]any
		Imbalance map[string]float64
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	if got.ClusterID != "7" || len(got.Nodes) != 3 {
		t.Fatalf("status JSON: %s", b.String())
	}
	first := got.Nodes[0]
	for field, want := range map[string]any{"id": 1.0, "addr": "127.0.0.1:7400", "state": "live", "replicas": 5.0,
		"leases": 3.0, "bytes": float64(3 << 20), "qps": 1234.56, "score": 2.5, "cpu": 0.42, "locality": "region=eu"} {
		if first[field] != want {
			t.Errorf("nodes[0].%s = %v, want %v", field, first[field], want)
		}
	}
	for _, dim := range []string{"replicas", "bytes", "qps", "cpu"} {
		if _, ok := got.Imbalance[dim]; !ok {
			t.Errorf("imbalance.%s missing: %s", dim, b.String())
		}
	}
	if got.Imbalance["bytes"] != 0.99 {
		t.Errorf("imbalance.bytes = %v", got.Imbalance["bytes"])
	}
}

func TestRangesOf(t *testing.T) {
	resp := sampleRanges()
	resp.Ranges[0].Qps, resp.Ranges[0].Bytes = 12.5, 4096
	v := RangesOf(resp)
	if len(v.Ranges) != 3 {
		t.Fatalf("ranges: %+v", v)
	}
	first, last := v.Ranges[0], v.Ranges[2]
	if first.ID != 1 || first.Start != "" || first.End != `"\x00meta"` || first.Leader != 1 {
		t.Errorf("first range: %+v", first)
	}
	if last.ID != 4 || last.Start != "user/500" || last.End != "" || last.QPS != 12.5 || last.Bytes != 4096 {
		t.Errorf("last range: %+v", last)
	}
	if len(last.Replicas) != 3 || last.Replicas[2] != (ReplicaView{Node: 3, Type: "learner"}) || last.Replicas[0].Type != "voter" {
		t.Errorf("replicas: %+v", last.Replicas)
	}
}

func TestEventsTable(t *testing.T) {
	at := time.Date(2026, 11, 22, 3, 4, 5, 6e6, time.UTC)
	v := EventsOf([]*tidekvpb.Event{
		{UnixNanos: at.UnixNano(), NodeId: 2, Kind: "split", Subject: "range 4", Reason: "split at k\nby request"},
		{UnixNanos: at.Add(time.Second).UnixNano(), NodeId: 1, Kind: "node-suspect", Subject: "node 3", Reason: "no heartbeat for 5.2s"},
	})
	var b bytes.Buffer
	if err := EventsTable(&b, v); err != nil {
		t.Fatal(err)
	}
	want := `TIME (UTC)               NODE  KIND          SUBJECT  REASON
2026-11-22 03:04:05.006  2     split         range 4  split at k by request
2026-11-22 03:04:06.006  1     node-suspect  node 3   no heartbeat for 5.2s
2 events
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteJSON(&b, v); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b.Bytes(), []byte(`"time": "2026-11-22T03:04:05.006Z"`)) {
		t.Errorf("event time in JSON: %s", b.String())
	}
}
