package keyspace

import (
	"bytes"
	"encoding/binary"
	"hash/fnv"
	"math"
)

// ID numbers a key space; 0 is the default key space.
type ID uint32

// Default is the key space of every key outside the reserved prefix.
const Default ID = 0

// reserved starts every key of a named key space. Keys of the default key
// space must not start with it (IsReserved).
var reserved = []byte{0xff, 0xff}

const (
	idLen   = 4
	hashLen = 8
)

// Prefix is the first key of key space id (for Default: the first key of
// the reserved area, which belongs to no key space).
func Prefix(id ID) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(nil), reserved...), uint32(id))
}

// Span is the keys of named key space id: [Prefix(id), Prefix(id+1)).
func Span(id ID) (lo, hi []byte) {
	lo = Prefix(id)
	if id == ^ID(0) {
		return lo, nil
	}
	return lo, Prefix(id + 1)
}

// Of returns the key space a key belongs to. A key in the reserved area
// shorter than a full prefix is read as if padded with zero bytes, so
// Of is monotone in the key: a range's key space is that of its start key.
func Of(key []byte) ID {
	if !bytes.HasPrefix(key, reserved) {
		return Default
	}
	var b [idLen]byte
	copy(b[:], key[len(reserved):])
	return ID(binary.BigEndian.Uint32(b[:]))
}

// ReservedStart is the first key of the reserved area: ranges split there
// so that no range holds keys of the default key space and of a named one.
func ReservedStart() []byte { return append([]byte(nil), reserved...) }

// IsReserved reports whether key lies in the reserved area, which the
// default key space may not use.
func IsReserved(key []byte) bool { return bytes.HasPrefix(key, reserved) }

// Codec maps one key space's user keys to the keys ranges span and back.
type Codec struct {
	ID   ID
	Mode Mode
}

// Hash is the position of a user key inside a hashed key space: FNV-1a,
// 64 bits, stable across binaries as the layout on disk needs, then mixed
// by MurmurHash3's 64-bit finalizer. FNV-1a alone leaves the high bits of
// keys that differ in their last bytes ("user0001", "user0002") close
// together, so such keys would crowd into one range.
func Hash(key []byte) uint64 {
	h := fnv.New64a()
	h.Write(key)
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// Encode returns the stored key of user key key. The default key space
// stores keys unchanged.
func (c Codec) Encode(key []byte) []byte {
	if c.ID == Default {
		return key
	}
	n := len(reserved) + idLen + len(key)
	if c.Mode == Hashed {
		n += hashLen
	}
	out := append(make([]byte, 0, n), Prefix(c.ID)...)
	if c.Mode == Hashed {
		out = binary.BigEndian.AppendUint64(out, Hash(key))
	}
	return append(out, key...)
}

// Decode returns the user key of stored key k, and false if k is not a
// key of this key space.
func (c Codec) Decode(k []byte) ([]byte, bool) {
	if c.ID == Default {
		return k, !IsReserved(k)
	}
	p := Prefix(c.ID)
	if !bytes.HasPrefix(k, p) {
		return nil, false
	}
	k = k[len(p):]
	if c.Mode == Hashed {
		if len(k) < hashLen {
			return nil, false
		}
		k = k[hashLen:]
	}
	return k, true
}

// Owns reports whether stored key k is a key of this key space as Encode
// writes it: under its prefix (outside the reserved area for the default
// key space), and in a hashed key space after the hash of the rest.
func (c Codec) Owns(k []byte) bool {
	u, ok := c.Decode(k)
	if !ok || c.Mode != Hashed {
		return ok
	}
	return binary.BigEndian.Uint64(k[len(reserved)+idLen:]) == Hash(u)
}

// EncodeSpan maps the user span [start, end) (empty end: to the end of the
// key space) of an ordered key space to stored keys. The default key
// space's span ends where the reserved area starts.
func (c Codec) EncodeSpan(start, end []byte) (lo, hi []byte) {
	if c.ID == Default {
		if len(end) == 0 || bytes.Compare(end, reserved) > 0 {
			end = reserved
		}
		return start, end
	}
	lo = c.Encode(start)
	if len(end) == 0 {
		_, hi = Span(c.ID)
		return lo, hi
	}
	return lo, c.Encode(end)
}

// HashSlices is how many equal slices of the hash space a hashed key
// space starts with, one range each: its writes spread over the nodes
// from its first key, rather than all reaching the one range it would
// otherwise start as until that range grows big enough to split. The
// slice starts stay boundaries (ranges never merge across them), as
// the buckets of a hash-sharded index do.
const HashSlices = 8

// HashSliceStarts returns the stored keys where hashed key space id's
// slices 2..HashSlices start.
func HashSliceStarts(id ID) [][]byte {
	out := make([][]byte, 0, HashSlices-1)
	for i := uint64(1); i < HashSlices; i++ {
		out = append(out, binary.BigEndian.AppendUint64(Prefix(id), i*(math.MaxUint64/HashSlices+1)))
	}
	return out
}
