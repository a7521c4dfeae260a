package herenow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSharedScenario is the shared client scenario (clients/SCENARIO.md):
// the same steps and answers as the Python and TypeScript clients'
// shared_scenario tests. It runs against a server of its own, so the
// /metrics deltas of the debounce step are the scenario's alone. The
// Heartbeater runs on an injected clock and is flushed by hand: nothing
// here sleeps for state.
func TestSharedScenario(t *testing.T) {
	srv, err := startServer()
	if err != nil {
		t.Fatalf("scenario server: %v", err)
	}
	t.Cleanup(srv.stop)
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	prefix := "sc" + hex.EncodeToString(rnd[:])

	t.Run("api", func(t *testing.T) { scenarioAPI(t, srv.url, prefix) })
	t.Run("debounce", func(t *testing.T) { scenarioDebounce(t, srv.url, prefix) })
	t.Run("server_down", func(t *testing.T) { scenarioServerDown(t, prefix) })
}

func scenarioAPI(t *testing.T, url, prefix string) {
	c, cx := clientOf(t, url, Options{}), ctx(t)
	S := prefix + "-space"
	u := func(name string) string { return prefix + "-" + name }
	ada, nobody, zed := u("ada"), u("nobody"), u("zed")
	ms := make([]string, 24)
	for i := range ms {
		ms[i] = u(fmt.Sprintf("m%02d", i))
	}

	// 1. A single heartbeat.
	r := must[HeartbeatResult](t)(c.Heartbeat(cx, S, Heartbeat{ID: ada, Meta: Meta{"name": "Ada"}}))
	if r != (HeartbeatResult{Accepted: 1, Joined: 1, Stale: 0}) {
		t.Fatalf("heartbeat: %+v", r)
	}
	m := must[Member](t)(c.Member(cx, S, User(ada)))
	if m.Status != StatusOnline || m.LastSeenMs == nil || !reflect.DeepEqual(m.Meta, Meta{"name": "Ada"}) {
		t.Fatalf("member ada: %+v", m)
	}

	// 2. Batches.
	batch := make([]Heartbeat, 0, 25)
	for _, id := range ms {
		batch = append(batch, Heartbeat{ID: id})
	}
	batch = append(batch, Heartbeat{ID: "10.0.0.7", Kind: KindGuest})
	if r := must[HeartbeatResult](t)(c.Heartbeats(cx, S, batch)); r != (HeartbeatResult{Accepted: 25, Joined: 25}) {
		t.Fatalf("batch: %+v", r)
	}
	if r := must[HeartbeatResult](t)(c.Heartbeats(cx, S, []Heartbeat{{ID: ada}, {ID: ms[0]}})); r.Accepted != 2 || r.Joined != 0 {
		t.Fatalf("second batch: %+v", r)
	}

	// 3. Online, paged to the end: 10 + 10 + 5, every user once, in id order.
	everyone := append([]string{ada}, ms...)
	sort.Strings(everyone)
	var sizes []int
	var listed []string
	opts := OnlineOptions{Order: OrderID, Limit: 10}
	for {
		page := must[OnlinePage](t)(c.Online(cx, S, &opts))
		if page.WindowMs != 600_000 {
			t.Fatalf("window_ms %d", page.WindowMs)
		}
		sizes = append(sizes, len(page.Members))
		for _, x := range page.Members {
			listed = append(listed, x.ID)
		}
		if page.NextCursor == "" {
			break
		}
		opts.Cursor = page.NextCursor
		if len(sizes) >= 10 {
			t.Fatal("paging never ends")
		}
	}
	if !reflect.DeepEqual(sizes, []int{10, 10, 5}) || !reflect.DeepEqual(listed, everyone) {
		t.Fatalf("pages %v: %v", sizes, listed)
	}
	var each []string
	if err := c.ForEachOnline(cx, S, &OnlineOptions{Order: OrderID, Limit: 10}, func(m Member) error {
		each = append(each, m.ID)
		return nil
	}); err != nil || !reflect.DeepEqual(each, everyone) {
		t.Fatalf("ForEachOnline: %v %v", err, each)
	}

	// 4. Count.
	if n := must[Count](t)(c.Count(cx, S, 0)); n != (Count{Users: 25, Guests: 1, Total: 26, WindowMs: 600_000}) {
		t.Fatalf("count: %+v", n)
	}

	// 5. Status: unknown is not an error; the batch keeps the order asked.
	if m := must[Member](t)(c.Member(cx, S, User(nobody))); m.Status != StatusOffline || m.LastSeenMs != nil {
		t.Fatalf("nobody: %+v", m)
	}
	got := must[[]Member](t)(c.Status(cx, S, []MemberRef{User(ada), User(nobody), Guest("10.0.0.7")}))
	type row struct {
		id     string
		kind   Kind
		status Status
	}
	var rows []row
	for _, x := range got {
		rows = append(rows, row{x.ID, x.Kind, x.Status})
	}
	want := []row{{ada, KindUser, StatusOnline}, {nobody, KindUser, StatusOffline}, {"10.0.0.7", KindGuest, StatusOnline}}
	if !reflect.DeepEqual(rows, want) || got[0].LastSeenMs == nil || got[1].LastSeenMs != nil {
		t.Fatalf("status: %+v", got)
	}

	// 6. Last seen anywhere.
	seen := must[[]SeenAnywhere](t)(c.UsersStatus(cx, []string{ada, nobody}))
	if len(seen) != 2 || seen[0].ID != ada || seen[0].Status != StatusOnline || seen[0].Space != S || seen[0].LastSeenMs == nil {
		t.Fatalf("users status: %+v", seen)
	}
	if seen[1] != (SeenAnywhere{ID: nobody, Status: StatusOffline}) {
		t.Fatalf("users status of nobody: %+v", seen[1])
	}

	// 7. Friends and online friends.
	if n := must[int64](t)(c.SetFriends(cx, ada, []string{ms[0], ms[1], zed})); n != 3 {
		t.Fatalf("set friends: %d", n)
	}
	if n := must[int64](t)(c.AddFriends(cx, ada, []string{ms[2]})); n != 4 {
		t.Fatalf("add friends: %d", n)
	}
	if n := must[int64](t)(c.RemoveFriends(cx, ada, []string{ms[1]})); n != 3 {
		t.Fatalf("remove friends: %d", n)
	}
	if f := sorted(must[[]string](t)(c.Friends(cx, ada))); !reflect.DeepEqual(f, sorted([]string{ms[0], ms[2], zed})) {
		t.Fatalf("friends: %v", f)
	}
	if f := ids(must[[]Member](t)(c.OnlineFriends(cx, S, ada, nil))); !reflect.DeepEqual(sorted(f), []string{ms[0], ms[2]}) {
		t.Fatalf("online friends: %v", f)
	}

	// 8. Leave: offline at once, last seen remembered.
	if n := must[int64](t)(c.Leave(cx, S, []MemberRef{User(ms[0]), User(nobody)})); n != 1 {
		t.Fatalf("left %d", n)
	}
	if m := must[Member](t)(c.Member(cx, S, User(ms[0]))); m.Status != StatusOffline || m.LastSeenMs == nil {
		t.Fatalf("m00 after leaving: %+v", m)
	}
	if n := must[Count](t)(c.Count(cx, S, 0)); n.Users != 24 {
		t.Fatalf("count after leave: %+v", n)
	}
	if f := ids(must[[]Member](t)(c.OnlineFriends(cx, S, ada, nil))); !reflect.DeepEqual(f, []string{ms[2]}) {
		t.Fatalf("online friends after leave: %v", f)
	}

	// 9. Erase.
	if e := must[Erasure](t)(c.EraseUser(cx, ada)); e != (Erasure{Presence: 1, Remembered: 0, FriendSet: true, ListedBy: 0}) {
		t.Fatalf("erase: %+v", e)
	}
	if s := must[SeenAnywhere](t)(c.User(cx, ada)); s != (SeenAnywhere{ID: ada, Status: StatusOffline}) {
		t.Fatalf("erased user: %+v", s)
	}
	if f := must[[]string](t)(c.Friends(cx, ada)); len(f) != 0 {
		t.Fatalf("erased user's friends: %v", f)
	}

	// 10. The server's 4xx problems are typed errors.
	_, err := c.Member(cx, S, User(strings.Repeat("x", 300)))
	e := mustProblem(t, err, 400, CodeBadMemberID)
	if e.RetryAfter != 0 || e.Retryable() {
		t.Fatalf("a 400 with Retry-After: %+v", e)
	}
	_, err = c.Online(cx, S, &OnlineOptions{Cursor: "not-a-cursor"})
	mustProblem(t, err, 400, CodeBadCursor)
}

var heartbeatsTotalRe = regexp.MustCompile(`(?m)^herenow_heartbeats_total(?:\{[^}]*\})?\s+(\d+)`)

// heartbeatsTotal reads herenow_heartbeats_total, every heartbeat the
// server received, from /metrics.
func heartbeatsTotal(t *testing.T, c *Client) int64 {
	t.Helper()
	text := must[string](t)(c.Metrics(ctx(t)))
	m := heartbeatsTotalRe.FindStringSubmatch(text)
	if m == nil {
		t.Fatal("/metrics has no herenow_heartbeats_total")
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func scenarioDebounce(t *testing.T, url, prefix string) {
	c, cx := clientOf(t, url, Options{}), ctx(t)
	S2 := prefix + "-site"
	users := make([]string, 10)
	for i := range users {
		users[i] = fmt.Sprintf("%s-v%d", prefix, i)
	}
	clk, logs := newFakeClock(), &logLines{}
	h := heartbeater(t, c, S2, HeartbeaterOptions{Interval: time.Minute, Clock: clk, Logger: logs})
	s := site(h, MiddlewareOptions{})

	h0 := heartbeatsTotal(t, c)
	for i := 0; i < 1000; i++ {
		visit(t, s, users[i%10], "192.0.2.1") // asserts 200 and the page's body
		clk.Advance(50 * time.Millisecond)    // 50 s in all: one interval
	}
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	h1 := heartbeatsTotal(t, c)
	// The spec's bound is "at most 10"; with 10 users it is exactly 10.
	if h1-h0 != 10 {
		t.Fatalf("%d heartbeats at the server for 1,000 requests from 10 users", h1-h0)
	}
	var online []string
	if err := c.ForEachOnline(cx, S2, nil, func(m Member) error {
		online = append(online, m.ID)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sorted(online), sorted(users)) {
		t.Fatalf("online: %v", online)
	}

	clk.Advance(time.Minute) // the next interval: each user once more
	for _, user := range users {
		visit(t, s, user, "192.0.2.1")
	}
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	if d := heartbeatsTotal(t, c) - h1; d != 10 {
		t.Fatalf("%d heartbeats in the second interval", d)
	}
	st := h.Stats()
	if st.Queued != 20 || st.Sent != 20 || st.Debounced != 990 || st.Failed != 0 || st.Dropped != 0 {
		t.Fatalf("stats: %+v", st)
	}
	if l := logs.get(); len(l) != 0 {
		t.Fatalf("logged: %v", l)
	}
}

func scenarioServerDown(t *testing.T, prefix string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // bound, then released: connections are refused

	c := clientOf(t, dead, Options{})
	clk, logs := newFakeClock(), &logLines{}
	h := heartbeater(t, c, "site", HeartbeaterOptions{Interval: time.Minute, Clock: clk, Logger: logs})
	s := site(h, MiddlewareOptions{})
	cx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		visit(t, s, fmt.Sprintf("%s-w%d", prefix, i), "192.0.2.1") // asserts 200 and the body
		if err := h.Flush(cx); err != nil {
			t.Fatalf("flush %d: %v", i, err)
		}
	}
	if l := logs.get(); len(l) != 1 {
		t.Fatalf("want one line within the interval, got %d: %v", len(l), l)
	}
	clk.Advance(time.Minute)
	visit(t, s, prefix+"-late", "192.0.2.1")
	if err := h.Flush(cx); err != nil {
		t.Fatal(err)
	}
	if l := logs.get(); len(l) != 2 {
		t.Fatalf("want a second line after the interval, got %d: %v", len(l), l)
	}
	if st := h.Stats(); st.Failed != 21 || st.Sent != 0 {
		t.Fatalf("stats: %+v", st)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func ids(ms []Member) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// TestWebhooksStateWithoutWebhooks: GET /v1/webhooks of a server with none
// configured (skipped for a server binary that predates webhooks).
func TestWebhooksStateWithoutWebhooks(t *testing.T) {
	st, err := client(t).Webhooks(ctx(t))
	if HasCode(err, CodeNotFound) {
		t.Skip("this herenow binary predates webhooks")
	}
	if err != nil {
		t.Fatal(err)
	}
	if st.Enabled || st.Consumer != "" || len(st.Endpoints) != 0 || st.Outbox != nil {
		t.Fatalf("webhooks state: %+v", st)
	}
}

// TestWebhooksStateWithAnEndpoint: GET /v1/webhooks names a configured
// endpoint, typed, and never its secret.
func TestWebhooksStateWithAnEndpoint(t *testing.T) {
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	srv, err := startServer("--webhook", recv.URL+"/hooks,events=join,leave,spaces=room:*", "--webhook-secret", secret)
	if err != nil {
		if strings.Contains(err.Error(), "--webhook") {
			t.Skipf("this herenow binary predates webhooks: %v", err)
		}
		t.Fatal(err)
	}
	defer srv.stop()
	st := must[WebhooksState](t)(clientOf(t, srv.url, Options{}).Webhooks(ctx(t)))
	if !st.Enabled || st.Consumer == "" || len(st.Endpoints) != 1 || st.Outbox == nil {
		t.Fatalf("webhooks state: %+v", st)
	}
	e := st.Endpoints[0]
	if e.URL != recv.URL+"/hooks" || e.Spaces == nil || *e.Spaces != "room:*" ||
		!reflect.DeepEqual(sorted(e.Events), []string{"join", "leave"}) || e.Queue.Limit != 10_000 {
		t.Fatalf("endpoint: %+v", e)
	}
	switch e.State {
	case EndpointOK, EndpointRetrying, EndpointFailing:
	default:
		t.Fatalf("state %q", e.State)
	}
	if strings.Contains(fmt.Sprintf("%+v", st), "MfKQ9r8") {
		t.Fatal("the secret is shown")
	}
}
