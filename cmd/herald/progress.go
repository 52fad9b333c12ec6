package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// progress shows how far a long operation is, on stderr: a bar redrawn in
// place when stderr is a terminal, plain count lines otherwise (at most
// one per plainEvery, and the last one at Done) so that logs stay short.
// Bulk commands use it; it is safe for concurrent use.
type progress struct {
	w     io.Writer
	label string
	total int // 0: unknown, counts only
	tty   bool
	now   func() time.Time

	mu    sync.Mutex
	n     int
	last  time.Time // last drawn
	drawn bool
	done  bool
	// shown is the count of the last plain line (-1: none): Done does not
	// print the same line again.
	shown int
}

// Redraw intervals.
const (
	ttyEvery   = 100 * time.Millisecond
	plainEvery = 2 * time.Second
	barWidth   = 30
)

// newProgress starts a progress display of label on w; total is the
// number of items expected (0 if unknown).
func newProgress(w io.Writer, label string, total int) *progress {
	return &progress{w: w, label: label, total: total, tty: isTerminal(w), now: time.Now, shown: -1}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Add counts n more items done.
func (p *progress) Add(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.n += n
	every := plainEvery
	if p.tty {
		every = ttyEvery
	}
	if now := p.now(); !p.drawn || now.Sub(p.last) >= every {
		p.draw(false)
		p.last, p.drawn = now, true
	}
}

// Done draws the final count and ends the display (later calls do
// nothing).
func (p *progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	p.draw(true)
}

// draw writes the current state; final ends the line.
func (p *progress) draw(final bool) {
	count := fmt.Sprint(p.n)
	if p.total > 0 {
		count = fmt.Sprintf("%d/%d", p.n, p.total)
	}
	if !p.tty {
		if (final || p.n > 0) && p.n != p.shown {
			fmt.Fprintf(p.w, "%s: %s\n", p.label, count)
			p.shown = p.n
		}
		return
	}
	line := p.label + " " + count
	if p.total > 0 {
		filled := min(barWidth, p.n*barWidth/p.total)
		bar := strings.Repeat("=", filled)
		if filled < barWidth {
			bar += ">" + strings.Repeat(" ", barWidth-filled-1)
		}
		line = fmt.Sprintf("%s [%s] %s %3d%%", p.label, bar, count, min(100, p.n*100/p.total))
	}
	fmt.Fprintf(p.w, "\r\033[K%s", line)
	if final {
		fmt.Fprintln(p.w)
	}
}
