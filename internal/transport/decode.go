package transport

import (
	"math"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/wirefield"
)

// decodeBatch decodes a frame's RaftMessageBatch with a fixed number of
// allocations per frame, where proto.Unmarshal makes one per message, per
// entry and per set field (raftpb's proto2 fields are pointers, each its
// own allocation: about 30 per replicated write on the receiving nodes,
// docs/benchmarks/cost.md). A first pass counts the messages, entries and
// fields and checks that the frame holds nothing but the fields handled
// here; the second fills arrays of that size, one per kind, and points
// into them. Entries' Data and messages' Context alias body, capped so
// that an append copies: body must not be reused or written after the
// call (the messages and their entries outlive it, in Raft's log). A
// frame with anything else (a snapshot, a lease handoff, storage
// responses, unknown fields or enum values, a field of an unexpected wire
// type, a message field given twice, which protobuf merges) and a frame
// that does not parse go to proto.Unmarshal, which copies.
func decodeBatch(body []byte) ([]*tidekvpb.RaftMessage, error) {
	var d batchDecoder
	if d.batch(body) {
		d.alloc()
		d.fill = true
		d.batch(body)
		return d.out, nil
	}
	b := &tidekvpb.RaftMessageBatch{}
	if err := proto.Unmarshal(body, b); err != nil {
		return nil, err
	}
	return b.GetMessages(), nil
}

// batchDecoder walks a batch twice: counting (fill false), then filling
// the arrays the counts sized. The counters are the arrays' lengths after
// the first walk and their next free slot in the second.
type batchDecoder struct {
	fill                                bool
	nRM, nMsg, nEnt, nU64, nMT, nET, nB int

	out   []*tidekvpb.RaftMessage
	rms   []tidekvpb.RaftMessage
	msgs  []raftpb.Message
	ents  []raftpb.Entry
	entPs []*raftpb.Entry
	u64s  []uint64
	mts   []raftpb.MessageType
	ets   []raftpb.EntryType
	bools []bool
}

func (d *batchDecoder) alloc() {
	d.out = make([]*tidekvpb.RaftMessage, d.nRM)
	d.rms = make([]tidekvpb.RaftMessage, d.nRM)
	d.msgs = make([]raftpb.Message, d.nMsg)
	if d.nEnt > 0 {
		d.ents = make([]raftpb.Entry, d.nEnt)
		d.entPs = make([]*raftpb.Entry, d.nEnt)
	}
	d.u64s = make([]uint64, d.nU64)
	d.mts = make([]raftpb.MessageType, d.nMT)
	if d.nET > 0 {
		d.ets = make([]raftpb.EntryType, d.nET)
	}
	if d.nB > 0 {
		d.bools = make([]bool, d.nB)
	}
	d.nRM, d.nMsg, d.nEnt, d.nU64, d.nMT, d.nET, d.nB = 0, 0, 0, 0, 0, 0, 0
}

func (d *batchDecoder) batch(buf []byte) bool {
	for len(buf) > 0 {
		num, _, b, rest, isBytes, ok := wirefield.Next(buf)
		if !ok || num != 1 || !isBytes {
			return false
		}
		if !d.raftMessage(b) {
			return false
		}
		buf = rest
	}
	return true
}

func (d *batchDecoder) raftMessage(buf []byte) bool {
	var rm *tidekvpb.RaftMessage
	if d.fill {
		rm = &d.rms[d.nRM]
		d.out[d.nRM] = rm
	}
	d.nRM++
	seenMsg := false
	for len(buf) > 0 {
		num, v, b, rest, isBytes, ok := wirefield.Next(buf)
		if !ok {
			return false
		}
		buf = rest
		switch {
		case num == 4 && isBytes && !seenMsg:
			seenMsg = true
			m, ok := d.message(b)
			if !ok {
				return false
			}
			if d.fill {
				rm.Message = m
			}
		case isBytes:
			return false
		case !d.fill:
			if num != 1 && num != 2 && num != 3 && num != 6 && num != 7 {
				return false
			}
		case num == 1:
			rm.RangeId = v
		case num == 2:
			rm.FromNodeId = v
		case num == 3:
			rm.ToNodeId = v
		case num == 6:
			rm.DataLost = protowire.DecodeBool(v)
		case num == 7:
			rm.LogHeldByAll = v
		}
	}
	return true
}

// message returns the Message decoded from buf (nil in the first walk);
// false: the frame is not for this decoder.
func (d *batchDecoder) message(buf []byte) (*raftpb.Message, bool) {
	var m *raftpb.Message
	if d.fill {
		m = &d.msgs[d.nMsg]
	}
	d.nMsg++
	ent0 := d.nEnt
	for len(buf) > 0 {
		num, v, b, rest, isBytes, ok := wirefield.Next(buf)
		if !ok {
			return nil, false
		}
		buf = rest
		if isBytes {
			switch num {
			case 7:
				if !d.entry(b) {
					return nil, false
				}
			case 12:
				if d.fill {
					m.Context = b
				}
			default:
				return nil, false // a snapshot, responses, or a field unknown here
			}
			continue
		}
		switch num {
		case 1:
			if v > math.MaxInt32 || raftpb.MessageType_name[int32(v)] == "" {
				return nil, false
			}
			if d.fill {
				d.mts[d.nMT] = raftpb.MessageType(v)
				m.Type = &d.mts[d.nMT]
			}
			d.nMT++
		case 10:
			if d.fill {
				d.bools[d.nB] = protowire.DecodeBool(v)
				m.Reject = &d.bools[d.nB]
			}
			d.nB++
		case 2, 3, 4, 5, 6, 8, 11, 13:
			if d.fill {
				p := &d.u64s[d.nU64]
				*p = v
				switch num {
				case 2:
					m.To = p
				case 3:
					m.From = p
				case 4:
					m.Term = p
				case 5:
					m.LogTerm = p
				case 6:
					m.Index = p
				case 8:
					m.Commit = p
				case 11:
					m.RejectHint = p
				case 13:
					m.Vote = p
				}
			}
			d.nU64++
		default:
			return nil, false
		}
	}
	if d.fill && d.nEnt > ent0 {
		m.Entries = d.entPs[ent0:d.nEnt:d.nEnt]
	}
	return m, true
}

// entry decodes an Entry of the message being decoded; false as message.
func (d *batchDecoder) entry(buf []byte) bool {
	var e *raftpb.Entry
	if d.fill {
		e = &d.ents[d.nEnt]
		d.entPs[d.nEnt] = e
	}
	d.nEnt++
	for len(buf) > 0 {
		num, v, b, rest, isBytes, ok := wirefield.Next(buf)
		if !ok {
			return false
		}
		buf = rest
		switch {
		case num == 4 && isBytes:
			if d.fill {
				e.Data = b
			}
		case isBytes:
			return false
		case num == 1:
			if v > math.MaxInt32 || raftpb.EntryType_name[int32(v)] == "" {
				return false
			}
			if d.fill {
				d.ets[d.nET] = raftpb.EntryType(v)
				e.Type = &d.ets[d.nET]
			}
			d.nET++
		case num == 2 || num == 3:
			if d.fill {
				p := &d.u64s[d.nU64]
				*p = v
				if num == 2 {
					e.Term = p
				} else {
					e.Index = p
				}
			}
			d.nU64++
		default:
			return false
		}
	}
	return true
}
