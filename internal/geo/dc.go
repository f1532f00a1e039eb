package geo

import (
	"fmt"
	"slices"
	"time"
)

// Message is one DC's epoch message: the transactions its gateway took
// during the epoch, the votes it cast and the results it computed since
// its previous message, and what it holds of everyone's messages (Acks[d]:
// every message of DC d below that epoch). Messages are never modified
// once sent.
//
// An Early message carries no input: it sends the votes and results of an
// epoch as soon as the DC executed it, so that validation need not wait
// for the next epoch message (which carries them again, reliably, since
// early messages are neither acknowledged nor sent again).
//
// A Late message was sent more than half the deadline after its epoch
// ended (its DC fell behind: starved of CPU, or paused): its sender votes
// its own input out, and so does every DC that receives it, whatever its
// own clock says. Every DC thus votes alike on a late sender's input, and
// the input is settled even when only two DCs remain (see hold).
type Message struct {
	Early   bool
	Late    bool
	From    int
	Genesis uint64 // the first epoch; DC 0 sets it, the others learn it
	Epoch   uint64
	Txns    []Txn
	Votes   []Vote
	Results []Result
	Acks    []uint64
}

// Transport sends a DC's messages to its peers. Send must not block, may
// lose messages (the DC sends again until acknowledged) and may deliver
// them in any order.
type Transport interface {
	Send(to int, m *Message)
}

// Decision is the outcome of one of this DC's own transactions: Result
// as a majority of DCs computed it, or Retry when its epoch's input from
// this DC was left out (it never ran anywhere).
type Decision struct {
	ID     TxnID
	Result Result
	Retry  bool
}

// entry is a transaction executed speculatively and not yet validated.
type entry struct {
	txn  *Txn
	mine Result
	hash [32]byte
}

type tallied struct {
	r     Result
	h     [32]byte
	order uint64 // of the message it came in (sentOrder)
}

// DC is the geo protocol of one data centre. It is pure: time comes in as
// arguments, messages go out through the Transport, decisions through the
// decide callback. Not safe for concurrent use (Node serialises it).
type DC struct {
	cfg    Config
	id, n  int
	tr     Transport
	decide func(Decision)
	fault  func(*Result) // tests: alters this DC's results

	genesis    uint64   // 0 until known
	next       uint64   // the next epoch this DC closes
	overdue    []uint64 // overdue[dc]: the next epoch whose input from dc this DC has not voted on by the clock
	heard      []uint64 // heard[dc]: the latest epoch of a message from dc taken
	seq        uint64
	pending    []Txn
	outVotes   []Vote
	outResults []Result
	earlyVotes int // outVotes and outResults already sent early
	earlyRes   int

	lastRetx  time.Time
	inputs    map[uint64][]*Message // kept past validation until every peer holds them (relay.go)
	heldBelow []uint64              // heldBelow[d]: we hold every message of d below this
	peerHeld  [][]uint64            // peerHeld[p]: peer p's heldBelow as its messages said
	retxHeld  [][]uint64            // retxHeld[p]: peerHeld[p] at the last retransmission
	votes     *votes
	tally     map[TxnID]map[int]tallied
	doneBelow []uint64 // doneBelow[d]: d's transactions below this sequence are settled

	spec, validated *Store
	lastHash        [32]byte          // the hash of the last validated result
	execNext        uint64            // the next epoch to execute
	execMembers     map[uint64]uint64 // the inputs each executed epoch ran with
	vEpoch          uint64            // the first position not yet validated:
	vIndex          int               // epoch and index in its order
	log             []entry           // executed past that position, in order
	rollbacks       int               // how often the speculative copy was dropped
}

// NewDC returns DC id of n (ids 0..n-1; 64 at most). decide receives the
// outcome of each transaction submitted to this DC.
func NewDC(cfg Config, id, n int, tr Transport, decide func(Decision)) (*DC, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if n < 1 || n > 64 || id < 0 || id >= n {
		return nil, fmt.Errorf("geo: DC %d of %d: want 1 to 64 DCs and 0 <= id < n", id, n)
	}
	return &DC{cfg: cfg, id: id, n: n, tr: tr, decide: decide,
		peerHeld: make([][]uint64, n), retxHeld: make([][]uint64, n), inputs: map[uint64][]*Message{},
		heldBelow: make([]uint64, n), heard: make([]uint64, n), votes: newVotes(n), tally: map[TxnID]map[int]tallied{},
		doneBelow: make([]uint64, n), spec: NewStore(cfg.Partitions), validated: NewStore(cfg.Partitions),
		execMembers: map[uint64]uint64{}}, nil
}

// Submit takes a transaction for the epoch now open; its decision comes
// through the decide callback.
func (d *DC) Submit(ops []Op) (TxnID, error) {
	if err := ValidateOps(d.cfg, ops); err != nil {
		return TxnID{}, err
	}
	d.seq++
	id := TxnID{DC: d.id, Seq: d.seq}
	d.pending = append(d.pending, Txn{ID: id, Ops: ops})
	return id, nil
}

// Read returns key's validated value: the state every transaction decided
// so far left, and nothing speculative.
func (d *DC) Read(key string) ([]byte, bool) { return d.validated.Get(key) }

// Validated returns a copy of the validated state (tests and checks).
func (d *DC) Validated() map[string][]byte { return d.validated.All() }

// Rollbacks counts the times this DC dropped its speculative copy (its
// result lost a vote, or an epoch ran with an input later left out).
func (d *DC) Rollbacks() int { return d.rollbacks }

// Position is the first epoch not completely validated.
func (d *DC) Position() uint64 { return d.vEpoch }

func (d *DC) epochOf(t time.Time) uint64 { return uint64(t.UnixNano() / int64(d.cfg.Epoch)) }

func (d *DC) epochEnd(e uint64) time.Time { return time.Unix(0, int64(e+1)*int64(d.cfg.Epoch)) }

// Tick closes the epochs that ended by now, votes on inputs past their
// deadline, sends unacknowledged messages again when due, and makes
// progress.
func (d *DC) Tick(now time.Time) {
	if d.genesis == 0 && d.id == 0 {
		d.start(d.epochOf(now))
	}
	if d.genesis == 0 {
		return
	}
	for d.next < d.epochOf(now) {
		d.close(now)
	}
	for dc := range d.n {
		for ; d.overdue[dc] < d.next && !now.Before(d.epochEnd(d.overdue[dc]).Add(d.cfg.Deadline)); d.overdue[dc]++ {
			e := d.overdue[dc]
			if d.holds(e, dc) {
				continue
			}
			if !d.othersPast(e, dc) {
				break
			}
			if d.votes.cast(e, dc, d.id, false) {
				d.outVotes = append(d.outVotes, Vote{Epoch: e, DC: dc})
			}
		}
	}
	if now.Sub(d.lastRetx) >= d.cfg.Retransmit {
		d.lastRetx = now
		d.retransmit(now)
	}
	d.progress()
}

func (d *DC) start(genesis uint64) {
	d.genesis, d.next, d.execNext, d.vEpoch = genesis, genesis, genesis, genesis
	d.overdue = slices.Repeat([]uint64{genesis}, d.n)
	for i := range d.n {
		d.heldBelow[i] = genesis
		d.peerHeld[i] = slices.Repeat([]uint64{genesis}, d.n)
	}
}

// close sends this DC's message for epoch d.next, marked late if now is
// more than half the deadline past the epoch's end: the other half is the
// network's, so a message sent in time reaches every DC before its
// deadline.
func (d *DC) close(now time.Time) {
	late := now.Sub(d.epochEnd(d.next)) > d.cfg.Deadline/2
	m := &Message{From: d.id, Late: late, Genesis: d.genesis, Epoch: d.next, Txns: d.pending,
		Votes: d.outVotes, Results: d.outResults, Acks: append([]uint64(nil), d.heldBelow...)}
	d.pending, d.outVotes, d.outResults, d.earlyVotes, d.earlyRes = nil, nil, nil, 0, 0
	d.next++
	d.hold(m)
	for p := range d.n {
		if p != d.id {
			d.tr.Send(p, m)
		}
	}
}

// Receive takes a peer's message.
func (d *DC) Receive(m *Message) {
	if m.From < 0 || m.From >= d.n || m.From == d.id || len(m.Acks) != d.n {
		return
	}
	if d.genesis == 0 && m.Genesis != 0 {
		d.start(m.Genesis)
	}
	if d.genesis == 0 || m.Epoch < d.genesis {
		return
	}
	for x, e := range m.Acks {
		d.peerHeld[m.From][x] = max(d.peerHeld[m.From][x], e)
	}
	d.heard[m.From] = max(d.heard[m.From], m.Epoch)
	switch {
	case m.Early:
		d.absorb(m)
	case !d.holds(m.Epoch, m.From) && m.Epoch >= d.vEpoch:
		d.hold(m)
		d.absorb(m)
	default:
		// A copy sent again, or a message for an epoch settled here (its
		// input left out: it came late). A late sender's message can
		// carry its votes on epochs well past its own, which no other
		// message repeats; without them an epoch whose third vote it is
		// never settles here. A vote is cast once, so taking it again is
		// harmless; the results are not taken (they are for epochs
		// before the message's, settled here, and an old copy's would
		// replace newer ones).
		d.absorbVotes(m)
	}
	d.progress()
}

// absorb takes a message's votes and results.
func (d *DC) absorb(m *Message) {
	d.absorbVotes(m)
	for _, r := range m.Results {
		d.note(m.From, r, sentOrder(m))
	}
}

func (d *DC) absorbVotes(m *Message) {
	for _, v := range m.Votes {
		if v.Epoch >= d.vEpoch && v.DC >= 0 && v.DC < d.n {
			d.votes.cast(v.Epoch, v.DC, m.From, v.Have)
		}
	}
}

// sendEarly sends the votes and results queued since the last epoch
// message (or early one) at once.
func (d *DC) sendEarly() {
	if d.earlyVotes == len(d.outVotes) && d.earlyRes == len(d.outResults) {
		return
	}
	m := &Message{Early: true, From: d.id, Genesis: d.genesis, Epoch: d.next,
		Votes: slices.Clone(d.outVotes[d.earlyVotes:]), Results: slices.Clone(d.outResults[d.earlyRes:]),
		Acks: slices.Clone(d.heldBelow)}
	d.earlyVotes, d.earlyRes = len(d.outVotes), len(d.outResults)
	for p := range d.n {
		if p != d.id {
			d.tr.Send(p, m)
		}
	}
}

// othersPast says whether this DC took a message that a DC other than
// itself and dc sent a deadline after epoch e ended. Only then does it
// vote dc's missing input for e out: its own clock says the deadline
// passed, but not that the messages sent before then reached it (a
// loaded machine holds them back while its clock runs on), and a live
// DC's input voted out so is, with one DC gone, a 1–1 split no vote can
// settle. With one DC gone its two peers never vote each other's inputs
// out by the clock: each votes on the other's input as its message says
// (have, or out if Late), and both vote alike.
func (d *DC) othersPast(e uint64, dc int) bool {
	// An epoch message for epoch f is sent once f ended, an early one
	// once f began: past the deadline when f-1 ends a deadline after e.
	past := e + uint64(d.cfg.Deadline/d.cfg.Epoch) + 2
	for y, h := range d.heard {
		if y != dc && y != d.id && h >= past {
			return true
		}
	}
	return false
}

func (d *DC) holds(e uint64, dc int) bool {
	return e < d.heldBelow[dc] || (d.inputs[e] != nil && d.inputs[e][dc] != nil)
}

// hold keeps an epoch message: its arrival is its sender's vote, and ours
// unless our deadline passed first; both are "have" unless it is late.
//
// A sender that is late votes its input out rather than in: with one DC
// gone, the two left must vote alike on every input or it is never
// settled (a 1–1 split has no third vote to break it), and a sender that
// fell behind by more than a deadline used to vote "have" on inputs its
// peer had already voted out, stalling both for good.
func (d *DC) hold(m *Message) {
	in := d.inputs[m.Epoch]
	if in == nil {
		in = make([]*Message, d.n)
		d.inputs[m.Epoch] = in
	}
	in[m.From] = m
	d.advanceHeld(m.From)
	have := !m.Late
	d.votes.cast(m.Epoch, m.From, m.From, have)
	if m.From != d.id && d.votes.cast(m.Epoch, m.From, d.id, have) {
		d.outVotes = append(d.outVotes, Vote{Epoch: m.Epoch, DC: m.From, Have: have})
	}
}

// advanceHeld moves heldBelow[dc] past what we hold of dc and past the
// validated epochs (an input left out there is as good as held: it will
// never be needed).
func (d *DC) advanceHeld(dc int) {
	for {
		e := d.heldBelow[dc]
		if e >= d.vEpoch && (d.inputs[e] == nil || d.inputs[e][dc] == nil) {
			return
		}
		d.heldBelow[dc]++
	}
}

// sentOrder orders a DC's messages as it sent them: by epoch, and an
// epoch's early messages before its epoch message (which repeats their
// results, in order, after any it computed since).
func sentOrder(m *Message) uint64 {
	if m.Early {
		return 2 * m.Epoch
	}
	return 2*m.Epoch + 1
}

// note records a DC's result for a transaction not yet settled; a later
// result from the same DC (after it rolled back) replaces its earlier one.
// Later as sent, not as taken: messages arrive in any order, an epoch
// message lost and sent again is taken after newer ones, and its results,
// computed on a speculative state since dropped, would replace the newer
// ones, which are not sent again: no majority would ever form for the
// transaction and validation would wait for good.
func (d *DC) note(from int, r Result, order uint64) {
	if r.ID.DC < 0 || r.ID.DC >= d.n || r.ID.Seq < d.doneBelow[r.ID.DC] {
		return
	}
	t := d.tally[r.ID]
	if t == nil {
		t = map[int]tallied{}
		d.tally[r.ID] = t
	}
	if old, ok := t[from]; ok && old.order > order {
		return
	}
	t[from] = tallied{r: r, h: r.Hash(), order: order}
}
