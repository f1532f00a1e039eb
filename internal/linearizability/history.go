package linearizability

import (
	"fmt"
	"sync"
	"time"
)

// OpKind identifies the operation an Input performs.
type OpKind int

// Operation kinds. Every operation touches exactly one key.
const (
	Put OpKind = iota
	Get
	CAS
	Delete
)

func (k OpKind) String() string {
	switch k {
	case Put:
		return "put"
	case Get:
		return "get"
	case CAS:
		return "cas"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Input is what a client asked for.
type Input struct {
	Kind OpKind
	Key  string
	// Value is the new value for Put and CAS.
	Value string
	// Expected is the value CAS requires the key to hold; only meaningful
	// when ExpectExists is set.
	Expected string
	// ExpectExists makes CAS require the key to exist with value Expected;
	// when false, CAS requires the key to be absent.
	ExpectExists bool
}

// PutInput returns the Input for put(key, value).
func PutInput(key, value string) Input { return Input{Kind: Put, Key: key, Value: value} }

// GetInput returns the Input for get(key).
func GetInput(key string) Input { return Input{Kind: Get, Key: key} }

// DeleteInput returns the Input for delete(key).
func DeleteInput(key string) Input { return Input{Kind: Delete, Key: key} }

// CASInput returns the Input for a CAS that swaps expected for value.
func CASInput(key, expected, value string) Input {
	return Input{Kind: CAS, Key: key, Value: value, Expected: expected, ExpectExists: true}
}

// CASAbsentInput returns the Input for a CAS that creates key with value only
// if the key does not exist.
func CASAbsentInput(key, value string) Input {
	return Input{Kind: CAS, Key: key, Value: value}
}

// Output is what a client observed. Put and Delete outputs carry no
// information and are not checked.
type Output struct {
	// Found and Value are the result of a Get; Value is ignored when
	// !Found.
	Found bool
	Value string
	// Swapped is the result of a CAS.
	Swapped bool
	// Unknown marks an operation whose outcome is unknown (timeout,
	// ambiguous error, crash): it may have taken effect at any point after
	// its invocation, or never. Such an operation's Op.Return is ignored
	// and treated as infinity, and its other Output fields are ignored.
	Unknown bool
}

// Op is one completed (or abandoned) operation in a history. Times are
// nanoseconds on any clock shared by all clients; intervals are closed, so
// operations that touch at an instant are concurrent.
type Op struct {
	ClientID int
	Input    Input
	Output   Output
	Call     int64
	// Return is ignored when Output.Unknown is set.
	Return int64
}

// History is a set of operations; their order in the slice is irrelevant.
// It can be produced by a Recorder or built by hand with explicit times.
type History []Op

type opState uint8

const (
	opPending opState = iota
	opDone
	opFailed
)

type recordedOp struct {
	op    Op
	state opState
}

// Recorder records a history from many client goroutines. Its methods are
// safe for concurrent use.
type Recorder struct {
	// start anchors a monotonic clock so that wall-clock jumps cannot
	// reorder operations.
	start time.Time

	mu  sync.Mutex
	ops []recordedOp
}

// NewRecorder returns an empty Recorder whose clock starts now.
func NewRecorder() *Recorder {
	return &Recorder{start: time.Now()}
}

func (r *Recorder) now() int64 { return int64(time.Since(r.start)) }

// Begin records the invocation of in by client clientID and returns the
// handle through which its outcome must be reported. Call it immediately
// before sending the request: the invocation time must not be later than
// the moment the operation could first take effect.
func (r *Recorder) Begin(clientID int, in Input) Pending {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The timestamp is taken under the lock so that slice order matches
	// invocation order, which keeps histories easy to read when debugging.
	r.ops = append(r.ops, recordedOp{op: Op{ClientID: clientID, Input: in, Call: r.now()}})
	return Pending{r: r, idx: len(r.ops) - 1}
}

// Pending is an operation that has been invoked but whose outcome has not
// been recorded yet. Exactly one of Ok, Unknown or Failed must be called;
// an operation left pending when History is called is treated as Unknown.
type Pending struct {
	r   *Recorder
	idx int
}

// Ok records a definite result. The Unknown field of out is ignored.
func (p Pending) Ok(out Output) {
	// Read the clock before taking the lock: contention would stretch the
	// interval, which is still sound but weakens the check.
	ret := p.r.now()
	out.Unknown = false
	p.finish(opDone, out, ret)
}

// Unknown records that the operation's outcome is unknown: it may or may
// not have taken effect, at any time after its invocation.
func (p Pending) Unknown() {
	p.finish(opDone, Output{Unknown: true}, 0)
}

// Failed records that the operation definitely did not take effect (e.g.
// the request was rejected as invalid or never sent). It is dropped from
// the history.
func (p Pending) Failed() {
	p.finish(opFailed, Output{}, 0)
}

func (p Pending) finish(state opState, out Output, ret int64) {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	rec := &p.r.ops[p.idx]
	if rec.state != opPending {
		// Reporting twice means the client's bookkeeping is broken, and
		// silently keeping either outcome could hide a real bug.
		panic(fmt.Sprintf("linearizability: outcome of %s by client %d recorded twice",
			rec.op.Input.Kind, rec.op.ClientID))
	}
	rec.state = state
	rec.op.Output = out
	rec.op.Return = ret
}

// History returns a snapshot of the recorded operations. Failed operations
// are omitted; operations still pending are included as Unknown, since they
// may already have taken effect.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := make(History, 0, len(r.ops))
	for _, rec := range r.ops {
		switch rec.state {
		case opFailed:
			continue
		case opPending:
			op := rec.op
			op.Output = Output{Unknown: true}
			h = append(h, op)
		default:
			h = append(h, rec.op)
		}
	}
	return h
}
