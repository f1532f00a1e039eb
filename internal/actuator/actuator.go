// Package actuator builds the node actuator the controller uses, by name:
// "local" (processes on this machine, package local), "kubernetes" (a
// StatefulSet's scale subresource, package kubernetes) or "manual" (a
// recommendation and an optional command hook, package manual).
package actuator

import (
	"fmt"
	"strings"

	"github.com/tidekv/tidekv/internal/actuator/kubernetes"
	"github.com/tidekv/tidekv/internal/actuator/local"
	"github.com/tidekv/tidekv/internal/actuator/manual"
	"github.com/tidekv/tidekv/internal/control"
)

// The actuator names New accepts.
const (
	Local      = "local"
	Kubernetes = "kubernetes"
	Manual     = "manual"
)

// Names lists the actuator names New accepts.
var Names = []string{Local, Kubernetes, Manual}

// Config holds every actuator's settings; New uses the named one's.
type Config struct {
	Local      local.Config
	Kubernetes kubernetes.Config
	Manual     manual.Config
}

// DefaultConfig returns each kind's defaults. Local.Dir is empty: set it
// from the server's data directory (local.DirBeside).
func DefaultConfig() Config {
	return Config{
		Local:      local.DefaultConfig(),
		Kubernetes: kubernetes.DefaultConfig(),
		Manual:     manual.DefaultConfig(),
	}
}

// Validate checks that name is known and that its settings are valid; the
// other kinds' settings are not looked at.
func (c Config) Validate(name string) error {
	switch name {
	case Local:
		return c.Local.Validate()
	case Kubernetes:
		return c.Kubernetes.Validate()
	case Manual:
		return c.Manual.Validate()
	}
	return fmt.Errorf("unknown actuator %q (want one of %s)", name, strings.Join(Names, ", "))
}

// New returns the actuator called name, configured from cfg.
func New(name string, cfg Config) (control.Actuator, error) {
	if err := cfg.Validate(name); err != nil {
		return nil, err
	}
	switch name {
	case Local:
		return local.New(cfg.Local)
	case Kubernetes:
		return kubernetes.New(cfg.Kubernetes)
	default:
		return manual.New(cfg.Manual)
	}
}
