package security

import (
	"log"
	"runtime"
	"sync"
	"time"
)

// onIdleThread runs derive on an OS thread of its own that the kernel runs
// only when nothing else of the node's wants that CPU (SCHED_IDLE, where
// the platform has it), and waits for it. A derivation keeps a CPU busy
// for about 30 ms without a pause; at the default priority a logged-in
// request whose thread shares that CPU waits behind it for up to the
// kernel's time slice, and the Go runtime's (a goroutine is preempted
// every 10 ms). At idle priority the request's thread takes the CPU as
// soon as it wakes. The Go scheduler still needs a free P for the
// request's goroutine: GOMAXPROCS is at least 2 on a node whose CPU quota
// is below 2 (the runtime's own minimum under a cgroup quota).
//
// The thread is never unlocked, so it ends with the goroutine: an
// unprivileged process cannot raise a thread's priority back, and the
// runtime would otherwise go on to run any goroutine on it at idle
// priority.
//
// It returns the CPU time derive took on its thread (where the platform
// tells it; elsewhere its wall time).
func onIdleThread(derive func()) (cpu time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err := lowerThread(); err != nil {
			idleOnce.Do(func() {
				log.Printf("security: password derivations run at the default priority: %v", err)
			})
		}
		start := threadTime()
		derive()
		cpu = threadTime() - start
	}()
	<-done
	return cpu
}

// idleOnce logs a platform that refuses the idle priority once, not at
// every login of a flood.
var idleOnce sync.Once
