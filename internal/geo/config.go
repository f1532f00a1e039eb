package geo

import (
	"fmt"
	"time"
)

// Config holds the knobs of the geo mode. Start from DefaultConfig.
type Config struct {
	// Epoch is how long a gateway collects transactions before it sends
	// them as one epoch message; it adds up to one Epoch to the commit
	// latency and sets the message rate (one per peer per Epoch).
	Epoch time.Duration
	// Deadline is how long after an epoch's end a DC waits for a peer's
	// message for it before voting to leave that peer's input out (once
	// a third DC's message shows the deadline passed there too). A DC
	// that sends its own message more than half of it late votes its
	// input out itself (Message.Late), so half of it must exceed the
	// slowest inter-DC one-way delay, or inputs are left out (their
	// transactions answered "retry") while all DCs are up.
	Deadline time.Duration
	// Retransmit is how often messages a peer has not acknowledged are
	// sent again (after a drop or a partition).
	Retransmit time.Duration
	// Partitions is how many partitions a DC's copy is split into; each
	// executes its part of the chains in its own goroutine.
	Partitions int
	// MaxOps and MaxBytes bound one transaction: its operations, and
	// the bytes of its keys and values.
	MaxOps   int
	MaxBytes int
}

// DefaultConfig: 10 ms epochs, a 1 s deadline, retransmission every
// 250 ms, 8 partitions, at most 64 operations and 64 KiB a transaction.
func DefaultConfig() Config {
	return Config{Epoch: 10 * time.Millisecond, Deadline: time.Second, Retransmit: 250 * time.Millisecond,
		Partitions: 8, MaxOps: 64, MaxBytes: 64 << 10}
}

// Validate refuses a configuration in one sentence.
func (c Config) Validate() error {
	switch {
	case c.Epoch < time.Millisecond || c.Epoch > time.Second:
		return fmt.Errorf("geo: epoch must be between 1ms and 1s, not %v", c.Epoch)
	case c.Deadline < c.Epoch:
		return fmt.Errorf("geo: deadline (%v) must be at least one epoch (%v)", c.Deadline, c.Epoch)
	case c.Retransmit < c.Epoch:
		return fmt.Errorf("geo: retransmit interval (%v) must be at least one epoch (%v)", c.Retransmit, c.Epoch)
	case c.Partitions < 1 || c.Partitions > 256:
		return fmt.Errorf("geo: partitions must be between 1 and 256, not %d", c.Partitions)
	case c.MaxOps < 1:
		return fmt.Errorf("geo: max ops must be positive, not %d", c.MaxOps)
	case c.MaxBytes < 1:
		return fmt.Errorf("geo: max bytes must be positive, not %d", c.MaxBytes)
	}
	return nil
}
