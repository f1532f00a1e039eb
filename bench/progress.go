package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progressInterval is how often the live progress line is refreshed.
const progressInterval = time.Second

// progress prints a phase's live progress. On a terminal it rewrites one
// line with '\r'; elsewhere (files, pipes, CI logs) it prints plain lines so
// the output stays readable. A progress with a nil writer does nothing.
type progress struct {
	w        io.Writer
	tty      bool
	name     string
	interval time.Duration

	total   int64
	limit   time.Duration
	workers []*worker
	begin   time.Time
	lastOps int64
	lastAt  time.Time
	lastLen int
	// note, if set, adds a phrase of the caller's to each line.
	note func() string

	quit chan struct{}
	done chan struct{}
}

func newProgress(w io.Writer, name string) *progress {
	return &progress{w: w, tty: isTerminal(w), name: name, interval: progressInterval}
}

// isTerminal reports whether w is a character device such as a terminal,
// using only the standard library.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// start begins printing every interval until stop.
func (p *progress) start(now time.Time, total int64, limit time.Duration, workers []*worker) {
	if p.w == nil {
		return
	}
	p.total, p.limit, p.workers = total, limit, workers
	p.begin, p.lastAt = now, now
	p.quit, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case now := <-t.C:
				p.print(now, false)
			}
		}
	}()
}

// stop ends the ticker and prints the phase's final line.
func (p *progress) stop(now time.Time) {
	if p.w == nil {
		return
	}
	close(p.quit)
	<-p.done
	p.print(now, true)
}

func (p *progress) print(now time.Time, final bool) {
	var ops, errs int64
	for _, w := range p.workers {
		ops += w.done.Load()
		errs += w.errs.Load()
	}
	elapsed := now.Sub(p.begin)
	var b strings.Builder
	// The bar follows whichever bound ends the phase first.
	frac := -1.0
	if p.total > 0 {
		frac = float64(ops) / float64(p.total)
	}
	if p.limit > 0 {
		frac = max(frac, elapsed.Seconds()/p.limit.Seconds())
	}
	if frac >= 0 {
		b.WriteString(bar(frac, 20))
		b.WriteByte(' ')
	}
	fmt.Fprintf(&b, "%s: %d", p.name, ops)
	if p.total > 0 {
		fmt.Fprintf(&b, "/%d ops (%.1f%%)", p.total, 100*float64(ops)/float64(p.total))
	} else {
		b.WriteString(" ops")
	}
	if final {
		fmt.Fprintf(&b, ", %.0f ops/s avg", rate(ops, elapsed))
	} else {
		fmt.Fprintf(&b, ", %.0f ops/s", rate(ops-p.lastOps, now.Sub(p.lastAt)))
	}
	fmt.Fprintf(&b, ", %d errors, %.1fs elapsed", errs, elapsed.Seconds())
	if p.limit > 0 {
		fmt.Fprintf(&b, " of %s", p.limit)
	}
	if p.note != nil {
		b.WriteString(", " + p.note())
	}
	p.lastOps, p.lastAt = ops, now

	line := b.String()
	if p.tty {
		// Pad over the remains of a longer previous line.
		pad := max(p.lastLen-len(line), 0)
		p.lastLen = len(line)
		end := ""
		if final {
			end = "\n"
		}
		fmt.Fprintf(p.w, "\r%s%s%s", line, strings.Repeat(" ", pad), end)
		return
	}
	fmt.Fprintln(p.w, line)
}

// bar renders a fraction in [0,1] as [#####.....] of width cells.
func bar(frac float64, width int) string {
	filled := int(min(max(frac, 0), 1) * float64(width))
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
}

// rate returns n per second over d.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}
