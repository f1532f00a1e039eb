package redisdiff

import (
	"slices"
	"strings"
	"testing"
)

// The scripts parse, and quoted arguments are Go string literals.
func TestParse(t *testing.T) {
	if _, err := Scripts(); err != nil {
		t.Fatal(err)
	}
	s, err := Parse("t", "# c\nSET k \"a b\" \"\"\n\nshape: TIME\nttl: TTL \"\\x00k\"\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{{Line: 2, Args: []string{"SET", "k", "a b", ""}}, {Line: 4, Args: []string{"TIME"}, Compare: Shape},
		{Line: 5, Args: []string{"TTL", "\x00k"}, Compare: AnyPositive}}
	if !slices.EqualFunc(s.Steps, want, func(a, b Step) bool {
		return a.Line == b.Line && a.Compare == b.Compare && slices.Equal(a.Args, b.Args)
	}) {
		t.Fatalf("steps %+v, want %+v", s.Steps, want)
	}
	if got := s.Steps[0].String(); got != `SET k "a b" ""` {
		t.Errorf("String() = %s", got)
	}
	for _, bad := range []string{`GET "k`, `GET "k"x`, `GET "\q"`} {
		if _, err := Parse("t", bad); err == nil || !strings.HasPrefix(err.Error(), "t:1:") {
			t.Errorf("Parse(%s) = %v, want an error at t:1", bad, err)
		}
	}
}

// A seed draws the same sequence every time.
func TestRandomIsDeterministic(t *testing.T) {
	a, b := Random("lists", 7, 50), Random("lists", 7, 50)
	for i := range a.Steps {
		if !slices.Equal(a.Steps[i].Args, b.Steps[i].Args) {
			t.Fatalf("step %d: %v and %v", i, a.Steps[i].Args, b.Steps[i].Args)
		}
	}
}
