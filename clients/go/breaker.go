package herenow

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"sync"
	"time"
)

// DefaultBackoff is how long an open [Breaker] answers "unknown" before
// it lets one probe through.
const DefaultBackoff = 30 * time.Second

// ErrUnavailable is returned, at once and without a request, by the calls
// that go through an open [Breaker] (the [Presence] helpers and the
// [Heartbeater]'s sender): herenow failed or timed out recently, and the
// caller should show "unknown" and drive on.
var ErrUnavailable = errors.New("herenow: unavailable (circuit open)")

// BreakerOptions configures a [Breaker]. The zero value is the defaults.
type BreakerOptions struct {
	// Backoff: after a failure or a timeout, calls answer ErrUnavailable
	// at once for Backoff, then one call is let through as a probe (a
	// success closes the breaker, a failure opens it for another
	// Backoff). Zero: DefaultBackoff (30 s).
	Backoff time.Duration
	// Clock: zero value SystemClock.
	Clock Clock
	// Logger receives one line per opening (not per call) and one when
	// herenow answers again. Nil: the standard logger.
	Logger Logger
	// Name is said in the log lines: "herenow NAME failed (…)". Empty:
	// "server"; BreakerFor's are named by the server's URL.
	Name string
}

// BreakerStats counts what a Breaker did.
type BreakerStats struct {
	// Openings: times it opened (the first failure, and each failed
	// probe).
	Openings uint64
	// ShortCircuited: calls answered ErrUnavailable without a request.
	ShortCircuited uint64
	// Open: whether it is open (or probing) now.
	Open bool
}

// Breaker is a circuit breaker in front of one herenow server, shared by
// every page helper and Heartbeater of a process that talks to it (see
// [BreakerFor]): after a failure or timeout it answers ErrUnavailable at
// once for its Backoff, so a hung server costs a page at most one
// timeout, then lets one probe through. Refusals (4xx) are answers, not
// failures; a caller's own cancellation is neither.
type Breaker struct {
	backoff time.Duration
	clock   Clock
	logger  Logger
	name    string

	mu        sync.Mutex
	open      bool
	until     time.Time // open: no call before this
	probing   bool      // open: a probe is out
	probeFrom time.Time
	stats     BreakerStats
}

// NewBreaker makes a Breaker of its own (most programs use BreakerFor's
// shared one, through [Client.Breaker]).
func NewBreaker(opts BreakerOptions) *Breaker {
	b := &Breaker{backoff: opts.Backoff, clock: opts.Clock, logger: opts.Logger, name: opts.Name}
	if b.backoff <= 0 {
		b.backoff = DefaultBackoff
	}
	if b.clock == nil {
		b.clock = SystemClock
	}
	if b.logger == nil {
		b.logger = log.Default()
	}
	if b.name == "" {
		b.name = "server"
	}
	return b
}

var (
	breakersMu sync.Mutex
	breakers   = map[string]*Breaker{}
)

// BreakerFor answers the process's Breaker for the server at baseURL,
// making it (with the defaults) on first use: every [Client] of that
// server shares it unless [Options.Breaker] names another.
func BreakerFor(baseURL string) *Breaker {
	breakersMu.Lock()
	defer breakersMu.Unlock()
	b, ok := breakers[baseURL]
	if !ok {
		b = NewBreaker(BreakerOptions{Name: baseURL})
		breakers[baseURL] = b
	}
	return b
}

// Allow says whether a call may go to the server now: true while closed,
// and for the one probe after the back-off; false (count it as
// short-circuited) otherwise. A caller that was allowed must Report.
func (b *Breaker) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return true
	}
	now := b.clock.Now()
	if now.Before(b.until) {
		b.stats.ShortCircuited++
		return false
	}
	// One probe at a time; a probe that never reported (its caller
	// vanished) is replaced after another back-off.
	if b.probing && now.Sub(b.probeFrom) < b.backoff {
		b.stats.ShortCircuited++
		return false
	}
	b.probing, b.probeFrom = true, now
	return true
}

// Report tells the breaker how an allowed call went: nil (or a refusal,
// a 4xx) closes it; a failure or timeout opens it.
func (b *Breaker) Report(err error) {
	failed := isOutage(err)
	if err != nil && !failed && (errors.Is(err, context.Canceled) || errors.Is(err, ErrInvalidInput)) {
		// The caller gave up, or nothing was sent: nothing learned, but
		// a probe is over.
		b.mu.Lock()
		b.probing = false
		b.mu.Unlock()
		return
	}
	b.mu.Lock()
	line := ""
	switch {
	case failed:
		wasOpen := b.open
		b.open, b.probing = true, false
		b.until = b.clock.Now().Add(b.backoff)
		b.stats.Openings++
		what := "failed"
		if wasOpen {
			what = "still fails"
		}
		line = fmt.Sprintf("herenow %s %s (%v); presence is unknown for %s, then one probe; driving on",
			b.name, what, err, b.backoff)
	case b.open:
		b.open, b.probing = false, false
		line = fmt.Sprintf("herenow %s answers again; presence is back", b.name)
	}
	b.mu.Unlock()
	if line != "" {
		b.logger.Printf("%s", line)
	}
}

// Do runs call through the breaker: ErrUnavailable at once while open,
// else call's own answer, reported.
func (b *Breaker) Do(call func() error) error {
	if !b.Allow() {
		return ErrUnavailable
	}
	err := call()
	b.Report(err)
	return err
}

// Stats answers the counters so far.
func (b *Breaker) Stats() BreakerStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.stats
	s.Open = b.open
	return s
}

// isOutage: a failure that says the server is down, hung or overloaded
// (a network error, a timeout, a 5xx), not a refusal of this request.
func isOutage(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 500 || e.Status == 429 || e.Status == 0
	}
	if errors.Is(err, ErrInvalidInput) || errors.Is(err, ErrUnavailable) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	// Anything else from a request that was sent (a broken answer, a
	// reset connection) is the server's.
	return true
}
