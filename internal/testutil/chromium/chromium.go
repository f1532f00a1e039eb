package chromium

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// debianPath is where Debian's chromium package installs its launcher.
const debianPath = "/usr/bin/chromium"

// startupSlack is added to the virtual-time budget to form the wall-clock
// limit of a run: browser start-up takes a second or two on an idle machine
// and much longer when `go test ./...` runs many packages at once.
const startupSlack = 45 * time.Second

// waitDelay bounds how long Wait waits for stray children that still hold
// stdout or stderr open after the browser itself has been killed.
const waitDelay = 5 * time.Second

// Path returns the Chromium executable to use and whether one was found.
func Path() (string, bool) {
	if fi, err := os.Stat(debianPath); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return debianPath, true
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// DumpDOM loads url in headless Chromium, lets the page run for budget of
// virtual time (see the package comment) and returns the serialized DOM.
// trust are server certificates to accept although no CA the browser knows
// signed them (an https URL of a cluster with its own CA).
func DumpDOM(ctx context.Context, url string, budget time.Duration, trust ...*x509.Certificate) (string, error) {
	out, err := run(ctx, budget, append(trustFlags(trust), "--dump-dom", url)...)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// Screenshot loads url in a width×height headless window, lets the page run
// for budget of virtual time and writes a PNG of the viewport to pngPath;
// trust is as for DumpDOM.
func Screenshot(ctx context.Context, url, pngPath string, width, height int, budget time.Duration, trust ...*x509.Certificate) error {
	if width <= 0 || height <= 0 {
		return fmt.Errorf("chromium: invalid window size %dx%d", width, height)
	}
	// A stale file would make the existence check below meaningless.
	if err := os.Remove(pngPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("chromium: %w", err)
	}
	if _, err := run(ctx, budget, append(trustFlags(trust),
		"--hide-scrollbars",
		"--screenshot="+pngPath,
		"--window-size="+strconv.Itoa(width)+","+strconv.Itoa(height),
		url,
	)...); err != nil {
		return err
	}
	fi, err := os.Stat(pngPath)
	if err != nil {
		return fmt.Errorf("chromium: screenshot not written: %w", err)
	}
	if fi.Size() == 0 {
		return fmt.Errorf("chromium: screenshot %s is empty", pngPath)
	}
	return nil
}

// trustFlags makes Chromium accept the certificates certs: Chromium keeps
// its trusted CAs in an NSS database, not in a flag, but it takes a list
// of public keys (base64 SHA-256 of each SubjectPublicKeyInfo) whose
// certificates' errors it ignores.
func trustFlags(certs []*x509.Certificate) []string {
	if len(certs) == 0 {
		return nil
	}
	hashes := make([]string, len(certs))
	for i, c := range certs {
		h := sha256.Sum256(c.RawSubjectPublicKeyInfo)
		hashes[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return []string{"--ignore-certificate-errors-spki-list=" + strings.Join(hashes, ",")}
}

// run starts Chromium with the common flags plus args and returns its
// stdout.
func run(ctx context.Context, budget time.Duration, args ...string) ([]byte, error) {
	bin, ok := Path()
	if !ok {
		return nil, errors.New("chromium: browser not found")
	}
	if budget <= 0 {
		return nil, fmt.Errorf("chromium: budget must be positive, got %v", budget)
	}
	tmp, err := os.MkdirTemp("", "tidekv-chromium-")
	if err != nil {
		return nil, fmt.Errorf("chromium: %w", err)
	}
	defer os.RemoveAll(tmp)

	ctx, cancel := context.WithTimeout(ctx, budget+startupSlack)
	defer cancel()

	cmd := command(ctx, bin, tmp, append([]string{"--virtual-time-budget=" + strconv.FormatInt(budget.Milliseconds(), 10)}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr

	err = cmd.Run()
	if cmd.Process != nil {
		// Reap stragglers of a browser that exited on its own, too.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr // "signal: killed" would hide the reason
		}
		return nil, fmt.Errorf("chromium: %s: %w (stderr: %s)", args[len(args)-1], err, tail(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// command is headless Chromium with a fresh profile in tmp and args,
// killed with its whole process group when ctx ends.
func command(ctx context.Context, bin, tmp string, args ...string) *exec.Cmd {
	flags := []string{
		"--headless",
		"--no-sandbox", // the sandbox needs user namespaces, often unavailable in CI containers
		"--disable-gpu",
		"--disable-quic",
		"--no-first-run",
		"--disable-background-networking",
		"--disable-component-update",
		"--disable-sync",
		"--user-data-dir=" + tmp,
	}
	cmd := exec.CommandContext(ctx, bin, append(flags, args...)...)
	// Keep the browser (and the Debian wrapper's crash-report cleanup) away
	// from the real home directory.
	cmd.Env = append(os.Environ(),
		"HOME="+tmp,
		"XDG_CONFIG_HOME="+tmp+"/config",
		"XDG_CACHE_HOME="+tmp+"/cache",
	)
	// Chromium forks zygote, GPU and renderer processes; killing only the
	// launcher would leave them running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	return cmd
}

// tail returns the end of Chromium's stderr, which is mostly noise (D-Bus,
// GPU) with the useful line last.
func tail(b []byte) string {
	const limit = 2000
	b = bytes.TrimSpace(b)
	if len(b) > limit {
		b = append([]byte("..."), b[len(b)-limit:]...)
	}
	return string(b)
}
