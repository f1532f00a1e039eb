package monitor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Names a Source is asked for, relative to the proc root.
const (
	FileStat      = "stat"
	FileMeminfo   = "meminfo"
	FileDiskstats = "diskstats"
	// FileSelfStat is this process's own stat (CPU time it used).
	FileSelfStat = "self/stat"
)

// Source supplies the contents of a /proc file by name (FileStat,
// FileMeminfo, FileDiskstats). The monitor owns this interface so tests can
// feed canned contents; production uses ProcSource.
type Source interface {
	Read(name string) ([]byte, error)
}

// DirSource reads files from a directory, normally /proc.
type DirSource string

// ProcSource reads the live /proc. Where it does not exist (non-Linux) every
// read fails and the affected utilisations are reported as 0.
const ProcSource DirSource = "/proc"

// Read returns the contents of dir/name.
func (d DirSource) Read(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(string(d), name))
}

// cpuTimes is the aggregate "cpu" line of /proc/stat, in USER_HZ ticks.
type cpuTimes struct {
	total uint64 // user+nice+system+idle+iowait+irq+softirq+steal
	idle  uint64 // idle+iowait
	cpus  int    // the per-CPU "cpuN" lines: the CPUs total is summed over
}

// parseStat extracts the aggregate cpu line and counts the CPUs. guest and
// guest_nice are left out of the total because the kernel already counts
// them in user and nice.
func parseStat(b []byte) (cpuTimes, error) {
	var t cpuTimes
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && len(f[0]) > 3 && strings.HasPrefix(f[0], "cpu") {
			t.cpus++
		}
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		// Kernels since 2.6.11 have at least 8 values; 2.6 has 4 (user
		// nice system idle). Fewer means the file is not /proc/stat.
		if len(f) < 5 {
			return cpuTimes{}, fmt.Errorf("monitor: /proc/stat cpu line has %d fields", len(f)-1)
		}
		found = true
		for i, s := range f[1:min(len(f), 9)] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return cpuTimes{}, fmt.Errorf("monitor: /proc/stat cpu field %d: %w", i+1, err)
			}
			t.total += v
			if i == 3 || i == 4 { // idle, iowait
				t.idle += v
			}
		}
	}
	if !found {
		return cpuTimes{}, errors.New("monitor: /proc/stat has no aggregate cpu line")
	}
	return t, nil
}

// cpuUtil is the busy fraction between two samples; 0 when time did not
// advance or counters went backwards (e.g. a CPU went offline).
func cpuUtil(prev, cur cpuTimes) float64 {
	if cur.total <= prev.total || cur.idle < prev.idle {
		return 0
	}
	dt := cur.total - prev.total
	di := cur.idle - prev.idle
	if di >= dt {
		return 0
	}
	return float64(dt-di) / float64(dt)
}

// parseSelfStat returns the process's CPU time (utime + stime, in
// USER_HZ ticks, all threads) from /proc/self/stat. The command name
// (field 2) may hold spaces and parentheses, so fields are counted after
// its last ')'.
func parseSelfStat(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("monitor: /proc/self/stat has no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("monitor: /proc/self/stat has %d fields after the name", len(f))
	}
	var total uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("monitor: /proc/self/stat cpu time: %w", err)
		}
		total += v
	}
	return total, nil
}

// parseMeminfo returns 1 - MemAvailable/MemTotal. Kernels before 3.14 lack
// MemAvailable; MemFree+Buffers+Cached approximates it there.
func parseMeminfo(b []byte) (float64, error) {
	var total, avail, free, buffers, cached uint64
	var haveTotal, haveAvail bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch key {
		case "MemTotal":
			dst, haveTotal = &total, true
		case "MemAvailable":
			dst, haveAvail = &avail, true
		case "MemFree":
			dst = &free
		case "Buffers":
			dst = &buffers
		case "Cached":
			dst = &cached
		default:
			continue
		}
		f := strings.Fields(rest) // "<n> kB"; units cancel in the ratio
		if len(f) == 0 {
			return 0, fmt.Errorf("monitor: /proc/meminfo %s has no value", key)
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("monitor: /proc/meminfo %s: %w", key, err)
		}
		*dst = v
	}
	if !haveTotal || total == 0 {
		return 0, errors.New("monitor: /proc/meminfo has no positive MemTotal")
	}
	if !haveAvail {
		avail = free + buffers + cached
	}
	if avail >= total {
		return 0, nil
	}
	return 1 - float64(avail)/float64(total), nil
}

// virtualDisk reports devices whose busy time says nothing about a physical
// disk: loop and RAM devices, device-mapper and md (their util double-counts
// the members and can exceed theirs), optical and network block devices.
// Partitions are kept: their busy time never exceeds their disk's, so they
// cannot change the maximum.
func virtualDisk(name string) bool {
	for _, p := range []string{"loop", "ram", "zram", "dm-", "md", "sr", "fd", "nbd"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// parseDiskstats returns io_ticks (ms the device had I/O in flight) per
// physical device. Field layout: major minor name, then 11 or more
// counters; io_ticks is the tenth counter.
func parseDiskstats(b []byte) (map[string]uint64, error) {
	ticks := make(map[string]uint64)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 14 {
			return nil, fmt.Errorf("monitor: /proc/diskstats line has %d fields, want >= 14", len(f))
		}
		name := f[2]
		if virtualDisk(name) {
			continue
		}
		v, err := strconv.ParseUint(f[12], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("monitor: /proc/diskstats %s io_ticks: %w", name, err)
		}
		ticks[name] = v
	}
	return ticks, nil
}

// diskUtil is the largest Δio_ticks/Δt over devices present in both
// samples, clamped to [0,1] (timer jitter can push it slightly above 1).
// A device whose counter went backwards (32-bit wrap, hot-swap) is skipped.
func diskUtil(prev, cur map[string]uint64, elapsedMs float64) float64 {
	if elapsedMs <= 0 {
		return 0
	}
	var worst float64
	for name, c := range cur {
		p, ok := prev[name]
		if !ok || c < p {
			continue
		}
		worst = max(worst, float64(c-p)/elapsedMs)
	}
	return min(worst, 1)
}

// ProcessWriteBytes is the number of bytes this process has caused to be
// written to storage (write_bytes of /proc/self/io: counted when pages are
// dirtied, so WAL, flushes and compactions all count, sockets do not).
func ProcessWriteBytes() (uint64, error) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, err
	}
	return parseSelfIOWriteBytes(b)
}

func parseSelfIOWriteBytes(b []byte) (uint64, error) {
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("monitor: /proc/self/io write_bytes: %w", err)
			}
			return n, nil
		}
	}
	return 0, errors.New("monitor: /proc/self/io has no write_bytes line")
}
