package raftstore

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// The log's own commands encode exactly as the API messages the log carried
// before it had types of its own, so entries from then and nodes from then
// read the same bytes the same way.
func TestLogCommandsEncodeAsTheirAPIForms(t *testing.T) {
	det := proto.MarshalOptions{Deterministic: true}
	same := func(name string, api, log proto.Message) {
		t.Helper()
		a, err := det.Marshal(api)
		if err != nil {
			t.Fatal(err)
		}
		l, err := det.Marshal(log)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, l) {
			t.Errorf("%s: API form %x, log form %x", name, a, l)
		}
	}
	ops := []*tidekvpb.WriteOp{
		{Key: []byte("k"), Value: []byte("v")},
		{Kind: tidekvpb.WriteOp_DELETE, Key: []byte("gone")},
		{Key: []byte("empty")},
	}
	logWritesOf := func(ops []*tidekvpb.WriteOp) []*tidekvpb.LogWrite {
		ws, err := logWrites(ops, hlc.Timestamp{})
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	for i, w := range logWritesOf(ops) {
		same("write "+string(ops[i].GetKey()), ops[i], w)
	}
	cas := &tidekvpb.CompareAndSetRequest{Key: []byte("c"), ExpectExists: true, ExpectedValue: []byte("old"), NewValue: []byte("new"), Delete: true}
	lc, err := logCAS(cas, hlc.Timestamp{})
	if err != nil {
		t.Fatal(err)
	}
	same("compare-and-set", cas, lc)
	g := &tidekvpb.WriteGuard{Key: []byte("h"), Value: []byte("H"), ClearStart: []byte("h/"), ClearEnd: []byte("h0")}
	same("guard", g, logGuard(g))

	// An entry as an older binary wrote it: API messages in fields 2, 3, 9.
	var old []byte
	for _, op := range ops {
		b, _ := proto.Marshal(op)
		old = protowire.AppendBytes(protowire.AppendTag(old, 2, protowire.BytesType), b)
	}
	gb, _ := proto.Marshal(g)
	old = protowire.AppendBytes(protowire.AppendTag(old, 9, protowire.BytesType), gb)
	cmd := &tidekvpb.RaftCommand{}
	if err := proto.Unmarshal(old, cmd); err != nil {
		t.Fatal(err)
	}
	want := &tidekvpb.RaftCommand{Writes: logWritesOf(ops), WriteGuard: logGuard(g)}
	if !proto.Equal(cmd, want) {
		t.Fatalf("old entry decodes as %v, want %v", cmd, want)
	}
}
