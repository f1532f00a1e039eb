package gossip

import (
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// deadline bounds every wait on the cluster; the waits normally end within a
// few probe intervals.
const deadline = 15 * time.Second

// testConfig returns fast loopback timings: a stopped member is Suspect
// within about two probe intervals and Dead about a second later.
func testConfig(id uint64, seeds ...string) Config {
	c := DefaultConfig()
	c.BindAddr = "127.0.0.1:0"
	c.Seeds = seeds
	c.NodeID = id
	c.GRPCAddr = fmt.Sprintf("127.0.0.1:%d", 26000+id)
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.GossipInterval = 50 * time.Millisecond
	c.PushPullInterval = 2 * time.Second
	c.TCPTimeout = time.Second
	c.JoinRetryInterval = 100 * time.Millisecond
	c.RejoinInterval = 500 * time.Millisecond
	c.Logger = log.New(os.Stderr, fmt.Sprintf("gossip n%d: ", id), log.Lmicroseconds)
	return c
}

// recorder keeps every state change a node saw, per member.
type recorder struct {
	mu      sync.Mutex
	changes map[uint64][]State
}

func (r *recorder) record(m Member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changes == nil {
		r.changes = make(map[uint64][]State)
	}
	r.changes[m.NodeID] = append(r.changes[m.NodeID], m.State)
}

func (r *recorder) of(id uint64) []State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.changes[id])
}

type node struct {
	*Gossip
	rec *recorder
}

func startNode(t *testing.T, cfg Config) *node {
	t.Helper()
	rec := &recorder{}
	g, err := start(cfg, nil, rec.record)
	if err != nil {
		t.Fatalf("start node %d: %v", cfg.NodeID, err)
	}
	t.Cleanup(func() { _ = g.Stop() })
	return &node{Gossip: g, rec: rec}
}

// startCluster starts n members, 1..n, all joining through member 1.
func startCluster(t *testing.T, n int) []*node {
	t.Helper()
	nodes := []*node{startNode(t, testConfig(1))}
	for id := 2; id <= n; id++ {
		nodes = append(nodes, startNode(t, testConfig(uint64(id), nodes[0].Addr())))
	}
	for _, nd := range nodes {
		waitAllAlive(t, nd, nodes...)
	}
	return nodes
}

func member(g *Gossip, id uint64) (Member, bool) {
	for _, m := range g.Members() {
		if m.NodeID == id {
			return m, true
		}
	}
	return Member{}, false
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("after %v: %s: still %s", deadline, what, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitState waits until observer sees member id in state s (and, if addr is
// not empty, at gossip address addr).
func waitState(t *testing.T, observer *Gossip, id uint64, s State, addr string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s sees node %d %v at %q", observer.Addr(), id, s, addr), func() (bool, string) {
		m, ok := member(observer, id)
		return ok && m.State == s && (addr == "" || m.GossipAddr == addr), fmt.Sprintf("%+v", observer.Members())
	})
}

// waitAllAlive waits until observer sees exactly the given nodes, all Alive
// at their addresses.
func waitAllAlive(t *testing.T, observer *node, nodes ...*node) {
	t.Helper()
	for _, nd := range nodes {
		waitState(t, observer.Gossip, nd.cfg.NodeID, Alive, nd.Addr())
	}
}

func TestThreeMembersJoinViaOneSeed(t *testing.T) {
	nodes := startCluster(t, 3)
	for _, nd := range nodes {
		ms := nd.Members()
		if len(ms) != 3 {
			t.Fatalf("%d sees %+v, want 3 members", nd.cfg.NodeID, ms)
		}
		for i, m := range ms {
			want := nodes[i]
			if m.NodeID != want.cfg.NodeID || m.State != Alive || m.GRPCAddr != want.cfg.GRPCAddr ||
				m.GossipAddr != want.Addr() || m.Since.IsZero() {
				t.Errorf("node %d sees %+v, want node %d alive at %s / %s", nd.cfg.NodeID, m, want.cfg.NodeID, want.cfg.GRPCAddr, want.Addr())
			}
		}
	}
	if _, port, _ := net.SplitHostPort(nodes[0].Addr()); port == "0" {
		t.Fatalf("Addr() %s does not report the real port", nodes[0].Addr())
	}
}

func TestStoppedMemberTurnsSuspectThenDead(t *testing.T) {
	nodes := startCluster(t, 3)
	stopped := time.Now()
	if err := nodes[2].Stop(); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes[:2] {
		waitState(t, nd.Gossip, 3, Dead, "")
		m, _ := member(nd.Gossip, 3)
		if m.Since.Before(stopped) {
			t.Errorf("node %d: Dead since %v, before the stop at %v", nd.cfg.NodeID, m.Since, stopped)
		}
		changes := nd.rec.of(3)
		if n := len(changes); n < 3 || changes[n-2] != Suspect || changes[n-1] != Dead {
			t.Errorf("node %d saw node 3 go %v, want ... suspect, dead", nd.cfg.NodeID, changes)
		}
		t.Logf("node %d: node 3 %v, dead %v after the stop", nd.cfg.NodeID, changes, m.Since.Sub(stopped).Round(time.Millisecond))
	}
	// The survivors still see each other alive.
	waitAllAlive(t, nodes[0], nodes[:2]...)
	waitAllAlive(t, nodes[1], nodes[:2]...)
}

func TestLeaveShowsLeft(t *testing.T) {
	nodes := startCluster(t, 3)
	if err := nodes[2].Leave(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	if m, _ := member(nodes[2].Gossip, 3); m.State != Left {
		t.Errorf("the leaver sees itself %v, want left", m.State)
	}
	for _, nd := range nodes[:2] {
		waitState(t, nd.Gossip, 3, Left, "")
	}
	if err := nodes[2].Stop(); err != nil {
		t.Fatal(err)
	}
	// A member that left is not probed: it stays Left, never Dead.
	time.Sleep(5 * nodes[0].cfg.ProbeInterval)
	for _, nd := range nodes[:2] {
		if changes := nd.rec.of(3); slices.Contains(changes, Dead) || changes[len(changes)-1] != Left {
			t.Errorf("node %d saw node 3 go %v, want left and never dead", nd.cfg.NodeID, changes)
		}
	}
	if err := nodes[2].Leave(time.Second); err == nil {
		t.Error("Leave after Stop succeeded")
	}
}

// A node restarted on a new port before the others noticed its death: the
// others refuse its name at the new address until the old incarnation is
// Dead, then take it back.
func TestRestartOnNewPortBeforeDeath(t *testing.T) {
	nodes := startCluster(t, 3)
	oldAddr := nodes[2].Addr()
	if err := nodes[2].Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := startNode(t, testConfig(3, nodes[0].Addr()))
	if restarted.Addr() == oldAddr {
		t.Fatalf("restarted on the same address %s", oldAddr)
	}
	for _, nd := range nodes[:2] {
		waitState(t, nd.Gossip, 3, Alive, restarted.Addr())
		t.Logf("node %d saw node 3 go %v", nd.cfg.NodeID, nd.rec.of(3))
	}
	waitAllAlive(t, restarted, nodes[0], nodes[1], restarted)
}

// A node restarted after the others declared it Dead comes back Alive, on a
// new port and on its old one.
func TestRestartAfterDeath(t *testing.T) {
	nodes := startCluster(t, 3)
	seed := nodes[0].Addr()
	prev := nodes[2]
	for _, samePort := range []bool{false, true} {
		if err := prev.Stop(); err != nil {
			t.Fatal(err)
		}
		for _, nd := range nodes[:2] {
			waitState(t, nd.Gossip, 3, Dead, "")
		}
		cfg := testConfig(3, seed)
		if samePort {
			cfg.BindAddr = prev.Addr()
		}
		next := startNode(t, cfg)
		for _, nd := range nodes[:2] {
			waitState(t, nd.Gossip, 3, Alive, next.Addr())
		}
		waitAllAlive(t, next, nodes[0], nodes[1], next)
		prev = next
	}
}

func TestSeedDownAtStart(t *testing.T) {
	seedAddr := freeAddr(t)
	joiner := startNode(t, testConfig(2, seedAddr))
	time.Sleep(3 * joiner.cfg.JoinRetryInterval)
	if ms := joiner.Members(); len(ms) != 1 || ms[0].NodeID != 2 {
		t.Fatalf("joiner sees %+v before the seed is up, want only itself", ms)
	}
	cfg := testConfig(1)
	cfg.BindAddr = seedAddr
	seed := startNode(t, cfg)
	waitAllAlive(t, seed, seed, joiner)
	waitAllAlive(t, joiner, seed, joiner)
}

// After the seed died and the other member forgot it, the seed comes back
// without seeds of its own: nothing in memberlist would ever contact it
// again, the rejoin loop merges the two.
func TestRejoinHealsSeedThatCameBack(t *testing.T) {
	fast := func(c Config) Config {
		c.PushPullInterval = time.Second // also how long memberlist remembers the dead
		return c
	}
	seed := startNode(t, fast(testConfig(1)))
	other := startNode(t, fast(testConfig(2, seed.Addr())))
	waitAllAlive(t, other, seed, other)
	addr := seed.Addr()
	if err := seed.Stop(); err != nil {
		t.Fatal(err)
	}
	waitState(t, other.Gossip, 1, Dead, "")
	time.Sleep(other.cfg.PushPullInterval + 3*other.cfg.ProbeInterval) // forgotten
	cfg := fast(testConfig(1))
	cfg.BindAddr = addr
	back := startNode(t, cfg)
	waitAllAlive(t, back, back, other)
	waitAllAlive(t, other, back, other)
}

func TestNonTideKVMembersAreLeftOut(t *testing.T) {
	g := startNode(t, testConfig(1))
	mc := memberlist.DefaultLocalConfig()
	mc.Name = "someone-else"
	mc.BindAddr, mc.BindPort, mc.AdvertisePort = "127.0.0.1", 0, 0
	mc.Logger = log.New(io.Discard, "", 0)
	ml, err := memberlist.Create(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ml.Shutdown() }()
	if _, err := ml.Join([]string{g.Addr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the foreign member is known", func() (bool, string) {
		return g.ml.NumMembers() == 2, strconv.Itoa(g.ml.NumMembers())
	})
	if ms := g.Members(); len(ms) != 1 || ms[0].NodeID != 1 {
		t.Fatalf("Members() = %+v, want only node 1", ms)
	}
}

func TestJoinAndStartErrors(t *testing.T) {
	g := startNode(t, testConfig(1))
	if err := g.Join([]string{freeAddr(t)}); err == nil {
		t.Error("Join to a closed port succeeded")
	}
	if _, err := Start(testConfig(0), nil); err == nil {
		t.Error("Start with node ID 0 succeeded")
	}
	cfg := testConfig(2)
	cfg.BindAddr = g.Addr()
	if _, err := Start(cfg, nil); err == nil {
		t.Error("Start on a port in use succeeded")
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if err := g.Join([]string{"127.0.0.1:1"}); err == nil {
		t.Error("Join after Stop succeeded")
	}
}

// freeAddr returns a loopback address whose port is free for TCP and UDP.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		_ = l.Close()
		if err == nil {
			_ = u.Close()
			return addr
		}
	}
	t.Fatal("no free port")
	return ""
}

// With Keys, gossip is encrypted: a member without the key, or with
// another one, cannot join, and the cluster never lists it; a member that
// encrypts with the key and also accepts a new one (the first step of a
// rotation) joins.
func TestMembersWithoutTheKeyCannotJoin(t *testing.T) {
	key, other := []byte("0123456789abcdef0123456789abcdef"), []byte("fedcba9876543210fedcba9876543210")
	keyed := func(id uint64, keys ...[]byte) Config {
		c := testConfig(id)
		c.Keys = keys
		return c
	}
	n1 := startNode(t, keyed(1, key))
	for _, c := range []Config{keyed(2), keyed(3, other), keyed(4, other, key)} {
		n := startNode(t, c)
		if err := n.Join([]string{n1.Addr()}); err == nil {
			t.Errorf("node %d with keys %q joined a cluster encrypted with %q", c.NodeID, c.Keys, key)
		}
		if ms := n1.Members(); len(ms) != 1 {
			t.Errorf("after node %d's refused join, node 1 sees %+v", c.NodeID, ms)
		}
	}
	rotating := startNode(t, keyed(5, key, other))
	if err := rotating.Join([]string{n1.Addr()}); err != nil {
		t.Fatalf("a member encrypting with the cluster's key and accepting another: %v", err)
	}
	waitAllAlive(t, n1, n1, rotating)
	waitAllAlive(t, rotating, n1, rotating)
}
