package chromium

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Browser is a headless Chromium driven over the DevTools protocol, for
// pages a test must act on (fill and submit a login form) rather than only
// load. It talks to the browser over a pair of pipes
// (--remote-debugging-pipe: commands on its fd 3, replies and events on
// its fd 4, each message a JSON object ended by a NUL byte), so no port is
// opened. It drives one page, in real time: no virtual time budget.
type Browser struct {
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	tmp     string
	w       io.WriteCloser
	replies chan message
	session string
	stderr  *os.File // in tmp: read for error messages

	mu     sync.Mutex // serializes commands
	nextID int
}

type message struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// Launch starts a browser with one blank page; trust is as for DumpDOM.
// ctx bounds the browser's life: when it ends, the browser is killed.
func Launch(ctx context.Context, trust ...*x509.Certificate) (*Browser, error) {
	bin, ok := Path()
	if !ok {
		return nil, errors.New("chromium: browser not found")
	}
	tmp, err := os.MkdirTemp("", "tidekv-chromium-")
	if err != nil {
		return nil, fmt.Errorf("chromium: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	b := &Browser{cancel: cancel, tmp: tmp, replies: make(chan message, 1)}
	if b.stderr, err = os.Create(filepath.Join(tmp, "stderr")); err != nil {
		b.Close()
		return nil, err
	}
	// The browser reads commands from cmdR (its fd 3) and writes to outW
	// (its fd 4); the other ends are ours.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		b.Close()
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		b.Close()
		return nil, err
	}
	cmd := command(ctx, bin, tmp, append(trustFlags(trust), "--remote-debugging-pipe", "about:blank")...)
	cmd.ExtraFiles, cmd.Stderr = []*os.File{cmdR, outW}, b.stderr
	err = cmd.Start()
	cmdR.Close()
	outW.Close()
	if err != nil {
		cmdW.Close()
		outR.Close()
		b.Close()
		return nil, fmt.Errorf("chromium: %w", err)
	}
	b.cmd, b.w = cmd, cmdW
	go b.read(outR)

	var created struct{ TargetID string }
	if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &created); err != nil {
		b.Close()
		return nil, err
	}
	var attached struct{ SessionID string }
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": created.TargetID, "flatten": true}, &attached); err != nil {
		b.Close()
		return nil, err
	}
	b.session = attached.SessionID
	return b, nil
}

// read passes the replies to commands on and drops events.
func (b *Browser) read(r io.ReadCloser) {
	defer r.Close()
	defer close(b.replies)
	br := bufio.NewReader(r)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m message
		if json.Unmarshal(raw[:len(raw)-1], &m) == nil && m.ID != 0 {
			b.replies <- m
		}
	}
}

// commandTimeout bounds one command: a browser that stops answering fails
// the test instead of hanging it.
const commandTimeout = 30 * time.Second

// call sends a command (to the page's session unless session is "") and
// decodes its result into out.
func (b *Browser) call(session, method string, params any, out any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	req := map[string]any{"id": b.nextID, "method": method, "params": params}
	if session != "" {
		req["sessionId"] = session
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := b.w.Write(append(raw, 0)); err != nil {
		return fmt.Errorf("chromium: %s: %w (stderr: %s)", method, err, b.stderrTail())
	}
	timer := time.NewTimer(commandTimeout)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-b.replies:
			if !ok {
				return fmt.Errorf("chromium: %s: the browser went away (stderr: %s)", method, b.stderrTail())
			}
			if m.ID != b.nextID {
				continue // the reply to a command that timed out
			}
			if m.Error != nil {
				return fmt.Errorf("chromium: %s: %s", method, m.Error.Message)
			}
			if out == nil {
				return nil
			}
			return json.Unmarshal(m.Result, out)
		case <-timer.C:
			return fmt.Errorf("chromium: %s: no reply within %v", method, commandTimeout)
		}
	}
}

func (b *Browser) stderrTail() string {
	out, _ := os.ReadFile(b.stderr.Name())
	return tail(out)
}

// Navigate loads url in the page.
func (b *Browser) Navigate(url string) error {
	var r struct{ ErrorText string }
	if err := b.call(b.session, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("chromium: navigating to %s: %s", url, r.ErrorText)
	}
	return nil
}

// Eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value into out (nil to drop it).
func (b *Browser) Eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := b.call(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("chromium: %s: %s %s", expr, e.Text, e.Exception.Description)
	}
	if out == nil || r.Result.Value == nil {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// WaitFor waits until the expression is true in the page, as the page
// gets there (a navigation, a render after a fetch): evaluation errors
// while a new page loads count as not yet. It fails when ctx ends, with
// the expression's last error.
func (b *Browser) WaitFor(ctx context.Context, expr string) error {
	var last error
	for {
		var ok bool
		if last = b.Eval(expr, &ok); last == nil && ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("chromium: waiting for %s: %w (last: %v)", expr, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Close kills the browser and removes its profile.
func (b *Browser) Close() {
	if b.w != nil {
		b.w.Close()
	}
	if b.cmd != nil {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		_ = b.cmd.Wait()
	}
	if b.stderr != nil {
		b.stderr.Close()
	}
	b.cancel()
	os.RemoveAll(b.tmp)
}

// Submit waits for the form that selector (CSS) finds, sets its named
// fields to values and submits it as its submit button would.
func (b *Browser) Submit(ctx context.Context, selector string, values map[string]string) error {
	sel, err := json.Marshal(selector)
	if err != nil {
		return err
	}
	if err := b.WaitFor(ctx, fmt.Sprintf("document.querySelector(%s) !== null", sel)); err != nil {
		return err
	}
	vals, err := json.Marshal(values)
	if err != nil {
		return err
	}
	return b.Eval(fmt.Sprintf(`(() => { const f = document.querySelector(%s); const v = %s;
		for (const k in v) f.elements[k].value = v[k]; f.requestSubmit(); })()`, sel, vals), nil)
}

// Screenshot writes a PNG of the page, laid out in a width×height window,
// to pngPath.
func (b *Browser) Screenshot(pngPath string, width, height int) error {
	if err := b.call(b.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return err
	}
	var shot struct{ Data []byte }
	if err := b.call(b.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		return err
	}
	return os.WriteFile(pngPath, shot.Data, 0o644)
}
