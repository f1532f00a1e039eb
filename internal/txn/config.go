package txn

import (
	"fmt"
	"time"
)

// Config holds the transactions' knobs (docs/transactions.md step 5).
type Config struct {
	// HeartbeatInterval is how often a coordinator heartbeats the record
	// of each open transaction that has written.
	HeartbeatInterval time.Duration
	// Expiry is how old a record's last heartbeat must be before a
	// transaction blocked by its intents aborts it (a push). More than
	// twice HeartbeatInterval, so a live coordinator is never taken for
	// a dead one over one late heartbeat.
	Expiry time.Duration
	// IntentWait bounds how long a request that meets a live
	// transaction's intent waits for it to finish before it fails with a
	// retryable error.
	IntentWait time.Duration
	// MaxKeys and MaxBytes bound what one transaction writes (keys, and
	// key and value bytes); MaxDuration is its deadline from its first
	// operation. Past any of them the coordinator aborts it. MaxKeys and
	// MaxBytes also bound one scan's answer: a scan over them is refused
	// (the transaction goes on).
	MaxKeys     int
	MaxBytes    int64
	MaxDuration time.Duration
}

// DefaultConfig: a heartbeat a second, expiry after 5 s, a wait of up
// to 2 s, 10,000 keys, 16 MiB and a minute per transaction.
func DefaultConfig() Config {
	return Config{HeartbeatInterval: time.Second, Expiry: 5 * time.Second, IntentWait: 2 * time.Second,
		MaxKeys: 10000, MaxBytes: 16 << 20, MaxDuration: time.Minute}
}

// Validate refuses knobs that cannot work together, in one sentence
// naming the `tidekv server` flag that sets the knob.
func (c Config) Validate() error {
	for _, d := range []struct {
		v    time.Duration
		flag string
	}{{c.HeartbeatInterval, "--txn-heartbeat-interval"}, {c.IntentWait, "--txn-intent-wait"}, {c.MaxDuration, "--txn-max-duration"}} {
		if d.v <= 0 {
			return fmt.Errorf("server: %s must be positive, not %v", d.flag, d.v)
		}
	}
	switch {
	case c.Expiry <= 2*c.HeartbeatInterval:
		return fmt.Errorf("server: --txn-expiry %v must be more than twice --txn-heartbeat-interval %v, so that one late heartbeat does not let others abort a live transaction", c.Expiry, c.HeartbeatInterval)
	case c.MaxKeys <= 0:
		return fmt.Errorf("server: --txn-max-keys must be positive, not %d", c.MaxKeys)
	case c.MaxBytes <= 0:
		return fmt.Errorf("server: --txn-max-bytes must be positive, not %d", c.MaxBytes)
	}
	return nil
}
