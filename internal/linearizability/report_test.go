package linearizability

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestFormatHistory(t *testing.T) {
	h := History{
		op(1, 3_000_000, 4_000_000, GetInput("x"), found("1")),
		op(0, 1_000_000, 2_500_000, PutInput("x", "1"), ok),
		op(2, 1_500_000, 1_600_000, PutInput("y", "2"), ok),
		unknownOp(3, 5_000_000, CASInput("x", "1", "3")),
		op(2, 6_000_000, 7_000_000, CASAbsentInput("y", "4"), unswapped),
		op(0, 8_000_000, 9_000_000, DeleteInput("x"), ok),
	}
	want := `client   0  [    1.000000ms,     2.500000ms]  put("x", "1")
client   1  [    3.000000ms,     4.000000ms]  get("x") -> "1"
client   3  [    5.000000ms, ?]  cas("x", "1" -> "3") -> ?
client   0  [    8.000000ms,     9.000000ms]  delete("x")
`
	if got := FormatHistory(h, []string{"x"}); got != want {
		t.Errorf("FormatHistory(x):\n%s\nwant:\n%s", got, want)
	}
	all := FormatHistory(h, nil)
	if n := strings.Count(all, "\n"); n != len(h) {
		t.Errorf("FormatHistory(all) has %d lines, want %d:\n%s", n, len(h), all)
	}
	if !strings.Contains(all, `cas("y", <absent> -> "4") -> not swapped`) || strings.Index(all, `"y", "2"`) > strings.Index(all, `get("x")`) {
		t.Errorf("FormatHistory(all) out of order or incomplete:\n%s", all)
	}
}

func TestCheckWithArtifacts(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(ArtifactsEnv, dir)
	good := History{op(0, 0, 10, PutInput("x", "1"), ok), op(1, 20, 30, GetInput("x"), found("1"))}
	if res := CheckWithArtifacts(t, good, testTimeout); !res.Ok {
		t.Fatalf("good history: %s", res.Describe)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a passing check left %d files", len(entries))
	}

	bad := append(History{}, good...)
	bad = append(bad, op(1, 40, 50, GetInput("x"), notFound), op(2, 0, 50, PutInput("y", "1"), ok))
	res := CheckWithArtifacts(t, bad, testTimeout)
	if res.Ok {
		t.Fatal("violation not found")
	}
	base := filepath.Join(dir, "TestCheckWithArtifacts")
	if _, err := os.Stat(base + ".html"); err != nil {
		t.Errorf("no visualization: %v", err)
	}
	b, err := os.ReadFile(base + ".history.txt")
	if err != nil {
		t.Fatalf("no history file: %v", err)
	}
	if got, want := string(b), FormatHistory(bad, []string{"x"}); got != want {
		t.Errorf("history file:\n%s\nwant the failing key's operations:\n%s", got, want)
	}
}

func TestNemesisDuration(t *testing.T) {
	t.Setenv(DurationEnv, "")
	if d := NemesisDuration(t, 7*time.Second); d != 7*time.Second {
		t.Errorf("unset: %v", d)
	}
	t.Setenv(DurationEnv, "90s")
	if d := NemesisDuration(t, 7*time.Second); d != 90*time.Second {
		t.Errorf("90s: %v", d)
	}
}

// fakeTB records failures instead of stopping the test.
type fakeTB struct {
	testing.TB
	failures []string
}

func (f *fakeTB) Helper()             {}
func (f *fakeTB) Logf(string, ...any) {}
func (f *fakeTB) Fatal(args ...any)   { f.failures = append(f.failures, fmt.Sprint(args...)) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
}

func TestWantViolation(t *testing.T) {
	stale := History{
		op(0, 0, 10, PutInput("x", "1"), ok),
		op(0, 20, 30, PutInput("x", "2"), ok),
		op(1, 40, 50, GetInput("x"), found("1")),
		op(2, 0, 50, PutInput("y", "1"), ok),
	}
	for _, tc := range []struct {
		name string
		h    History
		key  string
		want string // in the failure, "" for none
	}{
		{"violation on the key", stale, "x", ""},
		{"violation elsewhere", stale, "y", `do not include "y"`},
		{"no violation", stale[:2], "x", "went unnoticed; operations on x:\nclient   0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeTB{TB: t}
			WantViolation(f, tc.h, tc.key, testTimeout)
			switch {
			case tc.want == "" && len(f.failures) > 0:
				t.Errorf("unexpected failure: %q", f.failures)
			case tc.want != "" && (len(f.failures) != 1 || !strings.Contains(f.failures[0], tc.want)):
				t.Errorf("failures %q, want one containing %q", f.failures, tc.want)
			}
		})
	}
}
