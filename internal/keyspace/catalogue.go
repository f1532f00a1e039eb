package keyspace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"sort"
)

// KeySpace is one entry of the catalogue.
type KeySpace struct {
	ID ID
	Settings
}

// Codec maps the key space's user keys to stored keys.
func (k KeySpace) Codec() Codec { return Codec{ID: k.ID, Mode: k.Mode} }

// Catalogue is a cluster's named key spaces, ordered by ID. The default key
// space is implied: it is in every catalogue.
type Catalogue []KeySpace

// NewCatalogue orders ks by ID.
func NewCatalogue(ks []KeySpace) Catalogue {
	c := append(Catalogue(nil), ks...)
	sort.Slice(c, func(i, j int) bool { return c[i].ID < c[j].ID })
	return c
}

// ByName finds a key space by name ("" or DefaultName: the default).
func (c Catalogue) ByName(name string) (KeySpace, bool) {
	if name == "" || name == DefaultName {
		return KeySpace{ID: Default, Settings: DefaultSettings()}, true
	}
	for _, k := range c {
		if k.Name == name {
			return k, true
		}
	}
	return KeySpace{}, false
}

// ByID finds a key space by number (Default: the default key space).
func (c Catalogue) ByID(id ID) (KeySpace, bool) {
	if id == Default {
		return c.ByName("")
	}
	i := sort.Search(len(c), func(i int) bool { return c[i].ID >= id })
	if i < len(c) && c[i].ID == id {
		return c[i], true
	}
	return KeySpace{}, false
}

// All is the default key space followed by the catalogue.
func (c Catalogue) All() []KeySpace {
	d, _ := c.ByName("")
	return append([]KeySpace{d}, c...)
}

// CheckNew validates s as a new key space of this catalogue.
func (c Catalogue) CheckNew(s Settings) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Name == DefaultName {
		return fmt.Errorf("key space %q exists (it is the default key space)", s.Name)
	}
	if _, ok := c.ByName(s.Name); ok {
		return fmt.Errorf("key space %q exists", s.Name)
	}
	return nil
}

// Boundaries are the keys at which ranges must be split so that each
// range holds keys of one key space: the start of the reserved area and
// each key space's first and end keys, ascending; inside a hashed key
// space also its HashSlices slice starts (HashSliceStarts).
func (c Catalogue) Boundaries() [][]byte {
	if len(c) == 0 {
		return nil
	}
	out := [][]byte{append([]byte(nil), reserved...)}
	for _, k := range c {
		lo, hi := Span(k.ID)
		bs := [][]byte{lo}
		if k.Mode == Hashed {
			bs = append(bs, HashSliceStarts(k.ID)...)
		}
		for _, b := range append(bs, hi) {
			if b != nil && !bytes.Equal(out[len(out)-1], b) {
				out = append(out, b)
			}
		}
	}
	return out
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
