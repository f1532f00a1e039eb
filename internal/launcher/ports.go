package launcher

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// PortsPerNode is the size of each node's port block. Only the first few
// offsets are in use; the rest are reserved so that adding a listener later
// never shifts the ports of existing deployments.
const PortsPerNode = 10

// Offsets of each listener inside a node's port block.
const (
	OffsetGRPC   = 0
	OffsetHTTP   = 1
	OffsetRedis  = 2 // the Redis-protocol listener
	OffsetGossip = 3 // the gossip listener (TCP and UDP)
)

// Port returns the port at offset within node index's block (index is
// 1-based).
func Port(base, index, offset int) int {
	return base + PortsPerNode*(index-1) + offset
}

// Ports returns node index's gRPC and HTTP ports (index is 1-based):
// grpc = base + 10*(index-1), http = grpc + 1.
func Ports(base, index int) (grpc, http int) {
	return Port(base, index, OffsetGRPC), Port(base, index, OffsetHTTP)
}

// HostPort joins host and port into an address ("127.0.0.1:7400").
func HostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// PortsFree reports an error naming the first of ports that cannot be bound
// on host right now. It is a best-effort early check: the port can still be
// taken between the check and the server's own bind.
func PortsFree(host string, ports ...int) error {
	for _, p := range ports {
		l, err := net.Listen("tcp", HostPort(host, p))
		if err != nil {
			return fmt.Errorf("port %d on %s is not free: %w", p, host, err)
		}
		l.Close()
	}
	return nil
}

// FreeBasePort picks a base port whose whole block of nodes*PortsPerNode
// ports is currently bindable on host and reserves it for the rest of this
// process's life. It chooses at random below the kernel's ephemeral range,
// because a port inside that range can be grabbed as the local end of some
// outgoing connection while a node is down and its restart would then fail
// to bind.
//
// A free port says nothing of a cluster whose nodes are down for a
// moment, so the block is also reserved, against every process that picks
// ports here (test binaries running side by side, benchmarks, the local
// actuator): reserve holds a lock file per ten ports, which the kernel
// drops when the process exits.
func FreeBasePort(host string, nodes int) (int, error) {
	if nodes < 1 {
		return 0, fmt.Errorf("launcher: FreeBasePort: nodes must be >= 1, got %d", nodes)
	}
	lo, hi := 10000, ephemeralLow()
	span := nodes * PortsPerNode
	if hi-lo < span {
		lo, hi = 1024, 65536
	}
	blocks := (hi - lo - span) / PortsPerNode
	var lastErr error
	for attempt := 0; attempt < 100; attempt++ {
		base := lo + PortsPerNode*rand.IntN(blocks+1)
		ports := make([]int, span)
		for i := range ports {
			ports[i] = base + i
		}
		held, ok := reserve(base, span)
		if !ok {
			lastErr = fmt.Errorf("ports %d-%d are reserved by another cluster", base, base+span-1)
			continue
		}
		if lastErr = PortsFree(host, ports...); lastErr == nil {
			reserved.mu.Lock()
			reserved.files = append(reserved.files, held...)
			reserved.mu.Unlock()
			return base, nil
		}
		closeAll(held)
	}
	return 0, fmt.Errorf("launcher: no free block of %d ports on %s: %w", span, host, lastErr)
}

// reserved holds the lock files of the blocks this process reserved, open
// until it exits (the kernel releases the locks then); they are kept
// referenced because an unreferenced os.File is closed by its finalizer.
var reserved struct {
	mu    sync.Mutex
	files []*os.File
}

// reserve takes an exclusive lock on the lock file of every ten ports that
// [base, base+span) touches, in a directory every process on the machine
// shares; flock locks conflict between separate opens even within one
// process, so two clusters of one test binary exclude each other too. It
// reports false, holding nothing, if another holds any of them. Where the
// directory cannot be made or a file opened (a read-only temporary
// directory), it holds nothing and reports true: the bind check alone
// remains. The caller keeps or closes what it holds.
func reserve(base, span int) (held []*os.File, ok bool) {
	dir := filepath.Join(os.TempDir(), "tidekv-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, true
	}
	for unit := base / 10; unit <= (base+span-1)/10; unit++ {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(unit*10)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			closeAll(held)
			return nil, true
		}
		held = append(held, f)
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			closeAll(held)
			return nil, false
		}
	}
	return held, true
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// ephemeralLow returns the first port of the kernel's ephemeral range
// (Linux), or a conservative default elsewhere.
func ephemeralLow() int {
	const def = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return def
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return def
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 1024 {
		return def
	}
	return n
}
