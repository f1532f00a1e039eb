package local

import (
	"bytes"
	"os"
	"strconv"
)

// runsDataDir reports whether /proc/<pid>/cmdline has "--data-dir dir". A
// zombie has an empty command line and so does not count.
func runsDataDir(pid int, dir string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	args := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
	for i := 0; i+1 < len(args); i++ {
		if string(args[i]) == "--data-dir" && string(args[i+1]) == dir {
			return true
		}
	}
	return false
}
