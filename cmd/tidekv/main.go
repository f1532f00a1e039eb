// Command tidekv is TideKV's only binary: server, local cluster launcher,
// admin CLI and benchmark. Each subcommand lives in its own file and only
// parses flags before calling into a package.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(exitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "tidekv",
		Short:         "TideKV: an elastic, replicated, range-partitioned key-value store",
		SilenceUsage:  true,
		SilenceErrors: true,
		// Every command refuses a secret given as a flag.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error { return checkSecretFlags(cmd) },
	}
	root.AddCommand(newServerCmd(), newUpCmd(), newCtlCmd(), newBenchCmd(), newCertCmd(), newUserCmd(), newHogCmd())
	return root
}

// exitCodeError carries a process exit code other than 1.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

func exitCode(err error) int {
	if e, ok := err.(*exitCodeError); ok {
		return e.code
	}
	return 1
}
