package raftstore

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tidekv/tidekv/api/tidekvpb"
	"github.com/tidekv/tidekv/internal/wirefield"
)

// decodeCommand decodes a log entry's RaftCommand. Every replica decodes
// every entry it applies, and proto.Unmarshal makes about six allocations
// per write command (the command, its timestamp, the writes' slice, each
// write, its key and value: 17 per replicated write over three replicas,
// docs/benchmarks/cost.md). The writes of a command and of a batch of them
// (batch.go) are decoded here into one array per kind, sized by a first
// pass, and keys and values alias data, capped so that an append copies:
// an entry's data is never written after it is made (a proposal's
// marshaled command, a frame's body, a copy read from the engine). Any
// other command (CAS, split, meta, a transaction...), a field of an
// unexpected wire type, a timestamp given twice (protobuf merges), a
// command with both writes and a batch, or a batch within a batch goes
// to proto.Unmarshal.
func decodeCommand(data []byte) (*tidekvpb.RaftCommand, error) {
	var d cmdDecoder
	if d.command(data, false) {
		d.alloc()
		d.fill = true
		d.command(data, false)
		return &d.cmds[0], nil
	}
	cmd := &tidekvpb.RaftCommand{}
	return cmd, proto.Unmarshal(data, cmd)
}

// cmdDecoder walks a command twice, as the transport's batch decoder: the
// counters are the arrays' lengths after the first walk and their next
// free slot in the second.
type cmdDecoder struct {
	fill          bool
	nCmd, nTS, nW int
	cmds          []tidekvpb.RaftCommand
	batch         []*tidekvpb.RaftCommand
	tss           []tidekvpb.LogTimestamp
	writes        []tidekvpb.LogWrite
	writePs       []*tidekvpb.LogWrite
}

// oneWrite holds the arrays of the most common entry, one command of one
// write: one allocation instead of four.
type oneWrite struct {
	cmd    [1]tidekvpb.RaftCommand
	ts     [1]tidekvpb.LogTimestamp
	write  [1]tidekvpb.LogWrite
	writeP [1]*tidekvpb.LogWrite
}

func (d *cmdDecoder) alloc() {
	if d.nCmd == 1 && d.nTS <= 1 && d.nW == 1 {
		one := &oneWrite{}
		d.cmds, d.tss, d.writes, d.writePs = one.cmd[:], one.ts[:d.nTS], one.write[:], one.writeP[:]
		d.nCmd, d.nTS, d.nW = 0, 0, 0
		return
	}
	d.cmds = make([]tidekvpb.RaftCommand, d.nCmd)
	if d.nCmd > 1 {
		d.batch = make([]*tidekvpb.RaftCommand, d.nCmd-1)
	}
	if d.nTS > 0 {
		d.tss = make([]tidekvpb.LogTimestamp, d.nTS)
	}
	if d.nW > 0 {
		d.writes = make([]tidekvpb.LogWrite, d.nW)
		d.writePs = make([]*tidekvpb.LogWrite, d.nW)
	}
	d.nCmd, d.nTS, d.nW = 0, 0, 0
}

// command decodes one command; inner: it is an element of a batch.
func (d *cmdDecoder) command(buf []byte, inner bool) bool {
	var c *tidekvpb.RaftCommand
	if d.fill {
		c = &d.cmds[d.nCmd]
		if inner {
			d.batch[d.nCmd-1] = c
		}
	}
	d.nCmd++
	w0 := d.nW
	var hasWrites, hasBatch, hasTS bool
	for len(buf) > 0 {
		num, v, b, rest, isBytes, ok := wirefield.Next(buf)
		if !ok {
			return false
		}
		buf = rest
		switch {
		case num == 1 && !isBytes:
			if d.fill {
				c.ProposalId = v
			}
		case num == 10 && !isBytes:
			if d.fill {
				c.WantExisted = protowire.DecodeBool(v)
			}
		case num == 2 && isBytes && !hasBatch:
			hasWrites = true
			if !d.write(b) {
				return false
			}
		case num == 11 && isBytes && !inner && !hasWrites:
			hasBatch = true
			if !d.command(b, true) {
				return false
			}
		case num == 12 && isBytes && !hasTS:
			hasTS = true
			if !d.timestamp(b, c) {
				return false
			}
		default:
			return false
		}
	}
	if d.fill {
		if hasWrites {
			c.Writes = d.writePs[w0:d.nW:d.nW]
		}
		if hasBatch {
			c.Batch = d.batch
		}
	}
	return true
}

func (d *cmdDecoder) timestamp(buf []byte, c *tidekvpb.RaftCommand) bool {
	var ts *tidekvpb.LogTimestamp
	if d.fill {
		ts = &d.tss[d.nTS]
		c.Timestamp = ts
	}
	d.nTS++
	for len(buf) > 0 {
		num, v, _, rest, isBytes, ok := wirefield.Next(buf)
		if !ok || isBytes || (num != 1 && num != 2) {
			return false
		}
		buf = rest
		if d.fill && num == 1 {
			ts.WallNanos = int64(v)
		} else if d.fill {
			ts.Logical = uint32(v)
		}
	}
	return true
}

func (d *cmdDecoder) write(buf []byte) bool {
	var w *tidekvpb.LogWrite
	if d.fill {
		w = &d.writes[d.nW]
		d.writePs[d.nW] = w
	}
	d.nW++
	for len(buf) > 0 {
		num, v, b, rest, isBytes, ok := wirefield.Next(buf)
		if !ok || isBytes != (num == 2 || num == 3) || num < 1 || num > 6 {
			return false
		}
		buf = rest
		if !d.fill {
			continue
		}
		if len(b) == 0 {
			b = nil // as proto3 bytes decode
		}
		switch num {
		case 1:
			w.Delete = protowire.DecodeBool(v)
		case 2:
			w.Key = b
		case 3:
			w.Value = b
		case 4:
			w.ExpiresAt = int64(v)
		case 5:
			w.KeepTtl = protowire.DecodeBool(v)
		case 6:
			w.Expire = protowire.DecodeBool(v)
		}
	}
	return true
}
