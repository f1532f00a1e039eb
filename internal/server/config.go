package server

import (
	"errors"
	"fmt"
	"github.com/tidekv/tidekv/internal/actuator"
	"github.com/tidekv/tidekv/internal/admission"
	"github.com/tidekv/tidekv/internal/elastic"
	"github.com/tidekv/tidekv/internal/georpc"
	"net"
	"time"

	"github.com/tidekv/tidekv/internal/cache"
	"github.com/tidekv/tidekv/internal/control"
	"github.com/tidekv/tidekv/internal/events"
	"github.com/tidekv/tidekv/internal/gossip"
	"github.com/tidekv/tidekv/internal/memengine"
	"github.com/tidekv/tidekv/internal/monitor"
	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/queue"
	"github.com/tidekv/tidekv/internal/raftstore"
	"github.com/tidekv/tidekv/internal/resp"
	"github.com/tidekv/tidekv/internal/security"
	"github.com/tidekv/tidekv/internal/storage"
	"github.com/tidekv/tidekv/internal/transport"
	"github.com/tidekv/tidekv/internal/txn"
)

// AutoAddr as Config.HTTPAddr derives the HTTP address from the gRPC
// listener: its host with its port + 1 (the layout of `tidekv up`), or a
// free port on that host when that one is taken. Nodes started on one host
// with different --listen ports then never collide on a default.
const AutoAddr = "auto"

// Limits bound what a single request may carry. Requests over a limit fail
// with InvalidArgument naming the limit, and change nothing.
type Limits struct {
	// MaxKeySize is the largest key in bytes (keys must also be non-empty).
	MaxKeySize int
	// MaxValueSize is the largest value in bytes.
	MaxValueSize int
	// MaxScanLimit is the most keys one Scan may ask for; 0 asks for this many.
	MaxScanLimit int
	// MaxScanBytes caps the bytes one Scan response carries; the rest is
	// returned through resume_key.
	MaxScanBytes int
	// MaxBatchKeys caps keys in one BatchGet and ops in one Write.
	MaxBatchKeys int
	// MaxWriteBytes caps the total key and value bytes of one Write.
	MaxWriteBytes int
	// MaxMessageSize bounds every gRPC message the node receives or sends,
	// and so what one message can make it allocate before any check: gRPC
	// refuses a larger one unread (the Go client reports "request of N
	// bytes is too large (a node accepts at most M bytes per message)").
	// The KV, admin and Raft services share the server, so it must cover
	// Raft batches and scan pages: at least MaxWriteBytes and MaxScanBytes
	// plus 1 MiB of framing.
	MaxMessageSize int
	// MaxConcurrentStreams bounds the RPCs one gRPC connection has in
	// progress (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS; gRPC's default is
	// unbounded); a client's further calls wait for a free stream.
	MaxConcurrentStreams uint32
}

// DefaultLimits returns the documented limits.
func DefaultLimits() Limits {
	return Limits{
		MaxKeySize:    4 << 10,
		MaxValueSize:  1 << 20,
		MaxScanLimit:  10000,
		MaxScanBytes:  16 << 20,
		MaxBatchKeys:  1000,
		MaxWriteBytes: 16 << 20,
		// 64 MiB: Raft batches and 16 MiB scan pages fit with room.
		MaxMessageSize:       64 << 20,
		MaxConcurrentStreams: 1024,
	}
}

// Config configures a node.
type Config struct {
	// DataDir holds the engine and staged snapshots.
	DataDir string
	// GRPCAddr is the host:port the gRPC services listen on (also the
	// address other nodes and clients use).
	GRPCAddr string
	// AdvertiseAddr is the host:port other nodes and clients dial to reach
	// the gRPC listener, when it differs from the address bound (a pod's
	// DNS name in a StatefulSet); "" advertises the bound address.
	AdvertiseAddr string
	// HTTPAddr is the host:port of /health, /ready, /metrics and the
	// dashboard ("" disables it; AutoAddr puts it beside GRPCAddr).
	HTTPAddr string
	// Redis configures the Redis-protocol listener; an empty
	// Redis.ListenAddr disables it.
	Redis resp.Config
	// Security turns on TLS and authentication; its zero value is insecure.
	Security SecurityConfig
	// Join lists gRPC addresses of existing nodes; empty with a new data
	// dir creates a new cluster.
	Join []string
	// InMemory uses the in-memory engine instead of Pebble (tests).
	InMemory bool
	Pebble   storage.PebbleOptions
	Raft     raftstore.Config
	// Transport configures the gRPC Raft transport.
	Transport transport.Config
	Limits    Limits
	// Admission decides which client requests the node starts: a hard cap
	// on requests in progress and shedding by queueing delay
	// (internal/admission, docs/admission.md).
	Admission admission.Config
	// Txn holds the transactions' knobs (internal/txn, config.go).
	Txn txn.Config
	// Geo turns on geo transactions (internal/georpc); off by default.
	Geo georpc.Config
	// admissionClock replaces time.Now for the admission controller
	// (tests drive its windows by hand).
	admissionClock func() time.Time
	// engine, when set, is the engine the node runs on instead of the one
	// InMemory or DataDir names: a test restarts a killed node on what its
	// in-memory engine held.
	engine storage.Engine
	// redisWrote, when set (tests), is called after each put the Redis
	// front end makes, applied (Put) or kept for a transaction's commit:
	// where a test stops the node in the middle of a multi-key command.
	redisWrote func()
	// HeartbeatInterval is how often the node reports to the meta range.
	HeartbeatInterval time.Duration
	// LivenessTimeout is how long without a heartbeat before the meta
	// leaseholder considers a node not live.
	LivenessTimeout time.Duration
	// ReportInterval is how often each leaseholder re-reports its ranges'
	// descriptors to the meta range.
	ReportInterval time.Duration
	// SizeWatchInterval is how often a leaseholder checks its ranges'
	// sizes against Θmax between reports: a range that crosses it is
	// reported at once and wakes the control loop, so its split does not
	// wait for the next periodic report and round.
	SizeWatchInterval time.Duration
	// SplitBackpressure holds writes to a range whose exact size has
	// reached this multiple of Θmax until the range splits (0: never),
	// for at most SplitBackpressureWait, then refuses them as RANGE_BUSY.
	// Just below 1, so that with the writes already on their way a range
	// stays within Θmax; never at or below the split line (placement's
	// range-split-fill), so that a held range is always one placement
	// splits. The wait outlasts the few seconds a new meta leaseholder
	// takes to learn liveness before it places anything.
	SplitBackpressure     float64
	SplitBackpressureWait time.Duration
	// Control holds the control loop's interval, the dead-node grace (how
	// long a node may stay silent, no heartbeat and gossip not seeing it,
	// before placement replaces its replicas) and the runner's limits;
	// the simulator reads the same struct.
	Control control.Config
	// Placement tunes the placement policies.
	Placement placement.Config
	// Autoscale is the elasticity policy (cluster settings autoscale.*
	// override it at runtime); Actuators configures each actuator it may
	// name.
	Autoscale elastic.Policy
	Actuators actuator.Config
	// MaxSnapshotRate caps this node's outgoing snapshots (bytes/s)
	// whatever migration allowance the control loop hands out (0: no cap
	// beyond the allowance). An operator's bound for a node whose disk or
	// link is shared.
	MaxSnapshotRate float64
	// ReplicaGCInterval is how often the node checks its replicas against
	// the meta range and removes those no longer members.
	ReplicaGCInterval time.Duration
	// ClosedTimestampInterval is how often a leaseholder publishes closed
	// timestamps (and the node its load) to the other nodes. A BOUNDED
	// read's bound must exceed it plus the network delay to be served by
	// followers.
	ClosedTimestampInterval time.Duration
	// GC configures the MVCC GC queue (internal/gcqueue); the gc-ttl cluster
	// setting overrides GC.TTL.
	GC queue.GCConfig
	// Cache configures eviction in key spaces with a capacity and
	// read-through in key spaces with a miss handler (internal/keyspaces).
	Cache cache.Config
	// MemEngine configures the memory engine of each memory key space
	// (internal/keyspaces/mem.go); its Index is ignored, each key space names its own.
	MemEngine memengine.Config
	// Locality labels the node's place, "key=value,..." from the widest
	// (region=eu,zone=a); "" for none.
	Locality string
	// Events bounds the node's in-memory event log.
	Events events.Config
	// Monitor samples the node's resource use and computes its load score.
	Monitor monitor.Config
	// Gossip configures membership and failure detection; an empty
	// Gossip.BindAddr turns it off (heartbeats alone then decide).
	Gossip gossip.Config
	// FaultInjection serves /debug/faults on the HTTP address (loopback
	// callers only), through which chaos runs partition this node, skew
	// its lease clock and slow its disk. Off by default: it lets anyone on
	// the host do so.
	FaultInjection bool
	// EnablePprof serves Go's profiles on /debug/pprof/ (to admins on a
	// secure node). Off by default: profiles show memory contents and
	// cost CPU.
	EnablePprof bool
}

// DefaultConfig returns a configuration for a node of a local cluster;
// callers fill DataDir and addresses.
func DefaultConfig() Config {
	return Config{
		Pebble:                  storage.DefaultPebbleOptions(),
		Raft:                    raftstore.DefaultConfig(),
		Transport:               transport.DefaultConfig(),
		Limits:                  DefaultLimits(),
		Redis:                   redisDefaults(),
		Admission:               admission.DefaultConfig(),
		Txn:                     txn.DefaultConfig(),
		Geo:                     georpc.DefaultConfig(),
		HeartbeatInterval:       time.Second,
		LivenessTimeout:         5 * time.Second,
		ReportInterval:          3 * time.Second,
		SizeWatchInterval:       250 * time.Millisecond,
		SplitBackpressure:       0.97,
		SplitBackpressureWait:   5 * time.Second,
		Control:                 control.DefaultConfig(),
		Placement:               placement.DefaultConfig(),
		Autoscale:               elastic.DefaultPolicy(),
		Actuators:               actuator.DefaultConfig(),
		ReplicaGCInterval:       10 * time.Second,
		ClosedTimestampInterval: 100 * time.Millisecond,
		GC:                      queue.DefaultGCConfig(),
		Cache:                   cache.DefaultConfig(),
		MemEngine:               memengine.DefaultConfig(),
		Events:                  events.DefaultConfig(),
		Monitor:                 monitor.DefaultConfig(),
		Gossip:                  gossipDefaults(),
		Security:                SecurityConfig{Login: security.DefaultLoginConfig()},
	}
}

// snapshotRate is the bandwidth this node's snapshots may use under the
// allowance: the allowance, or the node's cap if that is lower.
func (c *Config) snapshotRate(allowance float64) float64 {
	if c.MaxSnapshotRate > 0 && (allowance <= 0 || allowance > c.MaxSnapshotRate) {
		return c.MaxSnapshotRate
	}
	return allowance
}

// validate checks the request limits.
func (l Limits) validate() error {
	if l.MaxKeySize <= 0 || l.MaxValueSize <= 0 || l.MaxScanLimit <= 0 || l.MaxScanBytes <= 0 || l.MaxBatchKeys <= 0 || l.MaxWriteBytes <= 0 || l.MaxConcurrentStreams == 0 {
		return errors.New("server: every limit must be positive")
	}
	if need := max(l.MaxWriteBytes, l.MaxScanBytes) + 1<<20; l.MaxMessageSize < need {
		return fmt.Errorf("server: MaxMessageSize (%d bytes) must be at least %d bytes, MaxWriteBytes and MaxScanBytes plus 1 MiB, so that a full write or scan page fits in one message", l.MaxMessageSize, need)
	}
	return nil
}

// validateIntervals checks the node's loop intervals and timeouts.
func (c *Config) validateIntervals() error {
	for name, d := range map[string]time.Duration{"HeartbeatInterval": c.HeartbeatInterval, "LivenessTimeout": c.LivenessTimeout,
		"ReportInterval": c.ReportInterval, "SizeWatchInterval": c.SizeWatchInterval, "ReplicaGCInterval": c.ReplicaGCInterval, "ClosedTimestampInterval": c.ClosedTimestampInterval} {
		if d <= 0 {
			return fmt.Errorf("server: %s must be positive", name)
		}
	}
	if c.LivenessTimeout <= c.HeartbeatInterval {
		return errors.New("server: LivenessTimeout must exceed HeartbeatInterval")
	}
	if c.Control.DeadNodeGrace <= c.LivenessTimeout {
		return errors.New("server: the dead-node grace must exceed LivenessTimeout")
	}
	return nil
}

// Validate checks the configuration: the node's own fields, then each
// component's settings, in that order.
func (c *Config) Validate() error {
	if err := c.validateNode(); err != nil {
		return err
	}
	for _, check := range c.componentChecks() {
		if err := check(); err != nil {
			return err
		}
	}
	if c.FaultInjection && c.HTTPAddr == "" {
		return errors.New("server: fault injection is served on the HTTP address, which is disabled")
	}
	return nil
}

// validateNode checks the fields of the node itself.
func (c *Config) validateNode() error {
	if c.DataDir == "" {
		return errors.New("server: data dir is required")
	}
	if c.AdvertiseAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseAddr); err != nil {
			return fmt.Errorf("server: advertise address %q is not host:port: %v", c.AdvertiseAddr, err)
		}
	}
	if c.GRPCAddr == "" {
		return errors.New("server: gRPC listen address is required")
	}
	if c.SplitBackpressure != 0 && (c.SplitBackpressure < 0.5 || c.SplitBackpressureWait <= 0) {
		return fmt.Errorf("server: split backpressure must be 0 (off) or at least 0.5 × Θmax with a positive wait, not %v × Θmax for %v", c.SplitBackpressure, c.SplitBackpressureWait)
	}
	if c.MaxSnapshotRate < 0 {
		return fmt.Errorf("server: the snapshot rate cap must be positive or 0 for none, not %v", c.MaxSnapshotRate)
	}
	return nil
}

// componentChecks are the components' own validations, each error as the
// operator should read it.
func (c *Config) componentChecks() []func() error {
	prefixed := func(format string, check func() error) func() error {
		return func() error {
			if err := check(); err != nil {
				return fmt.Errorf(format, err)
			}
			return nil
		}
	}
	return []func() error{
		prefixed("server: --max-offset: %w", c.Raft.ValidateMaxClockOffset),
		c.Txn.Validate,
		c.Geo.Validate,
		prefixed("server: %w", c.Admission.Validate),
		c.Limits.validate,
		c.validateIntervals,
		c.Placement.Validate,
		prefixed("server: autoscale policy: %w", func() error { return c.Autoscale.Validate(c.Placement.ReplicationFactor) }),
		c.Control.Validate,
		func() error {
			if c.Control.Runner.RecentWindow < c.Placement.Lease.ReturnAfter {
				return fmt.Errorf("server: the control loop remembers operators for %v, less than the lease return-after (%v) that needs them", c.Control.Runner.RecentWindow, c.Placement.Lease.ReturnAfter)
			}
			return nil
		},
		c.Cache.Validate,
		prefixed("server: %w", c.MemEngine.Validate),
		prefixed("server: %w", c.GC.Validate),
		func() error {
			if c.Gossip.BindAddr == "" {
				return nil
			}
			// The node's ID and address are filled in once known.
			g := c.Gossip
			g.NodeID, g.GRPCAddr = 1, c.GRPCAddr
			return g.Validate()
		},
		c.Events.Validate,
		c.Monitor.Validate,
		c.Security.Login.Validate,
		c.Transport.Validate,
		func() error {
			if c.Redis.ListenAddr == "" {
				return nil
			}
			return c.Redis.Validate()
		},
	}
}

// redisDefaults is resp's configuration with the listener off: a node
// serves the Redis protocol only when given an address. Its bulk strings
// are capped at the maximum value size: a larger one could only be refused
// by the KV after being read whole.
func redisDefaults() resp.Config {
	c := resp.DefaultConfig()
	c.ListenAddr = ""
	c.MaxBulkLen = DefaultLimits().MaxValueSize
	return c
}

// gossipDefaults is gossip's configuration with the listener off: a node
// gossips only when given an address.
func gossipDefaults() gossip.Config {
	c := gossip.DefaultConfig()
	c.BindAddr = ""
	return c
}
