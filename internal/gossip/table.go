package gossip

import (
	"bytes"
	"encoding/binary"
	"log"
	"strconv"
	"strings"
	"sync"
	"time"
)

// table is this node's view of the TideKV members: the state machine fed by
// memberlist's callbacks, kept apart from the networking so it can be tested
// by calling it directly.
type table struct {
	now func() time.Time

	mu      sync.Mutex
	members map[uint64]*entry
	// onChange, if set, sees every state change, in order, under mu.
	onChange func(Member)
}

type entry struct {
	m Member
	// leaving: a leave note arrived while the member was live, so its
	// coming leave is Left rather than Dead.
	leaving bool
}

func newTable(now func() time.Time) *table {
	return &table{now: now, members: make(map[uint64]*entry)}
}

// setState moves e to s, stamping Since, if it is not there already.
func (t *table) setState(e *entry, s State) {
	if e.m.State == s {
		return
	}
	e.m.State = s
	e.m.Since = t.now()
	if t.onChange != nil {
		t.onChange(e.m)
	}
}

// alive records that memberlist sees the member alive (a join, a rejoin or a
// metadata update), with its current addresses.
func (t *table) alive(id uint64, grpcAddr, gossipAddr string, joined bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.members[id]
	if e == nil {
		e = &entry{m: Member{NodeID: id}}
		t.members[id] = e
	}
	e.m.GRPCAddr, e.m.GossipAddr = grpcAddr, gossipAddr
	if joined {
		e.leaving = false
	}
	t.setState(e, Alive)
}

// gone records memberlist's leave notification: Left if the member said it
// was leaving, Dead otherwise.
func (t *table) gone(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.members[id]
	if e == nil {
		return
	}
	if e.leaving {
		e.leaving = false
		t.setState(e, Left)
		return
	}
	if e.m.State != Left {
		t.setState(e, Dead)
	}
}

// leaveNote records a member's note that it is leaving. The note and
// memberlist's leave broadcast travel separately (TCP versus UDP gossip), so
// the note may also arrive after the member was already marked Dead.
func (t *table) leaveNote(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.members[id]
	if e == nil {
		return
	}
	switch e.m.State {
	case Alive, Suspect:
		e.leaving = true
	case Dead:
		// Same departure, reported late: keep Since, the time it went.
		e.m.State = Left
		if t.onChange != nil {
			t.onChange(e.m)
		}
	}
}

// suspect records that this node's probe of the member failed.
func (t *table) suspect(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.members[id]; e != nil && e.m.State == Alive {
		t.setState(e, Suspect)
	}
}

// probeOK records that this node's direct probe of the member succeeded,
// which ends this node's suspicion of it.
func (t *table) probeOK(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.members[id]; e != nil && e.m.State == Suspect {
		t.setState(e, Alive)
	}
}

func (t *table) get(id uint64) (Member, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.members[id]; e != nil {
		return e.m, true
	}
	return Member{}, false
}

func (t *table) snapshot() []Member {
	t.mu.Lock()
	out := make([]Member, 0, len(t.members))
	for _, e := range t.members {
		out = append(out, e.m)
	}
	t.mu.Unlock()
	sortMembers(out)
	return out
}

// Member naming and metadata.

const namePrefix = "tidekv-"

func nodeName(id uint64) string { return namePrefix + strconv.FormatUint(id, 10) }

func parseNodeName(name string) (uint64, bool) {
	s, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 || nodeName(id) != name {
		return 0, false
	}
	return id, true
}

// metaMagic starts a TideKV member's metadata: "tkv", then format version 1.
// The rest is the node ID as a uvarint and the gRPC address.
var metaMagic = []byte("tkv\x01")

func encodeMeta(id uint64, grpcAddr string) []byte {
	b := append([]byte(nil), metaMagic...)
	b = binary.AppendUvarint(b, id)
	return append(b, grpcAddr...)
}

func decodeMeta(b []byte) (id uint64, grpcAddr string, ok bool) {
	rest, found := bytes.CutPrefix(b, metaMagic)
	if !found {
		return 0, "", false
	}
	id, n := binary.Uvarint(rest)
	if n <= 0 || id == 0 {
		return 0, "", false
	}
	return id, string(rest[n:]), true
}

// leaveMagic starts a leave note, sent member to member over TCP; the
// leaving node's ID follows as a uvarint.
var leaveMagic = []byte("tkv-leave\x01")

func encodeLeaveNote(id uint64) []byte {
	return binary.AppendUvarint(append([]byte(nil), leaveMagic...), id)
}

func decodeLeaveNote(b []byte) (uint64, bool) {
	rest, found := bytes.CutPrefix(b, leaveMagic)
	if !found {
		return 0, false
	}
	id, n := binary.Uvarint(rest)
	if n <= 0 || n != len(rest) || id == 0 {
		return 0, false
	}
	return id, true
}

// logFilter is the writer behind memberlist's logger. It drops DEBUG lines,
// passes the rest to out, and reports this node's failed probes, which
// memberlist only logs ("[INFO] memberlist: Suspect <name> has failed, no
// acks received").
type logFilter struct {
	out       *log.Logger
	onSuspect func(name string)
}

const (
	suspectPrefix = "[INFO] memberlist: Suspect "
	suspectSuffix = " has failed, no acks received"
)

func (f *logFilter) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\r\n")
	if rest, ok := strings.CutPrefix(line, suspectPrefix); ok && f.onSuspect != nil {
		if name, ok := strings.CutSuffix(rest, suspectSuffix); ok {
			f.onSuspect(name)
		}
	}
	if strings.HasPrefix(line, "[DEBUG]") {
		return len(p), nil
	}
	f.out.Print(line)
	return len(p), nil
}
