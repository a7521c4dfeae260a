package herenow

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"
)

// Clock tells the time. The Heartbeater asks it for debouncing and log
// throttling, so tests inject one and move time by hand.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// SystemClock is the real clock.
var SystemClock Clock = systemClock{}

// Logger receives the Heartbeater's failure lines; *log.Logger is one.
type Logger interface {
	Printf(format string, args ...any)
}

// Defaults of [HeartbeaterOptions].
const (
	DefaultInterval    = 60 * time.Second
	DefaultMaxTracked  = 100_000
	DefaultQueueSize   = 10_000
	DefaultMaxBatch    = 1_000
	DefaultSendTimeout = 5 * time.Second
	maxServerBatch     = 10_000
)

// HeartbeaterOptions configures a [Heartbeater]. The zero value is the
// defaults.
type HeartbeaterOptions struct {
	// Interval: at most one heartbeat per member per Interval, and at most
	// one failure log line per Interval. Zero: DefaultInterval (60 s).
	// A member is online while seen within the space's online_ms (60 s
	// by default), so an Interval under it keeps an active visitor
	// online; a longer one lets it read away between heartbeats.
	Interval time.Duration
	// MaxTracked bounds the debounce table (members heartbeaten within
	// the last interval or two). Over it, the oldest half-table is
	// forgotten first, then members at random: such a member may be sent
	// twice within an interval, never lost. Zero: DefaultMaxTracked.
	MaxTracked int
	// QueueSize bounds heartbeats waiting for the sender goroutine; one
	// more is dropped (counted in Stats, logged) and not debounced, so
	// the member's next request tries again. Zero: DefaultQueueSize.
	QueueSize int
	// MaxBatch bounds the members of one POST .../heartbeats (at most the
	// server's 10,000). Zero: DefaultMaxBatch.
	MaxBatch int
	// SendTimeout bounds one batch's request. Zero: DefaultSendTimeout.
	SendTimeout time.Duration
	// Clock: zero value SystemClock.
	Clock Clock
	// Logger receives at most one line per Interval while heartbeats fail
	// or are dropped, saying how many since the last line. Nil: the
	// standard logger (log.Default()).
	Logger Logger
}

// HeartbeaterStats counts what a Heartbeater did. Counters only grow.
type HeartbeaterStats struct {
	// Debounced: heartbeats skipped because the member was sent within
	// the interval.
	Debounced uint64
	// Queued: heartbeats handed to the sender.
	Queued uint64
	// Dropped: heartbeats refused because the queue was full.
	Dropped uint64
	// Sent: heartbeats the server accepted.
	Sent uint64
	// Failed: heartbeats in batches that failed (server down, refused).
	Failed uint64
	// Batches: requests sent, successful or not.
	Batches uint64
	// Tracked: members in the debounce table now.
	Tracked int
}

// Heartbeater sends members' heartbeats to one space in the background:
// debounced per member, batched, bounded, and never in the caller's way.
// It is safe for concurrent use. Close it to flush and stop.
type Heartbeater struct {
	client   *Client
	space    string
	interval time.Duration
	maxTrack int
	maxBatch int
	timeout  time.Duration
	clock    Clock
	logger   Logger

	mu      sync.Mutex
	closed  bool
	cur     map[MemberRef]time.Time // sent in the current generation
	prev    map[MemberRef]time.Time // sent in the one before
	genFrom time.Time
	stats   HeartbeaterStats
	// Failures not yet logged, and when the last line went out.
	unloggedFail, unloggedDrop uint64
	lastErr                    error
	loggedAt                   time.Time
	everLogged                 bool

	queue chan item
	quit  chan struct{}
	done  chan struct{}
}

// item is a heartbeat to send, or a flush marker (flushed non-nil).
type item struct {
	member  MemberRef
	flushed chan struct{}
}

// NewHeartbeater starts a Heartbeater for space, sending with client.
func NewHeartbeater(client *Client, space string, opts HeartbeaterOptions) (*Heartbeater, error) {
	if client == nil {
		return nil, invalid("a nil client")
	}
	if err := checkSpace(space); err != nil {
		return nil, err
	}
	if opts.Interval < 0 || opts.MaxTracked < 0 || opts.QueueSize < 0 || opts.MaxBatch < 0 || opts.SendTimeout < 0 {
		return nil, invalid("heartbeater options are negative")
	}
	if opts.MaxBatch > maxServerBatch {
		return nil, invalid("MaxBatch %d is over the server's %d", opts.MaxBatch, maxServerBatch)
	}
	h := &Heartbeater{
		client:   client,
		space:    space,
		interval: orDuration(opts.Interval, DefaultInterval),
		maxTrack: orInt(opts.MaxTracked, DefaultMaxTracked),
		maxBatch: orInt(opts.MaxBatch, DefaultMaxBatch),
		timeout:  orDuration(opts.SendTimeout, DefaultSendTimeout),
		clock:    opts.Clock,
		logger:   opts.Logger,
		cur:      make(map[MemberRef]time.Time),
		prev:     make(map[MemberRef]time.Time),
		queue:    make(chan item, orInt(opts.QueueSize, DefaultQueueSize)),
		quit:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if h.clock == nil {
		h.clock = SystemClock
	}
	if h.logger == nil {
		h.logger = log.Default()
	}
	h.genFrom = h.clock.Now()
	go h.run()
	return h, nil
}

// Space is the space this Heartbeater sends to.
func (h *Heartbeater) Space() string { return h.space }

// Beat asks for a heartbeat of m. It never blocks on the network: it
// answers false at once when m was sent within the interval (debounced),
// the queue is full (dropped), m has no id, or the Heartbeater is closed;
// true when the heartbeat is queued.
func (h *Heartbeater) Beat(m MemberRef) bool {
	if m.ID == "" {
		return false
	}
	if m.Kind == "" {
		m.Kind = KindUser
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	now := h.clock.Now()
	h.rotate(now)
	if at, ok := h.cur[m]; ok && now.Sub(at) < h.interval {
		h.stats.Debounced++
		return false
	}
	if at, ok := h.prev[m]; ok && now.Sub(at) < h.interval {
		h.stats.Debounced++
		return false
	}
	select {
	case h.queue <- item{member: m}:
	default:
		// Not recorded as sent: the member's next request tries again.
		h.stats.Dropped++
		h.unloggedDrop++
		if line := h.logLine(now); line != "" {
			h.mu.Unlock()
			h.logger.Printf("%s", line)
			h.mu.Lock()
		}
		return false
	}
	h.stats.Queued++
	h.track(m, now)
	return true
}

// rotate starts a new debounce generation each interval: entries of the
// generation before last are older than the interval and forgotten whole.
// Called with mu held.
func (h *Heartbeater) rotate(now time.Time) {
	age := now.Sub(h.genFrom)
	if age < h.interval && age >= 0 {
		return
	}
	if age >= 2*h.interval || age < 0 {
		// Idle for two intervals (or the clock went back): nothing is
		// recent.
		h.prev = make(map[MemberRef]time.Time)
	} else {
		h.prev = h.cur
	}
	h.cur = make(map[MemberRef]time.Time)
	h.genFrom = now
}

// track records m as sent at now, within MaxTracked. Called with mu held.
func (h *Heartbeater) track(m MemberRef, now time.Time) {
	if len(h.cur)+len(h.prev) >= h.maxTrack && len(h.prev) > 0 {
		h.prev = make(map[MemberRef]time.Time)
	}
	for len(h.cur) >= h.maxTrack {
		for k := range h.cur { // Go's map order: a random victim
			delete(h.cur, k)
			break
		}
	}
	h.cur[m] = now
}

// Flush waits until every heartbeat queued before it was sent (or
// failed), or ctx ends; ErrClosed after Close (which flushes itself).
func (h *Heartbeater) Flush(ctx context.Context) error {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return ErrClosed
	}
	done := make(chan struct{})
	select {
	case h.queue <- item{flushed: done}:
	case <-h.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-h.done:
		return nil // the sender drained the queue on its way out
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops taking heartbeats, sends those queued (until ctx ends),
// and stops the sender. Later calls answer ErrClosed.
func (h *Heartbeater) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	h.closed = true
	h.mu.Unlock()
	close(h.quit)
	select {
	case <-h.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats answers the counters so far.
func (h *Heartbeater) Stats() HeartbeaterStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.stats
	s.Tracked = len(h.cur) + len(h.prev)
	return s
}

// run is the sender: it takes what is queued, up to MaxBatch members, and
// sends it in one request; while a request is out, the queue fills, so a
// busy site's heartbeats go out in few requests without any timer.
func (h *Heartbeater) run() {
	defer close(h.done)
	batch := make([]Heartbeat, 0, h.maxBatch)
	var flushes []chan struct{}
	// Requests are bounded by SendTimeout, not by any caller's context.
	ctx := context.Background()
	for {
		var it item
		select {
		case it = <-h.queue:
		case <-h.quit:
			h.drain(ctx, batch)
			return
		}
		batch, flushes = h.add(batch[:0], flushes[:0], it)
		// Take what else is waiting, without waiting for more.
	more:
		for len(batch) < h.maxBatch {
			select {
			case it = <-h.queue:
				batch, flushes = h.add(batch, flushes, it)
			default:
				break more
			}
		}
		h.send(ctx, batch)
		for _, f := range flushes {
			close(f)
		}
	}
}

func (h *Heartbeater) add(batch []Heartbeat, flushes []chan struct{}, it item) ([]Heartbeat, []chan struct{}) {
	if it.flushed != nil {
		return batch, append(flushes, it.flushed)
	}
	return append(batch, Heartbeat{ID: it.member.ID, Kind: it.member.Kind}), flushes
}

// drain sends what is left in the queue at Close.
func (h *Heartbeater) drain(ctx context.Context, batch []Heartbeat) {
	batch = batch[:0]
	var flushes []chan struct{}
	for {
		select {
		case it := <-h.queue:
			batch, flushes = h.add(batch, flushes, it)
			if len(batch) < h.maxBatch {
				continue
			}
		default:
		}
		h.send(ctx, batch)
		for _, f := range flushes {
			close(f)
		}
		if len(batch) < h.maxBatch {
			return
		}
		batch, flushes = batch[:0], flushes[:0]
	}
}

// send posts one batch; a failure is counted and logged at most once per
// interval, never retried (the member's next request after the interval
// heartbeats again).
func (h *Heartbeater) send(ctx context.Context, batch []Heartbeat) {
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	res, err := h.client.Heartbeats(ctx, h.space, batch)
	h.mu.Lock()
	h.stats.Batches++
	line := ""
	if err != nil {
		h.stats.Failed += uint64(len(batch))
		h.unloggedFail += uint64(len(batch))
		h.lastErr = err
		line = h.logLine(h.clock.Now())
	} else {
		h.stats.Sent += uint64(res.Accepted)
	}
	h.mu.Unlock()
	if line != "" {
		h.logger.Printf("%s", line)
	}
}

// logLine answers the one line about failures and drops since the last
// line, at most once per interval ("" otherwise), and resets the counts
// it reports. Called with mu held; the caller logs it after unlocking.
func (h *Heartbeater) logLine(now time.Time) string {
	since := now.Sub(h.loggedAt)
	if h.everLogged && since < h.interval && since >= 0 {
		return ""
	}
	if h.unloggedFail == 0 && h.unloggedDrop == 0 {
		return ""
	}
	why := "none"
	if h.lastErr != nil {
		why = h.lastErr.Error()
	}
	line := fmt.Sprintf("herenow: heartbeats to space %q: %d failed, %d dropped (queue full) since the last report; driving on; last error: %s",
		h.space, h.unloggedFail, h.unloggedDrop, why)
	h.unloggedFail, h.unloggedDrop, h.lastErr = 0, 0, nil
	h.loggedAt, h.everLogged = now, true
	return line
}

func orDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func orInt(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}
