package server

import (
	"errors"
	"time"

	"google.golang.org/grpc"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/keys"
)

// geoNode is what the geo mode (internal/georpc) reads of s and does
// through it.
type geoNode struct{ s *Server }

func (g geoNode) ID() uint64                        { return g.s.id.node }
func (g geoNode) Ready() bool                       { return g.s.ports.ready.Load() }
func (g geoNode) Nodes() []*tidekvpb.NodeDescriptor { return g.s.peers.dir.List() }
func (g geoNode) Addr(node uint64) (string, bool)   { return g.s.peers.dir.Addr(node) }
func (g geoNode) Blocked(peer uint64) bool          { return g.s.cfg.Transport.Partition.Blocked(peer) }
func (g geoNode) Delay(peer uint64) time.Duration {
	return g.s.cfg.Transport.Delays.Get(g.s.id.node, peer)
}
func (g geoNode) Conn(addr string) grpc.ClientConnInterface { return g.s.conn(addr) }

// The mark lives in the engine: the gateway's copy lives in memory only.
func (g geoNode) RanGateway() (bool, error) {
	_, ran, err := g.s.ks.Engine().Get(keys.GeoGatewayKey)
	return ran, err
}

func (g geoNode) MarkGateway() error {
	b := g.s.ks.Engine().NewBatch()
	defer b.Close()
	return errors.Join(b.Set(keys.GeoGatewayKey, []byte{1}), b.Commit(true))
}
