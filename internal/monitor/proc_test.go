package monitor

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// Shaped like a 4-CPU kernel 6.x /proc/stat.
const stat1 = `cpu  10132153 290696 3084719 46828483 16683 0 25195 0 175628 0
cpu0 1393280 32966 572056 13343292 6130 0 17875 0 23933 0
cpu1 1335309 29476 1013458 11605539 4180 0 3209 0 59722 0
cpu2 3797539 113864 769283 10819506 3187 0 2462 0 45873 0
cpu3 3606025 114390 729922 11060146 3186 0 1649 0 46100 0
intr 1462898 0 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0
ctxt 115315
btime 1700000000
processes 23233
procs_running 2
procs_blocked 0
softirq 1076596 0 343512 2 12154 0 0 74063 389213 0 257652
`

const meminfo = `MemTotal:       16315640 kB
MemFree:         1234567 kB
MemAvailable:    4078910 kB
Buffers:          345678 kB
Cached:          2345678 kB
SwapCached:            0 kB
Active:          8765432 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
`

// Kernel 5.5+ layout (20 fields). io_ticks is column 13.
const diskstats1 = `   7       0 loop0 52 0 2118 21 0 0 0 0 0 900000 21 0 0 0 0 0 0
   8       0 sda 131586 32564 8620814 60234 216544 181236 7640896 312346 0 1000 372580 0 0 0 0 1234 5678
   8       1 sda1 131000 32000 8600000 60000 216000 181000 7640000 312000 0 900 372000 0 0 0 0 0 0
 259       0 nvme0n1 98765 0 4321000 12345 54321 0 987654 23456 0 2000 35801 0 0 0 0 0 0
 253       0 dm-0 200000 0 8000000 90000 400000 0 7000000 600000 0 500000 690000 0 0 0 0 0 0
`

func TestParseStat(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantTotal uint64
		wantIdle  uint64
		wantCPUs  int
		wantErr   bool
	}{
		{
			name: "kernel 6 with guest columns excluded from total",
			in:   stat1,
			// user+nice+system+idle+iowait+irq+softirq+steal
			wantTotal: 10132153 + 290696 + 3084719 + 46828483 + 16683 + 0 + 25195 + 0,
			wantIdle:  46828483 + 16683,
			wantCPUs:  4,
		},
		{name: "old 2.6 four columns", in: "cpu 10 20 30 40\n", wantTotal: 100, wantIdle: 40},
		{name: "too few columns", in: "cpu 10 20 30\n", wantErr: true},
		{name: "five columns", in: "cpu 10 20 30 40 5\n", wantTotal: 105, wantIdle: 45},
		{name: "per-cpu lines only", in: "cpu0 1 2 3 4 5 6 7 8\n", wantErr: true},
		{name: "garbage value", in: "cpu 1 2 x 4 5 6 7 8\n", wantErr: true},
		{name: "empty", in: "", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got.total != tc.wantTotal || got.idle != tc.wantIdle || got.cpus != tc.wantCPUs {
				t.Fatalf("got total=%d idle=%d cpus=%d, want %d %d %d", got.total, got.idle, got.cpus, tc.wantTotal, tc.wantIdle, tc.wantCPUs)
			}
		})
	}
}

func TestCPUUtil(t *testing.T) {
	tests := []struct {
		name      string
		prev, cur cpuTimes
		want      float64
	}{
		{"quarter busy", cpuTimes{total: 1000, idle: 800}, cpuTimes{total: 1400, idle: 1100}, 0.25},
		{"fully busy", cpuTimes{total: 1000, idle: 800}, cpuTimes{total: 1100, idle: 800}, 1},
		{"idle", cpuTimes{total: 1000, idle: 800}, cpuTimes{total: 1100, idle: 900}, 0},
		{"no time passed", cpuTimes{total: 1000, idle: 800}, cpuTimes{total: 1000, idle: 800}, 0},
		{"total went backwards", cpuTimes{total: 1000, idle: 800}, cpuTimes{total: 900, idle: 850}, 0},
		{"idle went backwards", cpuTimes{total: 1000, idle: 800}, cpuTimes{total: 1100, idle: 700}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := cpuUtil(tc.prev, tc.cur); math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("cpuUtil = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseMeminfo(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    float64
		wantErr bool
	}{
		{name: "MemAvailable", in: meminfo, want: 1 - 4078910.0/16315640},
		{
			name: "pre-3.14 fallback to free+buffers+cached",
			in:   "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 150 kB\n",
			want: 0.7,
		},
		{name: "available exceeds total", in: "MemTotal: 100 kB\nMemAvailable: 120 kB\n", want: 0},
		{name: "all used", in: "MemTotal: 100 kB\nMemAvailable: 0 kB\n", want: 1},
		{name: "no MemTotal", in: "MemAvailable: 10 kB\n", wantErr: true},
		{name: "zero MemTotal", in: "MemTotal: 0 kB\nMemAvailable: 0 kB\n", wantErr: true},
		{name: "bad number", in: "MemTotal: lots kB\n", wantErr: true},
		{name: "missing value", in: "MemTotal:\n", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMeminfo([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseDiskstats(t *testing.T) {
	got, err := parseDiskstats([]byte(diskstats1))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{"sda": 1000, "sda1": 900, "nvme0n1": 2000}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v (loop and dm- skipped)", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s io_ticks = %d, want %d", k, got[k], v)
		}
	}

	// Pre-4.18 layout: exactly 14 fields.
	old := "   8       0 sda 1 2 3 4 5 6 7 8 9 4242 11\n"
	got, err = parseDiskstats([]byte(old))
	if err != nil || got["sda"] != 4242 {
		t.Fatalf("14-field line: got %v, %v", got, err)
	}

	for _, bad := range []string{
		"   8 0 sda 1 2 3\n",
		"   8 0 sda 1 2 3 4 5 6 7 8 9 x 11\n",
	} {
		if _, err := parseDiskstats([]byte(bad)); err == nil {
			t.Errorf("parseDiskstats(%q) succeeded, want error", bad)
		}
	}
}

func TestDiskUtil(t *testing.T) {
	prev := map[string]uint64{"sda": 1000, "nvme0n1": 2000, "sdb": 5000}
	tests := []struct {
		name    string
		cur     map[string]uint64
		elapsed float64
		want    float64
	}{
		{"max over disks", map[string]uint64{"sda": 1250, "nvme0n1": 2600, "sdb": 5000}, 1000, 0.6},
		{"clamped to 1", map[string]uint64{"sda": 2100}, 1000, 1},
		{"new device ignored", map[string]uint64{"sdc": 999999}, 1000, 0},
		{"counter wrap ignored", map[string]uint64{"sda": 10, "sdb": 5100}, 1000, 0.1},
		{"no elapsed time", map[string]uint64{"sda": 1500}, 0, 0},
		{"negative elapsed time", map[string]uint64{"sda": 1500}, -5, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := diskUtil(prev, tc.cur, tc.elapsed); math.Abs(got-tc.want) > 1e-12 {
				t.Fatalf("diskUtil = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDirSource(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileMeminfo), []byte(meminfo), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := DirSource(dir).Read(FileMeminfo)
	if err != nil || string(b) != meminfo {
		t.Fatalf("Read = %q, %v", b, err)
	}
	if _, err := DirSource(dir).Read(FileStat); err == nil {
		t.Fatal("reading a missing file succeeded")
	}
}

func TestParseSelfIOWriteBytes(t *testing.T) {
	io := "rchar: 1685830\nwchar: 5001689\nsyscr: 668\nsyscw: 30\nread_bytes: 0\nwrite_bytes: 5001216\ncancelled_write_bytes: 0\n"
	if n, err := parseSelfIOWriteBytes([]byte(io)); err != nil || n != 5001216 {
		t.Fatalf("write_bytes = %d, %v; want 5001216", n, err)
	}
	if _, err := parseSelfIOWriteBytes([]byte("rchar: 1\n")); err == nil {
		t.Fatal("a file without write_bytes was accepted")
	}
	if _, err := parseSelfIOWriteBytes([]byte("write_bytes: lots\n")); err == nil {
		t.Fatal("an unreadable write_bytes was accepted")
	}
}
