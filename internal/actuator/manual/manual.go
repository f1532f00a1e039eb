// Package manual is the actuator that only recommends: it returns the
// sentence saying which node to add or remove (the controller records it as
// an event and a metric) and, if configured, runs an operator's command hook
// that can act on it.
package manual

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tidekv/tidekv/internal/control"
)

// Environment variables the command hook receives.
const (
	EnvAction     = "TIDEKV_SCALE_ACTION" // "scale-out" or "scale-in"
	EnvCount      = "TIDEKV_SCALE_COUNT"  // nodes to add (scale-out) or 1 (scale-in)
	EnvJoin       = "TIDEKV_JOIN"         // scale-out: comma-separated gRPC addresses to join through
	EnvMemberAddr = "TIDEKV_MEMBER_ADDR"  // scale-in: gRPC address of the drained node
	EnvMemberID   = "TIDEKV_MEMBER_ID"    // scale-in: ID of the drained node
)

// Config configures the manual actuator.
type Config struct {
	// Command is the hook's argv (no shell); empty runs nothing.
	Command []string
	// Timeout bounds one run of the hook; it is then killed with its
	// process group.
	Timeout time.Duration
}

// DefaultConfig returns no hook and a 30 s timeout.
func DefaultConfig() Config { return Config{Timeout: 30 * time.Second} }

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if c.Timeout <= 0 {
		return fmt.Errorf("manual actuator: hook timeout must be > 0, got %v", c.Timeout)
	}
	if len(c.Command) > 0 && c.Command[0] == "" {
		return errors.New("manual actuator: hook command has an empty program name")
	}
	return nil
}

// Actuator recommends and optionally runs the hook.
type Actuator struct{ cfg Config }

var _ control.Actuator = (*Actuator)(nil)

// New validates cfg.
func New(cfg Config) (*Actuator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Actuator{cfg: cfg}, nil
}

// Name returns "manual".
func (a *Actuator) Name() string { return "manual" }

// ScaleOut recommends adding count nodes and runs the hook with
// TIDEKV_SCALE_ACTION=scale-out.
func (a *Actuator) ScaleOut(ctx context.Context, count int, join []string) (string, error) {
	if count < 1 {
		return "", fmt.Errorf("manual actuator: scale-out count must be >= 1, got %d", count)
	}
	msg := fmt.Sprintf("manual: recommend adding %d node(s) joining through %s", count, strings.Join(join, ","))
	return a.hook(ctx, msg,
		EnvAction+"=scale-out", EnvCount+"="+strconv.Itoa(count), EnvJoin+"="+strings.Join(join, ","))
}

// Victim picks the member with the highest ID: the youngest node, which
// usually holds the least data.
func (a *Actuator) Victim(members []control.Member) (control.Member, error) {
	if len(members) == 0 {
		return control.Member{}, errors.New("manual actuator: no members to choose from")
	}
	return slices.MaxFunc(members, func(x, y control.Member) int {
		return cmp.Compare(x.ID, y.ID)
	}), nil
}

// Remove recommends stopping m, which placement has drained, and runs the
// hook with TIDEKV_SCALE_ACTION=scale-in.
func (a *Actuator) Remove(ctx context.Context, m control.Member) (string, error) {
	msg := fmt.Sprintf("manual: node %d (%s) is drained and decommissioned; recommend stopping it", m.ID, m.Addr)
	return a.hook(ctx, msg, EnvAction+"=scale-in", EnvCount+"=1",
		EnvMemberAddr+"="+m.Addr, EnvMemberID+"="+strconv.FormatUint(m.ID, 10))
}

// hook runs the configured command with env added and returns msg, with
// the hook's outcome appended when there is one.
func (a *Actuator) hook(ctx context.Context, msg string, env ...string) (string, error) {
	if len(a.cfg.Command) == 0 {
		return msg, nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, a.cfg.Command[0], a.cfg.Command[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, killed whole on timeout, so a hook's children
	// cannot keep it (and our pipes) alive.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (timeout %v)", ctx.Err(), a.cfg.Timeout)
		}
		return "", fmt.Errorf("manual actuator: hook %q failed: %v; output: %s",
			a.cfg.Command[0], err, lastLine(out.String()))
	}
	return fmt.Sprintf("%s; hook %q ran: %s", msg, a.cfg.Command[0], lastLine(out.String())), nil
}

// lastLine returns the last non-empty line of s, cut to 200 bytes.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 200 {
		l = l[:200] + "..."
	}
	if l == "" {
		return "(no output)"
	}
	return l
}
