package redisdiff

import (
	"math/rand/v2"
	"strings"
)

// Pools of the sorted-set commands: zkeys holds two sorted sets and a
// string key the string commands write too (WRONGTYPE both ways); "zl"
// only ever gets score 0, the lex commands' premise, which the others
// break.
var (
	zkeys    = []string{"z", "z2", "k0"}
	members  = []string{"a", "b", "c", "d", "e", "f", "g"}
	scores   = []string{"0", "1", "2", "-1", "1.5", "3", "10", "-0.5", "inf", "-inf", "1e3", "x"}
	bounds   = []string{"-inf", "+inf", "0", "1", "(1", "2", "(2", "-1", "3", "(10", "x"}
	lexBound = []string{"-", "+", "[a", "(a", "[c", "(c", "[e", "(g", "x"}
	ranks    = []string{"0", "1", "2", "-1", "-2", "5", "-10", "x"}
)

// zsetGens are the sorted-set commands random sequences draw.
var zsetGens = []gen{
	{4, func(r *rand.Rand) []string {
		args := append([]string{"ZADD", zkey(r)}, zaddFlags(r)...)
		for range 1 + r.IntN(3) {
			args = append(args, pick(r, scores), pick(r, members))
		}
		return args
	}, Equal},
	{2, func(r *rand.Rand) []string { return []string{"ZINCRBY", zkey(r), pick(r, scores), pick(r, members)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"ZREM", zkey(r), pick(r, members), pick(r, members)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"ZSCORE", zkey(r), pick(r, members)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"ZMSCORE", zkey(r), pick(r, members), pick(r, members)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"ZCARD", zkey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"ZCOUNT", zkey(r), pick(r, bounds), pick(r, bounds)} }, Equal},
	{2, func(r *rand.Rand) []string {
		return []string{pickOf(r, "ZRANK", "ZREVRANK"), zkey(r), pick(r, members)}
	}, Equal},
	{3, func(r *rand.Rand) []string {
		args := []string{"ZRANGE", zkey(r), pick(r, ranks), pick(r, ranks)}
		if r.IntN(2) == 0 {
			args = append(args, "REV")
		}
		return withScores(r, args)
	}, Equal},
	{3, func(r *rand.Rand) []string {
		cmd := pickOf(r, "ZRANGEBYSCORE", "ZREVRANGEBYSCORE")
		return withLimit(r, withScores(r, []string{cmd, zkey(r), pick(r, bounds), pick(r, bounds)}))
	}, Equal},
	{2, func(r *rand.Rand) []string {
		args := []string{"ZRANGE", zkey(r), pick(r, bounds), pick(r, bounds), "BYSCORE"}
		if r.IntN(2) == 0 {
			args = append(args, "REV")
		}
		return withLimit(r, withScores(r, args))
	}, Equal},
	{1, func(r *rand.Rand) []string {
		return []string{pickOf(r, "ZPOPMIN", "ZPOPMAX"), zkey(r), pick(r, []string{"1", "2", "0", "-1"})}
	}, Equal},
	{1, func(r *rand.Rand) []string { return []string{pickOf(r, "ZPOPMIN", "ZPOPMAX"), zkey(r)} }, Equal},
	{1, func(r *rand.Rand) []string {
		return []string{"ZREMRANGEBYSCORE", zkey(r), pick(r, bounds), pick(r, bounds)}
	}, Equal},
	{1, func(r *rand.Rand) []string {
		return []string{"ZREMRANGEBYRANK", zkey(r), pick(r, ranks), pick(r, ranks)}
	}, Equal},
	{2, func(r *rand.Rand) []string {
		return []string{"ZADD", "zl", "0", pick(r, members), "0", pick(r, members)}
	}, Equal},
	{1, func(r *rand.Rand) []string { return []string{"ZREM", "zl", pick(r, members)} }, Equal},
	{2, func(r *rand.Rand) []string {
		cmd := pickOf(r, "ZUNION", "ZINTER", "ZDIFF")
		return withScores(r, zalgebraOptions(r, cmd, []string{cmd, "2", zkey(r), zkey(r)}))
	}, Equal},
	{2, func(r *rand.Rand) []string {
		cmd := pickOf(r, "ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE")
		return zalgebraOptions(r, cmd, []string{cmd, zkey(r), "2", zkey(r), zkey(r)})
	}, Equal},
	{1, func(r *rand.Rand) []string {
		args := []string{"ZRANGESTORE", zkey(r), zkey(r), pick(r, ranks), pick(r, ranks)}
		if r.IntN(2) == 0 {
			args = []string{"ZRANGESTORE", zkey(r), zkey(r), pick(r, bounds), pick(r, bounds), "BYSCORE"}
		}
		if r.IntN(2) == 0 {
			args = append(args, "REV")
		}
		return args
	}, Equal},
	{1, func(r *rand.Rand) []string { return withScores(r, []string{"ZRANDMEMBER", zkey(r), "100"}) }, Unordered},
	{1, func(r *rand.Rand) []string {
		args := []string{"ZINTERCARD", "2", zkey(r), zkey(r)}
		if r.IntN(2) == 0 {
			args = append(args, "LIMIT", pick(r, []string{"0", "1", "-1"}))
		}
		return args
	}, Equal},
	{3, func(r *rand.Rand) []string {
		// "zl" has one score, as BYLEX wants; the other sets have several,
		// where a small set's answer is its walk in score order.
		cmd := pickOf(r, "ZRANGEBYLEX", "ZREVRANGEBYLEX", "ZLEXCOUNT", "ZREMRANGEBYLEX")
		args := []string{cmd, pickOf(r, "zl", "zl", "z", "z2"), pick(r, lexBound), pick(r, lexBound)}
		if strings.HasSuffix(cmd, "BYLEX") && !strings.HasPrefix(cmd, "ZREM") {
			args = withLimit(r, args)
		}
		return args
	}, Equal},
}

func zkey(r *rand.Rand) string                   { return pick(r, zkeys) }
func pickOf(r *rand.Rand, from ...string) string { return pick(r, from) }

// zaddFlags draws ZADD's options, sometimes conflicting ones.
func zaddFlags(r *rand.Rand) []string {
	var out []string
	for _, f := range []string{"NX", "XX", "GT", "LT", "CH", "INCR"} {
		if r.IntN(6) == 0 {
			out = append(out, f)
		}
	}
	return out
}

func withScores(r *rand.Rand, args []string) []string {
	if r.IntN(2) == 0 {
		return append(args, "WITHSCORES")
	}
	return args
}

// zalgebraOptions draws WEIGHTS and AGGREGATE for ZUNION and ZINTER
// (ZDIFF takes neither: a syntax error at times), a weight count wrong
// now and then.
func zalgebraOptions(r *rand.Rand, cmd string, args []string) []string {
	if strings.HasPrefix(cmd, "ZDIFF") && r.IntN(8) != 0 {
		return args
	}
	if r.IntN(3) == 0 {
		args = append(args, "WEIGHTS", pick(r, scores))
		if r.IntN(6) != 0 {
			args = append(args, pick(r, scores))
		}
	}
	if r.IntN(3) == 0 {
		args = append(args, "AGGREGATE", pick(r, []string{"SUM", "MIN", "MAX", "avg"}))
	}
	return args
}

func withLimit(r *rand.Rand, args []string) []string {
	if r.IntN(3) == 0 {
		return append(args, "LIMIT", pick(r, []string{"0", "1", "-1"}), pick(r, []string{"1", "2", "-1", "0"}))
	}
	return args
}
