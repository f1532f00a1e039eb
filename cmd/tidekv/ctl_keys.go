package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/tidekv/tidekv/client"
	"github.com/tidekv/tidekv/internal/cliformat"
)

// keyCmds are get, put, del and scan, in the key space --keyspace names.
func (o *ctlOptions) keyCmds() []*cobra.Command {
	var limit int
	var scanRead, getRead client.ReadOption
	scan := o.keyCommand("scan START END", "List keys in [START, END); END \"\" means to the end", 2,
		func(ctx context.Context, kv keyValues, w io.Writer, args []string) error {
			kvs, err := kv.Scan(ctx, []byte(args[0]), []byte(args[1]), limit, scanRead)
			if err != nil {
				return err
			}
			out := make([]cliformat.KV, len(kvs))
			for i, kv := range kvs {
				out[i] = cliformat.KV{Key: kv.Key, Value: kv.Value}
			}
			if o.json {
				return cliformat.WriteJSON(w, cliformat.ScanJSON(out))
			}
			if err := cliformat.ScanLines(w, out); err != nil {
				return err
			}
			if limit > 0 && len(kvs) == limit {
				// On stderr so that stdout stays just the listing.
				fmt.Fprintf(os.Stderr, "limit of %d reached; more keys may follow (see --limit)\n", limit)
			}
			return nil
		})
	scan.Flags().IntVar(&limit, "limit", 1000, "return at most this many keys (0: no limit)")
	scan.Flags().Var(&scanRead, "read", readFlagUsage)

	get := o.keyCommand("get KEY", "Print the value of KEY (exit 1 if it does not exist)", 1,
		func(ctx context.Context, kv keyValues, w io.Writer, args []string) error {
			key := []byte(args[0])
			v, err := kv.Get(ctx, key, getRead)
			found := err == nil
			if err != nil && !errors.Is(err, client.ErrNotFound) {
				return err
			}
			if o.json {
				if err := cliformat.WriteJSON(w, cliformat.GetJSON(key, v, found)); err != nil {
					return err
				}
			} else if found {
				fmt.Fprintln(w, cliformat.Quote(v))
			}
			if !found {
				return &keyNotFoundError{key: key}
			}
			return nil
		})
	get.Flags().Var(&getRead, "read", readFlagUsage)

	return []*cobra.Command{
		o.keyCommand("put KEY VALUE", "Set KEY to VALUE", 2,
			func(ctx context.Context, kv keyValues, w io.Writer, args []string) error {
				if err := kv.Put(ctx, []byte(args[0]), []byte(args[1])); err != nil {
					return err
				}
				return o.done(w, (&cliformat.Object{}).SetBytes("key", []byte(args[0])).Set("ok", true), "OK")
			}),
		get,
		o.keyCommand("del KEY", "Delete KEY", 1,
			func(ctx context.Context, kv keyValues, w io.Writer, args []string) error {
				existed, err := kv.Delete(ctx, []byte(args[0]))
				if err != nil {
					return err
				}
				msg := "deleted"
				if !existed {
					msg = "not found, nothing deleted"
				}
				return o.done(w, (&cliformat.Object{}).SetBytes("key", []byte(args[0])).Set("existed", existed), msg)
			}),
		scan,
	}
}
