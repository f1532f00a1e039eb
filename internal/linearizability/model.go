package linearizability

import (
	"fmt"
	"sort"

	"github.com/anishathalye/porcupine"
)

// register is the state of one key. Keys are independent, so after
// partitioning porcupine only ever sees a single register, which keeps
// states tiny and comparable with ==.
type register struct {
	found bool
	value string
}

// opMeta is attached to each porcupine operation for the visualization only.
type opMeta struct {
	client  int
	unknown bool
}

// Model returns the porcupine model of a map from string keys to independent
// string registers, where an absent key reads as not found. Inputs must be
// Input and outputs Output. It partitions histories by key, which is what
// makes checking large histories fast.
func Model() porcupine.Model {
	return porcupine.Model{
		Partition:         partitionOps,
		PartitionEvent:    partitionEvents,
		Init:              func() any { return register{} },
		Step:              step,
		Equal:             func(a, b any) bool { return a.(register) == b.(register) },
		Hash:              hashRegister,
		DescribeOperation: describeOperation,
		DescribeState:     describeState,
		DescribeOperationMetadata: func(m any) string {
			meta, ok := m.(opMeta)
			if !ok {
				return ""
			}
			if meta.unknown {
				return fmt.Sprintf("client %d, outcome unknown", meta.client)
			}
			return fmt.Sprintf("client %d", meta.client)
		},
	}
}

func step(state, input, output any) (bool, any) {
	s := state.(register)
	in := input.(Input)
	out := output.(Output)
	switch in.Kind {
	case Get:
		if out.Unknown {
			// Check drops these, but a direct porcupine user might not.
			return true, s
		}
		if out.Found != s.found || (s.found && out.Value != s.value) {
			return false, s
		}
		return true, s
	case Put:
		return true, register{found: true, value: in.Value}
	case Delete:
		return true, register{}
	case CAS:
		var match bool
		if in.ExpectExists {
			match = s.found && s.value == in.Expected
		} else {
			match = !s.found
		}
		// An unknown CAS behaves deterministically once linearized; the
		// "never happened" case is covered by its infinite return time,
		// which lets it linearize after everything else.
		if !out.Unknown && out.Swapped != match {
			return false, s
		}
		if match {
			return true, register{found: true, value: in.Value}
		}
		return true, s
	}
	return false, s
}

// hashRegister is FNV-1a; porcupine only uses it to bucket its memo cache.
func hashRegister(state any) uint64 {
	s := state.(register)
	if !s.found {
		return 0
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(s.value); i++ {
		h ^= uint64(s.value[i])
		h *= 1099511628211
	}
	return h
}

func partitionOps(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := make(map[string][]porcupine.Operation)
	for _, op := range history {
		k := op.Input.(Input).Key
		byKey[k] = append(byKey[k], op)
	}
	keys := sortedKeys(byKey)
	out := make([][]porcupine.Operation, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

func partitionEvents(history []porcupine.Event) [][]porcupine.Event {
	// Return events carry an Output, so their key comes from the call with
	// the same Id.
	keyOf := make(map[int]string)
	byKey := make(map[string][]porcupine.Event)
	for _, ev := range history {
		if ev.Kind == porcupine.CallEvent {
			keyOf[ev.Id] = ev.Value.(Input).Key
		}
		k := keyOf[ev.Id]
		byKey[k] = append(byKey[k], ev)
	}
	keys := sortedKeys(byKey)
	out := make([][]porcupine.Event, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

// sortedKeys gives partitions a stable order so visualizations and failure
// reports are reproducible.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func describeOperation(input, output any) string {
	in := input.(Input)
	out := output.(Output)
	var call string
	switch in.Kind {
	case Put:
		call = fmt.Sprintf("put(%q, %q)", in.Key, in.Value)
	case Get:
		call = fmt.Sprintf("get(%q)", in.Key)
	case Delete:
		call = fmt.Sprintf("delete(%q)", in.Key)
	case CAS:
		exp := "<absent>"
		if in.ExpectExists {
			exp = fmt.Sprintf("%q", in.Expected)
		}
		call = fmt.Sprintf("cas(%q, %s -> %q)", in.Key, exp, in.Value)
	default:
		call = fmt.Sprintf("%s(%q)", in.Kind, in.Key)
	}
	switch {
	case out.Unknown:
		return call + " -> ?"
	case in.Kind == Get && out.Found:
		return fmt.Sprintf("%s -> %q", call, out.Value)
	case in.Kind == Get:
		return call + " -> <not found>"
	case in.Kind == CAS && out.Swapped:
		return call + " -> swapped"
	case in.Kind == CAS:
		return call + " -> not swapped"
	}
	return call
}

func describeState(state any) string {
	s := state.(register)
	if !s.found {
		return "<absent>"
	}
	return fmt.Sprintf("%q", s.value)
}
