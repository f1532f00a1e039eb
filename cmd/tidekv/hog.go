package main

import (
	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/internal/launcher"
)

// newHogCmd is the co-runner a launcher starts beside a node whose quota
// it shares (`bench elastic --hog`): it spins until killed. Hidden: no
// one runs it by hand.
func newHogCmd() *cobra.Command {
	return &cobra.Command{
		Use:    launcher.HogCommand,
		Short:  "Burn CPU until killed (a launcher's co-runner)",
		Hidden: true,
		Args:   cobra.NoArgs,
		Run:    func(*cobra.Command, []string) { launcher.Spin() },
	}
}
