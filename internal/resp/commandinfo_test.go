package resp

import (
	"context"
	"slices"
	"testing"
)

// COMMAND, as go-redis reads it, describes every command of the table
// with its arity and key positions; COMMAND LIST names the same ones.
func TestCommandInfoMatchesTable(t *testing.T) {
	ctx := context.Background()
	_, rc := start(t, newFakeKV(), nil, nil)
	infos := must(rc.Command(ctx).Result())
	if len(infos) != len(commands) {
		t.Fatalf("COMMAND describes %d commands, the table has %d", len(infos), len(commands))
	}
	for name, spec := range commands {
		info := infos[name]
		if info == nil {
			t.Fatalf("COMMAND misses %s", name)
		}
		p := positions(name)
		if int(info.Arity) != spec.arity || int(info.FirstKeyPos) != p.first || int(info.LastKeyPos) != p.last || int(info.StepCount) != p.step {
			t.Errorf("COMMAND INFO %s = arity %d keys %d..%d step %d, want arity %d keys %+v", name, info.Arity, info.FirstKeyPos, info.LastKeyPos, info.StepCount, spec.arity, p)
		}
		if info.ReadOnly == writeCommands[name] && !keyless[name] {
			t.Errorf("COMMAND INFO %s: readonly %v, but it writes: %v", name, info.ReadOnly, writeCommands[name])
		}
	}
	list := must(rc.CommandList(ctx, nil).Result())
	if !slices.Equal(list, tableNames()) {
		t.Fatalf("COMMAND LIST = %v, want the table's names %v", list, tableNames())
	}
	if keys := must(rc.CommandGetKeys(ctx, "mset", "a", "1", "b", "2").Result()); !slices.Equal(keys, []string{"a", "b"}) {
		t.Fatalf("COMMAND GETKEYS mset a 1 b 2 = %v", keys)
	}
}
