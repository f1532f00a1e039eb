package geo

import (
	"reflect"
	"testing"
)

// Every field of a message survives the wire, and every truncation of
// one is refused rather than read as a shorter message.
func TestMessageWireRoundTrip(t *testing.T) {
	m := &Message{Early: true, Late: true, From: 2, Genesis: 1 << 40, Epoch: 1<<40 + 7,
		Txns: []Txn{{ID: TxnID{DC: 2, Seq: 1 << 62}, Ops: []Op{
			{Kind: OpAdd, Key: "acct/1", Delta: -30, Floor: -5, Floored: true},
			{Kind: OpCompare, Key: "k", Value: []byte("v"), Absent: true},
		}}},
		Votes: []Vote{{Epoch: 1<<40 + 3, DC: 1, Have: true}, {Epoch: 1<<40 + 4}},
		Results: []Result{{ID: TxnID{DC: 1, Seq: 9}, Members: 0b101, Prior: [32]byte{1, 2, 31: 3}, Committed: true,
			Reason: "below floor", Reads: []KV{{Key: "a", Value: []byte("1"), Found: true}}, Writes: []KV{{Key: "b"}}}},
		Acks: []uint64{1 << 40, 0, 5},
	}
	data, err := EncodeMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMessage(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
	if got.Results[0].Hash() != m.Results[0].Hash() {
		t.Fatal("a result's hash changed on the wire")
	}
	for i := range data {
		if _, err := DecodeMessage(data[:i]); err == nil {
			t.Fatalf("a message cut to %d of %d bytes was decoded", i, len(data))
		}
	}
}

// BenchmarkMessageWire encodes and decodes a typical epoch message: two
// transfers, their votes and results, the acknowledgements of three DCs.
func BenchmarkMessageWire(b *testing.B) {
	tr := func(seq uint64) Txn {
		return Txn{ID: TxnID{DC: 1, Seq: seq}, Ops: []Op{
			{Kind: OpAdd, Key: "acct/0001", Delta: -20, Floored: true}, {Kind: OpAdd, Key: "acct/0002", Delta: 20}}}
	}
	res := func(seq uint64) Result {
		return Result{ID: TxnID{DC: 1, Seq: seq}, Members: 0b111, Committed: true,
			Writes: []KV{{Key: "acct/0001", Value: []byte("80"), Found: true}, {Key: "acct/0002", Value: []byte("120"), Found: true}}}
	}
	m := &Message{From: 1, Genesis: 1 << 40, Epoch: 1<<40 + 9, Txns: []Txn{tr(1), tr(2)},
		Votes:   []Vote{{Epoch: 1<<40 + 8, DC: 0, Have: true}, {Epoch: 1<<40 + 8, DC: 2, Have: true}},
		Results: []Result{res(1), res(2)}, Acks: []uint64{1<<40 + 8, 1<<40 + 10, 1<<40 + 8}}
	for b.Loop() {
		data, err := EncodeMessage(m)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := DecodeMessage(data); err != nil {
			b.Fatal(err)
		}
	}
	data, _ := EncodeMessage(m)
	b.ReportMetric(float64(len(data)), "bytes/msg")
}
