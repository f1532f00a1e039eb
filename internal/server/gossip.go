package server

import (
	"time"

	"github.com/tidekv/tidekv/internal/gossip"
)

// Gossip (memberlist) tells the meta leaseholder within seconds that a node
// stopped answering, even when the node's heartbeats would only be missed
// later; heartbeats stay the fallback (and the only signal when gossip is
// off). stateOf combines both.

// startGossip joins the gossip cluster through the nodes this node knows.
func (s *Server) startGossip() error {
	if s.cfg.Gossip.BindAddr == "" {
		return nil
	}
	cfg := s.cfg.Gossip
	cfg.NodeID, cfg.GRPCAddr = s.id.node, s.Addr()
	cfg.Seeds = s.gossipSeeds()
	if s.sec != nil {
		cfg.Keys = s.sec.gossipKeys
	}
	g, err := gossip.Start(cfg, time.Now)
	if err != nil {
		return err
	}
	s.peers.gossip = g
	return nil
}

// gossipSeeds are the other known nodes' gossip addresses.
func (s *Server) gossipSeeds() []string {
	var out []string
	for _, n := range s.peers.dir.List() {
		if n.GetNodeId() != s.id.node && n.GetGossipAddr() != "" {
			out = append(out, n.GetGossipAddr())
		}
	}
	return out
}

// gossipAddr is the node's gossip address ("" when off).
func (s *Server) gossipAddr() string {
	if s.peers.gossip == nil {
		return ""
	}
	return s.peers.gossip.Addr()
}

// rejoinGossip asks gossip to join known nodes it does not see (a node
// that learnt of others only after it started).
func (s *Server) rejoinGossip() {
	if s.peers.gossip == nil {
		return
	}
	seen := map[uint64]bool{}
	for _, m := range s.peers.gossip.Members() {
		seen[m.NodeID] = true
	}
	var missing []string
	for _, n := range s.peers.dir.List() {
		if !seen[n.GetNodeId()] && n.GetGossipAddr() != "" && n.GetNodeId() != s.id.node {
			missing = append(missing, n.GetGossipAddr())
		}
	}
	if len(missing) > 0 {
		_ = s.peers.gossip.Join(missing)
	}
}

// gossipState returns what gossip says of node: its state and since when,
// ok=false when gossip is off or does not know the node.
func (s *Server) gossipState(node uint64) (gossip.State, time.Time, bool) {
	if s.peers.gossip == nil {
		return 0, time.Time{}, false
	}
	for _, m := range s.peers.gossip.Members() {
		if m.NodeID == node {
			return m.State, m.Since, true
		}
	}
	return 0, time.Time{}, false
}
