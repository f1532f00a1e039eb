package gcqueue

import (
	"testing"
	"time"

	"github.com/tidekv/tidekv/api/hlc"
	"github.com/tidekv/tidekv/api/tidekvpb"
)

// The safe point is ttl (at least twice the max offset) before the read,
// held lower by a protection that has not expired (by this clock less the
// max offset), and never by one that has.
func TestSafePoint(t *testing.T) {
	const offset = 500 * time.Millisecond
	readAt := hlc.Timestamp{WallTime: int64(time.Hour)}
	at := func(d time.Duration) hlc.Timestamp { return hlc.Timestamp{WallTime: readAt.WallTime - int64(d)} }
	prot := func(id uint64, ts hlc.Timestamp, expires time.Duration) *tidekvpb.ProtectedTimestamp {
		return &tidekvpb.ProtectedTimestamp{Id: id, Owner: "backup", Timestamp: tidekvpb.FromHLC(ts),
			ExpiresAtMs: (time.Duration(readAt.WallTime) + expires).Milliseconds()}
	}
	for _, c := range []struct {
		name string
		ttl  time.Duration
		ps   []*tidekvpb.ProtectedTimestamp
		want hlc.Timestamp
		held string
	}{
		{"ttl", 10 * time.Second, nil, at(10 * time.Second), ""},
		{"ttl below twice the offset", time.Second / 2, nil, at(2 * offset), ""},
		{"held", 10 * time.Second, []*tidekvpb.ProtectedTimestamp{prot(7, at(time.Minute), time.Minute)}, at(time.Minute), "protected timestamp 7 by backup"},
		{"lowest holds", 10 * time.Second, []*tidekvpb.ProtectedTimestamp{
			prot(7, at(time.Minute), time.Minute), prot(8, at(2*time.Minute), time.Minute)}, at(2 * time.Minute), "protected timestamp 8 by backup"},
		{"above the ttl: no hold", 10 * time.Second, []*tidekvpb.ProtectedTimestamp{prot(7, at(time.Second), time.Minute)}, at(10 * time.Second), ""},
		{"expired by less than the offset: still holds", 10 * time.Second, []*tidekvpb.ProtectedTimestamp{prot(7, at(time.Minute), -offset/2)}, at(time.Minute), "protected timestamp 7 by backup"},
		{"expired by more than the offset", 10 * time.Second, []*tidekvpb.ProtectedTimestamp{prot(7, at(time.Minute), -2*offset)}, at(10 * time.Second), ""},
	} {
		got, held := gcSafePoint(readAt, c.ttl, offset, c.ps)
		if got != c.want || held != c.held {
			t.Errorf("%s: safe point %v held %q, want %v held %q", c.name, got, held, c.want, c.held)
		}
	}
}
