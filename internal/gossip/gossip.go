package gossip

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Gossip is one node's member of the gossip cluster. Its methods are safe for
// concurrent use.
type Gossip struct {
	cfg    Config
	name   string // memberlist name, "tidekv-<NodeID>"
	meta   []byte
	tab    *table
	ml     *memberlist.Memberlist
	addr   atomic.Pointer[string] // advertised gossip address, set once Create returns
	logger *log.Logger

	// notAccepted is set when a member we exchange state with while joining
	// does not yet accept us (see NotifyMerge), so the join loop tries
	// again: typically we restarted on a new port before the old
	// incarnation was declared dead.
	notAccepted atomic.Bool

	lifeMu  sync.Mutex // orders Leave and Stop against memberlist's Shutdown
	stopped bool
	left    bool
	stopCh  chan struct{} // closed by Stop
	leaveCh chan struct{} // closed by Leave: no more joins
	wg      sync.WaitGroup
}

// Start creates this node's member, listening on cfg.BindAddr, and joins
// cfg.Seeds in the background: seeds that are down do not fail Start; the
// join is retried every JoinRetryInterval until the cluster has accepted this
// node, or until Leave or Stop. now stamps Member.Since (nil: time.Now).
func Start(cfg Config, now func() time.Time) (*Gossip, error) {
	return start(cfg, now, nil)
}

// start is Start with a hook that sees every state change (tests).
func start(cfg Config, now func() time.Time, onChange func(Member)) (*Gossip, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	host, port, err := splitAddr(cfg.BindAddr)
	if err != nil {
		return nil, err
	}
	ip, err := bindIP(host)
	if err != nil {
		return nil, fmt.Errorf("gossip: BindAddr %q: %w", cfg.BindAddr, err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = log.New(os.Stderr, "gossip: ", log.LstdFlags)
	}
	g := &Gossip{
		cfg:     cfg,
		name:    nodeName(cfg.NodeID),
		meta:    encodeMeta(cfg.NodeID, cfg.GRPCAddr),
		tab:     newTable(now),
		logger:  logger,
		stopCh:  make(chan struct{}),
		leaveCh: make(chan struct{}),
	}
	g.tab.onChange = onChange

	mc := memberlist.DefaultLocalConfig()
	mc.Name = g.name
	mc.BindAddr = ip
	mc.BindPort = port
	mc.AdvertisePort = port // DefaultLocalConfig advertises 7946 otherwise; 0 is filled in by memberlist
	mc.ProbeInterval = cfg.ProbeInterval
	mc.ProbeTimeout = cfg.ProbeTimeout
	mc.SuspicionMult = cfg.SuspicionMult
	mc.SuspicionMaxTimeoutMult = cfg.SuspicionMaxTimeoutMult
	mc.GossipInterval = cfg.GossipInterval
	mc.PushPullInterval = cfg.PushPullInterval
	mc.GossipToTheDeadTime = cfg.PushPullInterval
	mc.TCPTimeout = cfg.TCPTimeout
	// By default (0) memberlist never lets a name that died come back at
	// another address (until it has forgotten the dead member, after
	// GossipToTheDeadTime and a full probe round). A TideKV node that
	// restarts on a new port must come back as soon as its old incarnation
	// is Dead.
	mc.DeadNodeReclaimTime = time.Nanosecond
	if len(cfg.Keys) > 0 {
		// memberlist then also refuses plaintext messages and exchanges
		// (GossipVerifyIncoming and Outgoing, on by default).
		if mc.Keyring, err = memberlist.NewKeyring(cfg.Keys[1:], cfg.Keys[0]); err != nil {
			return nil, fmt.Errorf("gossip: %w", err)
		}
	}
	d := &delegate{g: g}
	mc.Delegate = d
	mc.Events = d
	mc.Merge = d
	mc.Ping = d
	mc.Logger = log.New(&logFilter{out: logger, onSuspect: d.onSuspect}, "", 0)

	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("gossip: %w", err)
	}
	g.ml = ml
	// Our own join was reported (NotifyJoin) inside Create, with the
	// address memberlist advertises. Nodes from memberlist (Members,
	// LocalNode) point into its live state and must not be read later.
	self, ok := g.tab.get(cfg.NodeID)
	if !ok {
		_ = ml.Shutdown()
		return nil, errors.New("gossip: memberlist did not report the local node")
	}
	g.addr.Store(&self.GossipAddr)

	if len(cfg.Seeds) > 0 {
		g.wg.Add(1)
		go g.joinLoop()
	}
	return g, nil
}

// Addr returns the gossip address other members reach this node at (the
// real port when BindAddr asked for port 0).
func (g *Gossip) Addr() string { return *g.addr.Load() }

// Members returns the TideKV members this node knows, itself included,
// sorted by NodeID. Members whose metadata carries no TideKV node ID are left
// out. Dead and Left members stay until their NodeID comes back.
func (g *Gossip) Members() []Member { return g.tab.snapshot() }

// Join joins the cluster through addrs (gossip host:port addresses). It
// succeeds if at least one of them answered.
func (g *Gossip) Join(addrs []string) error {
	g.lifeMu.Lock()
	stopped := g.stopped
	g.lifeMu.Unlock()
	if stopped {
		return errors.New("gossip: stopped")
	}
	if n, err := g.ml.Join(addrs); n == 0 {
		if err == nil {
			err = errors.New("no address given")
		}
		return fmt.Errorf("gossip: join: %w", err)
	}
	return nil
}

// Leave leaves the cluster gracefully: the other members see this node Left,
// not Dead (each live member is first sent a direct note, then memberlist's
// leave is broadcast). It blocks until the leave has been sent or timeout
// (which should be positive) passed. This node then sees itself Left and
// stops joining. Call Stop afterwards; Leave does not close the listeners.
func (g *Gossip) Leave(timeout time.Duration) error {
	g.lifeMu.Lock()
	defer g.lifeMu.Unlock()
	if g.stopped {
		return errors.New("gossip: stopped")
	}
	if g.left {
		return nil
	}
	g.left = true
	close(g.leaveCh)
	deadline := time.Now().Add(timeout)

	// First a direct note to every live member, so that they record Left
	// when memberlist's leave broadcast (which does not say "left" to its
	// event delegate) arrives. Wait for the notes for up to half the time.
	g.tab.leaveNote(g.cfg.NodeID)
	note := encodeLeaveNote(g.cfg.NodeID)
	var sent sync.WaitGroup
	for _, m := range g.liveOthers() {
		host, port, err := net.SplitHostPort(m.GossipAddr)
		p, perr := strconv.ParseUint(port, 10, 16)
		if err != nil || perr != nil {
			continue
		}
		to := &memberlist.Node{Name: nodeName(m.NodeID), Addr: net.ParseIP(host), Port: uint16(p)}
		sent.Add(1)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			defer sent.Done()
			if err := g.ml.SendReliable(to, note); err != nil {
				g.logger.Printf("[WARN] gossip: leave note to %s: %v", to.Name, err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { sent.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout / 2):
	}

	remaining := time.Until(deadline)
	if remaining <= 0 {
		remaining = time.Millisecond
	}
	if err := g.ml.Leave(remaining); err != nil {
		return fmt.Errorf("gossip: leave: %w", err)
	}
	return nil
}

// Stop shuts the member down without leaving: the others see it Dead once
// they notice. Members keeps returning the last view. Safe to call more than
// once.
func (g *Gossip) Stop() error {
	g.lifeMu.Lock()
	if g.stopped {
		g.lifeMu.Unlock()
		return nil
	}
	g.stopped = true
	close(g.stopCh)
	err := g.ml.Shutdown()
	g.lifeMu.Unlock()
	g.wg.Wait()
	if err != nil {
		return fmt.Errorf("gossip: %w", err)
	}
	return nil
}

// joinLoop joins the seeds until the cluster has accepted this node, then
// re-joins seeds that are not live members every RejoinInterval.
func (g *Gossip) joinLoop() {
	defer g.wg.Done()
	accepted := false
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-g.stopCh:
			return
		case <-g.leaveCh:
			return
		case <-timer.C:
		}
		if !accepted {
			accepted = g.tryJoin()
		} else {
			g.rejoinSeeds()
		}
		next := g.cfg.JoinRetryInterval
		if accepted {
			if g.cfg.RejoinInterval == 0 {
				return
			}
			next = g.cfg.RejoinInterval
		}
		timer.Reset(next)
	}
}

// tryJoin exchanges state with the seeds and the members known so far, and
// reports whether the cluster has accepted this node: at least one answered
// and each that answered accepts us (see NotifyMerge).
func (g *Gossip) tryJoin() bool {
	seen := map[string]bool{g.Addr(): true}
	var addrs []string
	for _, s := range g.cfg.Seeds {
		if !seen[s] && !g.isSelf(s) {
			seen[s] = true
			addrs = append(addrs, s)
		}
	}
	for _, m := range g.liveOthers() {
		if !seen[m.GossipAddr] {
			seen[m.GossipAddr] = true
			addrs = append(addrs, m.GossipAddr)
		}
	}
	if len(addrs) == 0 {
		// Only ourselves among the seeds: nothing to join. Others join us.
		return true
	}
	g.notAccepted.Store(false)
	n, _ := g.ml.Join(addrs)
	return n > 0 && !g.notAccepted.Load()
}

// rejoinSeeds joins the seeds that are not live members. memberlist never
// contacts a member it has declared dead once it has forgotten it, so
// without this two sides of a long partition would never merge again.
func (g *Gossip) rejoinSeeds() {
	live := make(map[string]bool)
	for _, m := range g.liveOthers() {
		live[m.GossipAddr] = true
	}
	var addrs []string
	for _, s := range g.cfg.Seeds {
		if g.isSelf(s) {
			continue
		}
		found := false
		for _, a := range g.resolve(s) {
			found = found || live[a]
		}
		if !found {
			addrs = append(addrs, s)
		}
	}
	if len(addrs) > 0 {
		_, _ = g.ml.Join(addrs)
	}
}

// liveOthers returns the other TideKV members that are Alive or Suspect.
// (memberlist's own Members returns pointers into its live state, which it
// keeps writing: reading them races.)
func (g *Gossip) liveOthers() []Member {
	var out []Member
	for _, m := range g.tab.snapshot() {
		if m.NodeID != g.cfg.NodeID && (m.State == Alive || m.State == Suspect) {
			out = append(out, m)
		}
	}
	return out
}

// isSelf reports whether seed is this node's own gossip address.
func (g *Gossip) isSelf(seed string) bool {
	for _, a := range g.resolve(seed) {
		if a == g.Addr() {
			return true
		}
	}
	return false
}

// resolve returns seed as ip:port strings, the form memberlist reports.
func (g *Gossip) resolve(seed string) []string {
	host, port, err := net.SplitHostPort(seed)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return []string{net.JoinHostPort(ip.String(), port)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.TCPTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		out = append(out, net.JoinHostPort(ip.IP.String(), port))
	}
	return out
}

// delegate receives memberlist's callbacks. memberlist calls some of them
// while holding its own lock, so they only touch the table and never call
// back into memberlist.
type delegate struct{ g *Gossip }

// memberlist.Delegate

func (d *delegate) NodeMeta(limit int) []byte {
	if len(d.g.meta) > limit {
		return nil // Validate keeps GRPCAddr well under memberlist's 512 bytes
	}
	return d.g.meta
}

func (d *delegate) NotifyMsg(b []byte) {
	if id, ok := decodeLeaveNote(b); ok {
		d.g.tab.leaveNote(id)
	}
}

func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// memberlist.EventDelegate. Node.State is never filled in by memberlist
// (its internal state shadows it), so the callbacks say what happened.

func (d *delegate) NotifyJoin(n *memberlist.Node)   { d.alive(n, true) }
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.alive(n, false) }

func (d *delegate) NotifyLeave(n *memberlist.Node) {
	if id, ok := parseNodeName(n.Name); ok {
		d.g.tab.gone(id)
	}
}

func (d *delegate) alive(n *memberlist.Node, joined bool) {
	id, grpcAddr, ok := decodeMeta(n.Meta)
	if !ok {
		return // not a TideKV member
	}
	if n.Name != nodeName(id) {
		d.g.logger.Printf("[WARN] gossip: ignoring member %q whose metadata says node %d", n.Name, id)
		return
	}
	d.g.tab.alive(id, grpcAddr, n.Address(), joined)
}

// memberlist.MergeDelegate: sees a member's whole view when we join through
// it (before it merges ours). The join loop keeps trying until a view
// accepts us: lists us alive at our address, does not list us (it adds us),
// or lists a dead incarnation of us at another address (it lets us reclaim
// the name). Listed live at another address, it refuses us until that
// incarnation is declared dead; listed suspect, dead or left at our address
// (a restart on the same port), it ignores our alive message until our state
// exchange carries a higher incarnation, which the next join does.

func (d *delegate) NotifyMerge(peers []*memberlist.Node) error {
	addr := d.g.addr.Load()
	if addr == nil {
		return nil
	}
	for _, p := range peers {
		if p.Name != d.g.name {
			continue
		}
		gone := p.State == memberlist.StateDead || p.State == memberlist.StateLeft
		if p.Address() == *addr && p.State != memberlist.StateAlive || p.Address() != *addr && !gone {
			d.g.notAccepted.Store(true)
		}
	}
	return nil
}

// memberlist.PingDelegate: a direct probe of n succeeded.

func (d *delegate) AckPayload() []byte { return nil }

func (d *delegate) NotifyPingComplete(n *memberlist.Node, _ time.Duration, _ []byte) {
	if id, ok := parseNodeName(n.Name); ok {
		d.g.tab.probeOK(id)
	}
}

// onSuspect is called from the log filter when this node's probe of name
// failed and memberlist marks it suspect.
func (d *delegate) onSuspect(name string) {
	if id, ok := parseNodeName(name); ok {
		d.g.tab.suspect(id)
	}
}
