package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tidekv/tidekv/internal/security"
)

func newCertCmd() *cobra.Command {
	o := security.CertOptions{Files: security.OSFiles{}}
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Create a CA and the node and client certificates of a secure cluster (docs/security.md)",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.Dir, "certs-dir", "certs", "directory of ca.crt, node.crt/.key, gossip.key and client.<user>.crt/.key")
	pf.StringVar(&o.CAKeyPath, "ca-key", "", "CA key file (default: <certs-dir>/ca.key)")
	pf.BoolVar(&o.Overwrite, "overwrite", false, "replace existing files")
	var lifetime time.Duration
	pf.DurationVar(&lifetime, "lifetime", 0, "validity (default: 10 years for the CA, 5 years for others; never beyond the CA's)")
	life := func(def time.Duration) security.CertOptions {
		c := o
		if c.Lifetime = lifetime; c.Lifetime == 0 {
			c.Lifetime = def
		}
		return c
	}
	const year = 365 * 24 * time.Hour
	var addKey bool
	gossipKey := &cobra.Command{
		Use: "create-gossip-key", Short: "Create gossip.key, the key that encrypts gossip between secure nodes (give every node the same copy)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return security.CreateGossipKey(o, addKey) },
	}
	gossipKey.Flags().BoolVar(&addKey, "add", false, "append a new key to the existing gossip.key, accepted beside it (a rotation's first step; docs/security.md)")
	cmd.AddCommand(gossipKey,
		&cobra.Command{
			Use: "create-ca", Short: "Create ca.crt and ca.key", Args: cobra.NoArgs,
			RunE: func(*cobra.Command, []string) error { return security.CreateCA(life(10 * year)) },
		},
		&cobra.Command{
			Use: "create-node HOST...", Short: "Create node.crt and node.key for the host names and IP addresses peers and clients dial",
			Args: cobra.MinimumNArgs(1),
			RunE: func(_ *cobra.Command, hosts []string) error { return security.CreateNode(life(5*year), hosts) },
		},
		&cobra.Command{
			Use: "create-client USER", Short: "Create client.USER.crt and client.USER.key", Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error { return security.CreateClient(life(5*year), args[0]) },
		},
	)
	return cmd
}

func newUserCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Manage the users file of a secure cluster (give it to every node with --users-file)",
		Long: "Manage the users file: users, their roles (read, write, admin) and hashed passwords.\n" +
			"Nodes re-read it within a second of a change. Passwords come from $TIDEKV_NEW_PASSWORD or are\n" +
			"asked on the terminal; they are never taken as arguments, which other users can see.",
	}
	cmd.PersistentFlags().StringVar(&path, "users-file", "users.json", "the users file")
	edit := func(fn func(uf *security.UserFile, args []string) error) func(*cobra.Command, []string) error {
		return func(_ *cobra.Command, args []string) error {
			uf, err := security.ReadUserFile(security.OSFiles{}, path)
			if err != nil {
				return err
			}
			if err := fn(uf, args); err != nil {
				return err
			}
			return uf.Write(security.OSFiles{}, path)
		}
	}
	cmd.AddCommand(newUserAddCmd(edit),
		&cobra.Command{Use: "remove USER", Short: "Remove a user", Args: cobra.ExactArgs(1),
			RunE: edit(func(uf *security.UserFile, args []string) error { return uf.Remove(args[0]) })},
		newUserPasswdCmd(edit),
		&cobra.Command{Use: "list", Short: "List users and roles", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				uf, err := security.ReadUserFile(security.OSFiles{}, path)
				if err != nil {
					return err
				}
				fmt.Fprint(cmd.OutOrStdout(), uf.Describe())
				return nil
			}},
	)
	return cmd
}

// newUserAddCmd is `tidekv user add`; edit runs it on the users file.
func newUserAddCmd(edit func(func(*security.UserFile, []string) error) func(*cobra.Command, []string) error) *cobra.Command {
	var role string
	var certOnly bool
	add := &cobra.Command{
		Use: "add USER", Short: "Add a user with a role and a password (or --cert-only)", Args: cobra.ExactArgs(1),
		RunE: edit(func(uf *security.UserFile, args []string) error {
			r, err := security.ParseRole(role)
			if err != nil {
				return err
			}
			pw := ""
			if !certOnly {
				if pw, err = newPassword(); err != nil {
					return err
				}
			}
			return uf.Add(args[0], r, pw)
		}),
	}
	add.Flags().StringVar(&role, "role", "read", "read, write or admin")
	add.Flags().BoolVar(&certOnly, "cert-only", false, "no password: the user authenticates with a client certificate only")
	refuseSecretFlag(add.Flags(), "password", newPasswordAdvice)
	return add
}

// newUserPasswdCmd is `tidekv user passwd`; edit runs it on the users file.
func newUserPasswdCmd(edit func(func(*security.UserFile, []string) error) func(*cobra.Command, []string) error) *cobra.Command {
	passwd := &cobra.Command{Use: "passwd USER", Short: "Change a user's password", Args: cobra.ExactArgs(1),
		RunE: edit(func(uf *security.UserFile, args []string) error {
			pw, err := newPassword()
			if err != nil {
				return err
			}
			return uf.Passwd(args[0], pw)
		})}
	refuseSecretFlag(passwd.Flags(), "password", newPasswordAdvice)
	return passwd
}

// newPasswordAdvice says where `tidekv user` takes a password from.
const newPasswordAdvice = "set $TIDEKV_NEW_PASSWORD or type it when asked"

// newPassword reads a new password from $TIDEKV_NEW_PASSWORD or, twice,
// from the terminal.
func newPassword() (string, error) {
	if pw := os.Getenv("TIDEKV_NEW_PASSWORD"); pw != "" {
		return pw, nil
	}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return "", errors.New("no password: set TIDEKV_NEW_PASSWORD or run on a terminal")
	}
	var pws [2]string
	for i, prompt := range []string{"New password: ", "Again: "} {
		fmt.Fprint(os.Stderr, prompt)
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return "", err
		}
		pws[i] = strings.TrimSpace(string(b))
	}
	if pws[0] != pws[1] {
		return "", errors.New("the two passwords differ")
	}
	return pws[0], nil
}
