package server

import (
	"log"
	"net/http"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tidekv/tidekv/internal/faultinject"
)

// injectFaults gives cfg's transport a partition, its store a clock and
// its engine a disk that the returned handler controls (internal/faultinject).
func injectFaults(cfg *Config) http.Handler {
	f := faultinject.New()
	cfg.Transport.Partition, cfg.Raft.Clock = f.Partition, f.Clock
	cfg.Pebble.FS = f.Disk.Wrap(vfs.Default)
	log.Printf("fault injection on: /debug/faults on the HTTP address can partition this node, skew its clock and slow or fail its disk (loopback callers only)")
	return f.Handler()
}
