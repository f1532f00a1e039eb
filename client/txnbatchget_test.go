package client

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// oldTxnServer is the Txn service of a node older than TxnBatchGet: its
// Get answers from data at readTS and counts its calls.
type oldTxnServer struct {
	tidekvpb.UnimplementedTxnServer
	data   map[string]string
	readTS *tidekvpb.Timestamp
	gets   int
}

func (s *oldTxnServer) Get(_ context.Context, req *tidekvpb.TxnGetRequest) (*tidekvpb.TxnGetResponse, error) {
	s.gets++
	v, ok := s.data[string(req.GetKey())]
	return &tidekvpb.TxnGetResponse{Value: []byte(v), Found: ok, ReadTimestamp: s.readTS}, nil
}

// withoutMethod is desc without the method named name: the service as a
// binary from before that method registers it (gRPC answers a call of it
// Unimplemented, "unknown method").
func withoutMethod(desc grpc.ServiceDesc, name string) *grpc.ServiceDesc {
	all := desc.Methods
	desc.Methods = nil
	for _, m := range all {
		if m.MethodName != name {
			desc.Methods = append(desc.Methods, m)
		}
	}
	return &desc
}

// Tx.BatchGet against a coordinator without the RPC (an older node in a
// cluster being upgraded) reads the keys it has not written one Get
// each, in order, as GetVersion would, and keeps the read timestamp the
// answers carry; the key it wrote is answered from its buffer.
func TestTxBatchGetFallsBackToGetOnAnOlderNode(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	old := &oldTxnServer{data: map[string]string{"a": "1", "c": "3"}, readTS: &tidekvpb.Timestamp{WallNanos: 42, Logical: 7}}
	srv := grpc.NewServer()
	srv.RegisterService(withoutMethod(tidekvpb.Txn_ServiceDesc, "BatchGet"), old)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })

	ctx := context.Background()
	tx := &Tx{nc: &nodeConn{cc: cc, txn: tidekvpb.NewTxnClient(cc)}, maxOps: 1000, meta: &tidekvpb.TxnMeta{Id: []byte("t")}}
	if err := tx.Put(ctx, []byte("w"), []byte("mine")); err != nil {
		t.Fatal(err)
	}
	got, err := tx.BatchGet(ctx, [][]byte{[]byte("a"), []byte("w"), []byte("b"), []byte("c")})
	if err != nil {
		t.Fatalf("BatchGet on a node without TxnBatchGet: %v", err)
	}
	want := []struct {
		value string
		found bool
	}{{"1", true}, {"mine", true}, {"", false}, {"3", true}}
	if len(got) != len(want) {
		t.Fatalf("BatchGet = %d results; want %d", len(got), len(want))
	}
	for i, w := range want {
		if string(got[i].Value) != w.value || got[i].Found != w.found {
			t.Errorf("result %d = %q found %v; want %q found %v", i, got[i].Value, got[i].Found, w.value, w.found)
		}
	}
	if old.gets != 3 {
		t.Errorf("the older node got %d Gets; want 3, one for each key not written", old.gets)
	}
	if ts := tx.ReadTimestamp(); ts.WallTime != 42 || ts.Logical != 7 {
		t.Errorf("read timestamp after the fallback = %v; want the node's 42.7", ts)
	}
}
