package herenow

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"mime"
	"net/http"
	"sync/atomic"
	"time"
)

// Defaults of [StreamOptions].
const (
	DefaultMinBackoff    = 250 * time.Millisecond
	DefaultMaxBackoff    = 30 * time.Second
	DefaultIdleTimeout   = 45 * time.Second
	DefaultMaxEventBytes = 32 << 20
)

// StreamOptions configures an event stream ([Client.Events],
// [Client.Watch]). The zero value resumes forever with backoff.
type StreamOptions struct {
	// NoResume ends the stream at its first drop instead of reconnecting:
	// Next then returns the reason ([ErrStreamEnded] when the server ended
	// it, an [*Error] for a watch stream's error event).
	NoResume bool
	// MinBackoff and MaxBackoff bound the wait before a reconnect: it
	// doubles from MinBackoff with each failed attempt up to MaxBackoff,
	// with jitter (half to all of it), and is at least the server's
	// Retry-After. Zero: DefaultMinBackoff, DefaultMaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// MaxAttempts ends the stream after this many reconnects in a row that
	// failed (the last failure is returned); zero: no limit. A refusal
	// that cannot succeed later (a 4xx other than 408 and 429) ends it at
	// once.
	MaxAttempts int
	// IdleTimeout drops a connection that received nothing, not even the
	// server's keep-alive comment (every 15 s), for this long, so a dead
	// network is noticed; zero: DefaultIdleTimeout; negative: never.
	IdleTimeout time.Duration
	// MaxEventBytes bounds one event (a snapshot of 10,000 members with
	// full metadata is about 12 MiB); a longer one ends the stream with an
	// error. Zero: DefaultMaxEventBytes.
	MaxEventBytes int
	// OnDrop, if set, is called (on the goroutine calling Next) each time
	// a connection is lost, with why, before reconnecting: for logs and
	// metrics.
	OnDrop func(err error)
}

// ErrStreamEnded is the reason of a stream the server ended (server
// shutdown, a proxy's timeout), returned by Next with NoResume.
var ErrStreamEnded = errors.New("herenow: the event stream ended")

// errEventTooLarge ends a stream whose event is over MaxEventBytes: a
// reconnect would meet the same snapshot.
var errEventTooLarge = errors.New("herenow: an event is over the stream's MaxEventBytes")

// sseEvent is one dispatched Server-Sent Event.
type sseEvent struct {
	name string
	data []byte
}

// sseReader parses text/event-stream (the WHATWG HTML "event stream
// interpretation"): `event` and `data` fields, comments and blank-line
// dispatch; `id` and `retry` are ignored (herenow sends neither). Lines
// end in LF or CRLF. An event is bounded by max bytes.
type sseReader struct {
	r    *bufio.Reader
	max  int
	line []byte
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(r, 32<<10), max: max}
}

// readLine reads one line without its end, bounded by the event limit.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(s.line)+len(chunk) > s.max+2 {
			return nil, errEventTooLarge
		}
		s.line = append(s.line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF && len(s.line) > 0 {
				// A last line without its end: the stream was cut
				// mid-event, which is never dispatched.
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line := s.line[:len(s.line)-1]
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		return line, nil
	}
}

// next reads up to the next dispatched event.
func (s *sseReader) next() (sseEvent, error) {
	var (
		name    string
		data    []byte
		hasData bool
	)
	for {
		line, err := s.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if !hasData {
				name = ""
				continue
			}
			if name == "" {
				name = "message"
			}
			return sseEvent{name: name, data: data}, nil
		}
		if line[0] == ':' {
			continue // a comment: the keep-alive
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			name = string(value)
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			if len(data)+len(value) > s.max {
				return sseEvent{}, errEventTooLarge
			}
			data = append(data, value...)
			hasData = true
		}
	}
}

// idleReader cancels its connection when no byte arrives for a while.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	idle  time.Duration
	fired atomic.Bool
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if n > 0 && i.timer != nil {
		i.timer.Reset(i.idle)
	}
	if err != nil && i.fired.Load() {
		err = fmt.Errorf("herenow: the event stream was silent for %s (StreamOptions.IdleTimeout): %w", i.idle, err)
	}
	return n, err
}

// stream is the resumable connection under EventStream and WatchStream:
// it reads raw events and, when the connection drops, reconnects with
// backoff. The events layer decides what a fresh picture is.
type stream struct {
	c    *Client
	req  request
	opts StreamOptions

	ctx    context.Context
	cancel context.CancelFunc
	closed atomic.Bool

	// The current connection; touched only by the goroutine calling Next.
	body       io.ReadCloser
	connCancel context.CancelFunc
	idle       *idleReader
	rd         *sseReader
	delivered  bool // an event came on this connection
	failures   int  // attempts in a row that failed or brought nothing
	rnd        *rand.Rand

	// reconnected is set by each successful reconnect; the events layer
	// reads and clears it.
	reconnected bool
}

func newStream(ctx context.Context, c *Client, req request, opts *StreamOptions) (*stream, error) {
	if ctx == nil {
		return nil, invalid("a nil context")
	}
	s := &stream{c: c, req: req}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.MinBackoff <= 0 {
		s.opts.MinBackoff = DefaultMinBackoff
	}
	if s.opts.MaxBackoff <= 0 {
		s.opts.MaxBackoff = DefaultMaxBackoff
	}
	if s.opts.MaxBackoff < s.opts.MinBackoff {
		s.opts.MaxBackoff = s.opts.MinBackoff
	}
	if s.opts.IdleTimeout == 0 {
		s.opts.IdleTimeout = DefaultIdleTimeout
	}
	if s.opts.MaxEventBytes <= 0 {
		s.opts.MaxEventBytes = DefaultMaxEventBytes
	}
	s.rnd = rand.New(rand.NewSource(time.Now().UnixNano()))
	s.ctx, s.cancel = context.WithCancel(ctx)
	if err := s.connect(); err != nil {
		s.cancel()
		return nil, err
	}
	return s, nil
}

// connect opens one connection: the request, bounded by the client's
// timeout until the answer's headers, then by IdleTimeout between bytes.
func (s *stream) connect() error {
	ctx, cancel := context.WithCancel(s.ctx)
	var headerTimer *time.Timer
	if s.c.timeout > 0 {
		headerTimer = time.AfterFunc(s.c.timeout, cancel)
	}
	resp, path, _, err := s.c.send(ctx, s.req, "text/event-stream", -1)
	if headerTimer != nil && !headerTimer.Stop() && err != nil {
		err = fmt.Errorf("herenow: %s %s: no answer within %s: %w", s.req.method, path, s.c.timeout, context.DeadlineExceeded)
	}
	if err != nil {
		cancel()
		return err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		drainClose(resp.Body)
		cancel()
		return &Error{Status: resp.StatusCode, Method: s.req.method, Path: path,
			Detail: fmt.Sprintf("the answer is %q, not an event stream", resp.Header.Get("Content-Type"))}
	}
	s.body, s.connCancel, s.delivered = resp.Body, cancel, false
	s.idle = &idleReader{r: resp.Body, idle: s.opts.IdleTimeout}
	if s.opts.IdleTimeout > 0 {
		idle := s.idle
		idle.timer = time.AfterFunc(s.opts.IdleTimeout, func() {
			idle.fired.Store(true)
			cancel()
		})
	}
	s.rd = newSSEReader(s.idle, s.opts.MaxEventBytes)
	return nil
}

// disconnect drops the current connection, if any.
func (s *stream) disconnect() {
	if s.rd == nil {
		return
	}
	if s.idle.timer != nil {
		s.idle.timer.Stop()
	}
	s.connCancel()
	_ = s.body.Close()
	s.rd, s.body, s.idle, s.connCancel = nil, nil, nil, nil
}

// next answers the next raw event, reconnecting as needed. The error is
// final: the stream is over.
func (s *stream) next() (sseEvent, error) {
	for {
		if s.closed.Load() {
			s.disconnect()
			return sseEvent{}, ErrClosed
		}
		if s.rd == nil {
			if err := s.reconnect(); err != nil {
				return sseEvent{}, err
			}
		}
		ev, err := s.rd.next()
		if err == nil {
			s.delivered = true
			s.failures = 0
			return ev, nil
		}
		if err := s.drop(err); err != nil {
			return sseEvent{}, err
		}
	}
}

// drop ends the current connection for why; it answers the stream's final
// error when the stream cannot go on, or nil when it will reconnect.
func (s *stream) drop(why error) error {
	if !s.delivered {
		// A connection that gave nothing counts as a failed attempt, so
		// a server that accepts and hangs up at once is not hammered.
		s.failures++
	}
	s.disconnect()
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if why == io.EOF {
		why = ErrStreamEnded
	}
	if s.opts.OnDrop != nil {
		s.opts.OnDrop(why)
	}
	if s.opts.NoResume || errors.Is(why, errEventTooLarge) {
		return why
	}
	return nil
}

// reconnect waits and connects until it works, the stream is closed, or
// a failure says it never will.
func (s *stream) reconnect() error {
	var retryAfter time.Duration
	for {
		if err := s.wait(s.backoff(retryAfter)); err != nil {
			return err
		}
		err := s.connect()
		if err == nil {
			s.reconnected = true
			return nil
		}
		if s.closed.Load() {
			return ErrClosed
		}
		if cerr := s.ctx.Err(); cerr != nil {
			return cerr
		}
		retryAfter = 0
		var e *Error
		if errors.As(err, &e) {
			if e.Status < 500 && e.Status != http.StatusTooManyRequests && e.Status != http.StatusRequestTimeout {
				return err // a refusal a retry would meet again
			}
			retryAfter = e.RetryAfter
		}
		s.failures++
		if s.opts.MaxAttempts > 0 && s.failures >= s.opts.MaxAttempts {
			return fmt.Errorf("herenow: gave up resuming the event stream after %d failed attempts: %w", s.failures, err)
		}
		if s.opts.OnDrop != nil {
			s.opts.OnDrop(err)
		}
	}
}

// backoff is the wait before the next attempt: exponential in the
// failures in a row, with jitter, at least retryAfter.
func (s *stream) backoff(retryAfter time.Duration) time.Duration {
	d := s.opts.MinBackoff
	for i := 0; i < s.failures && d < s.opts.MaxBackoff; i++ {
		d *= 2
	}
	if d > s.opts.MaxBackoff {
		d = s.opts.MaxBackoff
	}
	d = d/2 + time.Duration(s.rnd.Int63n(int64(d/2)+1))
	if d < retryAfter {
		d = retryAfter
	}
	return d
}

func (s *stream) wait(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-s.ctx.Done():
		if s.closed.Load() {
			return ErrClosed
		}
		return s.ctx.Err()
	}
}

// close ends the stream; a blocked next returns ErrClosed.
func (s *stream) close() {
	s.closed.Store(true)
	s.cancel()
}
