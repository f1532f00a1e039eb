package raftstore

import (
	"bytes"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/storage"
)

// The encoder writes what putProto writes, and reusing its buffers for the
// next write leaves the earlier ones in the batch intact.
func TestEncoderReusesBuffers(t *testing.T) {
	eng := storage.NewMem()
	b := eng.NewBatch()
	var enc encoder
	var want [][]byte
	for i := uint64(1); i <= 3; i++ {
		e := &raftpb.Entry{Index: proto.Uint64(i), Term: proto.Uint64(2), Data: bytes.Repeat([]byte{byte(i)}, int(i)*10)}
		enc.key = keys.AppendLogKey(enc.key[:0], 5, i)
		if err := enc.put(b, enc.key, e); err != nil {
			t.Fatal(err)
		}
		w, _ := proto.Marshal(e)
		want = append(want, w)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		v, ok, err := eng.Get(keys.LogKey(5, i))
		if err != nil || !ok || !bytes.Equal(v, want[i-1]) {
			t.Fatalf("entry %d: %x, %v, %v; want %x", i, v, ok, err, want[i-1])
		}
	}
}
