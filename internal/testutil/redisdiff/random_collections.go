package redisdiff

import "math/rand/v2"

// The pools of list and set sequences: two keys of the type, a string
// among them (WRONGTYPE both ways), small elements that repeat.
var (
	listKeys = []string{"l0", "l1", "k0"}
	setKeys  = []string{"s0", "s1", "s2", "k0"}
	elems    = []string{"a", "b", "c", "1", "2", "10", "", "x y", "\x00"}
	indexes  = []string{"0", "1", "2", "-1", "-2", "-5", "5", "100", "x"}
	counts   = []string{"0", "1", "2", "5", "-1", "x"}
	sides    = []string{"LEFT", "RIGHT", "left", "UP"}
)

// listGens are the list commands random sequences draw.
var listGens = []gen{
	{5, func(r *rand.Rand) []string { return append([]string{"LPUSH", lkey(r)}, some(r, elems)...) }, Equal},
	{5, func(r *rand.Rand) []string { return append([]string{"RPUSH", lkey(r)}, some(r, elems)...) }, Equal},
	{1, func(r *rand.Rand) []string { return append([]string{"LPUSHX", lkey(r)}, some(r, elems)...) }, Equal},
	{1, func(r *rand.Rand) []string { return append([]string{"RPUSHX", lkey(r)}, some(r, elems)...) }, Equal},
	{3, func(r *rand.Rand) []string { return []string{"LPOP", lkey(r)} }, Equal},
	{3, func(r *rand.Rand) []string { return []string{"RPOP", lkey(r), pick(r, counts)} }, Equal},
	{3, func(r *rand.Rand) []string { return []string{"LLEN", lkey(r)} }, Equal},
	{5, func(r *rand.Rand) []string { return []string{"LRANGE", lkey(r), pick(r, indexes), pick(r, indexes)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"LINDEX", lkey(r), pick(r, indexes)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"LSET", lkey(r), pick(r, indexes), pick(r, elems)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"LTRIM", lkey(r), pick(r, indexes), pick(r, indexes)} }, Equal},
	{2, func(r *rand.Rand) []string {
		return []string{"LMOVE", lkey(r), lkey(r), pick(r, sides), pick(r, sides)}
	}, Equal},
	{1, func(r *rand.Rand) []string { return []string{"RPOPLPUSH", lkey(r), lkey(r)} }, Equal},
	{2, func(r *rand.Rand) []string {
		return append([]string{"LPOS", lkey(r), pick(r, elems)}, lposOptions(r)...)
	}, Equal},
	{2, func(r *rand.Rand) []string { return []string{"LREM", lkey(r), pick(r, indexes), pick(r, elems)} }, Equal},
	{2, func(r *rand.Rand) []string {
		return []string{"LINSERT", lkey(r), pick(r, []string{"BEFORE", "AFTER", "after", "X"}), pick(r, elems), pick(r, elems)}
	}, Equal},
	{1, func(r *rand.Rand) []string { return []string{"SET", "k0", pick(r, values)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"DEL", lkey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"TYPE", lkey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"GET", lkey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"EXISTS", lkey(r), lkey(r)} }, Equal},
}

// setGens are the set commands random sequences draw. SPOP and
// SRANDMEMBER draw counts larger than any set, which take every member.
var setGens = []gen{
	{6, func(r *rand.Rand) []string { return append([]string{"SADD", skey(r)}, some(r, elems)...) }, Equal},
	{4, func(r *rand.Rand) []string { return append([]string{"SREM", skey(r)}, some(r, elems)...) }, Equal},
	{3, func(r *rand.Rand) []string { return []string{"SCARD", skey(r)} }, Equal},
	{3, func(r *rand.Rand) []string { return []string{"SISMEMBER", skey(r), pick(r, elems)} }, Equal},
	{2, func(r *rand.Rand) []string { return append([]string{"SMISMEMBER", skey(r)}, some(r, elems)...) }, Equal},
	{4, func(r *rand.Rand) []string { return []string{"SMEMBERS", skey(r)} }, Unordered},
	{2, func(r *rand.Rand) []string { return []string{"SINTER", skey(r), skey(r)} }, Unordered},
	{2, func(r *rand.Rand) []string { return []string{"SUNION", skey(r), skey(r), skey(r)} }, Unordered},
	{2, func(r *rand.Rand) []string { return []string{"SDIFF", skey(r), skey(r)} }, Unordered},
	{1, func(r *rand.Rand) []string { return []string{"SINTERSTORE", skey(r), skey(r), skey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"SUNIONSTORE", skey(r), skey(r), skey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"SDIFFSTORE", skey(r), skey(r), skey(r)} }, Equal},
	{2, func(r *rand.Rand) []string { return []string{"SMOVE", skey(r), skey(r), pick(r, elems)} }, Equal},
	{1, func(r *rand.Rand) []string {
		return []string{"SINTERCARD", "2", skey(r), skey(r), "LIMIT", pick(r, []string{"0", "1", "2"})}
	}, Equal},
	{1, func(r *rand.Rand) []string { return []string{"SPOP", skey(r), "100"} }, Unordered},
	{1, func(r *rand.Rand) []string { return []string{"SRANDMEMBER", skey(r), "100"} }, Unordered},
	{1, func(r *rand.Rand) []string { return []string{"SET", "k0", pick(r, values)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"DEL", skey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"TYPE", skey(r)} }, Equal},
	{1, func(r *rand.Rand) []string { return []string{"GET", skey(r)} }, Equal},
}

// countNeeded are the commands whose count a sequence never cuts: without
// it they draw at random, and the two servers' sets would differ after.
var countNeeded = map[string]bool{"SPOP": true, "SRANDMEMBER": true, "ZRANDMEMBER": true}

// lposOptions draws LPOS's options, at times a bad one.
func lposOptions(r *rand.Rand) []string {
	var out []string
	for range r.IntN(3) {
		out = append(out, pick(r, []string{"RANK", "COUNT", "MAXLEN"}), pick(r, indexes))
	}
	return out
}

func lkey(r *rand.Rand) string { return pick(r, listKeys) }
func skey(r *rand.Rand) string { return pick(r, setKeys) }

// some draws one to three elements.
func some(r *rand.Rand, from []string) []string {
	out := make([]string, 1+r.IntN(3))
	for i := range out {
		out[i] = pick(r, from)
	}
	return out
}
