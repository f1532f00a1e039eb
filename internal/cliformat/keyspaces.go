package cliformat

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/units"
)

// KeySpaceView is one key space as `ctl keyspace list --json` prints it.
// Hits, misses and evictions are summed over the nodes since each started
// (docs/keyspaces.md).
type KeySpaceView struct {
	ID              uint32 `json:"id"`
	Name            string `json:"name"`
	Mode            string `json:"mode"`
	Engine          string `json:"engine"`
	Index           string `json:"index"`
	RF              uint32 `json:"rf"`
	CapacityPerNode uint64 `json:"capacity_per_node"`
	TTLMs           int64  `json:"ttl_ms"`
	GCTTLMs         int64  `json:"gc_ttl_ms"` // 0: the engine's default
	MissHandler     string `json:"miss_handler,omitempty"`
	OnFull          string `json:"on_full,omitempty"`
	Ranges          uint32 `json:"ranges"`
	Bytes           uint64 `json:"bytes"`
	Keys            uint64 `json:"keys"`
	Hits            uint64 `json:"hits"`
	Misses          uint64 `json:"misses"`
	Evictions       uint64 `json:"evictions"`
}

// KeySpacesView lists key spaces, the default one first.
type KeySpacesView struct {
	KeySpaces []KeySpaceView `json:"keyspaces"`
}

// KeySpaceOf converts one key space.
func KeySpaceOf(k *tidekvpb.KeySpace) KeySpaceView {
	return KeySpaceView{ID: k.GetId(), Name: k.GetName(), Mode: k.GetMode(), Engine: k.GetEngine(), Index: k.GetIndex(),
		RF: k.GetRf(), CapacityPerNode: k.GetCapacityPerNode(), TTLMs: k.GetTtlMs(), GCTTLMs: k.GetGcTtlMs(), MissHandler: k.GetMissHandler(), OnFull: k.GetOnFull(), Ranges: k.GetRanges(), Bytes: k.GetBytes(),
		Keys: k.GetKeys(), Hits: k.GetHits(), Misses: k.GetMisses(), Evictions: k.GetEvictions()}
}

// KeySpacesOf converts key spaces, keeping their order.
func KeySpacesOf(ks []*tidekvpb.KeySpace) KeySpacesView {
	v := KeySpacesView{KeySpaces: make([]KeySpaceView, 0, len(ks))}
	for _, k := range ks {
		v.KeySpaces = append(v.KeySpaces, KeySpaceOf(k))
	}
	return v
}

// KeySpacesTable writes one line per key space. SELECT is the Redis
// database that reaches it.
func KeySpacesTable(w io.Writer, v KeySpacesView) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SELECT\tNAME\tMODE\tENGINE\tRF\tCAPACITY/NODE\tTTL\tGC-TTL\tRANGES\tBYTES\tKEYS\tHITS\tMISSES\tEVICTIONS")
	for _, k := range v.KeySpaces {
		rf, capacity, ttl, gcTTL := "cluster", "-", "-", "default"
		if k.RF > 0 {
			rf = fmt.Sprint(k.RF)
		}
		if k.CapacityPerNode > 0 {
			capacity = units.Human(k.CapacityPerNode)
		}
		if k.TTLMs > 0 {
			ttl = fmt.Sprintf("%dms", k.TTLMs)
		}
		if k.GCTTLMs > 0 {
			gcTTL = (time.Duration(k.GCTTLMs) * time.Millisecond).String()
		}
		engine := k.Engine
		if k.Index != "" {
			engine += "/" + k.Index
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\n", k.ID, k.Name, k.Mode, engine, rf, capacity, ttl, gcTTL, k.Ranges, units.Human(k.Bytes),
			k.Keys, k.Hits, k.Misses, k.Evictions)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, plural(len(v.KeySpaces), "key space"))
	return err
}
