package redisdiff

import (
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidekv/tidekv/internal/testutil/redisserver"
)

// Check runs every script and the drawn sequences against a redis-server
// it starts and the TideKV Redis listener at tidekv, one subtest each,
// and fails a subtest at its first step whose replies differ. It skips,
// saying why, when redis-server is not installed.
func Check(t *testing.T, tidekv string) {
	redis := redisserver.Start(t)
	if redis == "" {
		t.Skip("redis-server is not installed (Debian package redis-server, which .ci/run installs): no Redis to compare TideKV's replies with")
	}
	scripts, err := Scripts()
	if err != nil {
		t.Fatal(err)
	}
	first, runs, steps := knob(t, "TIDEKV_REDIFF_SEED", 1), knob(t, "TIDEKV_REDIFF_RUNS", 4), knob(t, "TIDEKV_REDIFF_STEPS", 300)
	for kind := range kinds {
		if k := os.Getenv("TIDEKV_REDIFF_KIND"); k != "" && k != kind {
			continue
		}
		for seed := first; seed < first+runs; seed++ {
			s := Random(kind, uint64(seed), steps)
			scripts = append(scripts, s, inRESP3(s), inMulti(s, uint64(seed)))
		}
	}
	for _, s := range scripts {
		t.Run(s.Name, func(t *testing.T) { run(t, redis, tidekv, s) })
	}
}

func knob(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a non-negative integer", name, v)
	}
	return n
}

// run runs s on empty databases of both servers.
func run(t *testing.T, redis, tidekv string, s Script) {
	var cs [2]*conn
	for i, addr := range []string{redis, tidekv} {
		c, err := dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		if err := empty(c); err != nil {
			t.Fatalf("emptying %s: %v", addr, err)
		}
		cs[i] = c
	}
	for i, st := range s.Steps {
		var r [2]Reply
		for j, c := range cs {
			var err error
			if r[j], err = c.do(st.Args...); err != nil {
				t.Fatalf("%s:%d: %s: %v", s.Name, st.Line, st, err)
			}
		}
		if !agreeStep(st, r[0], r[1]) {
			t.Fatalf("%s:%d: %s\nredis-server: %s\nTideKV:       %s%s", s.Name, st.Line, st, r[0], r[1], context(s, i))
		}
	}
}

// agreeStep reports whether a and b agree as st asks: an EXEC's replies
// one by one as st.Each says.
func agreeStep(st Step, a, b Reply) bool {
	if st.Each == nil || a.Kind != '*' || b.Kind != '*' || len(a.Elems) != len(st.Each) || len(b.Elems) != len(st.Each) {
		return agree(st.Compare, a, b)
	}
	for i, c := range st.Each {
		if !agree(c, a.Elems[i], b.Elems[i]) {
			return false
		}
	}
	return true
}

// agree reports whether a and b agree as c asks.
func agree(c Compare, a, b Reply) bool {
	switch {
	case c == Shape:
		return sameShape(a, b)
	case c == Unordered && a.Kind == b.Kind && (a.Kind == '*' || a.Kind == '~'):
		return sorted(a) == sorted(b)
	case c == Stats && a.Kind == b.Kind && (a.Kind == '$' || a.Kind == '='):
		return slices.Equal(statLines(a.Str), statLines(b.Str))
	case c == IDs:
		return clockIDs.ReplaceAllString(a.String(), `"<id>"`) == clockIDs.ReplaceAllString(b.String(), `"<id>"`)
	case c == Times:
		mask := func(r Reply) string {
			return clockTimes.ReplaceAllString(clockIDs.ReplaceAllString(r.String(), `"<id>"`), ":<ms>")
		}
		return mask(a) == mask(b)
	case c == AnyPositive && a.Kind == ':' && b.Kind == ':':
		x, _ := strconv.ParseInt(a.Str, 10, 64)
		y, _ := strconv.ParseInt(b.Str, 10, 64)
		if x > 0 && y > 0 {
			return true
		}
	}
	return a.String() == b.String()
}

// statLines are INFO's statistics lines in text, usec fields masked,
// sorted.
func statLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\r\n") {
		if strings.HasPrefix(l, "cmdstat_") || strings.HasPrefix(l, "errorstat_") || strings.HasPrefix(l, "total_error_replies:") {
			out = append(out, usecFields.ReplaceAllString(l, "usec=U"))
		}
	}
	slices.Sort(out)
	return out
}

var usecFields = regexp.MustCompile(`usec=\d+,usec_per_call=[\d.]+`)

// clockIDs are stream IDs of a clock's milliseconds as a reply renders
// them (quoted bulk strings).
var clockIDs = regexp.MustCompile(`"\d{13,}-\d+"`)

// clockTimes are integers of a clock's milliseconds as a reply renders
// them.
var clockTimes = regexp.MustCompile(`:\d{13,}`)

// sorted renders array r with its elements in order.
func sorted(r Reply) string {
	parts := make([]string, len(r.Elems))
	for i, e := range r.Elems {
		parts[i] = e.String()
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// context lists the last steps up to step i of a drawn sequence, which
// has no file to look them up in.
func context(s Script, i int) string {
	if s.Repro == "" {
		return ""
	}
	from := max(0, i-40)
	out := fmt.Sprintf("\nsteps %d to %d of the sequence (%s):", from, i, s.Repro)
	for _, st := range s.Steps[from : i+1] {
		out += "\n  " + st.String()
	}
	return out
}

// empty empties the connection's database with FLUSHALL, as standard
// Redis test harnesses start.
func empty(c *conn) error {
	r, err := c.do("FLUSHALL")
	if err == nil && (r.Kind != '+' || r.Str != "OK") {
		err = fmt.Errorf("FLUSHALL answered %s", r)
	}
	return err
}

// sorted is r with an array's elements in order of their text.

// inRESP3 is s run after HELLO 3: the same commands, answered in RESP3.
func inRESP3(s Script) Script {
	hello := Step{Args: []string{"HELLO", "3"}, Compare: Shape} // versions and ids differ
	s.Name += "-resp3"
	s.Repro = "(after HELLO 3) " + s.Repro
	s.Steps = append([]Step{hello}, s.Steps...)
	return s
}

// inMulti is s with its steps in MULTI/EXEC blocks of one to six commands
// drawn from seed; EXEC's reply agrees element by element as the steps'
// would. SET, MSET and MSETNX stay outside blocks: TideKV checks their
// syntax when they are queued, where Redis fails them in EXEC
// (docs/redis.md).
func inMulti(s Script, seed uint64) Script {
	r := rand.New(rand.NewPCG(seed, seed^0x6d756c7469))
	out := Script{Name: s.Name + "-multi", Repro: "(in MULTI blocks) " + s.Repro}
	for i := 0; i < len(s.Steps); {
		st := s.Steps[i]
		if queuedApart[st.Args[0]] {
			out.Steps = append(out.Steps, st)
			i++
			continue
		}
		out.Steps = append(out.Steps, Step{Line: st.Line, Args: []string{"MULTI"}})
		exec := Step{Line: st.Line, Args: []string{"EXEC"}}
		for n := 1 + r.IntN(6); n > 0 && i < len(s.Steps) && !queuedApart[s.Steps[i].Args[0]]; n-- {
			st := s.Steps[i]
			out.Steps = append(out.Steps, Step{Line: st.Line, Args: st.Args})
			exec.Each = append(exec.Each, st.Compare)
			i++
		}
		out.Steps = append(out.Steps, exec)
	}
	return out
}

// queuedApart are the commands inMulti leaves outside blocks.
var queuedApart = map[string]bool{"SET": true, "MSET": true, "MSETNX": true}
