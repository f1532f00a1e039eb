package server

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tidekv/tidekv/api/keyspace"
	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/ksconfig"
	"github.com/tidekv/tidekv/internal/memengine"
	"github.com/tidekv/tidekv/internal/metrics"
	"github.com/tidekv/tidekv/internal/raftstore"
)

// Key spaces (docs/keyspaces.md): the admin RPCs that create and list them,
// and each node's copy of the catalogue, which the Redis front end (SELECT)
// and the metrics read. The catalogue lives in the meta range; key spaces
// are never dropped and their mode never changes, and the one rename (a
// restore's staged key space published under its name, restore.go) only
// adds a name, so a copy is only ever missing names, and a miss refreshes
// it.

// catalogueCache is a node's copy of the key space catalogue, read on
// every request that names a key space, so without a lock.
type catalogueCache struct {
	cat atomic.Pointer[ksconfig.Catalogue]
	// learnt is told each catalogue that replaces the copy (memSpaces.learn).
	learnt func(ksconfig.Catalogue)
}

func (c *catalogueCache) get() ksconfig.Catalogue {
	if p := c.cat.Load(); p != nil {
		return *p
	}
	return nil
}

// set replaces the copy unless it knows more key spaces than cat (key
// spaces are never dropped: a shorter catalogue is an older one).
func (c *catalogueCache) set(cat ksconfig.Catalogue) {
	for {
		old := c.cat.Load()
		if old != nil && len(*old) > len(cat) {
			return
		}
		if c.cat.CompareAndSwap(old, &cat) {
			if c.learnt != nil {
				c.learnt(cat)
			}
			return
		}
	}
}

// keySpaceByName finds the key space a request names.
func (s *Server) keySpaceByName(ctx context.Context, name string) (ksconfig.KeySpace, error) {
	k, ok, err := s.findKeySpace(ctx, func(c ksconfig.Catalogue) (ksconfig.KeySpace, bool) { return c.ByName(name) })
	if err == nil && !ok {
		err = invalidArg("no key space %q (tidekv ctl keyspace list shows them)", name)
	}
	return k, err
}

// keySpaceByID finds key space number id.
func (s *Server) keySpaceByID(ctx context.Context, id keyspace.ID) (ksconfig.KeySpace, error) {
	k, ok, err := s.findKeySpace(ctx, func(c ksconfig.Catalogue) (ksconfig.KeySpace, bool) { return c.ByID(id) })
	if err == nil && !ok {
		err = fmt.Errorf("no key space number %d (tidekv ctl keyspace list shows them)", id)
	}
	return k, err
}

// findKeySpace looks a key space up in this node's copy of the catalogue,
// and once more after refreshing the copy from the meta range if it is not
// there.
func (s *Server) findKeySpace(ctx context.Context, find func(ksconfig.Catalogue) (ksconfig.KeySpace, bool)) (ksconfig.KeySpace, bool, error) {
	if k, ok := find(s.keyspaces.get()); ok {
		return k, true, nil
	}
	if _, err := s.listKeySpaces(ctx); err != nil {
		return ksconfig.KeySpace{}, false, err
	}
	k, ok := find(s.keyspaces.get())
	return k, ok, nil
}

// checkKeySpace checks that a request's keys belong to the key space it
// names: a named key space's keys as its Codec maps them; the default key
// space's outside the area reserved for the others.
func (s *Server) checkKeySpace(ctx context.Context, name string, keys ...[]byte) error {
	if name == "" { // every request of the default key space: no lookup
		for _, k := range keys {
			if keyspace.IsReserved(k) {
				return invalidArg("key %q lies in the area reserved for named key spaces (keys starting 0xFF 0xFF): name the key space (docs/keyspaces.md)", k)
			}
		}
		return nil
	}
	ks, err := s.keySpaceByName(ctx, name)
	if err != nil {
		return err
	}
	c := ks.Codec()
	for _, k := range keys {
		if !c.Owns(k) {
			return invalidArg("key %q is not a key of key space %q as its layout maps keys (docs/keyspaces.md)", k, ks.Name)
		}
	}
	return nil
}

// scanEnd checks a scan's bounds against the key space it names and
// returns where the scan ends: within an ordered key space's span, and for
// the default key space before the reserved area. A hashed key space has
// no key order to scan in, only the order it stores keys in (hashOrder).
func (s *Server) scanEnd(ctx context.Context, name string, start, end []byte, hashOrder bool) ([]byte, error) {
	ks, err := s.keySpaceByName(ctx, name)
	if err != nil {
		return nil, err
	}
	if ks.Mode == keyspace.Hashed {
		if !hashOrder {
			return nil, invalidArg("key space %q is hashed: its keys are placed by hash and have no order to scan", ks.Name)
		}
		lo, hi := keyspace.Span(ks.ID)
		if bytes.Compare(start, lo) < 0 || bytes.Compare(start, hi) >= 0 {
			return nil, invalidArg("scan start %q lies outside key space %q", start, ks.Name)
		}
		if len(end) == 0 || bytes.Compare(end, hi) > 0 {
			end = hi
		}
		return end, nil
	}
	if err := s.checkKeySpace(ctx, name, start); err != nil {
		return nil, err
	}
	_, hi := ks.Codec().EncodeSpan(nil, nil)
	if len(end) == 0 || bytes.Compare(end, hi) > 0 {
		end = hi
	}
	return end, nil
}

// keySpaceRF is the replication factor of the key space of the range
// starting at start, as this node's copy of the catalogue knows it (0: the
// cluster's). ChangeReplicas refreshes the copy first (learnKeySpace).
func (s *Server) keySpaceRF(start []byte) int {
	k, _ := s.keyspaces.get().ByID(keyspace.Of(start))
	return k.RF
}

// learnKeySpace makes sure this node's copy of the catalogue knows the key
// space of the range starting at start, if the meta range does.
func (s *Server) learnKeySpace(ctx context.Context, start []byte) {
	_, _ = s.keySpaceByID(ctx, keyspace.Of(start))
}

func recordOf(s ksconfig.Settings) *tidekvpb.KeySpaceRecord {
	return &tidekvpb.KeySpaceRecord{Name: s.Name, Mode: string(s.Mode), Rf: uint32(s.RF), Engine: string(s.Engine), Index: string(s.Index),
		CapacityPerNode: s.CapacityPerNode, TtlMs: s.TTL.Milliseconds(), MissHandler: s.MissHandler, OnFull: string(s.OnFull),
		GcTtlMs: s.GCTTL.Milliseconds()}
}

func catalogueOf(recs []*tidekvpb.KeySpaceRecord) ksconfig.Catalogue {
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

// metaCatalogue reads the catalogue from this node's copy of the meta range
// (its leaseholder's, after a lease read).
func (s *Server) metaCatalogue() (ksconfig.Catalogue, error) {
	recs, err := raftstore.ReadMetaKeySpaces(s.eng)
	if err != nil {
		return nil, err
	}
	return catalogueOf(recs), nil
}

// CreateKeySpace adds a key space to the catalogue; placement then splits
// ranges at its bounds.
func (a *adminService) CreateKeySpace(ctx context.Context, req *tidekvpb.CreateKeySpaceRequest) (*tidekvpb.CreateKeySpaceResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	s := a.s
	resp, err := callMeta(ctx, s, func(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.CreateKeySpaceResponse, error) {
		return s.createKeySpaceLocal(ctx, meta, req)
	}, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.CreateKeySpaceResponse, error) {
		return c.CreateKeySpace(ctx, req)
	})
	return resp, s.toStatus(err)
}

func (s *Server) createKeySpaceLocal(ctx context.Context, meta *raftstore.Replica, req *tidekvpb.CreateKeySpaceRequest) (*tidekvpb.CreateKeySpaceResponse, error) {
	if v := s.store.LogVersion(); v < raftstore.LogVersionKeySpaces {
		return nil, fmt.Errorf("%w: key spaces need Raft log version %d on every node, the cluster is at %d", raftstore.ErrLogVersion, raftstore.LogVersionKeySpaces, v)
	}
	if err := meta.LeaseRead(ctx); err != nil {
		return nil, err
	}
	cat, err := s.metaCatalogue()
	if err != nil {
		return nil, err
	}
	set := ksconfig.FromAPI(req.GetKeyspace()).Settings
	if err := cat.CheckNew(set); err != nil {
		return nil, invalidArg("key space not created: %v", err)
	}
	if req.GetStaged() {
		if err := s.checkStaging(); err != nil {
			return nil, err
		}
		set.Name = keyspace.StagingName(set.Name) // restore.go: published later
	}
	id, err := meta.ProposeMeta(ctx, &tidekvpb.MetaCommand{CreateKeyspace: recordOf(set)})
	if err != nil {
		return nil, err
	}
	if id == 0 {
		return nil, invalidArg("key space not created: key space %q exists", set.Name)
	}
	k := ksconfig.KeySpace{ID: keyspace.ID(id), Settings: set}
	s.events.Record("keyspace", "cluster", "key space %d created: %s", id, set)
	if cat, err := s.metaCatalogue(); err == nil {
		s.keyspaces.set(cat)
	}
	s.wakePlace() // split ranges at its bounds now rather than next round
	return &tidekvpb.CreateKeySpaceResponse{Keyspace: ksconfig.ToAPI(k)}, nil
}

// ListKeySpaces lists the key spaces with what they hold.
func (a *adminService) ListKeySpaces(ctx context.Context, req *tidekvpb.ListKeySpacesRequest) (*tidekvpb.ListKeySpacesResponse, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	resp, err := a.s.listKeySpaces(ctx)
	return resp, a.s.toStatus(err)
}

func (s *Server) listKeySpaces(ctx context.Context) (*tidekvpb.ListKeySpacesResponse, error) {
	resp, err := callMeta(ctx, s, s.listKeySpacesLocal, func(ctx context.Context, c tidekvpb.AdminClient) (*tidekvpb.ListKeySpacesResponse, error) {
		return c.ListKeySpaces(ctx, &tidekvpb.ListKeySpacesRequest{})
	})
	if err == nil {
		var ks []ksconfig.KeySpace
		for _, k := range resp.GetKeyspaces()[min(1, len(resp.GetKeyspaces())):] {
			ks = append(ks, ksconfig.FromAPI(k))
		}
		s.keyspaces.set(ksconfig.NewCatalogue(ks))
	}
	return resp, err
}

func (s *Server) listKeySpacesLocal(ctx context.Context, meta *raftstore.Replica) (*tidekvpb.ListKeySpacesResponse, error) {
	ranges, err := s.rangesLocal(ctx, meta) // a lease read first
	if err != nil {
		return nil, err
	}
	cat, err := s.metaCatalogue()
	if err != nil {
		return nil, err
	}
	resp := &tidekvpb.ListKeySpacesResponse{}
	byID := map[keyspace.ID]*tidekvpb.KeySpace{}
	for _, k := range cat.All() {
		a := ksconfig.ToAPI(k)
		byID[k.ID] = a
		resp.Keyspaces = append(resp.Keyspaces, a)
	}
	t := keySpaceTotals{}
	for _, ri := range ranges.GetRanges() {
		t.add(ri.GetDesc().GetStartKey(), ri.GetBytes(), ri.GetKeys())
	}
	for id, a := range byID {
		a.Bytes, a.Keys, a.Ranges = t[id].bytes, t[id].keys, uint32(t[id].ranges)
	}
	s.meta.Heartbeats(func(_ uint64, hb *tidekvpb.NodeHeartbeatRequest) {
		for _, c := range hb.GetKeyspaceCounts() {
			if a := byID[keyspace.ID(c.GetId())]; a != nil {
				a.Hits, a.Misses, a.Evictions = a.Hits+c.GetHits(), a.Misses+c.GetMisses(), a.Evictions+c.GetEvictions()
			}
		}
	})
	return resp, nil
}

// keySpaceTotals are the bytes, keys and ranges of each key space, by the
// key space of each range's start key.
type keySpaceTotals map[keyspace.ID]struct {
	bytes, keys uint64
	ranges      int
}

func (t keySpaceTotals) add(start []byte, bytes, keys uint64) {
	id := keyspace.Of(start)
	v := t[id]
	v.bytes += bytes
	v.keys += keys
	v.ranges++
	t[id] = v
}

// placeKeySpaces gives placement the key spaces' boundaries and each
// range's replication factor, and exports what each key space holds
// (meta leaseholder).
func (s *Server) placeKeySpaces(obs *control.Observation) {
	cat, err := s.metaCatalogue()
	if err != nil {
		return
	}
	s.keyspaces.set(cat)
	obs.Boundaries = cat.Boundaries()
	for _, k := range cat {
		if k.CapacityPerNode > 0 {
			lo, hi := keyspace.Span(k.ID)
			obs.Caches = append(obs.Caches, control.CacheSpace{Name: k.Name, Start: lo, End: hi, CapacityPerNode: k.CapacityPerNode, Grow: k.OnFull == ksconfig.Grow})
		}
	}
	t := keySpaceTotals{}
	for i := range obs.Ranges {
		r := &obs.Ranges[i]
		if r.ControlLoop {
			continue
		}
		if k, ok := cat.ByID(keyspace.Of(r.Start)); ok {
			r.RF = k.RF
		}
		var n uint64
		if l := s.meta.LoadOf(r.ID); l.Gen >= r.Generation { // not of a span before a split or merge
			n = l.Keys
		}
		t.add(r.Start, r.Bytes, n)
	}
	for _, k := range cat.All() {
		l := metrics.IDLabel(k.ID)
		s.metrics.KeyspaceBytes.WithLabelValues(l).Set(float64(t[k.ID].bytes))
		s.metrics.KeyspaceKeys.WithLabelValues(l).Set(float64(t[k.ID].keys))
		s.metrics.KeyspaceRanges.WithLabelValues(l).Set(float64(t[k.ID].ranges))
	}
}

// keySpaceLabel is the metrics label of the key space a key belongs to: its
// number, so counting a request needs no catalogue.
func keySpaceLabel(key []byte) string { return metrics.IDLabel(keyspace.Of(key)) }
