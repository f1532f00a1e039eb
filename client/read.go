package client

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// ReadOption selects how Get, Scan and BatchGet read: Linearizable(),
// Bounded(θ) or Any(). The zero value is Linearizable(). Pass it as the last
// argument of a read; when several are given the last wins, and when none is,
// Config.DefaultRead applies. See docs/read-modes.md.
//
// A *ReadOption is also a command-line flag value (flag.Value and
// spf13/pflag.Value): it parses with ParseReadMode.
type ReadOption struct {
	mode  tidekvpb.ReadMode
	bound time.Duration
	// at is the timestamp of a read at a timestamp (zero: the newest data).
	at hlc.Timestamp
	// txn is the ID of the transaction reading (TxnReadAt); a string
	// keeps options comparable.
	txn string
	// limit is the uncertainty limit of a transaction's read (TxnReadAt).
	limit hlc.Timestamp
}

// MinStaleness is the smallest bound Bounded accepts: the wire carries the
// bound in whole milliseconds.
const MinStaleness = time.Millisecond

// maxStaleness is the largest bound that fits the wire's uint32 milliseconds.
const maxStaleness = time.Duration(math.MaxUint32) * time.Millisecond

// Linearizable reads go to the range's leaseholder and see every write
// acknowledged before the read began. The default.
func Linearizable() ReadOption { return ReadOption{} }

// Bounded reads may be served by any replica (voter or learner) whose state
// includes every write committed more than maxStaleness ago; the client picks
// the cheapest replica by load and round trip. maxStaleness must be at least
// MinStaleness (a read with a smaller bound fails with ErrInvalidArgument);
// it is rounded down to whole milliseconds, which never loosens it.
func Bounded(maxStaleness time.Duration) ReadOption {
	return ReadOption{mode: tidekvpb.ReadMode_BOUNDED, bound: maxStaleness}
}

// Any reads are served by the cheapest replica from whatever it has applied:
// no freshness guarantee (a lagging or partitioned replica answers from old
// state), but no wait for one either.
func Any() ReadOption { return ReadOption{mode: tidekvpb.ReadMode_ANY} }

// ReadAt reads what the data was at ts, a hybrid logical clock timestamp
// such as Client.Now returns: the range's leaseholder answers from the
// versioned layout, after every write at or below ts, and no write lands
// at or below ts afterwards. Reads of several ranges at one ts see one
// consistent state. ts may not be below the range's GC threshold
// (now − gc-ttl) nor more than the cluster's maximum clock offset ahead of
// the serving node's clock (ErrInvalidArgument).
func ReadAt(ts hlc.Timestamp) ReadOption { return ReadOption{at: ts} }

// TxnReadAt reads at ts as transaction txn, which sees its own intents,
// with the uncertainty limit limit (zero: none): a committed version above
// ts and at or below limit fails the read with an *UncertainReadError.
// How a node's transaction coordinator reads (applications use Txn).
func TxnReadAt(ts hlc.Timestamp, txn []byte, limit hlc.Timestamp) ReadOption {
	return ReadOption{at: ts, txn: string(txn), limit: limit}
}

// FollowerReadAt is ReadAt served by the cheapest replica whose closed
// timestamp has reached ts (on a quiet cluster, anything older than a
// closed-timestamp interval and the replication delay); a replica behind
// it refers the read on, in the end to the leaseholder.
func FollowerReadAt(ts hlc.Timestamp) ReadOption {
	return ReadOption{mode: tidekvpb.ReadMode_ANY, at: ts}
}

// ParseReadMode parses "linearizable", "any" or "bounded:DURATION" (a Go
// duration of at least 1ms, e.g. "bounded:500ms"), case-insensitively. It is
// the inverse of ReadOption.String.
func ParseReadMode(s string) (ReadOption, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch {
	case t == "linearizable":
		return Linearizable(), nil
	case t == "any":
		return Any(), nil
	case t == "bounded":
		return ReadOption{}, fmt.Errorf("read mode %q: bounded needs a staleness bound, e.g. bounded:500ms", s)
	case strings.HasPrefix(t, "bounded:"):
		d, err := time.ParseDuration(strings.TrimSpace(t[len("bounded:"):]))
		if err != nil {
			return ReadOption{}, fmt.Errorf("read mode %q: staleness bound: %v", s, err)
		}
		o := Bounded(d)
		if err := o.validate(); err != nil {
			return ReadOption{}, fmt.Errorf("read mode %q: %v", s, err)
		}
		return o, nil
	}
	return ReadOption{}, fmt.Errorf("unknown read mode %q: want linearizable, any or bounded:DURATION (e.g. bounded:500ms)", s)
}

// Mode is the wire read mode.
func (o ReadOption) Mode() tidekvpb.ReadMode { return o.mode }

// MaxStaleness is the bound of a Bounded read, 0 for the other modes.
func (o ReadOption) MaxStaleness() time.Duration {
	if o.mode != tidekvpb.ReadMode_BOUNDED {
		return 0
	}
	return o.bound
}

// Timestamp is the timestamp of a read at a timestamp (zero: none).
func (o ReadOption) Timestamp() hlc.Timestamp { return o.at }

// timestamp is the wire read timestamp (nil: none).
func (o ReadOption) timestamp() *tidekvpb.Timestamp { return wireTS(o.at) }

// wireTS is ts on the wire (nil for zero: none).
func wireTS(ts hlc.Timestamp) *tidekvpb.Timestamp {
	if ts.IsZero() {
		return nil
	}
	return tidekvpb.FromHLC(ts)
}

// served checks that an answer to a read in o was read at o's timestamp
// (echoed, the answer's read_timestamp).
func (o ReadOption) served(op string, echoed *tidekvpb.Timestamp) error {
	if o.at.IsZero() || echoed.HLC() == o.at {
		return nil
	}
	return fmt.Errorf("%w: %s at %s", ErrNoReadAt, op, o.at)
}

// String renders o as ParseReadMode accepts it (a read at a timestamp with
// "@" and the timestamp after the mode, which ParseReadMode does not take).
func (o ReadOption) String() string {
	if !o.at.IsZero() {
		at := o
		at.at = hlc.Timestamp{}
		return at.String() + "@" + o.at.String()
	}
	switch o.mode {
	case tidekvpb.ReadMode_LINEARIZABLE:
		return "linearizable"
	case tidekvpb.ReadMode_ANY:
		return "any"
	case tidekvpb.ReadMode_BOUNDED:
		return "bounded:" + o.bound.String()
	}
	return fmt.Sprintf("ReadMode(%d)", int32(o.mode))
}

// Set parses s into o (flag.Value).
func (o *ReadOption) Set(s string) error {
	v, err := ParseReadMode(s)
	if err != nil {
		return err
	}
	*o = v
	return nil
}

// Type names the flag's value type in help text (pflag.Value).
func (o *ReadOption) Type() string { return "mode" }

func (o ReadOption) validate() error {
	switch o.mode {
	case tidekvpb.ReadMode_LINEARIZABLE, tidekvpb.ReadMode_ANY:
		return nil
	case tidekvpb.ReadMode_BOUNDED:
		if !o.at.IsZero() {
			return nil
		}
		if o.bound < MinStaleness {
			return fmt.Errorf("staleness bound %v is below the minimum of %v", o.bound, MinStaleness)
		}
		if o.bound > maxStaleness {
			return fmt.Errorf("staleness bound %v exceeds the maximum of %v", o.bound, maxStaleness)
		}
		return nil
	}
	return errors.New("unknown read mode")
}

// follower reports whether replicas other than the leaseholder may serve o.
func (o ReadOption) follower() bool { return o.mode != tidekvpb.ReadMode_LINEARIZABLE }

// staleMs is the wire bound: 0 unless BOUNDED, rounded down (stricter).
func (o ReadOption) staleMs() uint32 {
	if o.mode != tidekvpb.ReadMode_BOUNDED {
		return 0
	}
	return uint32(o.bound / time.Millisecond)
}

// readOption resolves a call's options: the last given, else the default.
func (c *Client) readOption(op string, opts []ReadOption) (ReadOption, error) {
	o := c.cfg.DefaultRead
	if len(opts) > 0 {
		o = opts[len(opts)-1]
	}
	if err := o.validate(); err != nil {
		return o, fmt.Errorf("%w: %s: read mode %s: %v", ErrInvalidArgument, op, o, err)
	}
	return o, nil
}
