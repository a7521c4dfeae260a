package herenow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Receiving webhooks, continued: the payload's types, deduplication, the
// handler's answers, and a real delivery from `herenow serve`
// (verification is in webhooks_test.go).

// apiBody is docs/API.md's example body.
const apiBody = `{"type": "presence.events", "timestamp": "2026-11-22T10:00:00.000Z",
 "data": {"events": [
   {"id": "8c1f-17", "type": "join", "space": "lobby", "at_ms": 1700000000000,
    "member": "ann", "kind": "user", "status": "online", "last_seen_ms": 1700000000000,
    "meta": {"page": "/"}},
   {"id": "8c1f-18", "type": "leave", "space": "lobby", "at_ms": 1700000090000,
    "member": "bob", "kind": "user", "status": "offline", "last_seen_ms": 1700000080000,
    "reason": "closed", "conn": "tab-1"},
   {"id": "8c1f-19", "type": "vacated", "space": "lobby", "at_ms": 1700000090000}]}}`

// signed is a request's headers for body, signed by v at the vector's time.
func signed(v *WebhookVerifier, msgID string, body []byte) http.Header {
	return vecHeaders("webhook-id", msgID, "webhook-signature", v.Sign(msgID, vecTimestamp, body))
}

func TestWebhookDocumentedBodyParsesIntoTypedEvents(t *testing.T) {
	v := verifier(t, 0)
	h := signed(v, "msg_docs", []byte(apiBody))
	batch, err := v.Receive(h, []byte(apiBody))
	if err != nil {
		t.Fatal(err)
	}
	if batch.Type != "presence.events" || batch.Timestamp != "2026-11-22T10:00:00.000Z" || batch.WebhookID != "msg_docs" || len(batch.Events) != 3 {
		t.Fatalf("batch: %+v", batch)
	}
	join, leave, vacated := batch.Events[0], batch.Events[1], batch.Events[2]
	if join.Type != WebhookJoin || join.ID != "8c1f-17" || join.Space != "lobby" || join.Member != "ann" ||
		join.Kind != KindUser || join.Status != StatusOnline || join.AtMs != 1700000000000 ||
		join.LastSeenMs == nil || *join.LastSeenMs != 1700000000000 || join.Reason != "" || join.Conn != "" {
		t.Fatalf("join: %+v", join)
	}
	var meta map[string]string
	if err := json.Unmarshal(join.Meta, &meta); err != nil || !reflect.DeepEqual(meta, map[string]string{"page": "/"}) {
		t.Fatalf("join meta %s: %v", join.Meta, err)
	}
	if !join.IsMemberEvent() || !join.Type.Known() || join.Ref() != User("ann") || !join.At().Equal(time.UnixMilli(1700000000000)) {
		t.Fatalf("join: %+v", join)
	}
	if seen, ok := join.LastSeen(); !ok || seen.UnixMilli() != 1700000000000 {
		t.Fatalf("join last seen %v %v", seen, ok)
	}
	if leave.Type != WebhookLeave || leave.Member != "bob" || leave.Status != StatusOffline ||
		leave.Reason != ReasonClosed || leave.Conn != "tab-1" || *leave.LastSeenMs != 1700000080000 || leave.Meta != nil {
		t.Fatalf("leave: %+v", leave)
	}
	if vacated.Type != WebhookVacated || vacated.Space != "lobby" || vacated.IsMemberEvent() ||
		vacated.Member != "" || vacated.Kind != "" || vacated.Status != "" || vacated.LastSeenMs != nil || vacated.Meta != nil {
		t.Fatalf("vacated: %+v", vacated)
	}
	if _, ok := vacated.LastSeen(); ok {
		t.Fatal("vacated has a last seen")
	}
	// Parse alone: no webhook id; the same events.
	parsed, err := ParseWebhookBatch([]byte(apiBody))
	if err != nil || parsed.WebhookID != "" || !reflect.DeepEqual(parsed.Events, batch.Events) {
		t.Fatalf("parse: %+v %v", parsed, err)
	}
	// null is absent, as in the Python client.
	nulls := `{"type":"presence.events","timestamp":null,"data":{"events":[{"id":"e","type":"occupied","space":"s","at_ms":-1,"member":null,"kind":null,"status":null,"last_seen_ms":null,"meta":null,"conn":null,"reason":null}]}}`
	b, err := ParseWebhookBatch([]byte(nulls))
	if err != nil || b.Timestamp != "" || b.Events[0].IsMemberEvent() || b.Events[0].Meta != nil || b.Events[0].LastSeenMs != nil || b.Events[0].AtMs != -1 {
		t.Fatalf("nulls: %+v %v", b, err)
	}
}

func TestWebhookNewerServersTypeAndFieldsAreKept(t *testing.T) {
	body := `{"type": "presence.events", "timestamp": 5, "extra": true, "data": {"events": [
		{"id": "e1", "type": "teleport", "space": "s", "at_ms": 1, "colour": "red"}], "more": 1}}`
	b, err := ParseWebhookBatch([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	e := b.Events[0]
	if e.Type != "teleport" || e.Type.Known() || b.Timestamp != "" {
		t.Fatalf("event %+v, batch %+v", e, b)
	}
	var raw map[string]any
	if err := json.Unmarshal(e.Raw, &raw); err != nil || raw["colour"] != "red" {
		t.Fatalf("raw %s: %v", e.Raw, err)
	}
	// Field names are exact: "ID" is not "id".
	if _, err := ParseWebhookBatch([]byte(`{"type":"presence.events","data":{"events":[{"ID":"e","type":"join","space":"s","at_ms":1}]}}`)); !errors.Is(err, ErrWebhookPayload) {
		t.Fatalf("want a payload error, got %v", err)
	}
	// An empty batch is a batch.
	if b, err := ParseWebhookBatch([]byte(`{"type":"presence.events","data":{"events":[]}}`)); err != nil || len(b.Events) != 0 {
		t.Fatalf("empty: %+v %v", b, err)
	}
}

func oneEvent(event string) string {
	return `{"type": "presence.events", "data": {"events": [` + event + `]}}`
}

func TestWebhookSignedBodyThatIsNotABatchIsAPayloadError(t *testing.T) {
	v := verifier(t, 0)
	for _, body := range []string{
		"not json",
		"\xff\xfe",
		"",
		"null",
		"[]",
		`"presence.events"`,
		`{"type": "something.else", "data": {"events": []}}`,
		`{"type": ["presence.events"], "data": {"events": []}}`,
		`{"type": "presence.events"}`,
		`{"type": "presence.events", "data": null}`,
		`{"type": "presence.events", "data": {"events": {}}}`,
		`{"type": "presence.events", "data": {"events": null}}`,
		`{"type": "presence.events", "data": {"events": [1]}}`,
		`{"type": "presence.events", "data": {"events": [null]}}`,
		oneEvent(`{"type": "join", "space": "s", "at_ms": 1}`), // no id
		oneEvent(`{"id": "e", "space": "s", "at_ms": 1}`),      // no type
		oneEvent(`{"id": "e", "type": "join", "at_ms": 1}`),    // no space
		oneEvent(`{"id": "e", "type": "join", "space": "s"}`),  // no at_ms
		oneEvent(`{"id": 7, "type": "join", "space": "s", "at_ms": 1}`),
		oneEvent(`{"id": "e", "type": "join", "space": "s", "at_ms": true}`),
		oneEvent(`{"id": "e", "type": "join", "space": "s", "at_ms": "1"}`),
		oneEvent(`{"id": "e", "type": "join", "space": "s", "at_ms": 1.0}`),
		oneEvent(`{"id": "e", "type": "join", "space": "s", "at_ms": 1e3}`),
		oneEvent(`{"id": "e", "type": "join", "space": "s", "at_ms": 1, "kind": "robot"}`),
		oneEvent(`{"id": "e", "type": "join", "space": "s", "at_ms": 1, "status": "asleep"}`),
		oneEvent(`{"id": "e", "type": "join", "space": "s", "at_ms": 1, "meta": []}`),
		oneEvent(`{"id": "e", "type": "join", "space": "s", "at_ms": 1, "member": 5}`),
		oneEvent(`{"id": "e", "type": "join", "space": "s", "at_ms": 1, "last_seen_ms": "1"}`),
		oneEvent(`{"id": "e", "type": "leave", "space": "s", "at_ms": 1, "reason": false}`),
		oneEvent(`{"id": "e", "type": "join", "space": "s` + "\xff" + `", "at_ms": 1}`), // not UTF-8
	} {
		b, err := ParseWebhookBatch([]byte(body))
		var pe *WebhookPayloadError
		if !errors.As(err, &pe) || !errors.Is(err, ErrWebhookPayload) || errors.Is(err, ErrWebhookVerification) || b != nil {
			t.Fatalf("%q: want a payload error, got %v", body, err)
		}
		// And through Receive: the signature is fine, the payload is not.
		if _, err := v.Receive(signed(v, "msg_x", []byte(body)), []byte(body)); !errors.Is(err, ErrWebhookPayload) {
			t.Fatalf("%q: Receive: want a payload error, got %v", body, err)
		}
	}
	// A JSON syntax error is kept.
	_, err := ParseWebhookBatch([]byte("not json"))
	var syntax *json.SyntaxError
	if !errors.As(err, &syntax) {
		t.Fatalf("want the JSON error inside, got %v", err)
	}
	// Verification comes first: an unsigned non-batch is a verification error.
	refused(t, receiveErr(v, vecHeaders(), []byte("not json")), WebhookNoMatchingSignature)
}

func receiveErr(v *WebhookVerifier, h http.Header, body []byte) error {
	_, err := v.Receive(h, body)
	return err
}

func TestWebhookDeduplicatorIsBoundedAndForgetsTheOldest(t *testing.T) {
	batch, err := ParseWebhookBatch([]byte(apiBody))
	if err != nil {
		t.Fatal(err)
	}
	seen := NewDeduplicator(3)
	var got []string
	for _, e := range seen.Fresh(batch.Events) {
		got = append(got, e.ID)
	}
	if !reflect.DeepEqual(got, []string{"8c1f-17", "8c1f-18", "8c1f-19"}) {
		t.Fatalf("fresh: %v", got)
	}
	if again := seen.Fresh(batch.Events); len(again) != 0 { // a redelivery
		t.Fatalf("redelivered: %v", again)
	}
	if !seen.FirstTime("new") || seen.Len() != 3 { // 8c1f-17 is now forgotten…
		t.Fatalf("len %d", seen.Len())
	}
	if !seen.FirstTime("8c1f-17") || seen.FirstTime("new") { // …and so new again
		t.Fatal("8c1f-17 is not forgotten")
	}
	// Seeing an id again makes it the most recent: the oldest is
	// forgotten, not the first remembered.
	if seen.FirstTime("8c1f-19") { // oldest first: 19, 17, new → 17, new, 19
		t.Fatal("8c1f-19 is forgotten")
	}
	if !seen.FirstTime("another") || seen.FirstTime("8c1f-19") || !seen.FirstTime("8c1f-17") {
		t.Fatal("not the least recently seen id was forgotten") // 17 was
	}
	seen.Forget("new")
	if !seen.FirstTime("new") || seen.Len() != 3 {
		t.Fatal("Forget")
	}
	if d := NewDeduplicator(0); d.max != DefaultDeduplicatorSize {
		t.Fatalf("default size %d", d.max)
	}
	// Concurrent use (under -race): every id is first once.
	d := NewDeduplicator(1000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				if d.FirstTime(strconv.Itoa(i)) {
					mu.Lock()
					firsts++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if firsts != 500 || d.Len() != 500 {
		t.Fatalf("firsts %d, len %d", firsts, d.Len())
	}
}

func TestWebhookHandlerStatusCodes(t *testing.T) {
	v := verifier(t, 0)
	var handled []*WebhookBatch
	fail := errors.New("database down")
	var answer error
	h := WebhookHandler(v, func(ctx context.Context, b *WebhookBatch) error {
		if ctx == nil {
			t.Error("no context")
		}
		handled = append(handled, b)
		return answer
	})
	serve := func(method string, hdr http.Header, body io.Reader, length int64) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/hooks/presence", body)
		if hdr != nil {
			r.Header = hdr
		}
		if length >= 0 {
			r.ContentLength = length
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	body := []byte(apiBody)
	ok := signed(v, "msg_ok", body)
	if w := serve(http.MethodPost, ok, bytes.NewReader(body), -1); w.Code != http.StatusNoContent || len(handled) != 1 || handled[0].WebhookID != "msg_ok" || len(handled[0].Events) != 3 {
		t.Fatalf("ok: %d %s, %d handled", w.Code, w.Body, len(handled))
	}
	answer = fail
	if w := serve(http.MethodPost, ok, bytes.NewReader(body), -1); w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "database") {
		t.Fatalf("failing handler: %d %s", w.Code, w.Body)
	}
	answer = nil
	handled = nil
	for name, c := range map[string]struct {
		method string
		hdr    http.Header
		body   []byte
		length int64
		want   int
	}{
		"get":                {http.MethodGet, ok, nil, -1, http.StatusMethodNotAllowed},
		"put":                {http.MethodPut, ok, body, -1, http.StatusMethodNotAllowed},
		"bad signature":      {http.MethodPost, vecHeaders("webhook-signature", vecWrongSignature), body, -1, http.StatusUnauthorized},
		"no headers":         {http.MethodPost, http.Header{}, body, -1, http.StatusUnauthorized},
		"stale":              {http.MethodPost, vecHeaders("webhook-timestamp", "1000"), body, -1, http.StatusUnauthorized},
		"tampered":           {http.MethodPost, ok, append([]byte(apiBody), ' '), -1, http.StatusUnauthorized},
		"not a batch":        {http.MethodPost, signed(v, "msg_nb", []byte(`{"a":1}`)), []byte(`{"a":1}`), -1, http.StatusBadRequest},
		"declared too large": {http.MethodPost, ok, body, MaxWebhookBodyBytes + 1, http.StatusRequestEntityTooLarge},
		// Chunked (length unknown) and too large: cut at the bound.
		"too large": {http.MethodPost, ok, bytes.Repeat([]byte(" "), MaxWebhookBodyBytes+1), -1, http.StatusRequestEntityTooLarge},
	} {
		var rd io.Reader
		if c.body != nil {
			rd = io.MultiReader(bytes.NewReader(c.body)) // a length not known in advance
		}
		w := serve(c.method, c.hdr, rd, c.length)
		if w.Code != c.want {
			t.Fatalf("%s: %d %s, want %d", name, w.Code, w.Body, c.want)
		}
		if c.want == http.StatusMethodNotAllowed && w.Header().Get("Allow") != http.MethodPost {
			t.Fatalf("%s: Allow %q", name, w.Header().Get("Allow"))
		}
	}
	if len(handled) != 0 {
		t.Fatalf("refused requests were handled: %d", len(handled))
	}
	// A body at the bound is read (then refused for its signature only).
	big := bytes.Repeat([]byte(" "), MaxWebhookBodyBytes)
	if w := serve(http.MethodPost, ok, bytes.NewReader(big), -1); w.Code != http.StatusUnauthorized {
		t.Fatalf("at the bound: %d", w.Code)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("a nil verifier did not panic")
			}
		}()
		WebhookHandler(nil, func(context.Context, *WebhookBatch) error { return nil })
	}()
}

// TestWebhooksFromARealServerVerifyAndParse: `herenow serve --webhook` to
// a WebhookHandler; a member's heartbeat and leave arrive verified and
// typed (occupied, join, leave, vacated), ann's in order.
func TestWebhooksFromARealServerVerifyAndParse(t *testing.T) {
	v, err := NewWebhookVerifier([]string{vecSecret}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sp := space(t)
	var mu sync.Mutex
	var mine []WebhookEvent
	var webhookIDs []string
	arrived := make(chan struct{}, 1)
	recv := httptest.NewServer(WebhookHandler(v, func(_ context.Context, b *WebhookBatch) error {
		mu.Lock()
		defer mu.Unlock()
		webhookIDs = append(webhookIDs, b.WebhookID)
		for _, e := range b.Events {
			if e.Space == sp {
				mine = append(mine, e)
			}
		}
		select {
		case arrived <- struct{}{}:
		default:
		}
		return nil
	}))
	defer recv.Close()
	url := recv.URL + "/hooks/presence"
	srv, err := startServer("--webhook", url+",secret="+vecSecret)
	if err != nil {
		if strings.Contains(err.Error(), "--webhook") {
			t.Skipf("this herenow binary predates webhooks: %v", err)
		}
		t.Fatal(err)
	}
	defer srv.stop()
	c := clientOf(t, srv.url, Options{})
	must[HeartbeatResult](t)(c.Heartbeat(ctx(t), sp, Heartbeat{ID: "ann", Meta: Meta{"page": "/"}}))
	if _, err := c.Leave(ctx(t), sp, []MemberRef{User("ann")}); err != nil {
		t.Fatal(err)
	}

	byType := map[WebhookEventType]WebhookEvent{}
	deadline := time.After(20 * time.Second)
	for len(byType) < 4 {
		select {
		case <-arrived:
		case <-deadline:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("within 20 s only %+v arrived (server log: %s)", mine, srv.stderr.String())
		}
		mu.Lock()
		for _, e := range mine {
			byType[e.Type] = e
		}
		mu.Unlock()
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []WebhookEventType{WebhookOccupied, WebhookJoin, WebhookLeave, WebhookVacated} {
		if _, ok := byType[want]; !ok || len(byType) != 4 {
			t.Fatalf("events: %+v", mine)
		}
	}
	join, leave := byType[WebhookJoin], byType[WebhookLeave]
	var meta map[string]any
	if join.Member != "ann" || join.Kind != KindUser || join.Status != StatusOnline ||
		json.Unmarshal(join.Meta, &meta) != nil || !reflect.DeepEqual(meta, map[string]any{"page": "/"}) {
		t.Fatalf("join: %+v (meta %s)", join, join.Meta)
	}
	if leave.Member != "ann" || leave.Status != StatusOffline || leave.Reason != ReasonExplicit ||
		leave.LastSeenMs == nil || leave.AtMs < join.AtMs {
		t.Fatalf("leave: %+v", leave)
	}
	joinAt, leaveAt, ids := -1, -1, map[string]bool{}
	for i, e := range mine {
		switch e.Type {
		case WebhookJoin:
			joinAt = i
		case WebhookLeave:
			leaveAt = i
		}
		ids[e.ID] = true
	}
	if joinAt > leaveAt || len(ids) != len(mine) {
		t.Fatalf("order or ids: %+v", mine)
	}
	for _, id := range webhookIDs {
		if !strings.HasPrefix(id, "msg_") {
			t.Fatalf("webhook-id %q", id)
		}
	}
	// The server counts what the handler's 204s delivered.
	st := must[WebhooksState](t)(c.Webhooks(ctx(t)))
	if len(st.Endpoints) != 1 || st.Endpoints[0].URL != url {
		t.Fatalf("webhooks state: %+v", st)
	}
}
