package geo

import (
	"slices"
	"time"
)

// Every DC keeps the epoch messages it holds, its own and its peers', until
// every peer holds them, and sends again what a peer's acknowledgements say
// it lacks. Relaying peers' messages matters when a DC's message reached
// some DCs but not others and the DC is then gone for good: the input was
// voted in by those that got it, and the others could never settle that
// epoch without a copy.

// maxRetransmit bounds how many messages one peer is sent again at once.
const maxRetransmit = 128

// retransmit sends every peer the messages it lacks that are at least one
// Retransmit interval old (younger ones may still be on their way), then
// drops the validated epochs' messages every peer holds.
//
// A peer we heard nothing new from since the last retransmission (its
// acknowledgements did not move; a live peer's move every epoch, since it
// holds its own messages) is gone, cut off or starved: it gets one message
// of each DC, enough to resume once it is back, not a full batch: a
// gateway that restarted and stays out was sent the same full batch every
// interval forever, work that on a loaded machine competes with its two
// peers' messages to each other.
func (d *DC) retransmit(now time.Time) {
	old := min(d.next, d.epochOf(now.Add(-d.cfg.Retransmit)))
	for p := range d.n {
		if p == d.id {
			continue
		}
		silent := slices.Equal(d.peerHeld[p], d.retxHeld[p])
		d.retxHeld[p] = slices.Clone(d.peerHeld[p])
		sent := 0
		for x := range d.n {
			for e := d.peerHeld[p][x]; x != p && e < old && sent < maxRetransmit; e++ {
				if in := d.inputs[e]; in != nil && in[x] != nil {
					d.tr.Send(p, in[x])
					sent++
					if silent {
						break
					}
				}
			}
		}
	}
	for e, in := range d.inputs {
		if e < d.vEpoch && d.everyPeerHolds(e, in) {
			delete(d.inputs, e)
		}
	}
}

func (d *DC) everyPeerHolds(e uint64, in []*Message) bool {
	for p := range d.n {
		for x, m := range in {
			if p != d.id && p != x && m != nil && d.peerHeld[p][x] <= e {
				return false
			}
		}
	}
	return true
}
