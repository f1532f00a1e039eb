package keyspaces

import (
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/memengine"
	"github.com/tidekv/tidekv/internal/metrics"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/rangeload"
	"github.com/tidekv/tidekv/internal/storage"
)

// Record is the meta range's record of key space settings s.
func Record(s ksconfig.Settings) *tidekvpb.KeySpaceRecord {
	return &tidekvpb.KeySpaceRecord{Name: s.Name, Mode: string(s.Mode), Rf: uint32(s.RF), Engine: string(s.Engine), Index: string(s.Index),
		CapacityPerNode: s.CapacityPerNode, TtlMs: s.TTL.Milliseconds(), MissHandler: s.MissHandler, OnFull: string(s.OnFull),
		GcTtlMs: s.GCTTL.Milliseconds()}
}

// CatalogueOf is the catalogue the meta range's records say.
func CatalogueOf(recs []*tidekvpb.KeySpaceRecord) ksconfig.Catalogue {
	ks := make([]ksconfig.KeySpace, 0, len(recs))
	for _, r := range recs {
		ks = append(ks, ksconfig.KeySpace{ID: keyspace.ID(r.GetId()), Settings: ksconfig.Settings{Name: r.GetName(),
			Mode: keyspace.Mode(r.GetMode()), RF: int(r.GetRf()), Engine: ksconfig.Engine(r.GetEngine()), Index: memengine.Index(r.GetIndex()),
			CapacityPerNode: r.GetCapacityPerNode(), TTL: time.Duration(r.GetTtlMs()) * time.Millisecond, MissHandler: r.GetMissHandler(),
			OnFull: ksconfig.Evict, GCTTL: time.Duration(r.GetGcTtlMs()) * time.Millisecond}})
		if r.GetOnFull() != "" {
			ks[len(ks)-1].OnFull = ksconfig.OnFull(r.GetOnFull())
		}
	}
	return ksconfig.NewCatalogue(ks)
}

// ReadCatalogue reads the catalogue from a node's copy of the meta range
// (its leaseholder's, after a lease read).
func ReadCatalogue(eng storage.Reader) (ksconfig.Catalogue, error) {
	recs, err := raftstore.ReadMetaKeySpaces(eng)
	if err != nil {
		return nil, err
	}
	return CatalogueOf(recs), nil
}

// Totals are the bytes, keys and ranges of each key space, by the key
// space of each range's start key.
type Totals map[keyspace.ID]Total

// Total is what one key space holds.
type Total struct {
	Bytes, Keys uint64
	Ranges      int
}

// Add counts a range starting at start holding bytes and keys.
func (t Totals) Add(start []byte, bytes, keys uint64) {
	id := keyspace.Of(start)
	v := t[id]
	v.Bytes += bytes
	v.Keys += keys
	v.Ranges++
	t[id] = v
}

// Loads is the meta leaseholder's table of the ranges' reported loads.
type Loads interface {
	LoadOf(rangeID uint64) rangeload.Load
}

// Place gives placement the key spaces' boundaries and each range's
// replication factor, and exports what each key space holds (meta
// leaseholder), from cat, the catalogue as the meta range holds it, which
// also replaces this node's copy.
func (sp *Spaces) Place(obs *control.Observation, cat ksconfig.Catalogue, loads Loads) {
	sp.Set(cat)
	obs.Boundaries = cat.Boundaries()
	for _, k := range cat {
		if k.CapacityPerNode > 0 {
			lo, hi := keyspace.Span(k.ID)
			obs.Caches = append(obs.Caches, control.CacheSpace{Name: k.Name, Start: lo, End: hi, CapacityPerNode: k.CapacityPerNode, Grow: k.OnFull == ksconfig.Grow})
		}
	}
	t := Totals{}
	for i := range obs.Ranges {
		r := &obs.Ranges[i]
		if r.ControlLoop {
			continue
		}
		if k, ok := cat.ByID(keyspace.Of(r.Start)); ok {
			r.RF = k.RF
		}
		var n uint64
		if l := loads.LoadOf(r.ID); l.Span.Equal(rangeload.Span{Start: r.Start, End: r.End}) { // not of a span before a split or merge
			n = l.Keys
		}
		t.Add(r.Start, r.Bytes, n)
	}
	for _, k := range cat.All() {
		l := metrics.IDLabel(k.ID)
		sp.m.KeyspaceBytes.WithLabelValues(l).Set(float64(t[k.ID].Bytes))
		sp.m.KeyspaceKeys.WithLabelValues(l).Set(float64(t[k.ID].Keys))
		sp.m.KeyspaceRanges.WithLabelValues(l).Set(float64(t[k.ID].Ranges))
	}
}
