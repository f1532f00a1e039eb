package geo

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
)

// OpKind is what one operation of a geo transaction does. Every kind reads
// and writes its own key only, and its abort condition depends on that
// key alone: that is what makes every transaction chainable (a hop at a
// partition needs nothing but its keys and whether earlier hops aborted).
type OpKind uint8

const (
	// OpGet reads the key (reported in Result.Reads).
	OpGet OpKind = iota + 1
	// OpPut writes Value.
	OpPut
	// OpDelete removes the key.
	OpDelete
	// OpAdd adds Delta to the key's decimal integer (absent: 0). With
	// Floored, a sum below Floor aborts the transaction: a bank debit
	// that would overdraw. A value that is not an integer aborts too.
	OpAdd
	// OpCompare aborts the transaction unless the key holds Value
	// (Absent: unless the key is absent). A flag, not a nil Value: the
	// wire form does not tell nil from empty.
	OpCompare
)

// Op is one operation of a geo transaction.
type Op struct {
	Kind    OpKind
	Key     string
	Value   []byte
	Delta   int64
	Floor   int64
	Floored bool
	Absent  bool
}

// TxnID names a transaction: its gateway DC and that gateway's sequence.
type TxnID struct {
	DC  int
	Seq uint64
}

func (id TxnID) String() string { return fmt.Sprintf("%d.%d", id.DC, id.Seq) }

// Txn is one geo transaction as it travels in epoch messages.
type Txn struct {
	ID  TxnID
	Ops []Op
}

// KV is one key's value in a result; Found false means absent.
type KV struct {
	Key   string
	Value []byte
	Found bool
}

// Result is what executing a transaction gave at one DC. Members is the
// set of DCs whose input its epoch was executed with (bit i: DC i), so a
// result computed on an input the DCs later decided otherwise never
// matches a valid one. Prior is the hash of the result executed just
// before it (which covers the one before that, and so on): a result
// computed on a speculative state that another result before it got
// wrong never matches one computed on the decided history, even where
// the two happen to read and write the same values. Without it, two DCs'
// results from before their rollbacks could make a majority for a third
// DC that never ran on that state.
type Result struct {
	ID        TxnID
	Members   uint64
	Prior     [32]byte
	Committed bool
	Reason    string // why it aborted
	Reads     []KV   // the OpGet reads, in operation order
	Writes    []KV   // the final values it wrote, in operation order (Found false: deleted)
}

// Hash is what DCs compare: equal hashes mean the same result.
func (r *Result) Hash() [32]byte {
	h := sha256.New()
	var b []byte
	b = binary.AppendUvarint(b, uint64(r.ID.DC))
	b = binary.AppendUvarint(b, r.ID.Seq)
	b = binary.AppendUvarint(b, r.Members)
	b = append(b, r.Prior[:]...)
	b = strconv.AppendBool(b, r.Committed)
	b = appendBytes(b, []byte(r.Reason))
	for _, list := range [][]KV{r.Reads, r.Writes} {
		b = binary.AppendUvarint(b, uint64(len(list)))
		for _, kv := range list {
			b = appendBytes(appendBytes(b, []byte(kv.Key)), kv.Value)
			b = strconv.AppendBool(b, kv.Found)
		}
	}
	h.Write(b)
	return [32]byte(h.Sum(nil))
}

func appendBytes(b, v []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(v))), v...) }

// ErrInvalid marks a transaction refused before it is ordered; nothing
// changed.
var ErrInvalid = errors.New("invalid geo transaction")

// ValidateOps refuses ops that cannot run as a geo transaction under cfg,
// in one sentence.
func ValidateOps(cfg Config, ops []Op) error {
	if len(ops) == 0 {
		return fmt.Errorf("%w: no operations", ErrInvalid)
	}
	if len(ops) > cfg.MaxOps {
		return fmt.Errorf("%w: %d operations, more than the limit of %d", ErrInvalid, len(ops), cfg.MaxOps)
	}
	size := 0
	for i, op := range ops {
		if op.Key == "" {
			return fmt.Errorf("%w: operation %d has an empty key", ErrInvalid, i)
		}
		if op.Kind < OpGet || op.Kind > OpCompare {
			return fmt.Errorf("%w: operation %d has unknown kind %d", ErrInvalid, i, op.Kind)
		}
		size += len(op.Key) + len(op.Value)
	}
	if size > cfg.MaxBytes {
		return fmt.Errorf("%w: %d bytes of keys and values, more than the limit of %d", ErrInvalid, size, cfg.MaxBytes)
	}
	return nil
}

// apply runs op on the key's current value (v, found) and returns the new
// one; abort is non-empty when the transaction must abort. Pure.
func (op *Op) apply(v []byte, found bool) (nv []byte, nfound bool, abort string) {
	switch op.Kind {
	case OpPut:
		return op.Value, true, ""
	case OpDelete:
		return nil, false, ""
	case OpCompare:
		if found == op.Absent || (found && !bytes.Equal(v, op.Value)) {
			return v, found, fmt.Sprintf("compare failed on %q", op.Key)
		}
	case OpAdd:
		var n int64
		if found {
			var err error
			if n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return v, found, fmt.Sprintf("%q holds %q, not an integer", op.Key, v)
			}
		}
		sum := n + op.Delta
		if op.Floored && sum < op.Floor {
			return v, found, fmt.Sprintf("%q would fall to %d, below %d", op.Key, sum, op.Floor)
		}
		return strconv.AppendInt(nil, sum, 10), true, ""
	}
	return v, found, ""
}
