//go:build unix

package herenow

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Issue 36: drive on for real when herenow hangs. A hung server is a
// real `herenow serve` of the test's own, stopped with SIGSTOP (the
// kernel still accepts its connections; nothing answers).

// hangable starts a server of the test's own that hang() stops; the
// cleanup resumes it (SIGCONT) and stops it by its pid.
type hangable struct {
	*server
	t *testing.T
}

func startHangable(t *testing.T) *hangable {
	t.Helper()
	s, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	h := &hangable{server: s, t: t}
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
		s.stop()
	})
	return h
}

func (h *hangable) hang() {
	h.t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		h.t.Fatal(err)
	}
	// kill() returns when the signal is queued: each thread of a busy
	// multi-threaded process stops when it next enters the kernel, so a
	// request sent at once could still be answered by a thread that has
	// not stopped yet (the process's own /proc/PID/stat shows only its
	// main thread). Wait until every thread shows state T in
	// /proc/PID/task/TID/stat, so that no request is answered after hang()
	// returns.
	if !waitStopped(h.cmd.Process.Pid, 5*time.Second) {
		h.t.Fatal("the server did not stop")
	}
}

// waitStopped reports whether every thread of pid shows state T (stopped)
// within timeout; without /proc (not Linux) it waits 100 ms and says yes.
func waitStopped(pid int, timeout time.Duration) bool {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			return true
		}
		stopped := true
		for _, task := range tasks {
			b, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
			if err != nil {
				continue // the thread ended
			}
			if i := strings.LastIndexByte(string(b), ')'); i < 0 || !strings.HasPrefix(string(b[i:]), ") T") {
				stopped = false
				break
			}
		}
		if stopped {
			return true
		}
	}
	return false
}

func (h *hangable) resume() {
	h.t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		h.t.Fatal(err)
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

var pageTmpl = template.Must(template.New("page").Parse(
	`<aside>{{.Who}}</aside><p>{{range .Who.Members}}{{.ID}} {{end}}</p>` +
		`<p>ada: {{.Ada}}; seen {{.Seen}}; {{.Count}} here</p>`))

// presencePage is a page with every helper: who's online (count and
// list), one member online, a user's last seen, the count; behind the
// middleware.
func presencePage(p *Presence, beats *Heartbeater, ada string) http.Handler {
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cx := r.Context()
		_ = pageTmpl.Execute(w, map[string]any{
			"Who":   p.WhosOnline(cx),
			"Ada":   p.Online(cx, User(ada)),
			"Seen":  p.LastSeen(cx, ada),
			"Count": p.Count(cx),
		})
	})
	return Middleware(beats, MiddlewareOptions{
		Identify: func(*http.Request) (MemberRef, bool) { return User(ada), true },
	})(page)
}

func get(t *testing.T, h http.Handler, ip string) (string, time.Duration) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = ip + ":40000"
	rr := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rr, req)
	took := time.Since(start)
	if rr.Code != http.StatusOK {
		t.Fatalf("the page answered %d", rr.Code)
	}
	b, _ := io.ReadAll(rr.Body)
	return string(b), took
}

// A page with every helper, herenow hung: the first request pays at most
// one timeout, the next ones add at most 50 ms over the healthy page
// (medians); "unknown" renders as the chosen text; the breaker logs once
// per opening, probes after its back-off, and closes when herenow
// answers again.
func TestPageDrivesOnWhenHerenowHangs(t *testing.T) {
	srv := startHangable(t)
	clk, logs := newFakeClock(), &logLines{}
	br := NewBreaker(BreakerOptions{Clock: clk, Logger: logs, Name: "test"})
	c := clientOf(t, srv.url, Options{Breaker: br})
	sp, cx := space(t), ctx(t)
	ada := uid(t, "ada")
	must[HeartbeatResult](t)(c.Heartbeat(cx, sp, Heartbeat{ID: ada, Meta: Meta{"name": "Ada"}}))
	const timeout = time.Second
	p, err := NewPresence(c, sp, PresenceOptions{Timeout: timeout, Unknown: "(presence unknown)"})
	if err != nil {
		t.Fatal(err)
	}
	// The middleware's sender has a breaker of its own here, so that the
	// probes below are the page's.
	beats := heartbeater(t, c, sp, HeartbeaterOptions{Clock: clk, Logger: &logLines{}, CloseTimeout: 200 * time.Millisecond,
		Breaker: NewBreaker(BreakerOptions{Logger: &logLines{}})})
	page := presencePage(p, beats, ada)

	const n = 11
	var healthy []time.Duration
	for i := 0; i < n+2; i++ {
		body, took := get(t, page, "10.1.0.1")
		if !strings.Contains(body, "1 user and 0 guests online") || !strings.Contains(body, ada+" ") ||
			!strings.Contains(body, "ada: online; seen online; 1 here") {
			t.Fatalf("healthy page: %s", body)
		}
		if i >= 2 { // the first ones open connections
			healthy = append(healthy, took)
		}
	}

	srv.hang()
	body, first := get(t, page, "10.1.0.2")
	t.Logf("hung server: first request %v (timeout %v)", first, timeout)
	if first > timeout+300*time.Millisecond {
		t.Fatalf("the first request took %v: more than one timeout (%v)", first, timeout)
	}
	want := "<aside>(presence unknown)</aside><p></p><p>ada: (presence unknown); seen (presence unknown); (presence unknown) here</p>"
	if body != want {
		t.Fatalf("unknown renders as\n%s\nwant\n%s", body, want)
	}
	var hung []time.Duration
	for i := 0; i < n; i++ {
		body, took := get(t, page, fmt.Sprint("10.1.1.", i))
		if body != want {
			t.Fatalf("request %d while hung: %s", i, body)
		}
		hung = append(hung, took)
	}
	ph, pu := median(healthy), median(hung)
	t.Logf("page p50: healthy %v, hung %v (overhead %v); the log: %q", ph, pu, pu-ph, logs.get())
	if pu-ph > 50*time.Millisecond {
		t.Fatalf("a page adds %v over the healthy page while herenow hangs (at most 50 ms)", pu-ph)
	}
	if l := logs.get(); len(l) != 1 || !strings.Contains(l[0], "unknown for 30s") {
		t.Fatalf("one line per opening, got %q", l)
	}
	if st := br.Stats(); !st.Open || st.Openings != 1 || st.ShortCircuited < uint64(4*n) {
		t.Fatalf("breaker %+v", st)
	}

	// After the back-off one probe goes (one timeout), and fails: one
	// more line.
	clk.Advance(DefaultBackoff)
	_, probe := get(t, page, "10.1.2.1")
	if probe > timeout+300*time.Millisecond {
		t.Fatalf("the probe took %v", probe)
	}
	if _, took := get(t, page, "10.1.2.2"); took > 50*time.Millisecond+ph {
		t.Fatalf("after a failed probe a page took %v", took)
	}
	if l := logs.get(); len(l) != 2 || !strings.Contains(l[1], "still fails") {
		t.Fatalf("a line for the failed probe, got %q", l)
	}

	// herenow answers again: the next probe closes the breaker.
	srv.resume()
	clk.Advance(DefaultBackoff)
	body, _ = get(t, page, "10.1.3.1")
	if !strings.Contains(body, "ada: online") {
		t.Fatalf("after the probe succeeded: %s", body)
	}
	if l := logs.get(); len(l) != 3 || !strings.Contains(l[2], "answers again") {
		t.Fatalf("a line when herenow is back, got %q", l)
	}
	if br.Stats().Open {
		t.Fatal("the breaker is still open")
	}
}

// Refusals are answers, not outages: a 4xx never opens the breaker.
func TestBreakerIgnoresRefusals(t *testing.T) {
	logs := &logLines{}
	br := NewBreaker(BreakerOptions{Logger: logs, Clock: newFakeClock()})
	c := clientOf(t, main_.url, Options{Breaker: br})
	p, err := NewPresence(c, space(t), PresenceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v := p.Online(ctx(t), User(strings.Repeat("x", 300)))
	if v.Known || v.String() != "" || !HasCode(v.Err, CodeBadMemberID) {
		t.Fatalf("view %+v", v)
	}
	if st := br.Stats(); st.Open || st.Openings != 0 || len(logs.get()) != 0 {
		t.Fatalf("a 400 opened the breaker: %+v %q", st, logs.get())
	}
	// Known empty is "Nobody is online.", unknown is never that.
	if w := p.WhosOnline(ctx(t)); !w.Known || w.String() != "Nobody is online." {
		t.Fatalf("empty space: %+v %q", w, w.String())
	}
	if w := (WhosOnlineView{}); w.String() != "" {
		t.Fatalf("unknown renders %q", w.String())
	}
	if s := (LastSeenView{Known: true, now: time.Now()}); s.String() != "never seen" {
		t.Fatalf("never seen renders %q", s.String())
	}
}

// Clients of one server share one breaker per process.
func TestBreakerIsSharedPerServer(t *testing.T) {
	a := clientOf(t, "http://127.0.0.1:1/x", Options{})
	b := clientOf(t, "http://127.0.0.1:1/x", Options{})
	other := clientOf(t, "http://127.0.0.1:2", Options{})
	if a.Breaker() != b.Breaker() || a.Breaker() == other.Breaker() || a.Breaker() != BreakerFor(a.BaseURL()) {
		t.Fatal("not one breaker per server")
	}
}

// The sender gathers for FlushInterval after the first heartbeat: 100
// heartbeats in 0.5 s are one POST.
func TestHeartbeaterGathersForFlushInterval(t *testing.T) {
	sp, cx := space(t), ctx(t)
	rec := newRecorder(false)
	c := clientOf(t, main_.url, Options{HTTPClient: &http.Client{Transport: rec}, Breaker: NewBreaker(BreakerOptions{})})
	h := heartbeater(t, c, sp, HeartbeaterOptions{Clock: newFakeClock(), Logger: &logLines{}})
	start := time.Now()
	for i := 0; i < 100; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * 5 * time.Millisecond)))
		if !h.Beat(User(fmt.Sprint("g", i))) {
			t.Fatalf("g%d not queued", i)
		}
	}
	spent := time.Since(start)
	deadline := time.Now().Add(5 * time.Second)
	for h.Stats().Batches == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	sentAt := time.Since(start)
	time.Sleep(200 * time.Millisecond) // nothing more comes
	_, sizes := rec.sent()
	t.Logf("100 heartbeats queued in %v; batches %v, the first after %v", spent, sizes, sentAt)
	if fmt.Sprint(sizes) != "[100]" {
		t.Fatalf("batches %v, want one of 100", sizes)
	}
	if sentAt < DefaultFlushInterval-50*time.Millisecond {
		t.Fatalf("sent after %v, before the flush interval", sentAt)
	}
	if n, err := direct(t).Count(cx, sp, 0); err != nil || n.Users != 100 {
		t.Fatalf("count %+v %v", n, err)
	}
	// MaxBatch ends the gathering early.
	h2 := heartbeater(t, c, sp, HeartbeaterOptions{Clock: newFakeClock(), Logger: &logLines{}, MaxBatch: 10, FlushInterval: time.Hour})
	for i := 0; i < 10; i++ {
		h2.Beat(User(fmt.Sprint("h", i)))
	}
	deadline = time.Now().Add(5 * time.Second)
	for h2.Stats().Batches == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if st := h2.Stats(); st.Batches != 1 || st.Sent != 10 {
		t.Fatalf("a full batch waits: %+v", st)
	}
}

// Close returns within its deadline against a hung server, and counts
// what it dropped.
func TestHeartbeaterCloseIsBoundedAgainstAHungServer(t *testing.T) {
	srv := startHangable(t)
	sp := space(t)
	for _, tc := range []struct {
		name  string
		opts  HeartbeaterOptions
		limit time.Duration
	}{
		{"default 1 s", HeartbeaterOptions{}, DefaultCloseTimeout},
		{"CloseTimeout 300 ms", HeartbeaterOptions{CloseTimeout: 300 * time.Millisecond}, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.resume()
			c := clientOf(t, srv.url, Options{Breaker: NewBreaker(BreakerOptions{Logger: &logLines{}})})
			opts := tc.opts
			opts.Clock, opts.Logger, opts.FlushInterval = newFakeClock(), &logLines{}, 10*time.Millisecond
			h, err := NewHeartbeater(c, sp, opts)
			if err != nil {
				t.Fatal(err)
			}
			h.Beat(User("warm"))
			if err := h.Flush(ctx(t)); err != nil || h.Stats().Sent != 1 {
				t.Fatalf("healthy: %v %+v", err, h.Stats())
			}
			srv.hang()
			h.Beat(User("a")) // out, and hung
			time.Sleep(100 * time.Millisecond)
			h.Beat(User("b"))
			h.Beat(User("c"))
			start := time.Now()
			err = h.Close(context.Background())
			took := time.Since(start)
			st := h.Stats()
			t.Logf("Close against a hung server: %v (deadline %v), %+v, %v", took, tc.limit, st, err)
			if took > tc.limit+150*time.Millisecond {
				t.Fatalf("Close took %v, over its %v", took, tc.limit)
			}
			if !errors.Is(err, ErrUnsent) || st.Unsent != 3 || st.Sent != 1 {
				t.Fatalf("want 3 unsent: %v %+v", err, st)
			}
		})
	}
	// A context's earlier deadline bounds it too.
	srv.hang()
	c := clientOf(t, srv.url, Options{Breaker: NewBreaker(BreakerOptions{Logger: &logLines{}})})
	h, err := NewHeartbeater(c, sp, HeartbeaterOptions{Clock: newFakeClock(), Logger: &logLines{}})
	if err != nil {
		t.Fatal(err)
	}
	h.Beat(User("d"))
	cx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = h.Close(cx)
	if took := time.Since(start); took > 350*time.Millisecond || !errors.Is(err, ErrUnsent) || h.Stats().Unsent != 1 {
		t.Fatalf("Close with a 200 ms context: %v %v %+v", took, err, h.Stats())
	}
}

// IdentifyMeta sends the user's metadata with its heartbeat.
func TestMiddlewareIdentifyMeta(t *testing.T) {
	sp, cx := space(t), ctx(t)
	h := heartbeater(t, client(t), sp, HeartbeaterOptions{Clock: newFakeClock(), Logger: &logLines{}})
	ada := uid(t, "ada")
	s := Middleware(h, MiddlewareOptions{
		IdentifyMeta: func(r *http.Request) (MemberRef, Meta, bool) {
			if u := r.Header.Get("X-User"); u != "" {
				return User(u), Meta{"name": "Ada Lovelace"}, true
			}
			return MemberRef{}, nil, false
		},
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "hello "+r.URL.Path) }))
	visit(t, s, ada, "10.0.0.1")
	visit(t, s, "", "10.0.0.1")
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	m, err := direct(t).Member(cx, sp, User(ada))
	if err != nil || m.Status != StatusOnline || m.Meta["name"] != "Ada Lovelace" {
		t.Fatalf("member %+v %v", m, err)
	}
	if g, err := direct(t).Member(cx, sp, Guest("10.0.0.1")); err != nil || g.Status != StatusOnline {
		t.Fatalf("guest %+v %v", g, err)
	}
}

// Two anonymous browsers behind one address: one guest by IP (the
// default), two with the guest cookie on; the cookie is random, HttpOnly
// and SameSite=Lax.
func TestGuestCookieTellsApartBrowsersBehindOneAddress(t *testing.T) {
	cx := ctx(t)
	for _, tc := range []struct {
		policy GuestPolicy
		guests int64
	}{{GuestsByIP, 1}, {GuestsByCookie, 2}} {
		sp := space(t)
		h := heartbeater(t, client(t), sp, HeartbeaterOptions{Clock: newFakeClock(), Logger: &logLines{}})
		s := site(h, MiddlewareOptions{Guests: tc.policy})
		var ids []string
		for browser := 0; browser < 2; browser++ {
			rr := visit(t, s, "", "198.51.100.7")
			set := rr.Header().Values("Set-Cookie")
			if tc.policy == GuestsByIP {
				if len(set) != 0 {
					t.Fatalf("guests by IP set a cookie: %q", set)
				}
				continue
			}
			if len(set) != 1 || !strings.Contains(set[0], "; HttpOnly") || !strings.Contains(set[0], "; SameSite=Lax") ||
				!strings.Contains(set[0], "; Path=/") || !strings.HasPrefix(set[0], DefaultGuestCookie+"=") {
				t.Fatalf("the guest cookie: %q", set)
			}
			ck := rr.Result().Cookies()[0]
			ids = append(ids, ck.Value)
			// The same browser again: known, no new cookie.
			if again := visit(t, s, "", "198.51.100.7", ck); len(again.Header().Values("Set-Cookie")) != 0 {
				t.Fatal("a known guest got a new cookie")
			}
		}
		if tc.policy == GuestsByCookie && (ids[0] == ids[1] || !validGuestID(ids[0])) {
			t.Fatalf("guest ids %q", ids)
		}
		if err := h.Flush(cx); err != nil {
			t.Fatal(err)
		}
		if n, err := direct(t).Count(cx, sp, 0); err != nil || n.Guests != tc.guests {
			t.Fatalf("policy %d: %+v %v, want %d guests", tc.policy, n, err, tc.guests)
		}
	}
}

// The back-off is configurable; after it, exactly one probe goes.
func TestBreakerBackoffAndProbe(t *testing.T) {
	clk, logs := newFakeClock(), &logLines{}
	b := NewBreaker(BreakerOptions{Backoff: 5 * time.Second, Clock: clk, Logger: logs})
	if !b.Allow() {
		t.Fatal("a new breaker is closed")
	}
	b.Report(&Error{Status: 503})
	clk.Advance(4 * time.Second)
	if b.Allow() || b.Do(func() error { t.Fatal("called while open"); return nil }) != ErrUnavailable {
		t.Fatal("open within the back-off")
	}
	clk.Advance(time.Second)
	if !b.Allow() {
		t.Fatal("no probe after the back-off")
	}
	if b.Allow() {
		t.Fatal("a second probe while the first is out")
	}
	b.Report(nil)
	if !b.Allow() || b.Stats().Open || b.Stats().Openings != 1 {
		t.Fatalf("closed after the probe: %+v", b.Stats())
	}
	if l := logs.get(); len(l) != 2 || !strings.Contains(l[0], "unknown for 5s") || !strings.Contains(l[1], "answers again") {
		t.Fatalf("log %q", l)
	}
}
