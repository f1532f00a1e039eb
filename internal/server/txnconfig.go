package server

import (
	"fmt"
	"time"
)

// TxnConfig holds the transactions' knobs (docs/transactions.md step 5).
type TxnConfig struct {
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
	// operation. Past any of them the coordinator aborts it.
	MaxKeys     int
	MaxBytes    int64
	MaxDuration time.Duration
}

// DefaultTxnConfig: a heartbeat a second, expiry after 5 s, a wait of up
// to 2 s, 10,000 keys, 16 MiB and a minute per transaction.
func DefaultTxnConfig() TxnConfig {
	return TxnConfig{HeartbeatInterval: time.Second, Expiry: 5 * time.Second, IntentWait: 2 * time.Second,
		MaxKeys: 10000, MaxBytes: 16 << 20, MaxDuration: time.Minute}
}

// Validate refuses knobs that cannot work together.
func (c TxnConfig) Validate() error {
	switch {
	case c.HeartbeatInterval <= 0 || c.IntentWait <= 0 || c.MaxDuration <= 0:
		return fmt.Errorf("server: transaction heartbeat interval (%v), intent wait (%v) and maximum duration (%v) must be positive", c.HeartbeatInterval, c.IntentWait, c.MaxDuration)
	case c.Expiry <= 2*c.HeartbeatInterval:
		return fmt.Errorf("server: transaction expiry %v must be more than twice the heartbeat interval %v", c.Expiry, c.HeartbeatInterval)
	case c.MaxKeys <= 0 || c.MaxBytes <= 0:
		return fmt.Errorf("server: a transaction's key (%d) and byte (%d) limits must be positive", c.MaxKeys, c.MaxBytes)
	}
	return nil
}
