package cliformat

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

func TestQuote(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
	}{
		{"user/42", "user/42"},
		{"with space", "with space"},
		{"héllo", "héllo"},
		{"", `""`},
		{"a\tb", `"a\tb"`},
		{"line\n", `"line\n"`},
		{"\x00\x01", `"\x00\x01"`},
		{"\xff\xfe", `"\xff\xfe"`},
		{`"quoted"`, `"\"quoted\""`},
		{"<min>", `"<min>"`},
		{`back\slash`, `back\slash`},
	} {
		if got := Quote([]byte(tc.in)); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if got := Bound(nil, false) + " " + Bound(nil, true) + " " + Bound([]byte("m"), true); got != "<min> <max> m" {
		t.Errorf("Bound: %s", got)
	}
}

func sampleStatus() *tidekvpb.StatusResponse {
	return &tidekvpb.StatusResponse{
		ClusterId:  7,
		NodeId:     1,
		RangeCount: 5,
		LogVersion: 2,
		Nodes: []*tidekvpb.NodeStatus{
			{Node: &tidekvpb.NodeDescriptor{NodeId: 3, GrpcAddr: "127.0.0.1:7402"}, State: "suspect", Live: false, Replicas: 4, Leases: 0, Bytes: 0, Qps: 0, LastSeenSeconds: 93.4},
			{Node: &tidekvpb.NodeDescriptor{NodeId: 1, GrpcAddr: "127.0.0.1:7400", Locality: "region=eu"}, State: "live", Live: true, Replicas: 5, Leases: 3, Bytes: 3 << 20, Qps: 1234.56, Cpu: 0.42, CpuQuota: 0.5, Score: 2.5, P99Ms: 3.25, LastSeenSeconds: 0.35,
				AdmitShare: 0.35, Overloaded: true, QueueDelayMs: 12.5, RejectedQps: 840, MaxClockOffsetMs: -312.4, ClockUntrusted: true,
				ClockReason: "clock is more than 200ms (0.8 × max offset 250ms) from 2 of 2 peers (node 2 -312ms ±1ms, node 3 -305ms ±1ms)"},
			{Node: &tidekvpb.NodeDescriptor{NodeId: 2, GrpcAddr: "127.0.0.1:7401"}, State: "live", Live: true, Replicas: 5, Leases: 2, Bytes: 1536, Qps: 7, LastSeenSeconds: 1.26, AdmitShare: 1,
				MaxClockOffsetMs: 312.4},
		},
		Imbalance: &tidekvpb.Imbalance{Replicas: 0, Bytes: 0.99, Qps: 0.988, Cpu: 1},
	}
}

func TestStatusTable(t *testing.T) {
	var b bytes.Buffer
	if err := StatusTable(&b, StatusOf(sampleStatus())); err != nil {
		t.Fatal(err)
	}
	want := `NODE  ADDRESS         STATE    LOCALITY   REPLICAS  LEASES  DATA     QPS     CPUS  CPU  SCORE  P99    LAST SEEN  CLOCK             ADMISSION
1     127.0.0.1:7400  live     region=eu  5         3       3.0 MiB  1234.6  0.5   42%  2.50   3.2ms  350ms ago  UNTRUSTED -312ms  admits 35%, delay 12.5ms, 840 refused/s
2     127.0.0.1:7401  live     -          5         2       1.5 KiB  7.0     -     0%   0.00   0.0ms  1.3s ago   +312ms            ok
3     127.0.0.1:7402  suspect  -          4         0       0 B      0.0     -     0%   0.00   0.0ms  1m33s ago  -                 -
node 1 holds no leases: clock is more than 200ms (0.8 × max offset 250ms) from 2 of 2 peers (node 2 -312ms ±1ms, node 3 -305ms ±1ms)
3 nodes, 5 ranges, log version 2; imbalance (stddev/mean): replicas 0.00, data 0.99, qps 0.99, cpu 1.00
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func sampleRanges() *tidekvpb.RangesResponse {
	voters := func(ids ...uint64) []*tidekvpb.ReplicaDescriptor {
		var out []*tidekvpb.ReplicaDescriptor
		for i, id := range ids {
			out = append(out, &tidekvpb.ReplicaDescriptor{NodeId: id, ReplicaId: uint64(i + 1)})
		}
		return out
	}
	withLearner := voters(1, 2)
	withLearner = append(withLearner, &tidekvpb.ReplicaDescriptor{NodeId: 3, ReplicaId: 3, Type: tidekvpb.ReplicaType_LEARNER})
	return &tidekvpb.RangesResponse{
		Ranges: []*tidekvpb.RangeInfo{
			{Desc: &tidekvpb.RangeDescriptor{RangeId: 4, StartKey: []byte("user/500"), Replicas: withLearner, Generation: 2}, LeaderNodeId: 2},
			{Desc: &tidekvpb.RangeDescriptor{RangeId: 1, EndKey: []byte("\x00meta"), Replicas: voters(1, 2, 3), Generation: 1}, LeaderNodeId: 1},
			{Desc: &tidekvpb.RangeDescriptor{RangeId: 2, StartKey: []byte("\x00meta"), EndKey: []byte("user/500"), Replicas: voters(1, 2, 3), Generation: 3}},
		},
		Nodes: []*tidekvpb.NodeDescriptor{{NodeId: 1, GrpcAddr: "127.0.0.1:7400"}},
	}
}

func TestRangesTable(t *testing.T) {
	var b bytes.Buffer
	if err := RangesTable(&b, sampleRanges()); err != nil {
		t.Fatal(err)
	}
	want := `RANGE  START       END         GEN  REPLICAS
1      <min>       "\x00meta"  1    n1(v)*,n2(v),n3(v)
2      "\x00meta"  user/500    3    n1(v),n2(v),n3(v)
4      user/500    <max>       2    n1(v),n2(v)*,n3(l)
3 ranges
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestScanLines(t *testing.T) {
	var b bytes.Buffer
	kvs := []KV{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b\x00"), Value: []byte("two words")}, {Key: []byte("c"), Value: nil}}
	if err := ScanLines(&b, kvs); err != nil {
		t.Fatal(err)
	}
	want := "a\t1\n\"b\\x00\"\ttwo words\nc\t\"\"\n3 keys\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	_ = ScanLines(&b, []KV{{Key: []byte("k"), Value: []byte("v")}})
	if !strings.HasSuffix(b.String(), "\n1 key\n") {
		t.Errorf("singular count: %q", b.String())
	}
}

func TestJSON(t *testing.T) {
	var b bytes.Buffer
	for _, v := range []any{
		GetJSON([]byte("k<1>"), []byte("v"), true),
		GetJSON([]byte("missing"), nil, false),
		GetJSON([]byte("bin"), []byte{0xff, 0x00}, true),
		ScanJSON([]KV{{Key: []byte("a"), Value: []byte("1")}}),
	} {
		if err := WriteJSON(&b, v); err != nil {
			t.Fatal(err)
		}
	}
	want := `{
  "key": "k<1>",
  "value": "v",
  "found": true
}
{
  "key": "missing",
  "value": null,
  "found": false
}
{
  "key": "bin",
  "value_base64": "/wA=",
  "found": true
}
{
  "kvs": [
    {
      "key": "a",
      "value": "1"
    }
  ],
  "count": 1
}
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}

	// Protocol buffer answers go through protojson, with every field.
	b.Reset()
	if err := WriteJSON(&b, sampleRanges()); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Ranges []struct {
			LeaderNodeID string `json:"leader_node_id"`
		} `json:"ranges"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	if len(got.Ranges) != 3 || got.Ranges[0].LeaderNodeID != "2" {
		t.Errorf("protojson ranges: %s", b.String())
	}
}
