package launcher

import (
	"bufio"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// reserveChildEnv makes the test binary a child that reserves the block at
// the base it names, says "held" and keeps it until its stdin closes.
const reserveChildEnv = "TIDEKV_TEST_RESERVE_BASE"

// A block reserved by one process is refused to another, and to a second
// reservation in the same process, in whole or in part; a neighbouring
// block is not; the reservation ends with the process that held it.
func TestReserveExcludesOtherProcesses(t *testing.T) {
	if b := os.Getenv(reserveChildEnv); b != "" {
		base, _ := strconv.Atoi(b)
		if _, ok := reserve(base, 3*PortsPerNode); !ok {
			t.Fatalf("child could not reserve %d", base)
		}
		os.Stdout.WriteString("held\n")
		io.Copy(io.Discard, os.Stdin)
		return
	}
	// A block of high ports nothing else here picks (FreeBasePort stays
	// below the ephemeral range), free of other holders.
	var base int
	for {
		base = 60000 + 10*rand.IntN(500)
		if held, ok := reserve(base-PortsPerNode, 5*PortsPerNode); ok {
			closeAll(held)
			break
		}
	}
	child := exec.Command(os.Args[0], "-test.run=^TestReserveExcludesOtherProcesses$")
	child.Env = append(os.Environ(), reserveChildEnv+"="+strconv.Itoa(base))
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "held\n" {
		t.Fatalf("child said %q (%v), want held", line, err)
	}

	for _, c := range []struct {
		base, span int
		want       bool
	}{
		{base, 3 * PortsPerNode, false},
		{base + 25, PortsPerNode, false}, // overlaps the child's last ports
		{base - 5, PortsPerNode, false},  // overlaps its first
		{base + 3*PortsPerNode, PortsPerNode, true},
	} {
		held, ok := reserve(c.base, c.span)
		if ok != c.want {
			t.Errorf("reserve(%d, %d) with the child holding %d-%d = %v, want %v", c.base, c.span, base, base+29, ok, c.want)
		}
		closeAll(held)
	}

	own, ok := reserve(base+3*PortsPerNode, PortsPerNode)
	if !ok {
		t.Fatal("neighbouring block not reservable")
	}
	if _, ok := reserve(base+3*PortsPerNode, PortsPerNode); ok {
		t.Error("a block this process holds was reserved again in the same process")
	}
	closeAll(own)

	stdin.Close()
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	held, ok := reserve(base, 3*PortsPerNode)
	if !ok {
		t.Error("the block stayed reserved after its holder exited")
	}
	closeAll(held)
}
