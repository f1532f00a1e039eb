package units

import "testing"

func TestHuman(t *testing.T) {
	for n, want := range map[uint64]string{
		0:                 "0 B",
		1023:              "1023 B",
		1024:              "1.0 KiB",
		1536:              "1.5 KiB",
		5 << 20:           "5.0 MiB",
		3<<30 + 512<<20:   "3.5 GiB",
		1 << 62:           "4.0 EiB",
		^uint64(0):        "16.0 EiB",
		10<<40 + 100<<30:  "10.1 TiB",
		999 * 1024 * 1024: "999.0 MiB",
	} {
		if got := Human(n); got != want {
			t.Errorf("Human(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{"4096": 4096, "64MiB": 64 << 20, "1.5GiB": 3 << 29, "10MB": 10e6, " 2 KiB": 2048} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1MiB", "ten"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) accepted", in)
		}
	}
	if got := Compact(48 << 20); got != "48MiB" {
		t.Errorf("Compact = %s", got)
	}
}
