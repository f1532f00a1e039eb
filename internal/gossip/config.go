package gossip

import (
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Config configures one node's Gossip instance. Start it from DefaultConfig
// and set BindAddr, Seeds, NodeID and GRPCAddr.
//
// With the defaults a member that stops without Leave is first probed within
// about one ProbeInterval per other member, turns Suspect when a probe fails
// (ProbeInterval after the probe began), and Dead SuspicionMult x
// ProbeInterval later once another member confirms the suspicion (3 s for up
// to 10 members, scaling with log10 of the cluster size), or after
// SuspicionMaxTimeoutMult times that (18 s) with no confirmation. On
// loopback a stopped member is Dead in about 4-5 s (2 to 5 members measured).
type Config struct {
	// BindAddr is the host:port gossip listens on, TCP and UDP on the same
	// port. Port 0 picks a free port; Addr reports the real address. The
	// host should be the address other members reach this node at: with
	// an empty or unspecified host (":7946", "0.0.0.0:7946") memberlist
	// advertises a private address of its choice.
	BindAddr string
	// Seeds are gossip addresses (host:port) of existing members to join.
	// Empty for the first member. Seeds that are down do not fail Start: the
	// join is retried every JoinRetryInterval until one answers. This node's
	// own address may be listed; it is skipped.
	Seeds []string
	// NodeID is this node's TideKV node ID (not 0). It names the member
	// ("tidekv-<NodeID>") and is carried in its metadata.
	NodeID uint64
	// GRPCAddr is the node's gRPC address (host:port), carried in its
	// metadata so other nodes can reach it. At most 256 bytes.
	GRPCAddr string

	// ProbeInterval is the time between two failure-detection probes; each
	// probe targets one other member in turn, round robin. Default 1 s.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct UDP probe waits for its ack before
	// indirect and TCP probes are tried (until the end of the
	// ProbeInterval). It should be about the 99th percentile round trip.
	// Must be less than ProbeInterval. Default 200 ms.
	ProbeTimeout time.Duration
	// SuspicionMult (a count, at least 1) sets how long a member stays
	// Suspect before it is declared Dead: SuspicionMult x ProbeInterval x
	// max(1, log10(members)) once other members confirm the suspicion.
	// Default 3.
	SuspicionMult int
	// SuspicionMaxTimeoutMult (a count, at least 1): in clusters of 3 or
	// more members a suspicion nobody else confirms lasts up to
	// SuspicionMaxTimeoutMult times the timeout above (each confirmation
	// shortens it toward that timeout). 1- and 2-member clusters expect no
	// confirmation and use the short timeout. Default 6.
	SuspicionMaxTimeoutMult int
	// GossipInterval is the time between gossip rounds that spread state
	// changes to a few random members. Default 100 ms.
	GossipInterval time.Duration
	// PushPullInterval is the time between full state exchanges with one
	// random member over TCP; it also bounds how long dead members are
	// still gossiped to (their chance to refute) before memberlist forgets
	// them. Default 15 s.
	PushPullInterval time.Duration
	// TCPTimeout bounds connecting to and exchanging state with one member
	// over TCP (joins, push-pull, leave notes). Default 1 s.
	TCPTimeout time.Duration
	// JoinRetryInterval is the time between join attempts while no seed has
	// answered yet, or while the cluster still knows this node's name at
	// another address (a restart before the old incarnation was declared
	// dead). Default 1 s.
	JoinRetryInterval time.Duration
	// RejoinInterval is the time between re-joins of seeds that are not live
	// members (heals partitions longer than memberlist's memory of dead
	// members). 0 disables. Default 15 s.
	RejoinInterval time.Duration
	// Keys encrypt and authenticate every gossip message and state
	// exchange with AES-GCM (memberlist's keyring): Keys[0] encrypts, any
	// of them decrypts, so that a key can be rotated in while members
	// still use the old one. Each is 16, 24 or 32 bytes (AES-128, -192,
	// -256). A member without a key these accept cannot join. Nil:
	// plaintext, and members with keys refuse this one.
	Keys [][]byte
	// Logger receives memberlist's INFO, WARN and ERR lines (DEBUG lines are
	// dropped). Nil logs to stderr with the prefix "gossip: ".
	Logger *log.Logger
}

// DefaultConfig returns timings for a LAN or loopback cluster, based on
// memberlist.DefaultLocalConfig. BindAddr, NodeID and GRPCAddr are left for
// the caller (BindAddr defaults to 127.0.0.1 with a free port).
func DefaultConfig() Config {
	ml := memberlist.DefaultLocalConfig()
	return Config{
		BindAddr:                "127.0.0.1:0",
		ProbeInterval:           ml.ProbeInterval,           // 1 s
		ProbeTimeout:            ml.ProbeTimeout,            // 200 ms
		SuspicionMult:           ml.SuspicionMult,           // 3
		SuspicionMaxTimeoutMult: ml.SuspicionMaxTimeoutMult, // 6
		GossipInterval:          ml.GossipInterval,          // 100 ms
		PushPullInterval:        ml.PushPullInterval,        // 15 s
		TCPTimeout:              ml.TCPTimeout,              // 1 s
		JoinRetryInterval:       time.Second,
		RejoinInterval:          15 * time.Second,
	}
}

const maxGRPCAddrLen = 256

// Validate reports the first problem with c, or nil.
func (c Config) Validate() error {
	if _, _, err := splitAddr(c.BindAddr); err != nil {
		return fmt.Errorf("gossip: BindAddr %q: %w", c.BindAddr, err)
	}
	for _, s := range c.Seeds {
		if _, port, err := splitAddr(s); err != nil {
			return fmt.Errorf("gossip: seed %q: %w", s, err)
		} else if port == 0 {
			return fmt.Errorf("gossip: seed %q: port 0", s)
		}
	}
	if c.NodeID == 0 {
		return errors.New("gossip: NodeID must not be 0")
	}
	if c.GRPCAddr == "" {
		return errors.New("gossip: GRPCAddr is empty")
	}
	if len(c.GRPCAddr) > maxGRPCAddrLen {
		return fmt.Errorf("gossip: GRPCAddr longer than %d bytes", maxGRPCAddrLen)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"ProbeInterval", c.ProbeInterval},
		{"ProbeTimeout", c.ProbeTimeout},
		{"GossipInterval", c.GossipInterval},
		{"PushPullInterval", c.PushPullInterval},
		{"TCPTimeout", c.TCPTimeout},
		{"JoinRetryInterval", c.JoinRetryInterval},
	} {
		if d.v <= 0 {
			return fmt.Errorf("gossip: %s must be positive, got %v", d.name, d.v)
		}
	}
	if c.ProbeTimeout >= c.ProbeInterval {
		return fmt.Errorf("gossip: ProbeTimeout %v must be less than ProbeInterval %v", c.ProbeTimeout, c.ProbeInterval)
	}
	if c.RejoinInterval < 0 {
		return fmt.Errorf("gossip: RejoinInterval must not be negative, got %v", c.RejoinInterval)
	}
	if c.SuspicionMult < 1 {
		return fmt.Errorf("gossip: SuspicionMult must be at least 1, got %d", c.SuspicionMult)
	}
	for i, k := range c.Keys {
		if err := memberlist.ValidateKey(k); err != nil {
			return fmt.Errorf("gossip: key %d: %w", i+1, err)
		}
	}
	if c.SuspicionMaxTimeoutMult < 1 {
		return fmt.Errorf("gossip: SuspicionMaxTimeoutMult must be at least 1, got %d", c.SuspicionMaxTimeoutMult)
	}
	return nil
}

// splitAddr splits host:port and checks the port.
func splitAddr(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	return host, port, nil
}

// bindIP resolves BindAddr's host to the IP string memberlist binds to.
func bindIP(host string) (string, error) {
	if host == "" {
		return "0.0.0.0", nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.String(), nil
	}
	ips, err := net.LookupIP(host)
	if err != nil {
		return "", err
	}
	for _, ip := range ips {
		if ip.To4() != nil {
			return ip.String(), nil
		}
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("no address for %q", host)
	}
	return ips[0].String(), nil
}
