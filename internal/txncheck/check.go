package txncheck

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Anomaly kinds that are not cycles (the cycles are G0, G1c, G-single,
// G2-item and those with "-realtime").
const (
	G1a               = "G1a"                // read an aborted transaction's write
	G1b               = "G1b"                // read a write its transaction overwrote
	GarbageRead       = "garbage-read"       // read a value nobody wrote
	DuplicateElement  = "duplicate-element"  // a list read holds a value twice
	IncompatibleOrder = "incompatible-order" // two list reads of a key, neither a prefix of the other
	Internal          = "internal"           // a transaction does not see its own writes
)

// Anomaly is one thing no serial order explains.
type Anomaly struct {
	Kind string `json:"kind"`
	// Txns are the transactions involved (indexes into the history): a
	// cycle's, in its order.
	Txns        []int  `json:"txns"`
	Explanation string `json:"explanation"`
	cycle       bool
}

// Result is a history's verdict.
type Result struct {
	Txns      int       `json:"txns"`
	Committed int       `json:"committed"`
	Anomalies []Anomaly `json:"anomalies,omitempty"`
}

// Valid: no anomaly was found.
func (r Result) Valid() bool { return len(r.Anomalies) == 0 }

// Kinds are the kinds of the anomalies found, sorted, each once.
func (r Result) Kinds() []string {
	var ks []string
	for _, a := range r.Anomalies {
		ks = append(ks, a.Kind)
	}
	slices.Sort(ks)
	return slices.Compact(ks)
}

// Smallest is the anomaly to show first: the shortest cycle, or, with no
// cycle, the first anomaly; nil when there is none.
func (r Result) Smallest() *Anomaly {
	var best *Anomaly
	for i := range r.Anomalies {
		a := &r.Anomalies[i]
		if best == nil || a.cycle && (!best.cycle || len(a.Txns) < len(best.Txns)) {
			best = a
		}
	}
	return best
}

// Describe is the verdict in a few lines: the counts, the kinds, and the
// smallest anomaly explained.
func (r Result) Describe() string {
	s := fmt.Sprintf("%d transactions, %d committed: ", r.Txns, r.Committed)
	if r.Valid() {
		return s + "no anomalies"
	}
	return fmt.Sprintf("%s%d anomalies (%s); the smallest:\n%s", s, len(r.Anomalies), strings.Join(r.Kinds(), ", "), r.Smallest().Explanation)
}

// writeRef is the write of a value: its transaction and whether it is
// the transaction's last write of the key.
type writeRef struct {
	txn   int
	final bool
}

// readRef is a committed transaction's read of a key: the list (list
// append) or value (register) it saw, and, for a register, whether it was
// external (before the transaction's own write of the key).
type readRef struct {
	txn      int
	list     []int
	value    int
	external bool
}

type checker struct {
	w      Workload
	h      []Txn
	g      *graph
	res    Result
	writes map[string]map[int]writeRef
	reads  map[string][]readRef
	// longest is each list key's longest read: its version order.
	longest map[string]readRef
	// inGraph: committed, or Info with a write someone read.
	inGraph []bool
	seen    map[string]bool // non-cycle anomalies already reported
}

// Check looks for anomalies in history h of workload w; it fails only when
// h breaks the workload's rules (a value written twice, a value not
// positive, a mop of the other workload).
func Check(w Workload, h []Txn) (Result, error) {
	c := &checker{w: w, h: h, g: newGraph(len(h)), writes: map[string]map[int]writeRef{}, reads: map[string][]readRef{}, longest: map[string]readRef{},
		inGraph: make([]bool, len(h)), seen: map[string]bool{}}
	c.res.Txns = len(h)
	if err := c.index(); err != nil {
		return Result{}, err
	}
	c.internal()
	keys := sortedKeys(c.reads, c.writes)
	if w == ListAppend {
		for _, k := range keys {
			c.listVersions(k)
		}
	}
	for _, k := range keys {
		if w == ListAppend {
			c.listKey(k)
		} else {
			c.registerKey(k)
		}
	}
	c.realtime()
	c.cycles()
	return c.res, nil
}

func sortedKeys(a map[string][]readRef, b map[string]map[int]writeRef) []string {
	var ks []string
	for k := range a {
		ks = append(ks, k)
	}
	for k := range b {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return slices.Compact(ks)
}

// index records every write and every committed read, and which
// transactions are in the graph.
func (c *checker) index() error {
	wf := Append
	if c.w == Register {
		wf = Write
	}
	for i, t := range c.h {
		if t.Outcome == OK {
			c.res.Committed++
			c.inGraph[i] = true
		}
		last := map[string]int{}
		for j, m := range t.Mops {
			switch m.F {
			case Read:
				if c.w == Register && m.List != nil {
					return errorf("T%d reads a list in a register history", i)
				}
			case wf:
				if m.Value <= 0 {
					return errorf("T%d writes %d to %s: written values must be positive", i, m.Value, m.Key)
				}
				last[m.Key] = j
			default:
				return errorf("T%d: %s in a %s history", i, m, c.w)
			}
		}
		for j, m := range t.Mops {
			if m.F != wf {
				continue
			}
			if c.writes[m.Key] == nil {
				c.writes[m.Key] = map[int]writeRef{}
			}
			if prev, dup := c.writes[m.Key][m.Value]; dup {
				return errorf("T%d and T%d both write %d to %s: written values must be unique per key", prev.txn, i, m.Value, m.Key)
			}
			c.writes[m.Key][m.Value] = writeRef{txn: i, final: last[m.Key] == j}
		}
	}
	for i, t := range c.h {
		if t.Outcome != OK {
			continue
		}
		wrote := map[string]bool{}
		for _, m := range t.Mops {
			if m.F != Read {
				wrote[m.Key] = true
				continue
			}
			c.reads[m.Key] = append(c.reads[m.Key], readRef{txn: i, list: m.List, value: m.Value, external: !wrote[m.Key]})
			c.sawCommitted(m.Key, m.Value)
		}
	}
	return nil
}

// sawCommitted notes that a committed transaction read v of k: an Info
// transaction that wrote it committed.
func (c *checker) sawCommitted(k string, v int) {
	if w, ok := c.writes[k][v]; ok && c.h[w.txn].Outcome == Info {
		c.inGraph[w.txn] = true
	}
}

func errorf(format string, args ...any) error {
	return fmt.Errorf("txncheck: "+format, args...)
}

// report records a non-cycle anomaly once per id.
func (c *checker) report(kind, id string, txns []int, format string, args ...any) {
	if c.seen[kind+" "+id] {
		return
	}
	c.seen[kind+" "+id] = true
	c.res.Anomalies = append(c.res.Anomalies, Anomaly{Kind: kind, Txns: txns, Explanation: kind + ": " + fmt.Sprintf(format, args...) + c.legend(txns)})
}

// legend lists txns for an explanation.
func (c *checker) legend(txns []int) string {
	var b strings.Builder
	for _, t := range slices.Compact(slices.Sorted(slices.Values(txns))) {
		fmt.Fprintf(&b, "\n  T%d: %s", t, c.h[t])
	}
	return b.String()
}

// internal checks that each committed transaction sees its own writes and
// its earlier reads.
func (c *checker) internal() {
	for i, t := range c.h {
		if t.Outcome != OK {
			continue
		}
		known := map[string][]int{} // a list read, with own appends since
		own := map[string][]int{}   // own appends before any read
		reg := map[string]int{}
		for _, m := range t.Mops {
			switch {
			case m.F == Append:
				if l, ok := known[m.Key]; ok {
					known[m.Key] = append(slices.Clip(l), m.Value)
				} else {
					own[m.Key] = append(own[m.Key], m.Value)
				}
			case m.F == Write:
				reg[m.Key] = m.Value
			case c.w == ListAppend:
				if l, ok := known[m.Key]; ok && !slices.Equal(l, m.List) {
					c.report(Internal, fmt.Sprint(i), []int{i}, "T%d read %s = %v, where its earlier reads and appends make %v", i, m.Key, m.List, l)
				} else if !ok && !hasSuffix(m.List, own[m.Key]) {
					c.report(Internal, fmt.Sprint(i), []int{i}, "T%d appended %v to %s and then read %v, which does not end with them", i, own[m.Key], m.Key, m.List)
				}
				known[m.Key] = m.List
			default:
				if v, ok := reg[m.Key]; ok && v != m.Value {
					c.report(Internal, fmt.Sprint(i), []int{i}, "T%d read %s = %d, where its earlier reads and writes make %d", i, m.Key, m.Value, v)
				}
				reg[m.Key] = m.Value
			}
		}
	}
}

func hasSuffix(l, s []int) bool { return len(l) >= len(s) && slices.Equal(l[len(l)-len(s):], s) }

func isPrefix(p, l []int) bool { return len(p) <= len(l) && slices.Equal(l[:len(p)], p) }

// writer is the transaction that wrote v to k when it is in the graph.
func (c *checker) writer(k string, v int) (writeRef, bool) {
	w, ok := c.writes[k][v]
	return w, ok && c.inGraph[w.txn]
}

// readValue reports the anomalies of reading v of k by reader: a value
// nobody wrote, an aborted one, or, when v is the version read (last), an
// intermediate one.
func (c *checker) readValue(k string, v, reader int, last bool) {
	w, ok := c.writes[k][v]
	id := fmt.Sprintf("%s %d %d", k, v, reader)
	switch {
	case !ok:
		c.report(GarbageRead, id, []int{reader}, "T%d read %d in %s, which no transaction wrote", reader, v, k)
	case c.h[w.txn].Outcome == Fail:
		c.report(G1a, id, []int{w.txn, reader}, "T%d read %d in %s, written by T%d, which failed", reader, v, k, w.txn)
	case last && !w.final && w.txn != reader:
		c.report(G1b, id, []int{w.txn, reader}, "T%d read %d in %s, which T%d wrote and then overwrote in the same transaction", reader, v, k, w.txn)
	}
}

func (c *checker) wroteIt(k string, v, txn int) bool {
	w, ok := c.writes[k][v]
	return ok && w.txn == txn
}

// listElements reports the anomalies of the values in list, read by
// reader.
func (c *checker) listElements(k string, reader int, list []int) {
	dup := make(map[int]bool, len(list))
	for _, v := range list {
		if dup[v] {
			c.report(DuplicateElement, fmt.Sprintf("%s %d", k, reader), []int{reader}, "T%d read %s = %v, which holds %d twice", reader, k, list, v)
		}
		dup[v] = true
		c.sawCommitted(k, v)
		c.readValue(k, v, reader, false)
	}
}

// listVersions finds the version order of list key k, the longest list
// read of it, and the anomalies of the values read: the elements of a
// prefix of the longest are its own, so only it and the reads that are
// not prefixes need a look at each element.
func (c *checker) listVersions(k string) {
	var longest readRef
	for _, r := range c.reads[k] {
		if len(r.list) > len(longest.list) {
			longest = r
		}
	}
	c.longest[k] = longest
	c.listElements(k, longest.txn, longest.list)
	for _, r := range c.reads[k] {
		if !isPrefix(r.list, longest.list) {
			c.report(IncompatibleOrder, k, []int{r.txn, longest.txn}, "T%d read %s = %v and T%d read %s = %v: neither is a prefix of the other", r.txn, k, r.list, longest.txn, k, longest.list)
			c.listElements(k, r.txn, r.list)
		}
	}
}

// listKey infers the dependencies on list key k: its version order is the
// longest list read, which every other read must be a prefix of.
func (c *checker) listKey(k string) {
	reads, longest := c.reads[k], c.longest[k].list
	pos := make(map[int]int, len(longest))
	for i, v := range longest {
		pos[v] = i
	}
	for i := 1; i < len(longest); i++ {
		a, aok := c.writer(k, longest[i-1])
		b, bok := c.writer(k, longest[i])
		if aok && bok {
			c.g.add(a.txn, b.txn, WW, why{k, longest[i-1], longest[i]})
		}
	}
	// A committed append longest lacks still comes after every read that
	// lacks it: had its transaction come first, the read would hold it.
	var unseen []int
	for v, w := range c.writes[k] {
		if _, in := pos[v]; !in && c.h[w.txn].Outcome == OK {
			unseen = append(unseen, v)
		}
	}
	slices.Sort(unseen)
	for _, r := range reads {
		ext := r.list // without the reader's own appends
		for len(ext) > 0 && c.wroteIt(k, ext[len(ext)-1], r.txn) {
			ext = ext[:len(ext)-1]
		}
		last := 0
		if len(ext) > 0 {
			last = ext[len(ext)-1]
			c.readValue(k, last, r.txn, true)
			if w, ok := c.writer(k, last); ok {
				c.g.add(w.txn, r.txn, WR, why{k, last, 0})
			}
		}
		if isPrefix(ext, longest) && len(ext) < len(longest) {
			if w, ok := c.writer(k, longest[len(ext)]); ok {
				c.g.add(r.txn, w.txn, RW, why{k, last, longest[len(ext)]})
			}
		}
		for _, v := range unseen {
			if !slices.Contains(r.list, v) { // a read not a prefix of longest may hold it
				c.g.add(r.txn, c.writes[k][v].txn, RW, why{k, last, v})
			}
		}
	}
}

// registerKey infers the dependencies on register key k. The version
// order is partial: unset precedes every write, and a transaction that
// read v and then wrote k wrote the version right after v.
func (c *checker) registerKey(k string) {
	readers := map[int][]int{} // value -> external readers
	firstRead := map[int]int{} // txn -> value of its first external read
	for _, r := range c.reads[k] {
		if r.value != 0 {
			c.readValue(k, r.value, r.txn, true)
		}
		if !r.external {
			continue
		}
		readers[r.value] = append(readers[r.value], r.txn)
		if _, ok := firstRead[r.txn]; !ok {
			firstRead[r.txn] = r.value
		}
		if w, ok := c.writer(k, r.value); ok && r.value != 0 {
			c.g.add(w.txn, r.txn, WR, why{k, r.value, 0})
		}
	}
	for _, v := range slices.Sorted(maps.Keys(c.writes[k])) {
		w := c.writes[k][v]
		if !w.final || !c.inGraph[w.txn] {
			continue
		}
		for _, r := range readers[0] {
			c.g.add(r, w.txn, RW, why{k, 0, v}) // unset comes first
		}
		prev, ok := firstRead[w.txn]
		if !ok || prev == 0 {
			continue
		}
		if pw, ok := c.writer(k, prev); ok {
			c.g.add(pw.txn, w.txn, WW, why{k, prev, v})
		}
		for _, r := range readers[prev] {
			c.g.add(r, w.txn, RW, why{k, prev, v})
		}
	}
}

// realtime adds an edge from each transaction in the graph that completed
// to each that began after it, leaving out those implied by a chain: a
// frontier holds the completed transactions no completed one follows.
func (c *checker) realtime() {
	type event struct {
		at     time.Duration
		invoke bool
		txn    int
	}
	var evs []event
	for i, t := range c.h {
		if !c.inGraph[i] {
			continue
		}
		evs = append(evs, event{t.Invoke, true, i})
		if t.Outcome == OK {
			evs = append(evs, event{t.Complete, false, i})
		}
	}
	// At equal times the invoke goes first: no edge between them.
	slices.SortStableFunc(evs, func(a, b event) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		if a.invoke != b.invoke {
			if a.invoke {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.txn, b.txn)
	})
	frontier := map[int]bool{}
	before := map[int][]int{} // txn -> the frontier when it began
	for _, e := range evs {
		if e.invoke {
			for f := range frontier {
				c.g.add(f, e.txn, RT, why{})
				before[e.txn] = append(before[e.txn], f)
			}
			continue
		}
		for _, f := range before[e.txn] {
			delete(frontier, f)
		}
		frontier[e.txn] = true
	}
}

// cycles reports the smallest cycle of each kind in each strongly
// connected component. Real-time cycles are looked for in a component
// with no cycle of dependencies alone: a serializability violation is the
// headline there.
func (c *checker) cycles() {
	g := c.g
	g.seal()
	for _, comp := range g.sccs() {
		var found bool
		add := func(kind string, cyc []step) {
			if cyc != nil {
				found = true
				c.res.Anomalies = append(c.res.Anomalies, c.explain(kind, cyc))
			}
		}
		add("G0", g.shortestCycle(comp, WW, WW))
		add("G1c", g.shortestCycle(comp, WR, WW|WR))
		single := g.shortestCycle(comp, RW, WW|WR)
		add("G-single", single)
		if single == nil {
			add("G2-item", g.shortestCycle(comp, RW, WW|WR|RW))
		}
		if !found {
			if cyc := g.shortestCycle(comp, RT, WW|WR|RW|RT); cyc != nil {
				c.res.Anomalies = append(c.res.Anomalies, c.explain(cycleKind(cyc)+"-realtime", cyc))
			}
		}
	}
}

// cycleKind names a cycle by its dependencies.
func cycleKind(cyc []step) string {
	var rw, wr int
	for _, s := range cyc {
		switch s.kind {
		case RW:
			rw++
		case WR:
			wr++
		}
	}
	switch {
	case rw == 1:
		return "G-single"
	case rw > 1:
		return "G2-item"
	case wr > 0:
		return "G1c"
	}
	return "G0"
}

// explain writes a cycle out step by step.
func (c *checker) explain(kind string, cyc []step) Anomaly {
	txns := make([]int, len(cyc))
	names := make([]string, len(cyc)+1)
	for i, s := range cyc {
		txns[i] = s.from
		names[i] = fmt.Sprintf("T%d", s.from)
	}
	names[len(cyc)] = names[0]
	var b strings.Builder
	fmt.Fprintf(&b, "%s: a cycle of %d transactions, %s:", kind, len(cyc), strings.Join(names, " → "))
	for _, s := range cyc {
		b.WriteString("\n  " + c.stepText(s))
	}
	fmt.Fprintf(&b, "\n  so T%d must come before itself: no serial order", cyc[0].from)
	if strings.HasSuffix(kind, "-realtime") {
		b.WriteString(" consistent with real time")
	}
	b.WriteString(" explains what the clients saw")
	b.WriteString(c.legend(txns))
	return Anomaly{Kind: kind, Txns: txns, Explanation: b.String(), cycle: true}
}

func (c *checker) stepText(s step) string {
	w := c.g.out[s.from][s.to].whys[kindIndex(s.kind)]
	a, b := fmt.Sprintf("T%d", s.from), fmt.Sprintf("T%d", s.to)
	list := c.w == ListAppend
	switch {
	case s.kind == RT:
		return fmt.Sprintf("%s completed at %v, before %s began at %v (realtime)", a, c.h[s.from].Complete.Round(time.Microsecond), b, c.h[s.to].Invoke.Round(time.Microsecond))
	case s.kind == WW && list:
		return fmt.Sprintf("%s appended %d to %s, then %s appended %d after it (ww)", a, w.from, w.key, b, w.to)
	case s.kind == WW:
		return fmt.Sprintf("%s wrote %s = %d, then %s overwrote it with %d (ww)", a, w.key, w.from, b, w.to)
	case s.kind == WR && list:
		return fmt.Sprintf("%s appended %d to %s, and %s read it (wr)", a, w.from, w.key, b)
	case s.kind == WR:
		return fmt.Sprintf("%s wrote %s = %d, and %s read it (wr)", a, w.key, w.from, b)
	case list:
		seen := "empty"
		if w.from != 0 {
			seen = fmt.Sprintf("up to %d", w.from)
		}
		return fmt.Sprintf("%s read %s %s, and %s appended %d after that (rw)", a, w.key, seen, b, w.to)
	}
	seen := "unset"
	if w.from != 0 {
		seen = fmt.Sprintf("= %d", w.from)
	}
	return fmt.Sprintf("%s read %s %s, and %s overwrote that with %d (rw)", a, w.key, seen, b, w.to)
}
