package herenow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is moved by hand: the debounce and the log throttle are
// tested without sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// logLines captures what the Heartbeater logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// recorder is a transport that records every heartbeat batch sent to the
// real server and, with a gate, holds each request until the gate opens.
type recorder struct {
	base    http.RoundTripper
	gate    chan struct{}
	entered chan struct{}

	mu      sync.Mutex
	batches [][]Heartbeat
	paths   []string
}

func newRecorder(gated bool) *recorder {
	r := &recorder{base: newTransport(4), entered: make(chan struct{}, 1000)}
	if gated {
		r.gate = make(chan struct{})
	}
	return r
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body.Close()
		var body struct {
			Heartbeats []Heartbeat `json:"heartbeats"`
		}
		if json.Unmarshal(b, &body) == nil && body.Heartbeats != nil {
			r.mu.Lock()
			r.batches = append(r.batches, body.Heartbeats)
			r.paths = append(r.paths, req.URL.EscapedPath())
			r.mu.Unlock()
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.ContentLength = int64(len(b))
	}
	if r.gate != nil {
		r.entered <- struct{}{}
		select {
		case <-r.gate:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return r.base.RoundTrip(req)
}

// sent counts heartbeats per "kind:id", and answers the batch sizes.
func (r *recorder) sent() (map[string]int, []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	per := map[string]int{}
	var sizes []int
	for _, b := range r.batches {
		sizes = append(sizes, len(b))
		for _, hb := range b {
			per[string(hb.Kind)+":"+hb.ID]++
		}
	}
	return per, sizes
}

func (r *recorder) waitEntered(t *testing.T) {
	t.Helper()
	select {
	case <-r.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the sender never sent")
	}
}

// site is a handler behind the middleware; X-User names the signed-in
// user.
func site(h *Heartbeater, opts MiddlewareOptions) http.Handler {
	if opts.Identify == nil {
		opts.Identify = func(r *http.Request) (MemberRef, bool) {
			if u := r.Header.Get("X-User"); u != "" {
				return User(u), true
			}
			return MemberRef{}, false
		}
	}
	return Middleware(h, opts)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello "+r.URL.Path)
	}))
}

// visit makes one request and asserts the site answered it.
func visit(t *testing.T, h http.Handler, user, ip string, cookies ...*http.Cookie) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/page", nil)
	req.RemoteAddr = ip + ":41000"
	if user != "" {
		req.Header.Set("X-User", user)
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, req)
	if rr.Code != http.StatusOK || rr.Body.String() != "hello /page" {
		t.Fatalf("the site answered %d %q", rr.Code, rr.Body.String())
	}
	return rr
}

func heartbeater(t *testing.T, c *Client, sp string, opts HeartbeaterOptions) *Heartbeater {
	t.Helper()
	h, err := NewHeartbeater(c, sp, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.Close(cx)
	})
	return h
}

func TestMiddlewareSendsOneHeartbeatPerMemberPerInterval(t *testing.T) {
	sp, cx := space(t), ctx(t)
	rec := newRecorder(false)
	c := clientOf(t, main_.url, Options{HTTPClient: &http.Client{Transport: rec}})
	clk, logs := newFakeClock(), &logLines{}
	h := heartbeater(t, c, sp, HeartbeaterOptions{Clock: clk, Logger: logs})
	s := site(h, MiddlewareOptions{})

	for i := 0; i < 3; i++ {
		visit(t, s, "alice", "10.0.0.1")
	}
	visit(t, s, "bob", "10.0.0.1")
	visit(t, s, "bob", "10.0.0.9")
	visit(t, s, "", "10.0.0.1")
	visit(t, s, "", "10.0.0.1")
	visit(t, s, "", "10.0.0.2")
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	per, _ := rec.sent()
	want := map[string]int{"user:alice": 1, "user:bob": 1, "guest:10.0.0.1": 1, "guest:10.0.0.2": 1}
	if fmt.Sprint(per) != fmt.Sprint(want) {
		t.Fatalf("sent %v, want %v", per, want)
	}
	// The real server has them all.
	page, err := direct(t).Online(cx, sp, &OnlineOptions{Kinds: All, Order: OrderID})
	if err != nil || memberIDs(page.Members) != "10.0.0.1,10.0.0.2,alice,bob" {
		t.Fatalf("online: %+v %v", page.Members, err)
	}

	clk.Advance(59 * time.Second)
	visit(t, s, "alice", "10.0.0.1")
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	if per, _ := rec.sent(); per["user:alice"] != 1 {
		t.Fatalf("alice heartbeaten twice within the interval: %v", per)
	}

	clk.Advance(time.Second) // 60 s after the first: a new interval
	visit(t, s, "alice", "10.0.0.1")
	visit(t, s, "alice", "10.0.0.1")
	visit(t, s, "bob", "10.0.0.1")
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	per, _ = rec.sent()
	if per["user:alice"] != 2 || per["user:bob"] != 2 || per["guest:10.0.0.1"] != 1 {
		t.Fatalf("after the interval: %v", per)
	}
	rec.mu.Lock()
	for _, p := range rec.paths {
		if p != "/v1/spaces/"+sp+"/heartbeats" {
			t.Errorf("sent to %s, not the batch endpoint", p)
		}
	}
	rec.mu.Unlock()
	st := h.Stats()
	if st.Queued != 6 || st.Sent != 6 || st.Failed != 0 || st.Dropped != 0 || st.Debounced != 6 {
		t.Fatalf("stats: %+v", st)
	}
	if l := logs.get(); len(l) != 0 {
		t.Fatalf("logged with nothing failing: %v", l)
	}
}

func direct(t *testing.T) *Client { return client(t) }

// The response never waits for herenow, and what queues up while a
// request is out goes in one batch.
func TestHeartbeatsAreBatchedWithoutDelayingResponses(t *testing.T) {
	sp, cx := space(t), ctx(t)
	rec := newRecorder(true)
	c := clientOf(t, main_.url, Options{HTTPClient: &http.Client{Transport: rec}})
	h := heartbeater(t, c, sp, HeartbeaterOptions{Clock: newFakeClock(), Logger: &logLines{}})
	s := site(h, MiddlewareOptions{})

	visit(t, s, "first", "10.0.0.1")
	rec.waitEntered(t) // the first batch is out, and held
	for i := 0; i < 50; i++ {
		// Each answers while the heartbeat request is still held.
		visit(t, s, fmt.Sprintf("u%02d", i), "10.0.0.1")
	}
	close(rec.gate)
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	if _, sizes := rec.sent(); fmt.Sprint(sizes) != "[1 50]" {
		t.Fatalf("batches %v, want [1 50]", sizes)
	}
	n, err := direct(t).Count(cx, sp, 0)
	if err != nil || n.Users != 51 {
		t.Fatalf("count: %+v %v", n, err)
	}
}

func TestBatchesRespectMaxBatch(t *testing.T) {
	sp, cx := space(t), ctx(t)
	rec := newRecorder(true)
	c := clientOf(t, main_.url, Options{HTTPClient: &http.Client{Transport: rec}})
	h := heartbeater(t, c, sp, HeartbeaterOptions{Clock: newFakeClock(), Logger: &logLines{}, MaxBatch: 3})
	h.Beat(User("m0"))
	rec.waitEntered(t)
	for i := 1; i <= 7; i++ {
		if !h.Beat(User(fmt.Sprint("m", i))) {
			t.Fatalf("m%d not queued", i)
		}
	}
	close(rec.gate)
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	if _, sizes := rec.sent(); fmt.Sprint(sizes) != "[1 3 3 1]" {
		t.Fatalf("batches %v, want [1 3 3 1]", sizes)
	}
	if st := h.Stats(); st.Sent != 8 || st.Batches != 4 {
		t.Fatalf("stats %+v", st)
	}
}

func TestQueueIsBoundedAndDropsAreCountedAndLogged(t *testing.T) {
	sp, cx := space(t), ctx(t)
	rec := newRecorder(true)
	c := clientOf(t, main_.url, Options{HTTPClient: &http.Client{Transport: rec}})
	logs := &logLines{}
	h := heartbeater(t, c, sp, HeartbeaterOptions{Clock: newFakeClock(), Logger: logs, QueueSize: 4})
	h.Beat(User("m0"))
	rec.waitEntered(t) // m0 is out; the queue is empty and holds 4
	queued := 0
	for i := 1; i < 10; i++ {
		if h.Beat(User(fmt.Sprint("m", i))) {
			queued++
		}
	}
	st := h.Stats()
	if queued != 4 || st.Dropped != 5 || st.Queued != 5 {
		t.Fatalf("queued %d, stats %+v", queued, st)
	}
	if l := logs.get(); len(l) != 1 || !strings.Contains(l[0], "1 dropped") {
		t.Fatalf("one line for the drops (the first), got %q", l)
	}
	close(rec.gate)
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	// A dropped member was not marked as sent: its next request queues.
	if !h.Beat(User("m9")) {
		t.Fatal("a dropped member is debounced")
	}
	if h.Beat(User("m1")) {
		t.Fatal("a sent member is not debounced")
	}
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	if n, err := direct(t).Count(cx, sp, 0); err != nil || n.Users != 6 {
		t.Fatalf("count: %+v %v", n, err)
	}
}

// herenow down: every request still succeeds, and the site logs one line
// per interval, whatever the number of failures.
func TestMiddlewareDrivesOnWhenTheServerIsDown(t *testing.T) {
	cx := ctx(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	c := clientOf(t, down, Options{})
	clk, logs := newFakeClock(), &logLines{}
	h := heartbeater(t, c, "lobby", HeartbeaterOptions{Clock: clk, Logger: logs})
	s := site(h, MiddlewareOptions{})

	for i := 0; i < 10; i++ {
		visit(t, s, fmt.Sprint("user", i), "10.0.0.1")
		if err := h.Flush(cx); err != nil { // each fails on its own
			t.Fatal(err)
		}
	}
	l := logs.get()
	if len(l) != 1 || !strings.Contains(l[0], "1 failed") || !strings.Contains(l[0], "driving on") {
		t.Fatalf("want one line, got %q", l)
	}
	clk.Advance(30 * time.Second)
	for i := 10; i < 15; i++ {
		visit(t, s, fmt.Sprint("user", i), "10.0.0.1")
	}
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	if l := logs.get(); len(l) != 1 {
		t.Fatalf("a second line within the interval: %q", l)
	}
	// Failed members are still debounced: a dead server is not hammered.
	visit(t, s, "user0", "10.0.0.1")
	clk.Advance(30 * time.Second) // 60 s after the first line
	visit(t, s, "user15", "10.0.0.1")
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	l = logs.get()
	if len(l) != 2 {
		t.Fatalf("want a second line after the interval, got %q", l)
	}
	// 9 after the first line, 5, then user15 (user0 was debounced).
	if !strings.Contains(l[1], "15 failed") {
		t.Fatalf("the second line counts the failures since the first: %q", l[1])
	}
	st := h.Stats()
	if st.Failed != 16 || st.Sent != 0 || st.Queued != 16 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMiddlewareGuestsByCookie(t *testing.T) {
	sp, cx := space(t), ctx(t)
	rec := newRecorder(false)
	c := clientOf(t, main_.url, Options{HTTPClient: &http.Client{Transport: rec}})
	h := heartbeater(t, c, sp, HeartbeaterOptions{Clock: newFakeClock(), Logger: &logLines{}})
	s := site(h, MiddlewareOptions{Guests: GuestsByCookie})

	rr := visit(t, s, "", "10.0.0.1")
	cookies := rr.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != DefaultGuestCookie || len(cookies[0].Value) != 32 ||
		!cookies[0].HttpOnly || cookies[0].MaxAge != 30*24*3600 {
		t.Fatalf("guest cookie: %+v", cookies)
	}
	id := cookies[0].Value
	again := visit(t, s, "", "10.0.0.2", cookies[0])
	if len(again.Result().Cookies()) != 0 {
		t.Fatal("a known guest got a new cookie")
	}
	forged := visit(t, s, "", "10.0.0.1", &http.Cookie{Name: DefaultGuestCookie, Value: "../../admin"})
	if fc := forged.Result().Cookies(); len(fc) != 1 || fc[0].Value == "../../admin" {
		t.Fatalf("a forged cookie was used: %+v", fc)
	}
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	per, _ := rec.sent()
	if per["guest:"+id] != 1 || len(per) != 2 {
		t.Fatalf("sent %v", per)
	}
	m, err := direct(t).Member(cx, sp, Guest(id))
	if err != nil || m.Status != StatusOnline {
		t.Fatalf("the cookie guest: %+v %v", m, err)
	}
}

func TestMiddlewareSkipAndGuestsOff(t *testing.T) {
	h := heartbeater(t, client(t), space(t), HeartbeaterOptions{Clock: newFakeClock(), Logger: &logLines{}})
	s := site(h, MiddlewareOptions{
		Guests: GuestsOff,
		Skip:   func(r *http.Request) bool { return r.Header.Get("X-Probe") != "" },
	})
	visit(t, s, "", "10.0.0.1") // a guest, and guests are off
	req := httptest.NewRequest(http.MethodGet, "/page", nil)
	req.Header.Set("X-User", "carol")
	req.Header.Set("X-Probe", "1")
	s.ServeHTTP(httptest.NewRecorder(), req) // skipped
	visit(t, s, "dave", "10.0.0.1")
	if st := h.Stats(); st.Queued != 1 {
		t.Fatalf("only dave is heartbeaten: %+v", st)
	}
	ipFrom := site(h, MiddlewareOptions{ClientIP: func(r *http.Request) string { return r.Header.Get("X-Real-IP") }})
	req = httptest.NewRequest(http.MethodGet, "/page", nil)
	req.Header.Set("X-Real-IP", "203.0.113.9")
	ipFrom.ServeHTTP(httptest.NewRecorder(), req)
	if st := h.Stats(); st.Queued != 2 {
		t.Fatalf("the proxy's client IP: %+v", st)
	}
}

func TestDebounceTableIsBounded(t *testing.T) {
	clk := newFakeClock()
	h := heartbeater(t, client(t), space(t), HeartbeaterOptions{Clock: clk, Logger: &logLines{}, MaxTracked: 4})
	for i := 0; i < 20; i++ {
		h.Beat(User(fmt.Sprint("b", i)))
		if n := h.Stats().Tracked; n > 4 {
			t.Fatalf("tracking %d members, over MaxTracked 4", n)
		}
		if i%5 == 0 {
			clk.Advance(40 * time.Second)
		}
	}
	if st := h.Stats(); st.Queued != 20 {
		t.Fatalf("every member is sent, never lost: %+v", st)
	}
	// A long idle time forgets every member.
	clk.Advance(3 * time.Minute)
	if !h.Beat(User("b19")) {
		t.Fatal("a member not seen for 3 min is debounced")
	}
}

func TestHeartbeaterCloseSendsWhatIsQueued(t *testing.T) {
	sp, cx := space(t), ctx(t)
	h, err := NewHeartbeater(client(t), sp, HeartbeaterOptions{Clock: newFakeClock(), Logger: &logLines{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c1", "c2", "c3"} {
		h.Beat(User(id))
	}
	if err := h.Close(cx); err != nil {
		t.Fatal(err)
	}
	if st := h.Stats(); st.Sent != 3 {
		t.Fatalf("close sent %+v", st)
	}
	if h.Beat(User("late")) {
		t.Fatal("a closed Heartbeater queued")
	}
	if err := h.Close(cx); !errors.Is(err, ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if err := h.Flush(cx); !errors.Is(err, ErrClosed) {
		t.Fatalf("flush after close: %v", err)
	}
	if n, err := direct(t).Count(cx, sp, 0); err != nil || n.Users != 3 {
		t.Fatalf("count %+v %v", n, err)
	}
}

func TestNewHeartbeaterRefusesBadOptions(t *testing.T) {
	c := client(t)
	for name, build := range map[string]func() (*Heartbeater, error){
		"nil client":        func() (*Heartbeater, error) { return NewHeartbeater(nil, "s", HeartbeaterOptions{}) },
		"empty space":       func() (*Heartbeater, error) { return NewHeartbeater(c, "", HeartbeaterOptions{}) },
		"negative interval": func() (*Heartbeater, error) { return NewHeartbeater(c, "s", HeartbeaterOptions{Interval: -1}) },
		"negative queue":    func() (*Heartbeater, error) { return NewHeartbeater(c, "s", HeartbeaterOptions{QueueSize: -1}) },
		"batch over 10,000": func() (*Heartbeater, error) { return NewHeartbeater(c, "s", HeartbeaterOptions{MaxBatch: 10_001}) },
	} {
		if _, err := build(); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: %v", name, err)
		}
	}
	h := heartbeater(t, c, space(t), HeartbeaterOptions{Logger: &logLines{}})
	if h.Beat(MemberRef{}) {
		t.Fatal("a member without an id was queued")
	}
}
