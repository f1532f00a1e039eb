package redisdiff

import "math/rand/v2"

// The pools of "moves" sequences: commands that read a key of any type
// and write another (SORT ... STORE, RENAME, RENAMENX, COPY, ZMPOP), over
// keys that hold a list, a set, a sorted set, a hash and a string by
// turns, and BY / GET patterns' keys. A sorted set's members are numbers,
// so that SORT orders them; "x" among the elements makes SORT's numeric
// error.
var (
	moveKeys  = []string{"l0", "l1", "s0", "z0", "z1", "h", "k0", "d0", "d1"}
	sortElems = []string{"1", "2", "3", "10", "-1", "2.5", "1e2", "07", "x"}
	weights   = []string{"1", "2", "5", "-3", "0.5", "x"}
	patterns  = []string{"w_*", "hw_*->f", "none_*", "#"}
)

// moveGens are the "moves" kind's commands: writes that give each key a
// type (RPUSH, SADD, ZADD, HSET, SET), the weights BY and GET read, the
// moves, and reads of every type to see what they left.
var moveGens = []gen{
	{3, func(r *rand.Rand) []string { return append([]string{"RPUSH", mkey(r)}, some(r, sortElems)...) }, Equal},
	{2, func(r *rand.Rand) []string { return append([]string{"SADD", mkey(r)}, some(r, sortElems)...) }, Equal},
	{2, func(r *rand.Rand) []string {
		return []string{"ZADD", mkey(r), pick(r, weights[:5]), pick(r, sortElems), pick(r, weights[:5]), pick(r, sortElems)}
	}, Equal},
	{1, func(r *rand.Rand) []string { return []string{"HSET", mkey(r), "f", pick(r, sortElems)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"SET", mkey(r), pick(r, sortElems)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"SET", "w_" + pick(r, sortElems), pick(r, weights)} }, Equal},
	{1, func(r *rand.Rand) []string {
		return []string{"HSET", "hw_" + pick(r, sortElems), "f", pick(r, weights)}
	}, Equal},
	{1, func(r *rand.Rand) []string { return []string{"EXPIRE", mkey(r), "1000"} }, Equal},
	{5, sortArgs, Equal},
	{2, func(r *rand.Rand) []string { return []string{pickOf(r, "RENAME", "RENAMENX"), mkey(r), mkey(r)} }, Equal},
	{2, func(r *rand.Rand) []string {
		args := []string{"COPY", mkey(r), mkey(r)}
		if r.IntN(2) == 0 {
			args = append(args, "REPLACE")
		}
		return args
	}, Equal},
	{2, func(r *rand.Rand) []string {
		args := []string{"ZMPOP", "2", mkey(r), mkey(r), pickOf(r, "MIN", "MAX", "max")}
		if r.IntN(2) == 0 {
			args = append(args, "COUNT", pick(r, []string{"1", "2", "10", "0"}))
		}
		return args
	}, Equal},
	{1, func(r *rand.Rand) []string { return []string{"TYPE", mkey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"TTL", mkey(r)} }, AnyPositive},
	{2, func(r *rand.Rand) []string { return []string{"LRANGE", mkey(r), "0", "-1"} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"SMEMBERS", mkey(r)} }, Unordered},
	{2, func(r *rand.Rand) []string { return []string{"ZRANGE", mkey(r), "0", "-1", "WITHSCORES"} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"HGET", mkey(r), "f"} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"GET", mkey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"DEL", mkey(r)} }, Equal},
}

func mkey(r *rand.Rand) string { return pick(r, moveKeys) }

// sortArgs draws a SORT or SORT_RO: BY (a pattern with "*": without one
// a set keeps its own order, hash order in Redis), LIMIT, GETs, ASC or
// DESC, ALPHA, and STORE. ALPHA does not go with BY: elements whose BY
// values are equal then come in an order Redis leaves undefined.
func sortArgs(r *rand.Rand) []string {
	cmd := pickOf(r, "SORT", "SORT", "SORT_RO")
	args := []string{cmd, mkey(r)}
	alpha := r.IntN(3) == 0
	if !alpha && r.IntN(2) == 0 {
		args = append(args, "BY", pick(r, patterns[:3]))
	}
	if r.IntN(3) == 0 {
		args = append(args, "LIMIT", pick(r, []string{"0", "1", "-1"}), pick(r, []string{"1", "2", "-1", "0"}))
	}
	for range r.IntN(3) {
		args = append(args, "GET", pick(r, patterns))
	}
	if r.IntN(2) == 0 {
		args = append(args, pickOf(r, "ASC", "DESC"))
	}
	if alpha {
		args = append(args, "ALPHA")
	}
	if cmd == "SORT" && r.IntN(3) == 0 {
		args = append(args, "STORE", mkey(r))
	}
	return args
}
