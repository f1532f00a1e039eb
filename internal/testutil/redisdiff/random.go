package redisdiff

import (
	"fmt"
	"math/rand/v2"
)

// The pools random sequences draw from: a few keys (so that commands
// meet each other's keys), a hash among them (WRONGTYPE), and values and
// arguments at the edges of what the commands parse.
var (
	keys   = []string{"k0", "k1", "k2", "k3", "h"}
	values = []string{"", "0", "1", "-1", "42", "-17", "007", "3.5", "-0.25", "1e3", "abc", "hello world",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808", " 1", "1 ", "inf", "\x00b\xff"}
	ints    = []string{"0", "1", "-1", "7", "-100", "9223372036854775807", "-9223372036854775808", "x", "1.5", ""}
	floats  = []string{"0.1", "-0.1", "1", "2.5e2", "-3", "1e308", "1e-5", "0.3333333333333333333333", "x", "", "inf"}
	offsets = []string{"0", "1", "2", "5", "12", "-1", "-3", "-20", "x"}
)

// gen draws one command's arguments.
type gen struct {
	weight int
	args   func(r *rand.Rand) []string
	// compare is how its replies must agree (TTLs: AnyPositive).
	compare Compare
}

// kinds are the pools of drawn sequences by data type: each sequence
// draws from one.
var kinds = map[string][]gen{"strings": gens, "lists": listGens, "sets": setGens, "moves": moveGens, "streams": streamGens}

// gens are the commands random sequences draw, all string and keyspace
// commands TideKV serves.
var gens = []gen{
	{6, func(r *rand.Rand) []string { return []string{"SET", key(r), pick(r, values)} }, Equal},
	{4, func(r *rand.Rand) []string { return append([]string{"SET", key(r), pick(r, values)}, setOptions(r)...) }, Equal},
	{6, func(r *rand.Rand) []string { return []string{"GET", key(r)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"DEL", key(r), key(r)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"EXISTS", key(r), key(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"TYPE", key(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"DBSIZE"} }, Equal},
	{3, func(r *rand.Rand) []string { return []string{"INCR", key(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"DECR", key(r)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"INCRBY", key(r), pick(r, ints)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"DECRBY", key(r), pick(r, ints)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"INCRBYFLOAT", key(r), pick(r, floats)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"MSET", key(r), pick(r, values), key(r), pick(r, values)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"MGET", key(r), key(r), key(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"SETNX", key(r), pick(r, values)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"GETSET", key(r), pick(r, values)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"HSET", "h", "f", pick(r, values)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"APPEND", key(r), pick(r, values)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"STRLEN", key(r)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"GETRANGE", key(r), pick(r, offsets), pick(r, offsets)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"SETRANGE", key(r), pick(r, offsets), pick(r, values)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"EXPIRE", key(r), "1000"} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"GETDEL", key(r)} }, Equal},
	{1, func(r *rand.Rand) []string {
		return []string{"SETEX", key(r), pick(r, []string{"1000", "0", "x"}), pick(r, values)}
	}, Equal},
	{1, func(r *rand.Rand) []string {
		return []string{"PSETEX", key(r), pick(r, []string{"1000000", "-5"}), pick(r, values)}
	}, Equal},
	{2, func(r *rand.Rand) []string {
		return []string{"MSETNX", key(r), pick(r, values), key(r), pick(r, values)}
	}, Equal},
	{2, func(r *rand.Rand) []string {
		opts := [][]string{{}, {"EX", "1000"}, {"PX", "1000000"}, {"PERSIST"}, {"EX", "0"}, {"KEEPTTL"}}
		return append([]string{"GETEX", key(r)}, opts[r.IntN(len(opts))]...)
	}, Equal},
	{1, func(r *rand.Rand) []string { return []string{"PERSIST", key(r)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"TTL", key(r)} }, AnyPositive},
	{2, func(r *rand.Rand) []string { return []string{"HINCRBY", key(r), pick(r, fields), pick(r, ints)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"HINCRBYFLOAT", key(r), pick(r, fields), pick(r, floats)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"HSETNX", key(r), pick(r, fields), pick(r, values)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"HSTRLEN", key(r), pick(r, fields)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"HDEL", key(r), pick(r, fields)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"HGETALL", key(r)} }, Equal},
}

func init() { gens = append(gens, zsetGens...) }

// fields are the hash fields drawn.
var fields = []string{"f", "g", "n"}

func key(r *rand.Rand) string                 { return pick(r, keys) }
func pick(r *rand.Rand, from []string) string { return from[r.IntN(len(from))] }

// setOptions draws SET's options, sometimes a conflicting pair.
func setOptions(r *rand.Rand) []string {
	opts := [][]string{{"NX"}, {"XX"}, {"GET"}, {"KEEPTTL"}, {"EX", "1000"}, {"PX", "1000000"}, {"EX", "0"}}
	var out []string
	for range 1 + r.IntN(2) {
		out = append(out, opts[r.IntN(len(opts))]...)
	}
	return out
}

// Random draws a sequence of n commands of the given kind (kinds) from
// seed; one in 30 has an argument too many or too few (arity and syntax
// errors).
func Random(kind string, seed uint64, n int) Script {
	gens := kinds[kind]
	r := rand.New(rand.NewPCG(seed, seed))
	total := 0
	for _, g := range gens {
		total += g.weight
	}
	s := Script{Name: fmt.Sprintf("%s-seed%d", kind, seed),
		Repro: fmt.Sprintf("TIDEKV_REDIFF_KIND=%s TIDEKV_REDIFF_SEED=%d TIDEKV_REDIFF_RUNS=1 TIDEKV_REDIFF_STEPS=%d", kind, seed, n)}
	for i := range n {
		w := r.IntN(total)
		g := gens[0]
		for _, g = range gens {
			if w -= g.weight; w < 0 {
				break
			}
		}
		args := g.args(r)
		if r.IntN(30) == 0 && !countNeeded[args[0]] {
			if len(args) > 1 && r.IntN(2) == 0 {
				args = args[:len(args)-1]
			} else {
				args = append(args, "x") // not a value: TideKV has no empty key
			}
		}
		s.Steps = append(s.Steps, Step{Line: i, Args: args, Compare: g.compare})
	}
	return s
}
