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

// Expiry says what a put does with its key's time to live. At most one of
// its fields is set; none: the value does not expire, and a TTL the key
// had is cleared.
type Expiry struct {
	// TTL > 0: the value expires TTL after the write (rounded up to a
	// millisecond).
	TTL time.Duration
	// At: the value expires at this time (to the millisecond) by the
	// cluster's clocks; a time already past leaves the key absent.
	At time.Time
	// Keep: keep the TTL of the key's current value (Redis KEEPTTL).
	Keep bool
}

// wire is e on the wire: the TTL rounded up, so that a positive one does
// not become 0 (none), and the time in Unix milliseconds.
func (e Expiry) wire() (ttlMs, atMs int64, err error) {
	if e.TTL < 0 {
		return 0, 0, fmt.Errorf("%w: a TTL must not be negative, got %v", ErrInvalidArgument, e.TTL)
	}
	if !e.At.IsZero() {
		if atMs = e.At.UnixMilli(); atMs <= 0 {
			return 0, 0, fmt.Errorf("%w: an expiry time must be after 1970, got %v", ErrInvalidArgument, e.At)
		}
	}
	return int64((e.TTL + time.Millisecond - 1) / time.Millisecond), atMs, nil
}

// wireExpiry is the Expiry a write states on the wire (the inverse of
// wire).
func wireExpiry(ttlMs, atMs int64) Expiry {
	return Expiry{TTL: time.Duration(ttlMs) * time.Millisecond, At: expireAt(atMs)}
}

// TTL returns the remaining time to live of key's value (0: it does not
// expire), or an error wrapping ErrNotFound. opts are Get's.
func (c *Client) TTL(ctx context.Context, key []byte, opts ...ReadOption) (time.Duration, error) {
	resp, err := c.get(ctx, key, opts)
	return time.Duration(resp.GetTtlMs()) * time.Millisecond, err
}

// Expire sets the expiry of key's value to e (e.Keep is invalid), or
// removes it with Expiry{} (Redis PERSIST), keeping the value, and reports
// whether the key existed; a missing key is left missing.
func (c *Client) Expire(ctx context.Context, key []byte, e Expiry) (existed bool, err error) {
	req, err := writeRequest(ctx, []Op{{Key: key, SetTTL: true, Expiry: e}})
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
