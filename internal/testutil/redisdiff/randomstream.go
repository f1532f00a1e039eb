package redisdiff

import "math/rand/v2"

// The pools of stream sequences: two streams and a string (WRONGTYPE both
// ways), IDs of a few small milliseconds so that explicit IDs meet each
// other, and thresholds around the streams' lengths. Replies that may
// hold IDs XADD * drew are compared by IDs.
var (
	streamKeys = []string{"x0", "x1", "k0"}
	streamIDs  = []string{"1", "1-1", "2-0", "2-5", "3", "3-1", "5-0", "7-2", "0-1", "1-*", "3-*", "8-*", "x", "18446744073709551615-18446744073709551615"}
	bounds2    = []string{"-", "+", "0", "1", "2-0", "(2-0", "3", "(3", "5-0", "(7-2", "9", "(", "x"}
	xfields    = []string{"a", "b", "", "f"}
	xthreshold = []string{"0", "1", "2", "3", "5", "-1", "x"}
	xminids    = []string{"0", "2", "3-1", "5", "9-0", "-", "x"}
)

// streamGens are the stream commands random sequences draw.
var streamGens = []gen{
	{6, func(r *rand.Rand) []string {
		return append(append([]string{"XADD", xkey(r)}, xaddOptions(r, pick(r, streamIDs))...), xfieldValues(r)...)
	}, IDs},
	{2, func(r *rand.Rand) []string {
		return append(append([]string{"XADD", xkey(r)}, xaddOptions(r, "*")...), xfieldValues(r)...)
	}, IDs},
	{3, func(r *rand.Rand) []string { return []string{"XLEN", xkey(r)} }, Equal},
	{5, func(r *rand.Rand) []string {
		return withCount(r, []string{pickOf(r, "XRANGE", "XREVRANGE"), xkey(r), pick(r, bounds2), pick(r, bounds2)})
	}, IDs},
	{2, func(r *rand.Rand) []string { return []string{"XRANGE", xkey(r), "-", "+"} }, IDs},
	{2, func(r *rand.Rand) []string { return []string{"XDEL", xkey(r), pick(r, streamIDs), pick(r, streamIDs)} }, Equal},
	{2, func(r *rand.Rand) []string { return append([]string{"XTRIM", xkey(r)}, trimOptions(r)...) }, Equal},
	{3, func(r *rand.Rand) []string {
		args := withCount(r, []string{"XREAD"})
		if r.IntN(5) == 0 {
			args = append(args, "BLOCK", "1")
		}
		args = append(args, "STREAMS", xkey(r))
		if r.IntN(3) == 0 {
			return append(args, xkey(r), pickOf(r, "0", "$", "2-0"), pickOf(r, "0", "$", "3"))
		}
		return append(args, pickOf(r, "0", "$", "2-0", "3", "x"))
	}, IDs},
	{1, func(r *rand.Rand) []string { return []string{"XINFO", "STREAM", xkey(r)} }, IDs},
	// With consumer groups FULL answers delivery and seen times.
	{1, func(r *rand.Rand) []string { return []string{"XINFO", "STREAM", xkey(r), "FULL"} }, Times},
	{1, func(r *rand.Rand) []string {
		args := []string{"XSETID", xkey(r), pick(r, streamIDs)}
		if r.IntN(3) == 0 {
			args = append(args, "ENTRIESADDED", pick(r, xthreshold))
		}
		if r.IntN(3) == 0 {
			args = append(args, "MAXDELETEDID", pick(r, xminids))
		}
		return args
	}, Equal},
	{1, func(r *rand.Rand) []string { return []string{"TYPE", xkey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"DEL", xkey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"SET", "k0", pick(r, values)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{pickOf(r, "RENAME", "COPY"), xkey(r), xkey(r)} }, Equal},
	// Consumer groups: two groups, three consumers; idle times compared
	// by shape.
	{2, func(r *rand.Rand) []string {
		args := []string{"XGROUP", "CREATE", xkey(r), pick(r, xgroups), pickOf(r, "0", "$", "2-0", "x")}
		if r.IntN(3) == 0 {
			args = append(args, "MKSTREAM")
		}
		if r.IntN(4) == 0 {
			args = append(args, "ENTRIESREAD", pick(r, xthreshold))
		}
		return args
	}, IDs},
	{1, func(r *rand.Rand) []string {
		return []string{"XGROUP", "SETID", xkey(r), pick(r, xgroups), pickOf(r, "0", "$", "2-0", "-", "x")}
	}, Equal},
	{1, func(r *rand.Rand) []string { return []string{"XGROUP", "DESTROY", xkey(r), pick(r, xgroups)} }, Equal},
	{1, func(r *rand.Rand) []string {
		return []string{"XGROUP", pickOf(r, "CREATECONSUMER", "DELCONSUMER"), xkey(r), pick(r, xgroups), pick(r, xconsumers)}
	}, Equal},
	{5, func(r *rand.Rand) []string {
		args := withCount(r, []string{"XREADGROUP", "GROUP", pick(r, xgroups), pick(r, xconsumers)})
		if r.IntN(5) == 0 {
			args = append(args, "NOACK")
		}
		return append(args, "STREAMS", xkey(r), pickOf(r, ">", ">", "0", "2-0", "$"))
	}, IDs},
	{2, func(r *rand.Rand) []string {
		return []string{"XACK", xkey(r), pick(r, xgroups), pick(r, streamIDs), pick(r, streamIDs)}
	}, Equal},
	{2, func(r *rand.Rand) []string { return []string{"XPENDING", xkey(r), pick(r, xgroups)} }, IDs},
	{2, func(r *rand.Rand) []string {
		args := []string{"XPENDING", xkey(r), pick(r, xgroups), pick(r, bounds2), pick(r, bounds2), pickOf(r, "10", "1", "0", "x")}
		if r.IntN(3) == 0 {
			args = append(args, pick(r, xconsumers))
		}
		return args
	}, Shape},
	{1, func(r *rand.Rand) []string { return []string{"XINFO", "GROUPS", xkey(r)} }, IDs},
	{1, func(r *rand.Rand) []string { return []string{"XINFO", "CONSUMERS", xkey(r), pick(r, xgroups)} }, Shape},
	{2, func(r *rand.Rand) []string {
		args := []string{"XCLAIM", xkey(r), pick(r, xgroups), pick(r, xconsumers), pickOf(r, "0", "1000000"), pick(r, streamIDs)}
		if r.IntN(3) == 0 {
			args = append(args, pick(r, streamIDs))
		}
		if r.IntN(3) == 0 {
			args = append(args, "FORCE")
		}
		return append(args, "JUSTID")
	}, IDs},
	{2, func(r *rand.Rand) []string {
		args := []string{"XAUTOCLAIM", xkey(r), pick(r, xgroups), pick(r, xconsumers), pickOf(r, "0", "1000000"), pick(r, bounds2)}
		if r.IntN(2) == 0 {
			args = append(args, "COUNT", pickOf(r, "1", "2", "0"))
		}
		return append(args, "JUSTID")
	}, IDs},
}

var (
	xgroups    = []string{"g0", "g1"}
	xconsumers = []string{"c0", "c1", "c2"}
)

func xkey(r *rand.Rand) string { return pick(r, streamKeys) }

// xaddOptions draws XADD's options, sometimes conflicting, then id.
func xaddOptions(r *rand.Rand, id string) []string {
	var out []string
	if r.IntN(6) == 0 {
		out = append(out, "NOMKSTREAM")
	}
	if r.IntN(3) == 0 {
		out = append(out, trimOptions(r)...)
	}
	return append(out, id)
}

// trimOptions draws MAXLEN or MINID with = or ~ and LIMIT.
func trimOptions(r *rand.Rand) []string {
	var out []string
	if r.IntN(2) == 0 {
		out = []string{"MAXLEN"}
	} else {
		out = []string{"MINID"}
	}
	if op := r.IntN(3); op > 0 {
		out = append(out, []string{"=", "~"}[op-1])
	}
	if out[0] == "MAXLEN" {
		out = append(out, pick(r, xthreshold))
	} else {
		out = append(out, pick(r, xminids))
	}
	if r.IntN(6) == 0 {
		out = append(out, "LIMIT", pick(r, []string{"0", "1", "100", "-1"}))
	}
	return out
}

func xfieldValues(r *rand.Rand) []string {
	var out []string
	for range 1 + r.IntN(2) {
		out = append(out, pick(r, xfields), pick(r, values))
	}
	return out
}

func withCount(r *rand.Rand, args []string) []string {
	if r.IntN(3) == 0 {
		return append(args, "COUNT", pick(r, []string{"0", "1", "2", "-1", "x"}))
	}
	return args
}
