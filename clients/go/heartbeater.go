package herenow

import (
	"context"
	"errors"
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
	// DefaultFlushInterval: how long the sender gathers after the first
	// queued heartbeat before it sends the batch.
	DefaultFlushInterval = time.Second
	// DefaultCloseTimeout bounds Close.
	DefaultCloseTimeout = time.Second
	maxServerBatch      = 10_000
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
	// FlushInterval: after the first heartbeat queued since the last
	// batch, the sender gathers for FlushInterval (or until MaxBatch
	// members, or a Flush) and sends them in one request. Zero:
	// DefaultFlushInterval (1 s).
	FlushInterval time.Duration
	// CloseTimeout bounds Close (as does its context): what is not sent
	// by then is dropped and counted (HeartbeaterStats.Unsent). Zero:
	// DefaultCloseTimeout (1 s).
	CloseTimeout time.Duration
	// Clock: zero value SystemClock.
	Clock Clock
	// Logger receives at most one line per Interval while heartbeats fail
	// or are dropped, saying how many since the last line. Nil: the
	// standard logger (log.Default()).
	Logger Logger
	// Breaker: batches go through it, so while herenow is down or hung
	// (as the page helpers found it, or this sender) they fail at once
	// instead of waiting for SendTimeout each. Nil: the client's
	// (Client.Breaker, shared per process and server).
	Breaker *Breaker
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
	// Failed: heartbeats in batches that failed (server down, refused,
	// or the breaker open).
	Failed uint64
	// Unsent: heartbeats Close dropped without sending them: its
	// deadline passed, or herenow was unavailable (breaker open).
	Unsent uint64
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
	gather   time.Duration
	closeIn  time.Duration
	clock    Clock
	logger   Logger
	breaker  *Breaker
	// sendCtx bounds every request; Close cancels it at its deadline.
	sendCtx    context.Context
	cancelSend context.CancelFunc

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
	meta    Meta
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
	if opts.Interval < 0 || opts.MaxTracked < 0 || opts.QueueSize < 0 || opts.MaxBatch < 0 || opts.SendTimeout < 0 ||
		opts.FlushInterval < 0 || opts.CloseTimeout < 0 {
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
		gather:   orDuration(opts.FlushInterval, DefaultFlushInterval),
		closeIn:  orDuration(opts.CloseTimeout, DefaultCloseTimeout),
		clock:    opts.Clock,
		logger:   opts.Logger,
		breaker:  opts.Breaker,
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
	if h.breaker == nil {
		h.breaker = client.breaker
	}
	h.sendCtx, h.cancelSend = context.WithCancel(context.Background())
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
func (h *Heartbeater) Beat(m MemberRef) bool { return h.BeatMeta(m, nil) }

// BeatMeta is Beat with the member's metadata (say, its display name),
// sent with the heartbeat when one is sent (non-nil meta replaces the
// member's; within the interval, debounced heartbeats send nothing).
func (h *Heartbeater) BeatMeta(m MemberRef, meta Meta) bool {
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
	case h.queue <- item{member: m, meta: meta}:
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

// ErrUnsent is wrapped by Close's error when it dropped heartbeats it
// could not send in time (HeartbeaterStats.Unsent counts them).
var ErrUnsent = errors.New("herenow: heartbeats not sent at close")

// Close stops taking heartbeats, sends those queued, and stops the
// sender, within CloseTimeout (1 s by default) or ctx, whichever ends
// first, even against a hung server: what is not sent by then is dropped,
// counted in Stats().Unsent, and reported by an error wrapping ErrUnsent.
// Later calls answer ErrClosed.
func (h *Heartbeater) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	h.closed = true
	h.mu.Unlock()
	close(h.quit)
	timer := time.NewTimer(h.closeIn)
	defer timer.Stop()
	var ctxDone <-chan struct{}
	if ctx != nil {
		ctxDone = ctx.Done()
	}
	select {
	case <-h.done:
	case <-ctxDone:
	case <-timer.C:
	}
	// Out of time: the request out is cancelled, and the sender counts
	// what is left as unsent without sending it.
	h.cancelSend()
	<-h.done
	h.mu.Lock()
	unsent := h.stats.Unsent
	h.mu.Unlock()
	if unsent > 0 {
		return fmt.Errorf("%w: %d dropped", ErrUnsent, unsent)
	}
	return nil
}

// Stats answers the counters so far.
func (h *Heartbeater) Stats() HeartbeaterStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.stats
	s.Tracked = len(h.cur) + len(h.prev)
	return s
}

// run is the sender: from the first heartbeat queued, it gathers for
// FlushInterval (or MaxBatch members, or until a Flush) and sends them in
// one request.
func (h *Heartbeater) run() {
	defer close(h.done)
	batch := make([]Heartbeat, 0, h.maxBatch)
	var flushes []chan struct{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var it item
		select {
		case it = <-h.queue:
		case <-h.quit:
			h.drain()
			return
		}
		batch, flushes = h.add(batch[:0], flushes[:0], it)
		quitting := false
		if len(flushes) == 0 {
			timer.Reset(h.gather)
		gather:
			for len(batch) < h.maxBatch && len(flushes) == 0 {
				select {
				case it = <-h.queue:
					batch, flushes = h.add(batch, flushes, it)
				case <-timer.C:
					break gather
				case <-h.quit:
					quitting = true
					break gather
				}
			}
			if !timer.Stop() {
				select { // drained already, or fired unread
				case <-timer.C:
				default:
				}
			}
		}
		if quitting {
			// Close sends this batch with the rest.
			h.drainFrom(batch, flushes)
			return
		}
		h.send(batch, false)
		for _, f := range flushes {
			close(f)
		}
	}
}

func (h *Heartbeater) add(batch []Heartbeat, flushes []chan struct{}, it item) ([]Heartbeat, []chan struct{}) {
	if it.flushed != nil {
		return batch, append(flushes, it.flushed)
	}
	return append(batch, Heartbeat{ID: it.member.ID, Kind: it.member.Kind, Meta: it.meta}), flushes
}

// drain sends what is left in the queue at Close.
func (h *Heartbeater) drain() { h.drainFrom(nil, nil) }

// drainFrom sends batch and then the queue, MaxBatch at a time, until
// the queue is empty or Close's deadline cancels sendCtx (then the rest
// is counted as unsent).
func (h *Heartbeater) drainFrom(batch []Heartbeat, flushes []chan struct{}) {
	for {
	fill:
		for len(batch) < h.maxBatch {
			select {
			case it := <-h.queue:
				batch, flushes = h.add(batch, flushes, it)
			default:
				break fill
			}
		}
		h.send(batch, true)
		for _, f := range flushes {
			close(f)
		}
		if len(batch) < h.maxBatch {
			return
		}
		batch, flushes = batch[:0], flushes[:0]
	}
}

// send posts one batch through the breaker; a failure is counted and
// logged at most once per interval, never retried (the member's next
// request after the interval heartbeats again). closing: Close is
// draining, and a batch it cannot send in time is unsent.
func (h *Heartbeater) send(batch []Heartbeat, closing bool) {
	if len(batch) == 0 {
		return
	}
	n := uint64(len(batch))
	if h.sendCtx.Err() != nil { // Close's deadline has passed
		h.mu.Lock()
		h.stats.Unsent += n
		h.mu.Unlock()
		return
	}
	var res HeartbeatResult
	var err error
	sent := h.breaker.Allow()
	if sent {
		ctx, cancel := context.WithTimeout(h.sendCtx, h.timeout)
		res, err = h.client.Heartbeats(ctx, h.space, batch)
		cancel()
		if err != nil && h.sendCtx.Err() != nil {
			// Cut short by Close's deadline: not the server's failure.
			h.breaker.Report(context.Canceled)
			h.mu.Lock()
			h.stats.Batches++
			h.stats.Unsent += n
			h.mu.Unlock()
			return
		}
		h.breaker.Report(err)
	} else {
		err = ErrUnavailable
	}
	h.mu.Lock()
	if sent {
		h.stats.Batches++
	}
	line := ""
	switch {
	case err == nil:
		h.stats.Sent += uint64(res.Accepted)
	case closing && !sent:
		h.stats.Unsent += n
	default:
		h.stats.Failed += n
		h.unloggedFail += n
		h.lastErr = err
		line = h.logLine(h.clock.Now())
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
