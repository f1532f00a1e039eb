package server

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// FuzzKVRequests sends arbitrary KV requests (any bytes that decode as a
// request of the kind picked by the first argument) to a one-node cluster
// over gRPC, as a hostile client could. Every answer must be a success or a
// typed refusal in one sentence, never a crash or an internal error, and a
// write refused as invalid must leave the keys it names as they were.
func FuzzKVRequests(f *testing.F) {
	seed := func(kind byte, m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(kind, b)
	}
	seed(0, &tidekvpb.WriteRequest{Ops: []*tidekvpb.WriteOp{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Kind: tidekvpb.WriteOp_DELETE}}})
	seed(0, &tidekvpb.WriteRequest{Ops: []*tidekvpb.WriteOp{{Key: []byte("h"), Value: []byte("v")}},
		Guard: &tidekvpb.WriteGuard{Key: []byte("h"), ClearStart: []byte("h\x00"), ClearEnd: []byte("h\x01")}, WantExisted: true})
	seed(0, &tidekvpb.WriteRequest{Ops: []*tidekvpb.WriteOp{{Key: []byte("e"), Value: []byte("1")}, {Key: nil, Value: []byte("1")}}})
	seed(0, &tidekvpb.WriteRequest{Ops: []*tidekvpb.WriteOp{{Key: []byte("g"), Value: []byte("v")}},
		Guard: &tidekvpb.WriteGuard{Key: []byte("g"), ClearStart: []byte("z"), ClearEnd: []byte("a")}})
	seed(1, &tidekvpb.CompareAndSetRequest{Key: []byte("c"), NewValue: []byte("2"), ExpectExists: true, ExpectedValue: []byte("1")})
	seed(2, &tidekvpb.ScanRequest{StartKey: []byte("a"), EndKey: []byte("z"), Limit: 10})
	seed(2, &tidekvpb.ScanRequest{StartKey: []byte("z"), EndKey: []byte("a")})
	seed(3, &tidekvpb.BatchGetRequest{Keys: [][]byte{[]byte("a"), {}, []byte("b")}})
	seed(4, &tidekvpb.GetRequest{Key: []byte("a"), ReadMode: tidekvpb.ReadMode_BOUNDED, MaxStalenessMs: 0})

	tc := startCluster(f, 1)
	kv := kvClient(f, tc.nodes[0].Addr())
	waitServing(f, kv)
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		switch kind % 5 {
		case 0:
			req := &tidekvpb.WriteRequest{}
			if proto.Unmarshal(data, req) != nil {
				return
			}
			var named [][]byte
			for _, op := range req.GetOps() {
				if len(op.GetKey()) > 0 && len(op.GetKey()) <= 4096 && len(named) < 4 {
					named = append(named, op.GetKey())
				}
			}
			before := readKeys(ctx, t, kv, named)
			_, err := kv.Write(ctx, req)
			if checkAnswer(t, "write", err) == codes.InvalidArgument {
				if after := readKeys(ctx, t, kv, named); !equalValues(before, after) {
					t.Fatalf("refused write changed its keys: %q -> %q", before, after)
				}
			}
		case 1:
			req := &tidekvpb.CompareAndSetRequest{}
			if proto.Unmarshal(data, req) == nil {
				_, err := kv.CompareAndSet(ctx, req)
				checkAnswer(t, "compare-and-set", err)
			}
		case 2:
			req := &tidekvpb.ScanRequest{}
			if proto.Unmarshal(data, req) == nil {
				_, err := kv.Scan(ctx, req)
				checkAnswer(t, "scan", err)
			}
		case 3:
			req := &tidekvpb.BatchGetRequest{}
			if proto.Unmarshal(data, req) == nil {
				_, err := kv.BatchGet(ctx, req)
				checkAnswer(t, "batch get", err)
			}
		default:
			req := &tidekvpb.GetRequest{}
			if proto.Unmarshal(data, req) == nil {
				_, err := kv.Get(ctx, req)
				checkAnswer(t, "get", err)
			}
		}
	})
}

// readKeys reads keys linearizably; a key's value is nil when absent.
func readKeys(ctx context.Context, t *testing.T, kv tidekvpb.KVClient, ks [][]byte) [][]byte {
	t.Helper()
	out := make([][]byte, len(ks))
	for i, k := range ks {
		resp, err := kv.Get(ctx, &tidekvpb.GetRequest{Key: k})
		if err != nil {
			t.Fatalf("reading %q: %v", k, err)
		}
		if resp.GetFound() {
			out[i] = resp.GetValue()
		}
	}
	return out
}

func equalValues(a, b [][]byte) bool {
	for i := range a {
		if !bytes.Equal(a[i], b[i]) || (a[i] == nil) != (b[i] == nil) {
			return false
		}
	}
	return true
}

// checkAnswer fails t unless err is nil or a typed refusal in one
// sentence, and returns its code.
func checkAnswer(t *testing.T, what string, err error) codes.Code {
	t.Helper()
	if err == nil {
		return codes.OK
	}
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%s: not a gRPC status: %v", what, err)
	}
	switch st.Code() {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.ResourceExhausted, codes.Unavailable, codes.DeadlineExceeded:
	default:
		t.Fatalf("%s: answered %v: %q", what, st.Code(), st.Message())
	}
	if m := st.Message(); m == "" || strings.Contains(m, "\n") {
		t.Fatalf("%s: message %q is not one sentence", what, m)
	}
	return st.Code()
}
