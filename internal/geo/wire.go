package geo

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// EncodeMessage and DecodeMessage are the wire form of a Message between
// nodes: fields in order, integers as varints, strings and byte slices
// length-prefixed, after a version byte (the format is the package's own
// and versioned with it).
//
// Not gob: a gob encoder per message sends every type's description with
// it (660 bytes for a message with one vote) and took about 80 µs to
// encode and decode one. Every gateway sends up to four messages an
// epoch (an epoch message and an early one to each of two peers), so at
// 5 ms epochs three gateways' gob work alone was about half of a third
// of a CPU, and TestGeoBankAcrossRegions squeezed to that fell behind
// from its first second and never caught up.
func EncodeMessage(m *Message) ([]byte, error) {
	b := []byte{wireVersion}
	b = appendBool(b, m.Early)
	b = appendBool(b, m.Late)
	b = binary.AppendVarint(b, int64(m.From))
	b = binary.AppendUvarint(b, m.Genesis)
	b = binary.AppendUvarint(b, m.Epoch)
	b = binary.AppendUvarint(b, uint64(len(m.Txns)))
	for _, t := range m.Txns {
		b = appendID(b, t.ID)
		b = binary.AppendUvarint(b, uint64(len(t.Ops)))
		for _, op := range t.Ops {
			b = append(b, byte(op.Kind))
			b = appendBytes(b, []byte(op.Key))
			b = appendBytes(b, op.Value)
			b = binary.AppendVarint(b, op.Delta)
			b = binary.AppendVarint(b, op.Floor)
			b = appendBool(b, op.Floored)
			b = appendBool(b, op.Absent)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(m.Votes)))
	for _, v := range m.Votes {
		b = binary.AppendUvarint(b, v.Epoch)
		b = binary.AppendVarint(b, int64(v.DC))
		b = appendBool(b, v.Have)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Results)))
	for _, r := range m.Results {
		b = appendID(b, r.ID)
		b = binary.AppendUvarint(b, r.Members)
		b = append(b, r.Prior[:]...)
		b = appendBool(b, r.Committed)
		b = appendBytes(b, []byte(r.Reason))
		b = appendKVs(b, r.Reads)
		b = appendKVs(b, r.Writes)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Acks)))
	for _, a := range m.Acks {
		b = binary.AppendUvarint(b, a)
	}
	return b, nil
}

const wireVersion = 1

var errWire = errors.New("geo: decoding epoch message: malformed")

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendID(b []byte, id TxnID) []byte {
	return binary.AppendUvarint(binary.AppendVarint(b, int64(id.DC)), id.Seq)
}

func appendKVs(b []byte, kvs []KV) []byte {
	b = binary.AppendUvarint(b, uint64(len(kvs)))
	for _, kv := range kvs {
		b = appendBytes(b, []byte(kv.Key))
		b = appendBytes(b, kv.Value)
		b = appendBool(b, kv.Found)
	}
	return b
}

// wireReader reads what EncodeMessage wrote; the first fault sticks.
type wireReader struct {
	b   []byte
	bad bool
}

func (r *wireReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }

func (r *wireReader) varint() int64 { return readVarint(r, binary.Varint) }

// readVarint reads one varint with decode (binary.Uvarint or Varint).
func readVarint[T uint64 | int64](r *wireReader, decode func([]byte) (T, int)) T {
	v, n := decode(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *wireReader) byte1() byte {
	if len(r.b) < 1 {
		r.bad = true
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *wireReader) bool1() bool { return r.byte1() == 1 }

func (r *wireReader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad, r.b = true, nil
		return nil
	}
	if n == 0 {
		return nil
	}
	v := append([]byte(nil), r.b[:n]...)
	r.b = r.b[n:]
	return v
}

// count reads a length, refusing one longer than the bytes left (each
// element takes at least one byte), so a corrupt length allocates nothing.
func (r *wireReader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.bad, r.b = true, nil
		return 0
	}
	return int(n)
}

func (r *wireReader) id() TxnID { return TxnID{DC: int(r.varint()), Seq: r.uvarint()} }

func (r *wireReader) kvs() []KV {
	var out []KV
	for range r.count() {
		out = append(out, KV{Key: string(r.bytes()), Value: r.bytes(), Found: r.bool1()})
	}
	return out
}

func DecodeMessage(data []byte) (*Message, error) {
	r := &wireReader{b: data}
	if v := r.byte1(); v != wireVersion {
		return nil, fmt.Errorf("geo: decoding epoch message: wire version %d, want %d", v, wireVersion)
	}
	m := &Message{Early: r.bool1(), Late: r.bool1(), From: int(r.varint()), Genesis: r.uvarint(), Epoch: r.uvarint()}
	for range r.count() {
		t := Txn{ID: r.id()}
		for range r.count() {
			t.Ops = append(t.Ops, Op{Kind: OpKind(r.byte1()), Key: string(r.bytes()), Value: r.bytes(),
				Delta: r.varint(), Floor: r.varint(), Floored: r.bool1(), Absent: r.bool1()})
		}
		m.Txns = append(m.Txns, t)
	}
	for range r.count() {
		m.Votes = append(m.Votes, Vote{Epoch: r.uvarint(), DC: int(r.varint()), Have: r.bool1()})
	}
	for range r.count() {
		res := Result{ID: r.id(), Members: r.uvarint()}
		if len(r.b) < len(res.Prior) {
			return nil, errWire
		}
		copy(res.Prior[:], r.b)
		r.b = r.b[len(res.Prior):]
		res.Committed = r.bool1()
		res.Reason = string(r.bytes())
		res.Reads, res.Writes = r.kvs(), r.kvs()
		m.Results = append(m.Results, res)
	}
	for range r.count() {
		m.Acks = append(m.Acks, r.uvarint())
	}
	if r.bad || len(r.b) != 0 {
		return nil, errWire
	}
	return m, nil
}
