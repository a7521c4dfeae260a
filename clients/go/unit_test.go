package herenow

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Behaviour that needs a misbehaving server: a fake one (httptest).

func fakeServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	s := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	c := clientOf(t, s.URL, Options{Timeout: 50 * time.Millisecond})
	start := time.Now()
	_, err := c.Count(context.Background(), "lobby", 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a deadline error, got %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("the timeout took %v", time.Since(start))
	}
	// The caller's context is honoured too.
	cx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := clientOf(t, s.URL, Options{Timeout: -1}).Count(cx, "lobby", 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestNonProblemErrorsAreTyped(t *testing.T) {
	s := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html>bad gateway "+strings.Repeat("x", 1000)+"</html>")
	})
	_, err := clientOf(t, s.URL, Options{}).Count(context.Background(), "lobby", 0)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error, got %T %v", err, err)
	}
	if e.Status != 502 || e.Code != "" || e.RetryAfter != 7*time.Second || !e.Retryable() ||
		!strings.HasPrefix(e.Detail, "<html>bad gateway") || len(e.Detail) > 210 {
		t.Fatalf("non-problem error: %+v", e)
	}
}

func TestAnswersOverTheLimitAreRefused(t *testing.T) {
	s := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"users": 1, "pad": "`+strings.Repeat("p", 4096)+`"}`)
	})
	_, err := clientOf(t, s.URL, Options{MaxResponseBytes: 1024}).Count(context.Background(), "lobby", 0)
	if err == nil || !strings.Contains(err.Error(), "MaxResponseBytes") {
		t.Fatalf("want the limit's error, got %v", err)
	}
	var e *Error
	if errors.As(err, &e) {
		t.Fatalf("a client-side limit is not a server refusal: %+v", e)
	}
}

func TestUndecodableAnswerIsAnError(t *testing.T) {
	s := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"users": "many"}`)
	})
	if _, err := clientOf(t, s.URL, Options{}).Count(context.Background(), "lobby", 0); err == nil ||
		!strings.Contains(err.Error(), "decoding") {
		t.Fatalf("want a decoding error, got %v", err)
	}
}

func TestBaseURLPrefixAndHeaders(t *testing.T) {
	var got *http.Request
	s := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"accepted":1,"joined":1,"stale":0}`)
	})
	c := clientOf(t, s.URL+"/presence/", Options{APIKey: "k1", UserAgent: "site/1"})
	if _, err := c.Heartbeat(context.Background(), "room:1", Heartbeat{ID: "a/b"}); err != nil {
		t.Fatal(err)
	}
	if got.URL.EscapedPath() != "/presence/v1/spaces/room:1/heartbeat" {
		t.Fatalf("path %q", got.URL.EscapedPath())
	}
	if got.Header.Get("Authorization") != "Bearer k1" || got.Header.Get("User-Agent") != "site/1" ||
		got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", got.Header)
	}
	if _, err := c.Member(context.Background(), "room:1", User("a/b")); err != nil {
		t.Fatal(err)
	}
	if got.URL.EscapedPath() != "/presence/v1/spaces/room:1/members/a%2Fb" {
		t.Fatalf("an id with a slash is one segment: %q", got.URL.EscapedPath())
	}
	if _, err := c.Member(context.Background(), "room:1", User("..")); err != nil {
		t.Fatal(err)
	}
	if got.URL.EscapedPath() != "/presence/v1/spaces/room:1/members/%2E%2E" {
		t.Fatalf("a dot-dot id is escaped: %q", got.URL.EscapedPath())
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":                              0,
		"5":                             5 * time.Second,
		" 1 ":                           time.Second,
		"0":                             0,
		"-3":                            0,
		"soon":                          0,
		"999999999":                     24 * time.Hour,
		"Mon, 01 Jan 2024 00:00:30 GMT": 30 * time.Second,
		"Sun, 31 Dec 2023 23:59:00 GMT": 0,
	}
	for in, want := range cases {
		if got := parseRetryAfter(in, now); got != want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestSSEParser(t *testing.T) {
	stream := ": keep-alive\n\n" +
		"event: snapshot\ndata: {\"a\":1}\n\n" +
		"event: join\r\ndata:{\"b\":2}\r\n\r\n" +
		"data: line one\ndata: line two\nid: 7\nretry: 100\n\n" +
		"event: lonely\n\n" + // no data: not dispatched
		"event: last\ndata: x\n\n" +
		"event: cut\ndata: partial"
	r := newSSEReader(strings.NewReader(stream), 1<<10)
	want := []sseEvent{
		{"snapshot", []byte(`{"a":1}`)},
		{"join", []byte(`{"b":2}`)},
		{"message", []byte("line one\nline two")},
		{"last", []byte("x")},
	}
	for _, w := range want {
		got, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if got.name != w.name || string(got.data) != string(w.data) {
			t.Fatalf("got %q %q, want %q %q", got.name, got.data, w.name, w.data)
		}
	}
	if _, err := r.next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("a cut event: %v", err)
	}
	big := "data: " + strings.Repeat("z", 2000) + "\n\n"
	if _, err := newSSEReader(strings.NewReader(big), 1000).next(); !errors.Is(err, errEventTooLarge) {
		t.Fatalf("an event over the bound: %v", err)
	}
	many := strings.Repeat("data: "+strings.Repeat("z", 100)+"\n", 20) + "\n"
	if _, err := newSSEReader(strings.NewReader(many), 1000).next(); !errors.Is(err, errEventTooLarge) {
		t.Fatalf("data lines over the bound: %v", err)
	}
	if _, err := newSSEReader(strings.NewReader(""), 10).next(); err != io.EOF {
		t.Fatalf("an empty stream: %v", err)
	}
}

// A connection that goes silent (no keep-alive) is dropped after
// IdleTimeout, so a dead network is noticed.
func TestStreamIdleTimeout(t *testing.T) {
	release := make(chan struct{})
	s := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: snapshot\ndata: {\"space\":\"s\",\"members\":[],\"omitted\":0,\"config\":{\"online_ms\":1,\"away_ms\":1,\"window_ms\":1,\"retention_ms\":1}}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	c := clientOf(t, s.URL, Options{})
	st, err := c.Events(ctx(t), "s", &StreamOptions{NoResume: true, IdleTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ev, err := st.Next(); err != nil || ev.Type != EventSnapshot {
		t.Fatalf("snapshot: %+v %v", ev, err)
	}
	start := time.Now()
	_, err = st.Next()
	if err == nil || errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "silent") {
		t.Fatalf("want the idle error, got %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("idle timeout took %v", time.Since(start))
	}
}

func TestStreamRefusesANonStreamAnswer(t *testing.T) {
	s := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	})
	_, err := clientOf(t, s.URL, Options{}).Events(ctx(t), "s", nil)
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(e.Detail, "not an event stream") {
		t.Fatalf("want a refusal, got %v", err)
	}
}

// Streams give up on refusals a retry would meet again, and after
// MaxAttempts failures in a row.
func TestStreamResumeGivesUp(t *testing.T) {
	var calls atomic.Int64
	s := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: lagged\ndata: {\"missed\":3}\n\n")
			return // the stream ends: the client resumes
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"type":"t","title":"T","status":503,"detail":"d","code":"store-unavailable"}`)
	})
	var drops []error
	st, err := clientOf(t, s.URL, Options{}).Events(ctx(t), "s", &StreamOptions{
		MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, MaxAttempts: 3,
		OnDrop: func(err error) { drops = append(drops, err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if ev, err := st.Next(); err != nil || ev.Type != EventLagged || ev.Missed != 3 {
		t.Fatalf("lagged: %+v %v", ev, err)
	}
	_, err = st.Next()
	if !HasCode(err, CodeStoreUnavailable) || !strings.Contains(err.Error(), "3 failed attempts") {
		t.Fatalf("want to give up after 3 attempts, got %v", err)
	}
	if calls.Load() != 4 || len(drops) != 3 || !errors.Is(drops[0], ErrStreamEnded) {
		t.Fatalf("calls %d, drops %v", calls.Load(), drops)
	}

}

func TestStreamResumeStopsAtARefusal(t *testing.T) {
	var calls atomic.Int64
	s := fakeServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: lagged\ndata: {\"missed\":1}\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"type":"t","title":"T","status":401,"detail":"d","code":"unknown-api-key"}`)
	})
	st, err := clientOf(t, s.URL, Options{}).Events(ctx(t), "s", &StreamOptions{MinBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Next(); err != nil {
		t.Fatal(err)
	}
	_, err = st.Next()
	mustProblem(t, err, 401, CodeUnknownAPIKey)
	if calls.Load() != 2 {
		t.Fatalf("%d calls: a refusal is not retried", calls.Load())
	}
}
