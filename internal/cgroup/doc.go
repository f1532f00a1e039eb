// Package cgroup gives TideKV node processes a CPU size of their own and
// lets a node read its size back. It owns:
//
//   - finding this process's cpu controller: a cgroup v2 hierarchy whose
//     cgroup.controllers lists cpu, else a cgroup v1 hierarchy mounted with
//     the cpu controller (from /proc/self/mountinfo and /proc/self/cgroup);
//   - refusing, in one sentence naming what is missing, where nodes cannot
//     be sized (not Linux, no cpu controller, a cgroup the launcher may not
//     write: not root);
//   - creating one cgroup per node under the launcher's own cgroup (beside
//     it when the launcher is itself a sized node, so nodes never share a
//     quota), with a quota of F CPUs per Period, moving the node's process
//     into it, and removing it once the process has exited;
//   - creating a child of a sized node's own v1 cgroup (Own), for its
//     password derivation workers, and removing a cgroup's children
//     with it;
//   - creating a co-runner's cgroup inside a sized node's v1 cgroup
//     (CoRunner): a share of the node's quota, taken ahead of the node;
//   - where v1 mounts cpuacct as a hierarchy of its own, a twin of every
//     cgroup it makes at the same path there (when the parent's twin
//     exists), entered and removed with it, so that the cgroup's usage
//     can be read;
//   - reading a cgroup's quota, throttling and usage: the CPU time of
//     all its tasks and children (v1 cpu.cfs_quota_us, cpu.cfs_period_us,
//     cpu.stat and cpuacct.usage of the cgroup at the same path; v2
//     cpu.max and cpu.stat).
//
// It does not start processes (internal/launcher and the local actuator
// do) nor turn the quota into a load figure (internal/monitor does). It
// imports only the standard library. docs/operations.md, "Node CPU size",
// is the operator's view.
package cgroup
