package resp

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// chiSquare is Pearson's statistic of counts against an equal share each
// of their total.
func chiSquare(counts map[string]int, k int) float64 {
	total := 0
	for _, c := range counts {
		total += c
	}
	exp := float64(total) / float64(k)
	x := 0.0
	for _, c := range counts {
		x += (float64(c) - exp) * (float64(c) - exp) / exp
	}
	// Members never drawn count too.
	x += float64(k-len(counts)) * exp
	return x
}

// ZRANDMEMBER and SRANDMEMBER draw uniformly, whatever the gaps between
// members' keys: one member, -count independent draws and count distinct
// ones each give every member its share. With 10 members (9 degrees of
// freedom) a uniform draw passes 27.88 once in a thousand; the seed is
// fixed, so the test is deterministic, and the draw from a random key
// (the former way) fails it by far for these members ("~" after a long
// gap).
func TestRandMemberUniform(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 1))
	s, _ := start(t, newFakeKV(), func(c *Config) { c.randN = r.IntN }, nil)
	members := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "~"}
	zadd, sadd := []string{"ZADD", "z"}, []string{"SADD", "s"}
	for i, m := range members {
		zadd, sadd = append(zadd, strconv.Itoa(i), m), append(sadd, m)
	}
	pipeline(t, s, zadd, sadd)
	const bound = 27.88
	check := func(what string, reps []string, distinct int) {
		t.Helper()
		counts := map[string]int{}
		for _, rep := range reps {
			got := strings.Fields(strings.Trim(rep, "*[]"))
			seen := map[string]bool{}
			for _, m := range got {
				if distinct > 0 && seen[m] {
					t.Fatalf("%s repeats a member: %s", what, rep)
				}
				seen[m] = true
				counts[strings.TrimPrefix(m, "$")]++
			}
			if distinct > 0 && len(got) != distinct {
				t.Fatalf("%s: %s", what, rep)
			}
		}
		if x := chiSquare(counts, len(members)); x > bound {
			t.Errorf("%s: chi-square %.1f > %.2f: %v", what, x, bound, counts)
		}
	}
	for _, cmd := range [][]string{{"ZRANDMEMBER", "z"}, {"SRANDMEMBER", "s"}} {
		var singles, threes [][]string
		for range 2000 {
			singles = append(singles, cmd)
		}
		for range 1000 {
			threes = append(threes, append(cmd[:2:2], "3"))
		}
		check(cmd[0]+" 2000 times", pipeline(t, s, singles...), 0)
		check(cmd[0]+" -5000", pipeline(t, s, append(cmd[:2:2], "-5000")), 0)
		check(cmd[0]+" 3, 1000 times", pipeline(t, s, threes...), 3)
	}
}

// A set larger than MaxBatchKeys is not read whole for a draw: a sorted
// set's members come from a random point on, a set's from positions drawn
// (sets.go), distinct for a positive count.
func TestRandLargeSetReadsItsCount(t *testing.T) {
	s, _ := start(t, newFakeKV(), func(c *Config) { c.MaxBatchKeys = 4 }, nil)
	pipeline(t, s, []string{"ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "6", "f"},
		[]string{"SADD", "s", "a", "b", "c"}, []string{"SADD", "s", "d", "e", "f"}) // SADD takes MaxBatchKeys-1
	for range 20 {
		for _, cmd := range []string{"ZRANDMEMBER", "SRANDMEMBER"} {
			key := strings.ToLower(cmd[:1])
			rep := pipeline(t, s, []string{cmd, key, "3"}, []string{cmd, key, "-8"}, []string{cmd, key, "9"})
			for i, n := range []int{3, 8, 6} {
				if got := strings.Fields(rep[i]); len(got) != n {
					t.Fatalf("%s %s: %s, want %d members", cmd, key, rep[i], n)
				}
			}
		}
	}
}

// RANDOMKEY draws uniformly from a small database, whatever the gaps
// between keys (the stock suite's test draws 100 times from "bar" and
// "foo" and wants both); a larger one still answers a key.
func TestRandomKeyUniform(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 2))
	s, _ := start(t, newFakeKV(), func(c *Config) { c.randN = r.IntN; c.MaxBatchKeys = 12 }, nil)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "~"}
	for _, k := range keys {
		pipeline(t, s, []string{"SET", k, "v"})
	}
	var draws [][]string
	for range 2000 {
		draws = append(draws, []string{"RANDOMKEY"})
	}
	counts := map[string]int{}
	for _, rep := range pipeline(t, s, draws...) {
		counts[strings.TrimPrefix(rep, "$")]++
	}
	if x := chiSquare(counts, len(keys)); x > 27.88 {
		t.Errorf("RANDOMKEY, 2000 times: chi-square %.1f > 27.88: %v", x, counts)
	}
	for i := range 10 {
		pipeline(t, s, []string{"SET", "more" + strconv.Itoa(i), "v"})
	}
	if rep := pipeline(t, s, []string{"RANDOMKEY"})[0]; !strings.HasPrefix(rep, "$") || rep == "$<nil>" {
		t.Errorf("RANDOMKEY of 20 keys, past MaxBatchKeys: %s", rep)
	}
}
