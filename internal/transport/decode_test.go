package transport

import (
	"math/rand/v2"
	"testing"
	"unsafe"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// randomBatch is a batch of the messages a frame carries: every field
// decodeBatch handles, each set or not at random (zero values and empty
// bytes included, which proto2 keeps apart from unset).
func randomBatch(rng *rand.Rand) *tidekvpb.RaftMessageBatch {
	u64 := func() *uint64 {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return new(uint64(0))
		}
		return new(rng.Uint64() >> rng.IntN(64))
	}
	bytes := func() []byte {
		switch rng.IntN(4) {
		case 0:
			return nil
		case 1:
			return []byte{}
		}
		b := make([]byte, rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	b := &tidekvpb.RaftMessageBatch{}
	for range rng.IntN(6) {
		rm := &tidekvpb.RaftMessage{RangeId: rng.Uint64N(1000), FromNodeId: rng.Uint64N(4), ToNodeId: rng.Uint64N(4),
			DataLost: rng.IntN(2) == 0, LogHeldByAll: rng.Uint64N(3) * rng.Uint64()}
		if rng.IntN(8) != 0 {
			m := &raftpb.Message{To: u64(), From: u64(), Term: u64(), LogTerm: u64(), Index: u64(), Commit: u64(),
				Vote: u64(), RejectHint: u64(), Context: bytes()}
			if rng.IntN(4) != 0 {
				m.Type = raftpb.MessageType(rng.IntN(len(raftpb.MessageType_name))).Enum()
			}
			if rng.IntN(3) == 0 {
				m.Reject = new(rng.IntN(2) == 0)
			}
			for range rng.IntN(5) {
				e := &raftpb.Entry{Term: u64(), Index: u64(), Data: bytes()}
				if rng.IntN(3) != 0 {
					e.Type = raftpb.EntryType(rng.IntN(len(raftpb.EntryType_name))).Enum()
				}
				m.Entries = append(m.Entries, e)
			}
			rm.Message = m
		}
		b.Messages = append(b.Messages, rm)
	}
	return b
}

// checkDecode says whether decodeBatch and proto.Unmarshal agree on body.
func checkDecode(t *testing.T, body []byte) {
	t.Helper()
	want := &tidekvpb.RaftMessageBatch{}
	werr := proto.Unmarshal(body, want)
	msgs, err := decodeBatch(body)
	if (err != nil) != (werr != nil) {
		t.Fatalf("decodeBatch error %v, proto.Unmarshal %v", err, werr)
	}
	if err != nil {
		return
	}
	// The messages are what a frame delivers: fields of the batch itself
	// that no node knows are dropped on either path.
	want = &tidekvpb.RaftMessageBatch{Messages: want.GetMessages()}
	if got := (&tidekvpb.RaftMessageBatch{Messages: msgs}); !proto.Equal(got, want) {
		t.Fatalf("decodeBatch:\n%v\nproto.Unmarshal:\n%v", got, want)
	}
}

func TestDecodeBatchMatchesUnmarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		body, err := proto.Marshal(randomBatch(rng))
		if err != nil {
			t.Fatal(err)
		}
		var d batchDecoder
		if !d.batch(body) {
			t.Fatalf("a batch of handled fields went to proto.Unmarshal: %x", body)
		}
		checkDecode(t, body)
	}
}

// The frames decodeBatch leaves to proto.Unmarshal decode as it does.
func TestDecodeBatchFallsBack(t *testing.T) {
	msg := func(m *raftpb.Message) []byte {
		b, err := proto.Marshal(&tidekvpb.RaftMessageBatch{Messages: []*tidekvpb.RaftMessage{{RangeId: 7, Message: m}}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	handoff, err := proto.Marshal(&tidekvpb.RaftMessageBatch{Messages: []*tidekvpb.RaftMessage{{
		Message: &raftpb.Message{Type: raftpb.MsgTimeoutNow.Enum()}, LeaseHandoff: &tidekvpb.Timestamp{WallNanos: 5}}}})
	if err != nil {
		t.Fatal(err)
	}
	// The same message field twice, which protobuf merges.
	one := msg(&raftpb.Message{Term: new(uint64(3))})
	embed := func(m *raftpb.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), b)
	}
	rm2 := append(embed(&raftpb.Message{Term: new(uint64(3))}), embed(&raftpb.Message{Index: new(uint64(4))})...)
	twice := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rm2)
	// A message carrying a field this decoder does not know (number 15).
	var unknown []byte
	unknown = protowire.AppendTag(unknown, 15, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 9)
	inner := append(protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 3), unknown...)
	rm := protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), inner)
	unknownBody := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rm)
	// An enum value MessageType does not name (closed in proto2).
	badEnum := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 999)
	rm = protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), badEnum)
	badEnumBody := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rm)
	// A known field of another wire type.
	fixed := protowire.AppendFixed64(protowire.AppendTag(nil, 4, protowire.Fixed64Type), 1)
	rm = protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), fixed)
	fixedBody := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rm)

	for name, body := range map[string][]byte{
		"snapshot":      msg(&raftpb.Message{Type: raftpb.MsgSnap.Enum(), Snapshot: &raftpb.Snapshot{Data: []byte("s")}}),
		"responses":     msg(&raftpb.Message{Responses: []*raftpb.Message{{Term: new(uint64(1))}}}),
		"lease handoff": handoff,
		"message twice": twice,
		"unknown field": unknownBody,
		"unknown enum":  badEnumBody,
		"wire type":     fixedBody,
		"truncated":     one[:len(one)-1],
	} {
		t.Run(name, func(t *testing.T) {
			var d batchDecoder
			if d.batch(body) {
				t.Fatal("decoded here, not by proto.Unmarshal")
			}
			checkDecode(t, body)
		})
	}
}

// Entries alias the frame, capped: an append to one's Data copies and
// leaves the frame, and the entry after it, as they were.
func TestDecodeBatchDataCapped(t *testing.T) {
	body, err := proto.Marshal(&tidekvpb.RaftMessageBatch{Messages: []*tidekvpb.RaftMessage{{Message: &raftpb.Message{
		Entries: []*raftpb.Entry{{Data: []byte("first")}, {Data: []byte{}}, {Data: []byte("third")}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := decodeBatch(body)
	if err != nil {
		t.Fatal(err)
	}
	ents := msgs[0].GetMessage().GetEntries()
	if p := unsafe.SliceData(ents[0].GetData()); uintptr(unsafe.Pointer(p)) < uintptr(unsafe.Pointer(&body[0])) ||
		uintptr(unsafe.Pointer(p)) >= uintptr(unsafe.Pointer(&body[0]))+uintptr(len(body)) {
		t.Fatal("an entry's data is a copy: the frame decoder did not run")
	}
	before := append([]byte{}, body...)
	for _, e := range ents {
		_ = append(e.GetData(), "XXXXXXXX"...)
	}
	if string(body) != string(before) {
		t.Fatal("an append to an entry's data wrote into the frame")
	}
	if ents[1].GetData() == nil || string(ents[2].GetData()) != "third" {
		t.Fatalf("entries %q %q", ents[1].GetData(), ents[2].GetData())
	}
}

// A frame costs the same few allocations however many messages and
// entries it carries.
func TestDecodeBatchAllocations(t *testing.T) {
	b := &tidekvpb.RaftMessageBatch{}
	for i := range 8 {
		m := &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(6)),
			LogTerm: new(uint64(6)), Index: new(uint64(100 + i)), Commit: new(uint64(99)), Reject: new(false)}
		for j := range 4 {
			m.Entries = append(m.Entries, &raftpb.Entry{Term: new(uint64(6)), Index: new(uint64(101 + j)),
				Type: raftpb.EntryNormal.Enum(), Data: make([]byte, 1000)})
		}
		b.Messages = append(b.Messages, &tidekvpb.RaftMessage{RangeId: uint64(i), FromNodeId: 1, ToNodeId: 2, Message: m})
	}
	body, err := proto.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	// Nine arrays: the message pointers, RaftMessages, Messages, Entries,
	// entry pointers, and the uint64, MessageType, EntryType and bool fields.
	if n := testing.AllocsPerRun(20, func() { _, _ = decodeBatch(body) }); n > 9 {
		t.Fatalf("%v allocations per frame of 8 messages and 32 entries, want at most 9", n)
	}
}

func FuzzDecodeBatch(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		body, err := proto.Marshal(randomBatch(rng))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDecode(t, body) })
}
