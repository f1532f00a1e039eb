package client

import (
	"context"
	"fmt"
	"time"
)

// Expiry (docs/expiry.md): a value may expire at a time the leaseholder
// fixes when it proposes the write (its timestamp plus the TTL), the same
// on every replica; reads from then on find no value. TTLs travel in whole
// milliseconds. They need every node at Raft log version 5: before, a
// write with one is refused as unavailable ("the cluster has not finished
// upgrading").

// Expiry says what a put does with its key's time to live.
type Expiry struct {
	// TTL > 0: the value expires TTL after the write (rounded up to a
	// millisecond); 0: it does not, and a TTL the key had is cleared.
	TTL time.Duration
	// Keep: keep the TTL of the key's current value (Redis KEEPTTL);
	// excludes TTL.
	Keep bool
}

// ttlMillis is a TTL on the wire, rounded up so that a positive one does
// not become 0 (no expiry).
func ttlMillis(d time.Duration) (int64, error) {
	if d < 0 {
		return 0, fmt.Errorf("%w: a TTL must not be negative, got %v", ErrInvalidArgument, d)
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond), nil
}

// TTL returns the remaining time to live of key's value (0: it does not
// expire), or an error wrapping ErrNotFound. opts are Get's.
func (c *Client) TTL(ctx context.Context, key []byte, opts ...ReadOption) (time.Duration, error) {
	resp, err := c.get(ctx, key, opts)
	return time.Duration(resp.GetTtlMs()) * time.Millisecond, err
}

// Expire sets the TTL of key's value to ttl, or removes it with ttl 0
// (Redis PERSIST), keeping the value, and reports whether the key existed;
// a missing key is left missing.
func (c *Client) Expire(ctx context.Context, key []byte, ttl time.Duration) (existed bool, err error) {
	req, err := writeRequest([]Op{{Key: key, SetTTL: true, Expiry: Expiry{TTL: ttl}}})
	if err != nil {
		return false, err
	}
	req.WantExisted = true
	resp, err := c.write(ctx, req)
	if err != nil {
		return false, err
	}
	return len(resp.GetExisted()) == 1 && resp.GetExisted()[0], nil
}
