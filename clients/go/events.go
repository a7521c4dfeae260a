package herenow

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// EventType names a space event.
type EventType string

// The events of a space's stream (docs/API.md, "Events").
const (
	// EventSnapshot opens every stream (and every resumed one): the
	// members present. It replaces whatever the reader knew.
	EventSnapshot EventType = "snapshot"
	// EventJoin: offline or unknown → present.
	EventJoin EventType = "join"
	// EventAway: online → away.
	EventAway EventType = "away"
	// EventBack: away → online.
	EventBack EventType = "back"
	// EventLeave: present → gone (Reason says why).
	EventLeave EventType = "leave"
	// EventUpdate: metadata changed while present.
	EventUpdate EventType = "update"
	// EventConnect: a present member opened another WebSocket connection.
	EventConnect EventType = "connect"
	// EventDisconnect: a present member closed one of its connections and
	// stays present through others.
	EventDisconnect EventType = "disconnect"
	// EventLagged: the reader fell behind and missed events; a snapshot
	// with Resync follows and replaces what it knew.
	EventLagged EventType = "lagged"
)

// LeaveReason says why a member left.
type LeaveReason string

// The reasons of a leave.
const (
	// ReasonExplicit: a leave call, an erasure, or its last connection
	// detached.
	ReasonExplicit LeaveReason = "explicit"
	// ReasonTimeout: silent for longer than the space's away_ms.
	ReasonTimeout LeaveReason = "timeout"
	// ReasonExpired: swept at its retention while still present.
	ReasonExpired LeaveReason = "expired"
)

// SpaceEvent is one event of a space's stream: exactly one of Snapshot,
// Change and Missed is meaningful, by Type.
type SpaceEvent struct {
	Type EventType
	// Snapshot is set for EventSnapshot.
	Snapshot *Snapshot
	// Change is set for a presence change (join, away, back, leave,
	// update, connect, disconnect).
	Change *Change
	// Missed is how many events were lost, for EventLagged.
	Missed uint64
	// Reconnected is true on the snapshot that opens a resumed stream
	// (the connection dropped and this client reconnected): changes
	// while it was away are folded into it, so it replaces what the
	// reader knew, like a resync.
	Reconnected bool
	// Raw is the data of an event type this client does not know (a newer
	// server); nil otherwise.
	Raw json.RawMessage
}

// Snapshot is the members present in a space when a stream (re)starts.
type Snapshot struct {
	Space string `json:"space"`
	// Members are present, most recent first (at most 10,000).
	Members []Member `json:"members"`
	// Omitted: present members beyond the snapshot's limit.
	Omitted uint64 `json:"omitted"`
	// Config is the space's policy.
	Config SpaceConfig `json:"config"`
	// Resync is true when the snapshot follows a lag (set by the server)
	// or a reconnect (set by this client): it replaces what was known.
	Resync bool `json:"resync"`
}

// Change is one change to a member's presence.
type Change struct {
	Space string    `json:"space"`
	Type  EventType `json:"type"`
	ID    string    `json:"id"`
	Kind  Kind      `json:"kind"`
	// Status after the change.
	Status Status `json:"status"`
	// LastSeenMs is the member's last heartbeat, if it still has one.
	LastSeenMs *int64 `json:"last_seen_ms"`
	// Meta is the member's metadata after the change; for a change a
	// WebSocket connection caused, that connection's.
	Meta Meta `json:"meta,omitempty"`
	// Reason is set on leave.
	Reason LeaveReason `json:"reason,omitempty"`
	// Conn names the WebSocket connection that caused the change, if one
	// did.
	Conn string `json:"conn,omitempty"`
}

// Ref names the member that changed.
func (c Change) Ref() MemberRef { return MemberRef{ID: c.ID, Kind: c.Kind} }

// EventStream reads a space's presence events and resumes after a
// dropped connection. Next is for one goroutine; Close may be called from
// any.
type EventStream struct {
	s *stream
}

// Events opens GET /v1/spaces/{space}/events: a snapshot of the members
// present, then one event per change. A refusal at open (a bad space
// name, too many streams) is returned here as an *Error; later drops are
// resumed as opts says. The stream lasts until ctx ends or Close.
func (c *Client) Events(ctx context.Context, space string, opts *StreamOptions) (*EventStream, error) {
	if err := checkSpace(space); err != nil {
		return nil, err
	}
	s, err := newStream(ctx, c, request{method: http.MethodGet, segments: []string{"v1", "spaces", space, "events"}}, opts)
	if err != nil {
		return nil, err
	}
	return &EventStream{s: s}, nil
}

// Next blocks until the next event. Its error is final: ErrClosed after
// Close, the context's error, or why the stream could not go on.
func (e *EventStream) Next() (SpaceEvent, error) {
	raw, err := e.s.next()
	if err != nil {
		return SpaceEvent{}, err
	}
	ev := SpaceEvent{Type: EventType(raw.name)}
	switch ev.Type {
	case EventSnapshot:
		var snap Snapshot
		if err := e.decode(raw, &snap); err != nil {
			return ev, err
		}
		if e.s.reconnected {
			e.s.reconnected = false
			ev.Reconnected = true
			snap.Resync = true
		}
		ev.Snapshot = &snap
	case EventJoin, EventAway, EventBack, EventLeave, EventUpdate, EventConnect, EventDisconnect:
		var ch Change
		if err := e.decode(raw, &ch); err != nil {
			return ev, err
		}
		ev.Change = &ch
	case EventLagged:
		var l struct {
			Missed uint64 `json:"missed"`
		}
		if err := e.decode(raw, &l); err != nil {
			return ev, err
		}
		ev.Missed = l.Missed
	default:
		ev.Raw = json.RawMessage(raw.data)
	}
	return ev, nil
}

func (e *EventStream) decode(raw sseEvent, out any) error {
	if err := json.Unmarshal(raw.data, out); err != nil {
		e.s.close()
		return fmt.Errorf("herenow: a %q event could not be decoded: %w", raw.name, err)
	}
	return nil
}

// Close ends the stream and its connection; a blocked Next returns
// ErrClosed. It is safe to call more than once, from any goroutine.
func (e *EventStream) Close() error {
	e.s.close()
	return nil
}

// WatchRequest says whom a watch stream follows: users by id, a user's
// friend set (followed as it changes), or both.
type WatchRequest struct {
	// Users to watch (at most 5,000 in all).
	Users []string `json:"users,omitempty"`
	// FriendsOf watches this user's friend set as it changes.
	FriendsOf string `json:"friends_of,omitempty"`
	// Space watches within one space; empty: anywhere (online if online
	// in any space).
	Space string `json:"space,omitempty"`
}

// WatchEventType names a watch stream's event.
type WatchEventType string

// The events of a watch stream (docs/PROTOCOL.md, "Watching users").
const (
	// WatchWatching: a page of watched users' states.
	WatchWatching WatchEventType = "watching"
	// WatchStatus: a watched user went online, away, back or offline.
	WatchStatus WatchEventType = "status"
	// WatchUnwatched: users that left the followed friend set.
	WatchUnwatched WatchEventType = "unwatched"
)

// WatchedUser is a watched user's state.
type WatchedUser struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
	// LastSeenMs: the last heartbeat while present, the remembered time
	// after; nil when never seen or past the horizon.
	LastSeenMs *int64 `json:"last_seen_ms"`
	// Space is where LastSeenMs is from when watching anywhere; empty
	// when watching within one space.
	Space string `json:"space,omitempty"`
}

// WatchingPage is one page of watched users' states (500 at most).
type WatchingPage struct {
	// Space is the watched space; empty: anywhere.
	Space string        `json:"space"`
	Users []WatchedUser `json:"users"`
	// Last is true on the last page of an answer.
	Last bool `json:"last"`
	// Resync: this answer (up to its last page) replaces everything
	// watched. Set by the server after lag, and by this client on the
	// answer that opens a resumed stream.
	Resync bool `json:"resync"`
}

// WatchEvent is one event of a watch stream: exactly one of Watching,
// Status and Unwatched is meaningful, by Type.
type WatchEvent struct {
	Type WatchEventType
	// Watching is set for WatchWatching.
	Watching *WatchingPage
	// Status is set for WatchStatus.
	Status *WatchedUser
	// Unwatched is set for WatchUnwatched.
	Unwatched []string
	// Reconnected is true on the pages of the answer that opens a
	// resumed stream; their Resync is true too.
	Reconnected bool
	// Raw is the data of an event type this client does not know.
	Raw json.RawMessage
}

// WatchStream reads a watch stream and resumes after a drop, or after the
// server's error event (its store failed). Next is for one goroutine;
// Close may be called from any.
type WatchStream struct {
	s *stream
	// resuming: the pages up to the next last page open a resumed stream.
	resuming bool
}

// Watch opens POST /v1/watch (read scope): the watched users' states in
// watching pages, then a status event whenever one changes. A refusal at
// open (nothing-to-watch, too-many-watched, too-many-streams,
// watch-capacity) is returned here as an *Error.
func (c *Client) Watch(ctx context.Context, req WatchRequest, opts *StreamOptions) (*WatchStream, error) {
	if len(req.Users) == 0 && req.FriendsOf == "" {
		return nil, invalid("a watch names users, friends_of, or both")
	}
	s, err := newStream(ctx, c, request{method: http.MethodPost, segments: []string{"v1", "watch"}, body: req}, opts)
	if err != nil {
		return nil, err
	}
	return &WatchStream{s: s}, nil
}

// Next blocks until the next event. Its error is final: ErrClosed after
// Close, the context's error, or why the stream could not go on (with
// NoResume, an *Error with Status 0 for the server's error event).
func (w *WatchStream) Next() (WatchEvent, error) {
	for {
		raw, err := w.s.next()
		if err != nil {
			return WatchEvent{}, err
		}
		if w.s.reconnected {
			w.s.reconnected = false
			w.resuming = true
		}
		ev := WatchEvent{Type: WatchEventType(raw.name)}
		switch ev.Type {
		case WatchWatching:
			var page WatchingPage
			if err := w.decode(raw, &page); err != nil {
				return ev, err
			}
			if w.resuming {
				ev.Reconnected = true
				page.Resync = true
				if page.Last {
					w.resuming = false
				}
			}
			ev.Watching = &page
		case WatchStatus:
			var u WatchedUser
			if err := w.decode(raw, &u); err != nil {
				return ev, err
			}
			ev.Status = &u
		case WatchUnwatched:
			var u struct {
				Users []string `json:"users"`
			}
			if err := w.decode(raw, &u); err != nil {
				return ev, err
			}
			ev.Unwatched = u.Users
		case "error":
			// The server's store failed and it ends the stream: resume
			// for a fresh picture, or end here with NoResume.
			var p struct {
				Code   string `json:"code"`
				Detail string `json:"detail"`
			}
			_ = json.Unmarshal(raw.data, &p)
			e := &Error{Code: p.Code, Detail: p.Detail, Method: w.s.req.method, Path: "/v1/watch"}
			if err := w.s.drop(e); err != nil {
				return WatchEvent{}, err
			}
			continue
		default:
			ev.Raw = json.RawMessage(raw.data)
		}
		return ev, nil
	}
}

func (w *WatchStream) decode(raw sseEvent, out any) error {
	if err := json.Unmarshal(raw.data, out); err != nil {
		w.s.close()
		return fmt.Errorf("herenow: a %q event could not be decoded: %w", raw.name, err)
	}
	return nil
}

// Close ends the stream and its connection; a blocked Next returns
// ErrClosed. It is safe to call more than once, from any goroutine.
func (w *WatchStream) Close() error {
	w.s.close()
	return nil
}
