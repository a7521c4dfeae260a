package herenow

import (
	"bytes"
	"container/list"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// WebhookBodyType is the "type" of every herenow webhook body.
const WebhookBodyType = "presence.events"

// WebhookEventType says what happened: a member's join … update, or a
// space's occupied (its first member came) and vacated (its last left).
// A type this client does not know (a newer server's) is kept as sent.
type WebhookEventType string

// The webhook event types (docs/API.md, "Webhooks").
const (
	WebhookJoin     WebhookEventType = "join"
	WebhookLeave    WebhookEventType = "leave"
	WebhookAway     WebhookEventType = "away"
	WebhookBack     WebhookEventType = "back"
	WebhookUpdate   WebhookEventType = "update"
	WebhookOccupied WebhookEventType = "occupied"
	WebhookVacated  WebhookEventType = "vacated"
)

// Known reports whether t is one of the types above.
func (t WebhookEventType) Known() bool {
	switch t {
	case WebhookJoin, WebhookLeave, WebhookAway, WebhookBack, WebhookUpdate,
		WebhookOccupied, WebhookVacated:
		return true
	}
	return false
}

// ReasonClosed: the member's last live connection closed (a webhook
// leave's reason).
const ReasonClosed LeaveReason = "closed"

// WebhookEvent is one event of a webhook batch (docs/API.md, "Webhooks").
//
// Member events (join, leave, away, back, update) carry Member, Kind,
// Status (after the event) and LastSeenMs, Meta when the member has
// metadata and Conn when a live connection caused it; a leave says why in
// Reason (explicit, closed, timeout, expired). occupied and vacated have
// none of them: those fields are then zero.
type WebhookEvent struct {
	// ID is unique, and the same on every redelivery: deduplicate by it.
	ID    string
	Type  WebhookEventType
	Space string
	// AtMs is when it happened, ms since the UNIX epoch.
	AtMs       int64
	Member     string
	Kind       Kind
	Status     Status
	LastSeenMs *int64
	// Meta is the member's metadata, a JSON object, as sent; nil when
	// absent.
	Meta   json.RawMessage
	Reason LeaveReason
	Conn   string
	// Raw is the event as sent, fields this client does not know
	// included.
	Raw json.RawMessage
}

// At is AtMs as a time.
func (e WebhookEvent) At() time.Time { return time.UnixMilli(e.AtMs) }

// LastSeen is LastSeenMs as a time; ok is false when it is nil.
func (e WebhookEvent) LastSeen() (t time.Time, ok bool) { return msTime(e.LastSeenMs) }

// IsMemberEvent reports whether the event is about a member (it names
// one), not a space's occupied or vacated.
func (e WebhookEvent) IsMemberEvent() bool { return e.Member != "" }

// Ref names the event's member.
func (e WebhookEvent) Ref() MemberRef { return MemberRef{ID: e.Member, Kind: e.Kind} }

// WebhookBatch is one webhook request's body: up to 100 events, each
// member's in order.
type WebhookBatch struct {
	// Type is WebhookBodyType.
	Type string
	// Timestamp is the body's timestamp (RFC 3339), as sent; empty when
	// it had none.
	Timestamp string
	Events    []WebhookEvent
	// WebhookID is the webhook-id header (set by Receive and
	// WebhookHandler, empty from ParseWebhookBatch): the same on every
	// retry of this batch.
	WebhookID string
}

// WebhookPayloadError is a correctly signed body that is not a herenow
// presence.events batch (a newer server's format, or a sender sharing the
// secret). It matches [ErrWebhookPayload] with errors.Is; Err is the JSON
// error behind it, if any.
type WebhookPayloadError struct {
	Detail string
	Err    error
}

func (e *WebhookPayloadError) Error() string {
	return "herenow: webhook payload: " + e.Detail
}

// Is makes errors.Is(err, ErrWebhookPayload) true.
func (e *WebhookPayloadError) Is(target error) bool { return target == ErrWebhookPayload }

// Unwrap is the JSON error, if any.
func (e *WebhookPayloadError) Unwrap() error { return e.Err }

func payloadError(format string, args ...any) error {
	return &WebhookPayloadError{Detail: fmt.Sprintf(format, args...)}
}

// jsonObject is a JSON object's members, by exact name (encoding/json's
// struct fields would match names in any case).
type jsonObject map[string]json.RawMessage

// jsonLeading is the first byte of a JSON value: '{', '[', '"', 'n', …; 0 for
// an absent value.
func jsonLeading(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// objectOf reads raw as a JSON object; ok is false for anything else (null
// included).
func objectOf(raw json.RawMessage) (jsonObject, bool) {
	if jsonLeading(raw) != '{' {
		return nil, false
	}
	var o jsonObject
	if json.Unmarshal(raw, &o) != nil {
		return nil, false
	}
	return o, true
}

// str is the member name as a string; absent or null is ok with
// present false.
func (o jsonObject) str(name string) (s string, present bool, err error) {
	raw, ok := o[name]
	if !ok || jsonLeading(raw) == 'n' {
		return "", false, nil
	}
	if jsonLeading(raw) != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false, payloadError("%q is not a string", name)
	}
	return s, true, nil
}

// integer is the member name as an integer (no fraction, no exponent).
func (o jsonObject) integer(name string) (n int64, present bool, err error) {
	raw, ok := o[name]
	if !ok || jsonLeading(raw) == 'n' {
		return 0, false, nil
	}
	// A JSON integer: no fraction, no exponent (1.0 and 1e3 are refused,
	// as by the Python client), within 64 bits.
	n, perr := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if perr != nil {
		return 0, false, payloadError("%q is not an integer", name)
	}
	return n, true, nil
}

func (o jsonObject) requiredStr(name string) (string, error) {
	s, present, err := o.str(name)
	if err == nil && !present {
		err = payloadError("an event has no %q", name)
	}
	return s, err
}

// ParseWebhookBatch reads a verified body as a [WebhookBatch]: an object
// with type "presence.events" and data.events, a list of events, each with
// a string id, type and space and an integer at_ms; member, kind (user or
// guest), status (online, away or offline), last_seen_ms, meta (an object),
// conn and reason are optional (null is absent). Anything else is a
// [*WebhookPayloadError]. An unknown event type is kept, unknown fields
// are ignored (and kept in Raw). Verify a request before parsing it:
// [WebhookVerifier.Receive] does both.
func ParseWebhookBatch(body []byte) (*WebhookBatch, error) {
	if !utf8.Valid(body) {
		return nil, payloadError("the body is not JSON: not UTF-8")
	}
	var doc jsonObject
	if err := json.Unmarshal(body, &doc); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return nil, payloadError("the body is not a JSON object")
		}
		return nil, &WebhookPayloadError{Detail: "the body is not JSON: " + err.Error(), Err: err}
	}
	if doc == nil {
		return nil, payloadError("the body is not a JSON object")
	}
	if typ, _, err := doc.str("type"); err != nil || typ != WebhookBodyType {
		return nil, payloadError("the body's type is %s, not %q", excerpt(doc["type"], 40), WebhookBodyType)
	}
	data, _ := objectOf(doc["data"])
	var rawEvents []json.RawMessage
	if jsonLeading(data["events"]) != '[' || json.Unmarshal(data["events"], &rawEvents) != nil {
		return nil, payloadError("the body has no data.events list")
	}
	batch := &WebhookBatch{Type: WebhookBodyType, Events: make([]WebhookEvent, 0, len(rawEvents))}
	if ts, _, err := doc.str("timestamp"); err == nil {
		batch.Timestamp = ts
	}
	for i, raw := range rawEvents {
		e, err := parseWebhookEvent(raw)
		if err != nil {
			var pe *WebhookPayloadError
			if errors.As(err, &pe) {
				pe.Detail = fmt.Sprintf("event %d: %s", i, pe.Detail)
			}
			return nil, err
		}
		batch.Events = append(batch.Events, e)
	}
	return batch, nil
}

func parseWebhookEvent(raw json.RawMessage) (WebhookEvent, error) {
	e := WebhookEvent{Raw: raw}
	o, ok := objectOf(raw)
	if !ok {
		return e, payloadError("an event is not a JSON object")
	}
	var err error
	var typ string
	if typ, err = o.requiredStr("type"); err != nil {
		return e, err
	}
	e.Type = WebhookEventType(typ) // a newer server's type: kept, not refused
	if e.ID, err = o.requiredStr("id"); err != nil {
		return e, err
	}
	if e.Space, err = o.requiredStr("space"); err != nil {
		return e, err
	}
	var present bool
	if e.AtMs, present, err = o.integer("at_ms"); err != nil {
		return e, err
	} else if !present {
		return e, payloadError("an event has no %q", "at_ms")
	}
	if e.Member, _, err = o.str("member"); err != nil {
		return e, err
	}
	var kind, status, reason string
	if kind, _, err = o.str("kind"); err != nil {
		return e, err
	}
	switch Kind(kind) {
	case "", KindUser, KindGuest:
		e.Kind = Kind(kind)
	default:
		return e, payloadError("%q is %q", "kind", kind)
	}
	if status, _, err = o.str("status"); err != nil {
		return e, err
	}
	switch Status(status) {
	case "", StatusOnline, StatusAway, StatusOffline:
		e.Status = Status(status)
	default:
		return e, payloadError("%q is %q", "status", status)
	}
	var lastSeen int64
	if lastSeen, present, err = o.integer("last_seen_ms"); err != nil {
		return e, err
	} else if present {
		e.LastSeenMs = &lastSeen
	}
	if meta, ok := o["meta"]; ok && jsonLeading(meta) != 'n' {
		if jsonLeading(meta) != '{' {
			return e, payloadError("%q is not an object", "meta")
		}
		e.Meta = meta
	}
	if e.Conn, _, err = o.str("conn"); err != nil {
		return e, err
	}
	if reason, _, err = o.str("reason"); err != nil {
		return e, err
	}
	e.Reason = LeaveReason(reason)
	return e, nil
}

// DefaultDeduplicatorSize is how many event ids a [Deduplicator]
// remembers unless told otherwise.
const DefaultDeduplicatorSize = 100_000

// Deduplicator remembers the ids of the last events handled, so that a
// redelivered event is recognised within one process (a site with several
// processes deduplicates in its database instead: a unique index on the
// event id). It is bounded, forgetting the least recently seen id first,
// and safe for concurrent use.
//
//	seen := herenow.NewDeduplicator(0)
//	for _, e := range seen.Fresh(batch.Events) { handle(e) }
type Deduplicator struct {
	mu    sync.Mutex
	max   int
	ids   map[string]*list.Element
	order *list.List // of string, least recently seen first
}

// NewDeduplicator remembers at most maxEntries ids; zero or less:
// DefaultDeduplicatorSize.
func NewDeduplicator(maxEntries int) *Deduplicator {
	if maxEntries <= 0 {
		maxEntries = DefaultDeduplicatorSize
	}
	return &Deduplicator{max: maxEntries, ids: map[string]*list.Element{}, order: list.New()}
}

// FirstTime reports whether id is seen for the first time (as far as
// this memory goes), and remembers it.
func (d *Deduplicator) FirstTime(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if el, ok := d.ids[id]; ok {
		d.order.MoveToBack(el)
		return false
	}
	d.ids[id] = d.order.PushBack(id)
	for d.order.Len() > d.max {
		oldest := d.order.Front()
		d.order.Remove(oldest)
		delete(d.ids, oldest.Value.(string))
	}
	return true
}

// Fresh is the events not seen before, in order, and remembers them.
func (d *Deduplicator) Fresh(events []WebhookEvent) []WebhookEvent {
	var out []WebhookEvent
	for _, e := range events {
		if d.FirstTime(e.ID) {
			out = append(out, e)
		}
	}
	return out
}

// Forget drops id, so that its redelivery counts as new: for an event
// whose handling failed after FirstTime or Fresh marked it.
func (d *Deduplicator) Forget(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if el, ok := d.ids[id]; ok {
		d.order.Remove(el)
		delete(d.ids, id)
	}
}

// Len is how many ids are remembered.
func (d *Deduplicator) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.order.Len()
}
