package server

import (
	"github.com/tidekv/tidekv/internal/cgroup"
	"github.com/tidekv/tidekv/internal/monitor"
)

// cgroupQuota gives the monitor the node's CPU size from its own cgroup:
// a node that `tidekv up --node-cpus`, the local actuator, systemd's
// CPUQuota= or a container's CPU limit sized scores the utilisation of its
// quota (monitor.Usage.NodeCPU).
type cgroupQuota struct{ r cgroup.Reader }

func (q cgroupQuota) ReadCPUQuota() (monitor.CPUQuota, error) {
	st, err := q.r.Read()
	return monitor.CPUQuota{CPUs: st.CPUs, Periods: st.Periods, Throttled: st.Throttled, ThrottledTime: st.ThrottledTime}, err
}

// ownQuota is the node's quota reader, or nil where it has no cpu cgroup
// to read (not Linux, no cpu controller): the node is then unsized.
func ownQuota() monitor.QuotaReader {
	r, err := cgroup.Self()
	if err != nil {
		return nil
	}
	return cgroupQuota{r}
}
