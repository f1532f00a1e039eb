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
// Retransmit interval old (younger ones may still be on their way), oldest
// epoch first and every DC's alike, then drops the validated epochs'
// messages every peer holds.
//
// Oldest first because a peer validates in epoch order: it needs every
// input of its first unvalidated epoch (and the votes that ride in the
// next ones) before anything later. Taking the DCs in id order instead
// spent a whole batch on the lowest DC's backlog while the peer waited
// for a higher DC's message of that epoch, as a dump of a server that had
// fallen far behind showed: DCs 0 and 1 waiting on DC 2's input of their
// next epoch, DC 2 on DC 1's (TestRetransmissionSendsOldestEpochsFirst).
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
		from := old
		for x, e := range d.peerHeld[p] {
			if x != p {
				from = min(from, e)
			}
		}
		sent, done := 0, make([]bool, d.n)
		done[p] = true
		for e := from; e < old && sent < maxRetransmit && slices.Contains(done, false); e++ {
			in := d.inputs[e]
			for x := 0; in != nil && x < d.n && sent < maxRetransmit; x++ {
				if done[x] || in[x] == nil || e < d.peerHeld[p][x] {
					continue
				}
				d.tr.Send(p, in[x])
				sent++
				done[x] = silent
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
