package resp

import "time"

// Pipelines: the connection's reader parses every whole command a client
// has sent (reader.go), and they are served here, in order. A run of
// consecutive plain GET, SET and one-key DEL commands is served together: its
// writes in one WriteEach (the node groups them into one proposal per
// range), its reads in one BatchGet, alternating in the order they came,
// so a read after a write to the same key sees it. Every other command runs alone, in its place.
// Inside MULTI every command but EXEC, DISCARD, MULTI, WATCH and QUIT is
// queued as it comes (multi.go), never grouped.
// Replies are written in order and each command gets its own, error or not.

// cmdClass says how a pipelined command may be grouped.
type cmdClass int

const (
	classAlone cmdClass = iota
	classRead
	classWrite
)

// prepared is one parsed command, ready to run.
type prepared struct {
	name  string
	args  [][]byte
	spec  cmdSpec
	class cmdClass
	// stat is the command's stat id (stats.go; -1: not counted).
	stat int
	// errMsg, when set, is the command's reply (unknown, arity, NOAUTH):
	// it was refused before it ran.
	errMsg string
	// argv holds args for a command of up to three: the reader reuses its
	// array of them, and this array is allocated with the command anyway.
	argv [3][]byte
	// served is the call serveOne makes for it, so that it is not an
	// allocation of its own.
	served call
}

// prepare takes a command's arguments and checks its name,
// authentication, permission and arity. The arguments themselves are the
// reader's, not copied: their bytes are never written again (reader.go),
// so they may outlive the read, as a queued MULTI's and the values the KV
// keeps do (TestArgumentsOutliveTheirRead); their slice is copied, into
// the command's own argv when it fits.
func (s *Server) prepare(st *connState, cmd [][]byte) *prepared {
	p := &prepared{}
	args := append(p.argv[:0], cmd...)
	args = args[:len(args):len(args)]
	name, ok := commandName(args[0])
	if !ok {
		return &prepared{stat: -1, errMsg: "ERR unknown command '" + trunc(args[0]) + "', with args beginning with: " + argsPreview(args[1:])}
	}
	spec := commands[name]
	stat := statOf(spec, args)
	if !st.authed && !spec.noAuth {
		return &prepared{stat: stat, errMsg: "NOAUTH Authentication required."}
	}
	if denied := st.denial(name); denied != "" {
		return &prepared{stat: stat, errMsg: denied}
	}
	if (spec.arity > 0 && len(args) != spec.arity) || (spec.arity < 0 && len(args) < -spec.arity) {
		return &prepared{stat: stat, errMsg: errArity(name)}
	}
	p.name, p.args, p.spec, p.stat = name, args, spec, stat
	switch {
	case name == "get":
		p.class = classRead
	case name == "set" && len(args) == 3, (name == "del" || name == "unlink") && len(args) == 2:
		// A DEL of several keys runs alone: it deletes them at once
		// (cmdDel), which a run's WriteEach would not.
		p.class = classWrite
	}
	return p
}

// commandName is the name of a known command given in any case, as the
// command table spells it, found without allocating.
func commandName(arg []byte) (string, bool) {
	var lower [24]byte
	if len(arg) > len(lower) {
		return "", false
	}
	for i, c := range arg {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	name, ok := commandNames[string(lower[:len(arg)])]
	return name, ok
}

// servePipeline serves the n commands the connection's reader parsed last
// in order, grouping runs of GET, SET and DEL.
func (s *Server) servePipeline(c replyConn, st *connState, n int) {
	for i := 0; i < n && !st.quit; {
		p := s.prepare(st, st.in.command(i))
		i++
		if st.multi != nil && !p.runsInMulti() {
			s.queue(c, st, p)
			continue
		}
		if p.class == classAlone {
			s.serveOne(c, st, p)
			continue
		}
		// None of GET, SET and DEL changes the connection's state, so the
		// commands after p may be checked before p runs; MULTI ends the
		// run (it runs alone), so no queued command joins one.
		run := []*prepared{p}
		for i < n {
			q := s.prepare(st, st.in.command(i))
			if q.class == classAlone {
				break
			}
			run = append(run, q)
			i++
		}
		for len(run) > 0 {
			n := 1
			for n < len(run) && run[n].class == run[0].class {
				n++
			}
			if n == 1 {
				s.serveOne(c, st, run[0])
			} else if run[0].class == classRead {
				s.serveReads(c, st, run[:n])
			} else {
				s.serveWrites(c, st, run[:n])
			}
			run = run[n:]
		}
	}
}

// serveOne runs one prepared command.
func (s *Server) serveOne(c replyConn, st *connState, p *prepared) {
	if p.errMsg != "" {
		s.refuse(c, p)
		return
	}
	x := &p.served
	*x = call{s: s, c: c, st: st, kv: st.kv, name: p.name, args: p.args}
	s.begin(x)
	defer x.cmd.end()
	mark := st.mark()
	start := time.Now()
	p.spec.fn(x)
	took := time.Since(start)
	o := st.outcomeSince(mark)
	s.stats.called(p.stat, took, o)
	if observe := s.observe.Load(); observe != nil {
		(*observe)(p.name, took, o != succeeded)
	}
}

// refuse answers a command refused before it ran (prepare's errMsg).
func (s *Server) refuse(c replyConn, p *prepared) {
	s.stats.refused(p.stat)
	c.WriteError(p.errMsg)
}

// serveReads runs GETs in batched reads of readBatch keys, each answered
// before the next is read: values are read no faster than the client takes
// them (output.go).
func (s *Server) serveReads(c replyConn, st *connState, run []*prepared) {
	start := time.Now()
	outcomes := make([]outcome, len(run))
	done := 0
	for done < len(run) && !st.quit {
		n := min(len(run)-done, s.readBatch())
		s.readAndReply(c, st, run[done:done+n], outcomes[done:])
		done += n
	}
	s.observeRun(run[:done], start, outcomes)
}

// readAndReply runs GETs in one batched read.
func (s *Server) readAndReply(c replyConn, st *connState, run []*prepared, outcomes []outcome) {
	keys := make([][]byte, len(run))
	for i, p := range run {
		keys[i] = encKey(p.args[1])
	}
	x := &call{s: s, c: c, st: st, kv: st.kv}
	s.begin(x)
	defer x.cmd.end()
	res, err := x.batchGet(keys)
	for i := range run {
		mark := st.mark()
		switch {
		case err != nil:
			replyErr(c, err)
		case !res[i].Found:
			c.WriteNull()
		case isMarker(res[i].Value):
			c.WriteError(errWrongType)
		default:
			c.WriteBulk(res[i].Value)
		}
		outcomes[i] = st.outcomeSince(mark)
	}
}

// serveWrites runs SETs and DELs through WriteEach, MaxBatchKeys ops at a
// time, and replies to each command from its own ops' results.
func (s *Server) serveWrites(c replyConn, st *connState, run []*prepared) {
	start := time.Now()
	var ops []Op
	first := make([]int, len(run)) // index of each command's first op
	for i, p := range run {
		first[i] = len(ops)
		switch {
		case p.name == "set" && isMarker(p.args[2]):
			// Refused below, without an op.
		case p.name == "set":
			ops = append(ops, Op{Key: encKey(p.args[1]), Value: p.args[2]})
		default:
			for _, k := range p.args[1:] {
				ops = append(ops, Op{Key: encKey(k), Delete: true})
			}
		}
	}
	results := s.writeEach(st, ops)
	outcomes := make([]outcome, len(run))
	// DEL's removal of hash fields gets a deadline of its own.
	x := &call{s: s, c: c, st: st, kv: st.kv}
	s.begin(x)
	defer x.cmd.end()
	for i, p := range run {
		end := len(ops)
		if i+1 < len(run) {
			end = first[i+1]
		}
		mark := st.mark()
		x.replyWrite(p, results[first[i]:end])
		outcomes[i] = st.outcomeSince(mark)
	}
	s.observeRun(run, start, outcomes)
}

// writeEach runs ops through kv.WriteEach, MaxBatchKeys at a time, each
// call with the deadline a command alone would have.
func (s *Server) writeEach(st *connState, ops []Op) []OpResult {
	results := make([]OpResult, 0, len(ops))
	for len(results) < len(ops) {
		chunk := ops[len(results):min(len(ops), len(results)+s.cfg.MaxBatchKeys)]
		ctx := new(cmdCtx)
		st.cmds.begin(ctx, s.cfg.RequestTimeout)
		results = append(results, st.kv.WriteEach(ctx, chunk)...)
		ctx.end()
	}
	return results
}

// replyWrite answers one SET or DEL from its ops' results.
func (x *call) replyWrite(p *prepared, rs []OpResult) {
	if p.name == "set" {
		switch {
		case len(rs) == 0:
			x.c.WriteError(errReserved)
		case rs[0].Err != nil:
			replyErr(x.c, rs[0].Err)
		default:
			x.c.WriteString("OK")
		}
		return
	}
	n := 0
	for i, r := range rs {
		if r.Err != nil {
			replyErr(x.c, r.Err)
			return
		}
		if !r.Existed {
			continue
		}
		n++
		// The key may have been a hash: remove its fields too, as DEL
		// does alone.
		if err := x.clearFields(p.args[1+i]); err != nil {
			replyErr(x.c, err)
			return
		}
	}
	x.c.WriteInt(n)
}

// observeRun counts a run's commands, each taking an equal share of its
// time, and tells the Observer of them.
func (s *Server) observeRun(run []*prepared, start time.Time, outcomes []outcome) {
	took := time.Since(start)
	share := took / time.Duration(max(len(run), 1))
	for i, p := range run {
		s.stats.called(p.stat, share, outcomes[i])
	}
	observe := s.observe.Load()
	if observe == nil {
		return
	}
	for i, p := range run {
		(*observe)(p.name, took, outcomes[i] != succeeded)
	}
}
