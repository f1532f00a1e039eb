package linearizability

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

const testTimeout = 10 * time.Second

func op(client int, call, ret int64, in Input, out Output) Op {
	return Op{ClientID: client, Input: in, Output: out, Call: call, Return: ret}
}

func unknownOp(client int, call int64, in Input) Op {
	return Op{ClientID: client, Input: in, Output: Output{Unknown: true}, Call: call}
}

var (
	ok        = Output{}
	notFound  = Output{Found: false}
	swapped   = Output{Swapped: true}
	unswapped = Output{Swapped: false}
)

func found(v string) Output { return Output{Found: true, Value: v} }

// checkT checks h and, on failure, writes the visualization where a human
// can find it.
func checkT(t *testing.T, h History) Result {
	t.Helper()
	res := Check(h, testTimeout, WithVisualization(VisualizationPath(t.TempDir(), t.Name())))
	if res.Unknown {
		t.Fatalf("check timed out: %s", res.Describe)
	}
	return res
}

func wantLinearizable(t *testing.T, h History) {
	t.Helper()
	if res := checkT(t, h); !res.Ok {
		t.Fatalf("want linearizable, got: %s", res.Describe)
	}
}

func wantViolation(t *testing.T, h History) Result {
	t.Helper()
	res := checkT(t, h)
	if res.Ok {
		t.Fatalf("want violation, got: %s", res.Describe)
	}
	return res
}

func TestSequential(t *testing.T) {
	wantLinearizable(t, History{
		op(0, 0, 10, GetInput("x"), notFound),
		op(0, 20, 30, PutInput("x", "1"), ok),
		op(1, 40, 50, GetInput("x"), found("1")),
		op(0, 60, 70, PutInput("x", "2"), ok),
		op(1, 80, 90, GetInput("x"), found("2")),
		op(1, 100, 110, PutInput("y", ""), ok),
		op(0, 120, 130, GetInput("y"), found("")), // empty value is not absent
	})
}

func TestEmptyValueIsNotAbsent(t *testing.T) {
	wantViolation(t, History{
		op(0, 0, 10, PutInput("y", ""), ok),
		op(0, 20, 30, GetInput("y"), notFound),
	})
}

func TestConcurrentWritesReadSeesEither(t *testing.T) {
	for _, v := range []string{"1", "2"} {
		t.Run(v, func(t *testing.T) {
			wantLinearizable(t, History{
				op(0, 0, 30, PutInput("x", "1"), ok),
				op(1, 5, 35, PutInput("x", "2"), ok),
				op(2, 10, 40, GetInput("x"), found(v)),
				op(2, 50, 60, GetInput("x"), found(v)),
			})
		})
	}
}

func TestConcurrentWritesReadsMustAgreeAfterwards(t *testing.T) {
	// Once both writes are done, the final value is fixed: two later reads
	// cannot flip between them.
	wantViolation(t, History{
		op(0, 0, 30, PutInput("x", "1"), ok),
		op(1, 5, 35, PutInput("x", "2"), ok),
		op(2, 50, 60, GetInput("x"), found("2")),
		op(2, 70, 80, GetInput("x"), found("1")),
	})
}

func TestStaleReadFails(t *testing.T) {
	res := wantViolation(t, History{
		op(0, 0, 10, PutInput("x", "1"), ok),
		op(0, 20, 30, PutInput("x", "2"), ok),
		op(1, 40, 50, GetInput("x"), found("1")),
		// An unrelated key keeps passing, and must not be blamed.
		op(2, 0, 50, PutInput("y", "1"), ok),
	})
	if len(res.FailedKeys) != 1 || res.FailedKeys[0] != "x" {
		t.Errorf("FailedKeys = %q, want [x]", res.FailedKeys)
	}
}

func TestReadOverlappingWriteMaySeeOldValue(t *testing.T) {
	wantLinearizable(t, History{
		op(0, 0, 10, PutInput("x", "1"), ok),
		op(0, 20, 50, PutInput("x", "2"), ok),
		op(1, 30, 40, GetInput("x"), found("1")),
		op(1, 45, 60, GetInput("x"), found("2")),
	})
}

func TestNeverWrittenValueFails(t *testing.T) {
	wantViolation(t, History{
		op(0, 0, 10, PutInput("x", "1"), ok),
		op(1, 5, 15, GetInput("x"), found("42")),
	})
}

func TestDelete(t *testing.T) {
	t.Run("get after delete is not found", func(t *testing.T) {
		wantLinearizable(t, History{
			op(0, 0, 10, PutInput("x", "1"), ok),
			op(0, 20, 30, DeleteInput("x"), ok),
			op(1, 40, 50, GetInput("x"), notFound),
		})
	})
	t.Run("get after delete sees old value", func(t *testing.T) {
		wantViolation(t, History{
			op(0, 0, 10, PutInput("x", "1"), ok),
			op(0, 20, 30, DeleteInput("x"), ok),
			op(1, 40, 50, GetInput("x"), found("1")),
		})
	})
	t.Run("delete of absent key", func(t *testing.T) {
		wantLinearizable(t, History{
			op(0, 0, 10, DeleteInput("x"), ok),
			op(0, 20, 30, GetInput("x"), notFound),
		})
	})
}

func TestCAS(t *testing.T) {
	base := History{op(0, 0, 10, PutInput("x", "a"), ok)}
	with := func(ops ...Op) History { return append(append(History{}, base...), ops...) }

	t.Run("one of two concurrent CAS swaps", func(t *testing.T) {
		wantLinearizable(t, with(
			op(1, 20, 40, CASInput("x", "a", "b"), swapped),
			op(2, 25, 45, CASInput("x", "a", "c"), unswapped),
			op(3, 50, 60, GetInput("x"), found("b")),
		))
	})
	t.Run("both concurrent CAS swap", func(t *testing.T) {
		wantViolation(t, with(
			op(1, 20, 40, CASInput("x", "a", "b"), swapped),
			op(2, 25, 45, CASInput("x", "a", "c"), swapped),
		))
	})
	t.Run("neither swaps although one must", func(t *testing.T) {
		wantViolation(t, with(
			op(1, 20, 40, CASInput("x", "a", "b"), unswapped),
			op(2, 25, 45, CASInput("x", "a", "c"), unswapped),
		))
	})
	t.Run("loser's value visible", func(t *testing.T) {
		wantViolation(t, with(
			op(1, 20, 40, CASInput("x", "a", "b"), swapped),
			op(2, 25, 45, CASInput("x", "a", "c"), unswapped),
			op(3, 50, 60, GetInput("x"), found("c")),
		))
	})
	t.Run("absent expectation", func(t *testing.T) {
		wantLinearizable(t, History{
			op(0, 0, 10, CASAbsentInput("y", "1"), swapped),
			op(0, 20, 30, CASAbsentInput("y", "2"), unswapped),
			op(0, 40, 50, GetInput("y"), found("1")),
		})
		wantViolation(t, History{
			op(0, 0, 10, PutInput("y", "1"), ok),
			op(0, 20, 30, CASAbsentInput("y", "2"), swapped),
		})
	})
	t.Run("expecting a value does not match absent", func(t *testing.T) {
		wantViolation(t, History{op(0, 0, 10, CASInput("z", "", "1"), swapped)})
	})
	t.Run("unknown CAS may have swapped", func(t *testing.T) {
		wantLinearizable(t, with(
			unknownOp(1, 20, CASInput("x", "a", "b")),
			op(2, 100, 110, GetInput("x"), found("b")),
		))
	})
	t.Run("unknown CAS may not have swapped", func(t *testing.T) {
		wantLinearizable(t, with(
			unknownOp(1, 20, CASInput("x", "a", "b")),
			op(2, 100, 110, GetInput("x"), found("a")),
		))
	})
	t.Run("unknown CAS cannot swap a mismatch", func(t *testing.T) {
		wantViolation(t, with(
			unknownOp(1, 20, CASInput("x", "zzz", "b")),
			op(2, 100, 110, GetInput("x"), found("b")),
		))
	})
}

func TestUnknownOutcomes(t *testing.T) {
	t.Run("unknown put later appears", func(t *testing.T) {
		wantLinearizable(t, History{
			unknownOp(0, 10, PutInput("x", "1")),
			op(1, 50, 60, GetInput("x"), notFound),
			op(1, 70, 80, GetInput("x"), found("1")),
		})
	})
	t.Run("unknown put never appears", func(t *testing.T) {
		wantLinearizable(t, History{
			unknownOp(0, 10, PutInput("x", "1")),
			op(1, 50, 60, GetInput("x"), notFound),
			op(0, 70, 80, PutInput("x", "2"), ok),
			op(1, 90, 100, GetInput("x"), found("2")),
		})
	})
	t.Run("unknown put cannot take effect before its call", func(t *testing.T) {
		wantViolation(t, History{
			op(1, 0, 5, GetInput("x"), found("1")),
			unknownOp(0, 10, PutInput("x", "1")),
		})
	})
	t.Run("unknown put cannot be undone", func(t *testing.T) {
		wantViolation(t, History{
			unknownOp(0, 10, PutInput("x", "1")),
			op(1, 50, 60, GetInput("x"), found("1")),
			op(1, 70, 80, GetInput("x"), notFound),
		})
	})
	t.Run("unknown delete", func(t *testing.T) {
		wantLinearizable(t, History{
			op(0, 0, 5, PutInput("x", "1"), ok),
			unknownOp(0, 10, DeleteInput("x")),
			op(1, 50, 60, GetInput("x"), found("1")),
			op(1, 70, 80, GetInput("x"), notFound),
		})
	})
	t.Run("unknown get is dropped", func(t *testing.T) {
		h := History{
			op(0, 0, 5, PutInput("x", "1"), ok),
			// Whatever a garbage output says, it must not matter.
			{ClientID: 1, Input: GetInput("x"), Output: Output{Unknown: true, Found: true, Value: "junk"}, Call: 10},
		}
		res := checkT(t, h)
		if !res.Ok || res.Ops != 1 {
			t.Fatalf("want Ok with 1 op, got %+v", res)
		}
	})
}

func TestEmptyHistory(t *testing.T) {
	wantLinearizable(t, nil)
}

func TestVisualizationWritten(t *testing.T) {
	path := VisualizationPath(t.TempDir(), "sub/dir name")
	if got := filepath.Base(path); got != "sub_dir_name.html" {
		t.Fatalf("name not sanitized: %s", got)
	}
	res := Check(History{
		op(0, 0, 10, PutInput("x", "1"), ok),
		op(0, 20, 30, PutInput("x", "2"), ok),
		op(1, 40, 50, GetInput("x"), found("1")),
		unknownOp(2, 5, PutInput("x", "3")),
		op(2, 60, 70, GetInput("x"), found("3")),
	}, testTimeout, WithVisualization(path))
	if res.Ok || res.VisualizationPath != path {
		t.Fatalf("want violation with visualization at %s, got %+v", path, res)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<html", `get(\"x\") -\u003e \"1\"`, "outcome unknown"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("visualization lacks %q", want)
		}
	}
	if !strings.Contains(res.Describe, path) {
		t.Errorf("Describe does not mention the visualization: %s", res.Describe)
	}
}

func TestVisualizationPathHonorsArtifactsEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(ArtifactsEnv, dir)
	if got, want := VisualizationPath("/elsewhere", "T/x"), filepath.Join(dir, "T_x.html"); got != want {
		t.Fatalf("VisualizationPath = %s, want %s", got, want)
	}
}

func TestNoVisualizationWhenNotAsked(t *testing.T) {
	res := Check(History{op(0, 0, 10, GetInput("x"), found("1"))}, testTimeout)
	if res.Ok || res.VisualizationPath != "" {
		t.Fatalf("got %+v", res)
	}
}

// TestPartitionEvent exercises the event-form partitioner, which Check does
// not use but porcupine users of Model may.
func TestPartitionEvent(t *testing.T) {
	ev := func(client int, kind porcupine.EventKind, v any, id int) porcupine.Event {
		return porcupine.Event{ClientId: client, Kind: kind, Value: v, Id: id}
	}
	good := []porcupine.Event{
		ev(0, porcupine.CallEvent, PutInput("x", "1"), 0),
		ev(1, porcupine.CallEvent, PutInput("y", "1"), 1),
		ev(0, porcupine.ReturnEvent, ok, 0),
		ev(1, porcupine.ReturnEvent, ok, 1),
		ev(0, porcupine.CallEvent, GetInput("x"), 2),
		ev(1, porcupine.CallEvent, GetInput("y"), 3),
		ev(1, porcupine.ReturnEvent, found("1"), 3),
		ev(0, porcupine.ReturnEvent, found("1"), 2),
	}
	if !porcupine.CheckEvents(Model(), good) {
		t.Fatal("good event history rejected")
	}
	bad := append([]porcupine.Event(nil), good...)
	bad[6] = ev(1, porcupine.ReturnEvent, notFound, 3)
	if porcupine.CheckEvents(Model(), bad) {
		t.Fatal("bad event history accepted")
	}
	if parts := Model().PartitionEvent(good); len(parts) != 2 || len(parts[0]) != 4 {
		t.Fatalf("partitions = %v", parts)
	}
}

func TestDescribe(t *testing.T) {
	m := Model()
	for _, tc := range []struct {
		in   Input
		out  Output
		want string
	}{
		{PutInput("k", "v"), ok, `put("k", "v")`},
		{GetInput("k"), found("v"), `get("k") -> "v"`},
		{GetInput("k"), notFound, `get("k") -> <not found>`},
		{CASInput("k", "a", "b"), swapped, `cas("k", "a" -> "b") -> swapped`},
		{CASAbsentInput("k", "b"), unswapped, `cas("k", <absent> -> "b") -> not swapped`},
		{DeleteInput("k"), Output{Unknown: true}, `delete("k") -> ?`},
	} {
		if got := m.DescribeOperation(tc.in, tc.out); got != tc.want {
			t.Errorf("DescribeOperation = %s, want %s", got, tc.want)
		}
	}
	if got := m.DescribeState(register{}); got != "<absent>" {
		t.Errorf("DescribeState(absent) = %s", got)
	}
	if got := m.DescribeState(register{found: true, value: "v"}); got != `"v"` {
		t.Errorf("DescribeState = %s", got)
	}
}
