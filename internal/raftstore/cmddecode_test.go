package raftstore

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
)

// randomWrites is a write command with every field decodeCommand handles
// set or not at random.
func randomWrites(rng *rand.Rand) *tidekvpb.RaftCommand {
	random := func() []byte {
		if rng.IntN(4) == 0 {
			return nil
		}
		b := make([]byte, rng.IntN(200))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	c := &tidekvpb.RaftCommand{ProposalId: rng.Uint64() >> rng.IntN(64), WantExisted: rng.IntN(2) == 0}
	if rng.IntN(4) != 0 {
		c.Timestamp = &tidekvpb.LogTimestamp{WallNanos: rng.Int64() - rng.Int64(), Logical: rng.Uint32() >> rng.IntN(32)}
	}
	for range rng.IntN(4) {
		c.Writes = append(c.Writes, &tidekvpb.LogWrite{Delete: rng.IntN(2) == 0, Key: random(), Value: random(),
			ExpiresAt: rng.Int64() - rng.Int64(), KeepTtl: rng.IntN(2) == 0, Expire: rng.IntN(2) == 0})
	}
	return c
}

// checkCommand says whether decodeCommand and proto.Unmarshal agree.
func checkCommand(t *testing.T, data []byte) {
	t.Helper()
	want := &tidekvpb.RaftCommand{}
	werr := proto.Unmarshal(data, want)
	got, err := decodeCommand(data)
	if (err != nil) != (werr != nil) {
		t.Fatalf("decodeCommand error %v, proto.Unmarshal %v", err, werr)
	}
	if err == nil && !proto.Equal(got, want) {
		t.Fatalf("decodeCommand:\n%v\nproto.Unmarshal:\n%v", got, want)
	}
}

func TestDecodeCommandMatchesUnmarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		var data []byte
		if rng.IntN(2) == 0 {
			b, err := proto.Marshal(randomWrites(rng))
			if err != nil {
				t.Fatal(err)
			}
			data = b
		} else {
			// A batch as proposeLocked makes it.
			var ps []*proposal
			for range 1 + rng.IntN(5) {
				b, err := proto.Marshal(randomWrites(rng))
				if err != nil {
					t.Fatal(err)
				}
				ps = append(ps, &proposal{data: b})
			}
			data = batchData(ps)
		}
		var d cmdDecoder
		if !d.command(data, false) {
			t.Fatalf("a write command went to proto.Unmarshal: %x", data)
		}
		checkCommand(t, data)
	}
}

// The commands decodeCommand leaves to proto.Unmarshal decode as it does.
func TestDecodeCommandFallsBack(t *testing.T) {
	marshal := func(c *tidekvpb.RaftCommand) []byte {
		b, err := proto.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ts := marshal(&tidekvpb.RaftCommand{Timestamp: &tidekvpb.LogTimestamp{WallNanos: 5}})
	w := marshal(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{{Key: []byte("k")}}})
	inner := marshal(&tidekvpb.RaftCommand{Batch: []*tidekvpb.RaftCommand{{ProposalId: 1}}})
	nested := protowire.AppendBytes(protowire.AppendTag(nil, 11, protowire.BytesType), inner)
	fixed := protowire.AppendFixed64(protowire.AppendTag(nil, 1, protowire.Fixed64Type), 1)
	for name, data := range map[string][]byte{
		"cas":              marshal(&tidekvpb.RaftCommand{Cas: &tidekvpb.LogCompareAndSet{Key: []byte("k")}}),
		"split":            marshal(&tidekvpb.RaftCommand{Split: &tidekvpb.SplitCommand{}}),
		"txn":              marshal(&tidekvpb.RaftCommand{Txn: &tidekvpb.TxnCommand{}, Writes: []*tidekvpb.LogWrite{{Key: []byte("k")}}}),
		"timestamp twice":  append(append([]byte{}, ts...), marshal(&tidekvpb.RaftCommand{Timestamp: &tidekvpb.LogTimestamp{Logical: 2}})...),
		"writes and batch": append(append([]byte{}, w...), inner...),
		"batch in batch":   nested,
		"wire type":        fixed,
		"truncated":        w[:len(w)-1],
	} {
		t.Run(name, func(t *testing.T) {
			var d cmdDecoder
			if d.command(data, false) {
				t.Fatal("decoded here, not by proto.Unmarshal")
			}
			checkCommand(t, data)
		})
	}
}

// Keys and values alias the entry, capped: an append copies.
func TestDecodeCommandAliasCapped(t *testing.T) {
	data, err := proto.Marshal(&tidekvpb.RaftCommand{Writes: []*tidekvpb.LogWrite{
		{Key: []byte("k1"), Value: []byte("v1")}, {Key: []byte("k2"), Value: []byte("v2")}}})
	if err != nil {
		t.Fatal(err)
	}
	before := string(data)
	cmd, err := decodeCommand(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range cmd.GetWrites() {
		_ = append(w.GetKey(), "XXXXXXXX"...)
		_ = append(w.GetValue(), "XXXXXXXX"...)
	}
	if string(data) != before {
		t.Fatal("an append to a write's key or value wrote into the entry")
	}
	if &cmd.GetWrites()[0].GetValue()[0] != &data[bytes.Index(data, []byte("v1"))] {
		t.Fatal("the first value is a copy: the command decoder did not run")
	}
}

// A batch of write commands costs the same few allocations however many
// it holds.
func TestDecodeCommandAllocations(t *testing.T) {
	var ps []*proposal
	for i := range 8 {
		b, err := proto.Marshal(&tidekvpb.RaftCommand{ProposalId: uint64(i + 1),
			Timestamp: &tidekvpb.LogTimestamp{WallNanos: 1e18, Logical: 1},
			Writes:    []*tidekvpb.LogWrite{{Key: []byte("key"), Value: make([]byte, 1000)}}})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, &proposal{data: b})
	}
	data := batchData(ps)
	// Five arrays: commands, the batch's pointers, timestamps, writes and
	// their pointers.
	if n := testing.AllocsPerRun(20, func() { _, _ = decodeCommand(data) }); n > 5 {
		t.Fatalf("%v allocations for a batch of 8 writes, want at most 5", n)
	}
}

// The most common entry, one command of one write, is one allocation.
func TestDecodeCommandOneWriteAllocations(t *testing.T) {
	data, err := proto.Marshal(&tidekvpb.RaftCommand{ProposalId: 1, Timestamp: &tidekvpb.LogTimestamp{WallNanos: 1e18},
		Writes: []*tidekvpb.LogWrite{{Key: []byte("key"), Value: make([]byte, 1000)}}})
	if err != nil {
		t.Fatal(err)
	}
	checkCommand(t, data)
	if n := testing.AllocsPerRun(20, func() { _, _ = decodeCommand(data) }); n > 1 {
		t.Fatalf("%v allocations for a command of one write, want 1", n)
	}
}

func FuzzDecodeCommand(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 20 {
		b, err := proto.Marshal(randomWrites(rng))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(batchData([]*proposal{{data: b}, {data: b}}))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkCommand(t, data) })
}
