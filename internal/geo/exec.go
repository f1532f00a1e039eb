package geo

import "math"

// progress executes every epoch that is ready, then validates what
// results allow, again while a rollback asks for it; new results go out
// at once in an early message.
func (d *DC) progress() {
	executed := false
	for {
		for d.execNext < d.next {
			members, ok := d.members(d.execNext, false)
			if !ok {
				break
			}
			d.executeEpoch(d.execNext, members)
			d.execNext++
			executed = true
		}
		if !d.validate() {
			break
		}
	}
	if executed {
		d.sendEarly()
	}
}

// members is the set of DCs whose input epoch e runs with. Settled only:
// every input decided. Otherwise speculatively: an input we hold counts
// unless decided out, and one we do not hold must be decided out.
func (d *DC) members(e uint64, settled bool) (uint64, bool) {
	var set uint64
	for dc := range d.n {
		decided, in := d.votes.decision(e, dc)
		switch {
		case decided && in && d.holds(e, dc):
			set |= 1 << dc
		case decided && !in:
		case !settled && !decided && d.holds(e, dc):
			set |= 1 << dc
		default:
			return 0, false
		}
	}
	return set, true
}

// ordered is epoch e's transactions in the order every DC runs them: by
// DC id, then as the DC's gateway took them.
func (d *DC) ordered(e uint64, members uint64) []*Txn {
	var out []*Txn
	for dc, m := range d.inputs[e] {
		if members&(1<<dc) != 0 && m != nil {
			for i := range m.Txns {
				out = append(out, &m.Txns[i])
			}
		}
	}
	return out
}

// executeEpoch runs epoch e's transactions on the speculative state (those
// of the first unvalidated epoch from the first unvalidated one), keeps
// them in the log and queues the results for the next message.
func (d *DC) executeEpoch(e uint64, members uint64) {
	d.execMembers[e] = members
	txns := d.ordered(e, members)
	if e == d.vEpoch {
		txns = txns[d.vIndex:]
	}
	prior := d.lastHash
	if len(d.log) > 0 {
		prior = d.log[len(d.log)-1].hash
	}
	for i, r := range execute(d.spec, txns, members, d.fault) {
		r.Prior = prior
		prior = r.Hash()
		d.log = append(d.log, entry{txn: txns[i], mine: r, hash: prior})
		d.outResults = append(d.outResults, r)
		d.note(d.id, r, math.MaxUint64) // our own are always the newest
	}
}

// validate settles transactions in order while their epoch's inputs are
// decided and a majority agree on their result: each decided result is
// applied to the validated state, and one that differs from ours (or an
// epoch that ran with other inputs than were decided) rolls the
// speculative state back to the validated one. It says whether it rolled
// back, so that progress executes again.
func (d *DC) validate() bool {
	for d.vEpoch < d.execNext {
		members, ok := d.members(d.vEpoch, true)
		if !ok {
			return false
		}
		if members != d.execMembers[d.vEpoch] {
			d.rollback()
			return true
		}
		txns := d.ordered(d.vEpoch, members)
		if d.vIndex == len(txns) {
			d.settleEpoch(d.vEpoch, members)
			continue
		}
		head := d.log[0]
		r, ok := d.decided(head.txn.ID, members)
		if !ok {
			return false
		}
		d.log = d.log[1:]
		d.vIndex++
		d.validated.Apply(&r)
		d.lastHash = r.Hash()
		d.settleTxn(r.ID, Decision{ID: r.ID, Result: r})
		if d.lastHash != head.hash {
			d.rollback()
			return true
		}
	}
	return false
}

// rollback drops the speculative state and what was executed on it; the
// next progress executes again from the first unvalidated transaction.
func (d *DC) rollback() {
	d.spec = d.validated.Clone()
	d.log = nil
	d.execNext = d.vEpoch
	d.rollbacks++
}

// settleEpoch moves past a validated epoch: this DC's transactions whose
// input was left out are answered Retry, and the epoch's state is dropped
// (its messages stay until every peer holds them: relay.go).
//
// A left-out message's votes go out again in the next one. Peers count a
// left-out input as held (advanceHeld), so the message is never sent
// again; but it may carry votes on later epochs (a sender that was late
// votes on what it received meanwhile), and a peer it never reached
// could wait for those votes forever. A vote is cast once, so a peer that
// took them already ignores the copy.
func (d *DC) settleEpoch(e uint64, members uint64) {
	if members&(1<<d.id) == 0 {
		if m := d.inputs[e][d.id]; m != nil {
			for _, t := range m.Txns {
				d.settleTxn(t.ID, Decision{ID: t.ID, Retry: true})
			}
			d.outVotes = append(d.outVotes, m.Votes...)
		}
	}
	for dc, m := range d.inputs[e] {
		if m != nil && members&(1<<dc) == 0 {
			for _, t := range m.Txns {
				d.doneBelow[dc] = max(d.doneBelow[dc], t.ID.Seq+1)
			}
		}
	}
	delete(d.execMembers, e)
	d.votes.forget(e)
	d.vEpoch++
	d.vIndex = 0
	for dc := range d.n {
		d.advanceHeld(dc)
	}
}

func (d *DC) settleTxn(id TxnID, dec Decision) {
	delete(d.tally, id)
	d.doneBelow[id.DC] = max(d.doneBelow[id.DC], id.Seq+1)
	if id.DC == d.id && d.decide != nil {
		d.decide(dec)
	}
}

// decided returns the result a majority of DCs computed for id with the
// epoch's decided inputs on the decided history (a result's Prior is the
// last validated result's hash: one a DC computed on a speculative state
// it later dropped is not counted, though its later one replaces it);
// once every DC reported without a majority, the largest group wins, ties
// to the group with the lowest DC id.
func (d *DC) decided(id TxnID, members uint64) (Result, bool) {
	type group struct {
		r      Result
		n, low int
	}
	groups := map[[32]byte]*group{}
	total := 0
	for dc, t := range d.tally[id] {
		if t.r.Members != members || t.r.Prior != d.lastHash {
			continue
		}
		total++
		g := groups[t.h]
		if g == nil {
			g = &group{r: t.r, low: dc}
			groups[t.h] = g
		}
		g.n++
		g.low = min(g.low, dc)
	}
	var best *group
	for _, g := range groups {
		if g.n >= d.n/2+1 {
			return g.r, true
		}
		if best == nil || g.n > best.n || (g.n == best.n && g.low < best.low) {
			best = g
		}
	}
	if total == d.n && best != nil {
		return best.r, true
	}
	return Result{}, false
}
