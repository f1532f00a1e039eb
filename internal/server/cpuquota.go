package server

import (
	"github.com/tidekv/tidekv/internal/cgroup"
	"github.com/tidekv/tidekv/internal/monitor"
)

// cgroupQuota gives the monitor the node's CPU size from its own cgroup:
// a node that `tidekv up --node-cpus`, the local actuator, systemd's
// CPUQuota= or a container's CPU limit sized scores the utilisation of its
// quota (monitor.Usage.NodeCPU), less what else runs in its cgroup uses
// where the cgroup's usage can be read.
//
// It finds the cgroup again at every read (two small /proc files, once a
// monitor sample): the launcher moves a node into its cgroup just after
// starting it, so the cgroup the process sees at start can still be the
// launcher's, and a reader bound then would report the node unsized for
// good.
type cgroupQuota struct{}

func (cgroupQuota) ReadCPUQuota() (monitor.CPUQuota, error) {
	r, err := cgroup.Self()
	if err != nil {
		return monitor.CPUQuota{}, err
	}
	st, err := r.Read()
	return monitor.CPUQuota{CPUs: st.CPUs, Periods: st.Periods, Throttled: st.Throttled, ThrottledTime: st.ThrottledTime,
		Usage: st.Usage, UsageKnown: st.UsageKnown}, err
}

// ownQuota is the node's quota reader, or nil where it has no cpu cgroup
// to read (not Linux, no cpu controller): the node is then unsized.
func ownQuota() monitor.QuotaReader {
	if _, err := cgroup.Self(); err != nil {
		return nil
	}
	return cgroupQuota{}
}
