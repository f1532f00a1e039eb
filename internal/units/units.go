// Package units reads and writes byte sizes for people: "64MiB" in flags,
// settings and scenario scripts, "1.5 KiB" in tables. It imports only the
// standard library.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var sizeSuffixes = []struct {
	suffix string
	mult   float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40},
	{"B", 1},
}

// ParseBytes parses a size such as 64MiB, 1.5GiB, 10MB or 4096.
func ParseBytes(s string) (uint64, error) {
	f, err := parseScaled(s)
	if err != nil {
		return 0, err
	}
	if f < 0 || f > math.MaxUint64/2 {
		return 0, fmt.Errorf("size %q out of range", s)
	}
	return uint64(math.Round(f)), nil
}

// ParseRate parses a byte rate such as 32MiB/s (the /s is optional).
func ParseRate(s string) (float64, error) {
	f, err := parseScaled(strings.TrimSuffix(s, "/s"))
	if err != nil {
		return 0, err
	}
	if f < 0 {
		return 0, fmt.Errorf("rate %q is negative", s)
	}
	return f, nil
}

func parseScaled(s string) (float64, error) {
	s = strings.TrimSpace(s)
	mult := 1.0
	for _, x := range sizeSuffixes {
		if strings.HasSuffix(s, x.suffix) {
			s, mult = strings.TrimSuffix(s, x.suffix), x.mult
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("bad size %q (want e.g. 64MiB)", s)
	}
	return f * mult, nil
}

// Compact prints n with a binary unit and no space: 512B, 1.5KiB, 48MiB.
func Compact(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	f := float64(n)
	i := -1
	for f >= unit && i < 4 {
		f /= unit
		i++
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[i]
}

// Human prints n for tables: 0 B, 512 B, 1.5 KiB, 3.0 MiB.
func Human(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
