package client

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/tidekv/tidekv/api/hlc"
)

// Config configures a Client. Zero durations and counts take their defaults,
// so Config{Addrs: ...} is a valid configuration.
type Config struct {
	// Addrs are seed node gRPC addresses (host:port); at least one. Any node
	// can answer; the client learns the rest of the cluster from it.
	Addrs []string
	// DialTimeout bounds one connection attempt (default 2s).
	DialTimeout time.Duration
	// AttemptTimeout bounds one RPC attempt when the context has a later
	// deadline or none (default 3s), so a hung node costs one attempt, not
	// the whole request.
	AttemptTimeout time.Duration
	// MaxAttempts bounds the RPC attempts of one request across redirects and
	// retries (default 30).
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the jittered exponential backoff
	// between retries (default 5ms and 500ms).
	MinBackoff, MaxBackoff time.Duration
	// FailFastOnOverload returns a node's "overloaded, retry" at once, as
	// an *OverloadedError with the node's hint, instead of waiting and
	// retrying: for front ends that pass the refusal on to their own
	// clients (the Redis protocol). Admin calls still retry.
	FailFastOnOverload bool

	// DefaultRead is the read mode of Get, Scan and BatchGet calls that pass
	// no ReadOption. The zero value is Linearizable(); Bounded and Any let
	// the client send reads to the cheapest replica instead of the
	// leaseholder (see docs/read-modes.md).
	DefaultRead ReadOption
	// RTTWeight is how many load-score points one millisecond of measured
	// round trip costs when ranking replicas for Bounded and Any reads.
	// 0 takes the default, 1, which is how the servers' own load score
	// weighs network distance; a tiny positive value ranks by load alone.
	RTTWeight float64
	// Latency is for emulating a WAN in tests and benchmarks only: if set,
	// the client waits Latency(addr) before sending each RPC to addr and
	// again after its reply arrives, so a round trip costs twice the
	// returned one-way delay. The delay counts in the client's measured round
	// trips, so replica choice prefers near nodes as it would on a real WAN.
	// It is called on every RPC and must be safe for concurrent use. Nil
	// means no added delay.
	Latency func(addr string) time.Duration
	// Locality names where this client runs ("region=eu,zone=a"). Sent with
	// every request (metadata tidekv-origin), it lets leaseholders move a
	// range's lease toward the locality its writes come from. "" sends none.
	Locality string
	// TLS, when set, dials every node over TLS with it: a secure cluster
	// (started with --certs-dir) refuses plaintext. A client certificate in
	// it authenticates the client as its user (docs/security.md).
	TLS *tls.Config
	// Credentials, when set, go with every call, e.g. a user name and
	// password; gRPC sends them only over TLS.
	Credentials credentials.PerRPCCredentials
	// UnaryRPC sends every KV request as its own gRPC call instead of
	// multiplexing the requests to a node on one Batch stream
	// (docs/batch-rpc.md). The stream costs the nodes less per request;
	// this is for comparing the two.
	UnaryRPC bool
	// ReadDelayTarget, when positive, is how much longer than a node's
	// quickest recent point read (Get, BatchGet) the average round trip
	// may grow before the client counts the excess as reads queued in front
	// of the node and narrows its window of requests in flight to it
	// (docs/admission.md). Reads over the window fail at once with
	// ErrOverloaded, or wait and retry, as a node's refusal would. 0 (the
	// default): the window closes only on a node's refusals.
	ReadDelayTarget time.Duration
	// MaxClockOffset is the cluster's --max-offset (default 250ms): the
	// client's hybrid logical clock, which every Batch message carries and
	// every answer updates, refuses a node's timestamp further ahead.
	MaxClockOffset time.Duration
	// TxnWriteOps is the most writes, or keys a Tx.BatchGet reads, one
	// message of a transaction carries to its coordinator (default 1,000,
	// a node's limit on one request's ops or keys, Limits.MaxBatchKeys): a
	// transaction writing more sends them in several messages and still
	// commits them at once.
	TxnWriteOps int
	// WallClock is the physical clock under the client's hybrid logical
	// clock (nil: the system clock). Tests inject a skewed one: nothing
	// the cluster guarantees depends on it (docs/transactions.md,
	// "Timestamps the cluster owns").
	WallClock hlc.PhysicalClock
}

const (
	defaultDialTimeout    = 2 * time.Second
	defaultAttemptTimeout = 3 * time.Second
	defaultMaxAttempts    = 30
	defaultMinBackoff     = 5 * time.Millisecond
	defaultMaxBackoff     = 500 * time.Millisecond
	defaultRTTWeight      = 1.0
	defaultTxnWriteOps    = 1000
)

// DefaultConfig returns the default configuration. Addrs is left empty: the
// caller must say where the cluster is.
func DefaultConfig() Config {
	return Config{
		DialTimeout:    defaultDialTimeout,
		AttemptTimeout: defaultAttemptTimeout,
		MaxAttempts:    defaultMaxAttempts,
		MinBackoff:     defaultMinBackoff,
		MaxBackoff:     defaultMaxBackoff,
		RTTWeight:      defaultRTTWeight,
		MaxClockOffset: hlc.DefaultMaxOffset,
		TxnWriteOps:    defaultTxnWriteOps,
	}
}

// Validate reports whether c is usable. Zero fields are valid (they take
// defaults); negative ones are not.
func (c Config) Validate() error {
	if len(c.Addrs) == 0 {
		return errors.New("tidekv client: config: at least one address is required")
	}
	for _, a := range c.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return fmt.Errorf("tidekv client: config: address %q: want host:port: %v", a, err)
		}
	}
	switch {
	case c.DialTimeout < 0:
		return errors.New("tidekv client: config: DialTimeout must not be negative")
	case c.AttemptTimeout < 0:
		return errors.New("tidekv client: config: AttemptTimeout must not be negative")
	case c.MaxAttempts < 0:
		return errors.New("tidekv client: config: MaxAttempts must not be negative")
	case c.ReadDelayTarget < 0:
		return errors.New("tidekv client: config: ReadDelayTarget must not be negative")
	case c.MaxClockOffset < 0:
		return errors.New("tidekv client: config: MaxClockOffset must not be negative")
	case c.TxnWriteOps < 0:
		return errors.New("tidekv client: config: TxnWriteOps must not be negative")
	case c.MinBackoff < 0 || c.MaxBackoff < 0:
		return errors.New("tidekv client: config: backoff durations must not be negative")
	case c.RTTWeight < 0 || math.IsNaN(c.RTTWeight) || math.IsInf(c.RTTWeight, 0):
		return fmt.Errorf("tidekv client: config: RTTWeight must be a finite non-negative number, got %v", c.RTTWeight)
	}
	if err := c.DefaultRead.validate(); err != nil {
		return fmt.Errorf("tidekv client: config: DefaultRead %s: %v", c.DefaultRead, err)
	}
	if d := c.withDefaults(); d.MinBackoff > d.MaxBackoff {
		return fmt.Errorf("tidekv client: config: MinBackoff %v exceeds MaxBackoff %v", d.MinBackoff, d.MaxBackoff)
	}
	return nil
}

// withDefaults fills zero fields with their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = d.AttemptTimeout
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = d.MaxAttempts
	}
	if c.MaxClockOffset == 0 {
		c.MaxClockOffset = d.MaxClockOffset
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = d.MinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = d.MaxBackoff
	}
	if c.RTTWeight == 0 {
		c.RTTWeight = d.RTTWeight
	}
	if c.TxnWriteOps == 0 {
		c.TxnWriteOps = d.TxnWriteOps
	}
	c.Addrs = append([]string(nil), c.Addrs...)
	return c
}
