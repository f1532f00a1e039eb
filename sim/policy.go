package sim

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidekv/tidekv/internal/placement"
	"github.com/tidekv/tidekv/internal/units"
)

// Decider is the seam between the control loop and a placement policy: a
// pure function from a snapshot to a plan. Nil means placement.Decide.
type Decider func(placement.Snapshot) placement.Plan

// Policy is what the simulator's control loop runs: the placement
// configuration (thresholds, replication factor, bootstrap rules) and,
// for tests of the simulator itself, a Decider standing in for
// placement.Decide.
type Policy struct {
	Name   string
	Config placement.Config
	Decide Decider
}

// PolicyFactory builds a Policy from a scenario's configuration overrides
// (key=value strings, such as "range-max"="64MiB").
type PolicyFactory func(overrides map[string]string) (Policy, error)

// Placement is the real policy: placement.DefaultConfig() with the
// overrides applied (see ApplyOverrides).
func Placement(overrides map[string]string) (Policy, error) {
	cfg := placement.DefaultConfig()
	if err := ApplyOverrides(&cfg, overrides); err != nil {
		return Policy{}, err
	}
	if err := cfg.Validate(); err != nil {
		return Policy{}, err
	}
	return Policy{Name: "placement", Config: cfg}, nil
}

// overrideAliases are short names for configuration fields.
var overrideAliases = map[string]string{
	"rf":           "ReplicationFactor",
	"range-max":    "RangeMaxBytes",
	"range-min":    "RangeMinBytes",
	"max-adaptive": "MaxAdaptiveReplicas",
	"adaptive-qps": "AdaptiveReadQPS",
}

// ApplyOverrides sets fields of the struct cfg points to from key=value
// strings. A key is a field's name in kebab case (ReplicationFactor:
// replication-factor, RangeMaxBytes: range-max-bytes), the field's Go name,
// or an alias (rf, range-max, range-min, max-adaptive, adaptive-qps); a
// nested struct's field is named through it (lease.return-after). Values
// are parsed by the field's type: integers (uint64 fields named …Bytes
// accept sizes such as 64MiB), floats, durations and booleans. Keys are
// applied in sorted order so errors are deterministic.
func ApplyOverrides(cfg any, overrides map[string]string) error {
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("sim: ApplyOverrides needs a pointer to a struct, got %T", cfg)
	}
	v = v.Elem()
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, name := v, ""
		for _, part := range strings.Split(k, ".") {
			if f.Kind() != reflect.Struct {
				return fmt.Errorf("sim: no configuration field %q in %s", k, v.Type())
			}
			if name = fieldName(f.Type(), part); name == "" {
				return fmt.Errorf("sim: no configuration field %q in %s", k, v.Type())
			}
			f = f.FieldByName(name)
		}
		if err := setField(f, name, overrides[k]); err != nil {
			return fmt.Errorf("sim: %s=%s: %w", k, overrides[k], err)
		}
	}
	return nil
}

func fieldName(t reflect.Type, key string) string {
	if a, ok := overrideAliases[key]; ok {
		if _, ok := t.FieldByName(a); ok {
			return a
		}
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.IsExported() && (f.Name == key || kebab(f.Name) == key) {
			return f.Name
		}
	}
	return ""
}

// kebab turns RangeMaxBytes into range-max-bytes and AdaptiveReadQPS into
// adaptive-read-qps.
func kebab(name string) string {
	var b strings.Builder
	rs := []rune(name)
	for i, r := range rs {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 {
			prevLower := rs[i-1] >= 'a' && rs[i-1] <= 'z'
			nextLower := i+1 < len(rs) && rs[i+1] >= 'a' && rs[i+1] <= 'z'
			if prevLower || nextLower && rs[i-1] >= 'A' && rs[i-1] <= 'Z' {
				b.WriteByte('-')
			}
		}
		b.WriteString(strings.ToLower(string(r)))
	}
	return b.String()
}

var durationType = reflect.TypeOf(time.Duration(0))

func setField(f reflect.Value, name, val string) error {
	switch {
	case f.Type() == durationType:
		d, err := time.ParseDuration(val)
		if err != nil {
			return err
		}
		f.SetInt(int64(d))
	case f.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(val)
		if err != nil {
			return err
		}
		f.SetBool(b)
	case f.Kind() >= reflect.Int && f.Kind() <= reflect.Int64:
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return err
		}
		f.SetInt(n)
	case f.Kind() >= reflect.Uint && f.Kind() <= reflect.Uint64:
		n, err := units.ParseBytes(val)
		if err != nil {
			return err
		}
		if !strings.HasSuffix(name, "Bytes") && strings.ContainsAny(val, "KMGTB") {
			return fmt.Errorf("a size for a field that is not one")
		}
		f.SetUint(n)
	case f.Kind() == reflect.Float64 || f.Kind() == reflect.Float32:
		x, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(x) {
			return fmt.Errorf("bad number")
		}
		f.SetFloat(x)
	default:
		return fmt.Errorf("unsupported field type %s", f.Type())
	}
	return nil
}
