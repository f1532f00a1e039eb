package keyspaces

import (
	"fmt"
	"log"
	"sync"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/internal/keys"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/memengine"
	"github.com/tidekv/tidekv/internal/mvcc"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/storage/routed"
)

// memSpaces keeps the data of each memory key space (docs/keyspaces.md,
// "Engines") in a memory engine of its index, inside the node's routed
// engine: raftstore sees one engine, whose memory key spaces' user data
// lives in memory and everything else in the base (Pebble).
//
// A key space is routed when the node's copy of the catalogue first holds
// it, which may be after this node's replicas applied writes to it (the
// routed engine copies those over). Each routed key space is recorded in
// the base first, so a restarted node knows which data it lost
// (raftstore's volatile.go) even before it learns the catalogue again.
type memSpaces struct {
	eng  *routed.Engine
	base storage.Engine
	cfg  memengine.Config // each key space's engine, with the key space's index

	mu     sync.Mutex
	routed map[keyspace.ID]bool
}

// openMemSpaces wraps base, with the memory key spaces recorded in it
// routed to fresh, empty memory engines.
func openMemSpaces(base storage.Engine, cfg memengine.Config) (*memSpaces, error) {
	// Only named key spaces' data may be routed: writes to the rest (Raft
	// state, the meta range, the default key space) go to base directly.
	m := &memSpaces{eng: routed.New(base, userDataSpans(keyspace.Prefix(1), nil)...), base: base, cfg: cfg, routed: map[keyspace.ID]bool{}}
	lo, hi := keys.NodeMemKeySpaceSpan()
	it, err := base.NewIter(lo, hi)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		id, ok := keys.MemKeySpaceOf(it.Key())
		if !ok {
			continue
		}
		if err := m.route(keyspace.ID(id), memengine.Index(it.Value()), m.eng.ReopenPart); err != nil {
			return nil, err
		}
	}
	return m, it.Close()
}

// learn routes the memory key spaces of cat not routed yet.
func (m *memSpaces) learn(cat ksconfig.Catalogue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range cat {
		if k.Engine != ksconfig.Memory || m.routed[k.ID] {
			continue
		}
		if err := m.record(k); err != nil {
			log.Printf("key space %q: cannot record its memory engine, its data stays in the base engine: %v", k.Name, err)
			continue
		}
		if err := m.route(k.ID, k.Index, m.eng.AddPart); err != nil {
			log.Printf("key space %q: %v", k.Name, err)
		}
	}
}

// record notes, durably, that k's data is kept in memory from now on.
func (m *memSpaces) record(k ksconfig.KeySpace) error {
	b := m.base.NewBatch()
	defer b.Close()
	if err := b.Set(keys.NodeMemKeySpaceKey(uint32(k.ID)), []byte(k.Index)); err != nil {
		return err
	}
	return b.Commit(true)
}

// route gives key space id a memory engine, attached by attach (AddPart
// or ReopenPart).
func (m *memSpaces) route(id keyspace.ID, idx memengine.Index, attach func(storage.Engine, ...routed.Span) error) error {
	cfg := m.cfg
	cfg.Index, cfg.Group = idx, mvcc.KeyGroups{} // a read of a key's versions reads one bucket
	e, err := memengine.New(cfg)
	if err != nil {
		return fmt.Errorf("memory engine of key space %d: %w", id, err)
	}
	if err := attach(e, userDataSpans(keyspace.Span(id))...); err != nil {
		return fmt.Errorf("memory engine of key space %d: %w", id, err)
	}
	m.routed[id] = true
	return nil
}

// count is the number of key spaces routed to memory.
func (m *memSpaces) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.routed)
}

// userDataSpans are the engine spans of the user data of keys in [start,
// end) (nil end: to the end).
func userDataSpans(start, end []byte) []routed.Span {
	var spans []routed.Span
	for _, s := range raftstore.UserDataSpans(start, end) {
		spans = append(spans, routed.Span{Lo: s[0], Hi: s[1]})
	}
	return spans
}
