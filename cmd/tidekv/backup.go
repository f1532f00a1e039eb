package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/backup"
	"github.com/tidekv/tidekv/internal/cliformat"
	"github.com/tidekv/tidekv/internal/units"
)

// longTimeout replaces --timeout's default for backup and restore, whose
// length grows with the data; a given --timeout still applies.
const longTimeout = 24 * time.Hour

// newBackupCmds are `ctl backup DIR` and `ctl restore DIR`
// (docs/backup.md).
func (o *ctlOptions) newBackupCmds() []*cobra.Command {
	var lease time.Duration
	bk := o.longCommand("backup DIR", "Write a consistent copy of every key, read at one timestamp, to the empty directory DIR", 1,
		func(ctx context.Context, cl *client.Client, w io.Writer, args []string) error {
			start := time.Now()
			src := backup.NewClientSource(cl)
			src.Lease, src.Owner = lease, "ctl backup "+args[0]
			m, err := backup.Backup(ctx, src, args[0], backup.Options{Progress: progress("backup")})
			if err != nil {
				return err
			}
			return o.summary(w, "backup", args[0], m, start)
		})
	bk.Flags().DurationVar(&lease, "protect-lease", backup.DefaultProtectLease, "how long the backup's protected timestamp outlives its last renewal (renewed every quarter of it): how long an abandoned backup keeps GC from its timestamp")
	var force bool
	rs := o.longCommand("restore DIR", "Verify the backup in DIR, then load it into the cluster (refused if the cluster holds data, unless --force)", 1,
		func(ctx context.Context, cl *client.Client, w io.Writer, args []string) error {
			start := time.Now()
			m, err := backup.Restore(ctx, backup.NewClientSink(cl), args[0], force, backup.Options{Progress: progress("restore")})
			if err != nil {
				return err
			}
			return o.summary(w, "restore", args[0], m, start)
		})
	rs.Flags().BoolVar(&force, "force", false, "restore into a cluster that already holds data (keys in the backup are overwritten, others stay)")
	return []*cobra.Command{bk, rs}
}

// longCommand is command with longTimeout unless --timeout is given.
func (o *ctlOptions) longCommand(use, short string, nargs int, fn func(context.Context, *client.Client, io.Writer, []string) error) *cobra.Command {
	c := o.command(use, short, nargs, fn)
	c.Long = short + ".\n\nProgress goes to stderr, the summary to stdout; --timeout defaults to 24h here. See docs/backup.md."
	run := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if !cmd.Flags().Changed("timeout") {
			o.timeout = longTimeout
		}
		return run(cmd, args)
	}
	return c
}

// progress prints running totals to stderr, at most once a second.
func progress(op string) func(pairs, bytes int64) {
	var mu sync.Mutex
	var last time.Time
	return func(pairs, bytes int64) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < time.Second {
			return
		}
		last = time.Now()
		fmt.Fprintf(os.Stderr, "%s: %d pairs, %s so far\n", op, pairs, units.Human(uint64(bytes)))
	}
}

// summary prints the outcome of a backup or restore.
func (o *ctlOptions) summary(w io.Writer, op, dir string, m *backup.Manifest, start time.Time) error {
	secs := time.Since(start).Seconds()
	if o.json {
		return cliformat.WriteJSON(w, map[string]any{"op": op, "dir": dir, "timestamp": m.Timestamp, "files": len(m.Files),
			"keyspaces": len(m.KeySpaces), "pairs": m.Pairs, "bytes": m.Bytes, "seconds": secs})
	}
	_, err := fmt.Fprintf(w, "%s of %s done: %d pairs, %s in %d files, %d named key spaces, at timestamp %s, in %.1fs (%.1f MB/s, %.0f pairs/s)\n",
		op, dir, m.Pairs, units.Human(uint64(m.Bytes)), len(m.Files), len(m.KeySpaces), m.Timestamp, secs,
		float64(m.Bytes)/1e6/secs, float64(m.Pairs)/secs)
	return err
}
