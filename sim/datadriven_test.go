package sim

import (
	"errors"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestScenarios runs the scenario files in testdata/ through an Interpreter
// driving the real policies (placement.Decide); see Interpreter for the
// commands. A failing assert prints FAIL in its output and fails the test
// once the whole file has run (also under -rewrite, which still writes the
// file, so the output shows what went wrong).
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		in := NewInterpreter(Placement)
		var failed []string
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			args := make([]Arg, len(td.CmdArgs))
			for i, a := range td.CmdArgs {
				args[i] = Arg{Key: a.Key, Vals: a.Vals}
			}
			out, err := in.Exec(td.Cmd, args)
			switch {
			case errors.Is(err, ErrAssert):
				failed = append(failed, td.Pos+": "+err.Error()+"\n"+out)
			case err != nil:
				return out + "error: " + err.Error() + "\n"
			}
			return out
		})
		for _, f := range failed {
			t.Error(f)
		}
	})
}
