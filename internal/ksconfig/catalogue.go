package ksconfig

import (
	"bytes"
	"fmt"
	"github.com/tidekv/tidekv/api/keyspace"
	"sort"
)

// KeySpace is one entry of the catalogue.
type KeySpace struct {
	ID keyspace.ID
	Settings
}

// Codec maps the key space's user keys to stored keys.
func (k KeySpace) Codec() keyspace.Codec { return keyspace.Codec{ID: k.ID, Mode: k.Mode} }

// Catalogue is a cluster's named key spaces, ordered by ID. The default key
// space is implied: it is in every catalogue.
type Catalogue []KeySpace

// NewCatalogue orders ks by ID.
func NewCatalogue(ks []KeySpace) Catalogue {
	c := append(Catalogue(nil), ks...)
	sort.Slice(c, func(i, j int) bool { return c[i].ID < c[j].ID })
	return c
}

// ByName finds a key space by name ("" or keyspace.DefaultName: the default).
func (c Catalogue) ByName(name string) (KeySpace, bool) {
	if name == "" || name == keyspace.DefaultName {
		return KeySpace{ID: keyspace.Default, Settings: DefaultSettings()}, true
	}
	for _, k := range c {
		if k.Name == name {
			return k, true
		}
	}
	return KeySpace{}, false
}

// ByID finds a key space by number (keyspace.Default: the default key space).
func (c Catalogue) ByID(id keyspace.ID) (KeySpace, bool) {
	if id == keyspace.Default {
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
	if s.Name == keyspace.DefaultName {
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
// space also its keyspace.HashSlices slice starts (keyspace.HashSliceStarts).
func (c Catalogue) Boundaries() [][]byte {
	if len(c) == 0 {
		return nil
	}
	out := [][]byte{keyspace.ReservedStart()}
	for _, k := range c {
		lo, hi := keyspace.Span(k.ID)
		bs := [][]byte{lo}
		if k.Mode == keyspace.Hashed {
			bs = append(bs, keyspace.HashSliceStarts(k.ID)...)
		}
		for _, b := range append(bs, hi) {
			if b != nil && !bytes.Equal(out[len(out)-1], b) {
				out = append(out, b)
			}
		}
	}
	return out
}
