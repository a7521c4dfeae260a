package herenow

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Heartbeat records that one member was seen in space (created on first
// use): POST /v1/spaces/{space}/heartbeat.
func (c *Client) Heartbeat(ctx context.Context, space string, hb Heartbeat) (HeartbeatResult, error) {
	var out HeartbeatResult
	if err := checkSpace(space); err != nil {
		return out, err
	}
	if err := checkID("member", hb.ID); err != nil {
		return out, err
	}
	err := c.do(ctx, request{method: http.MethodPost, segments: []string{"v1", "spaces", space, "heartbeat"}, body: hb}, &out)
	return out, err
}

// Heartbeats records a batch of 1 to 10,000 members seen in space, in one
// request: POST /v1/spaces/{space}/heartbeats.
func (c *Client) Heartbeats(ctx context.Context, space string, hbs []Heartbeat) (HeartbeatResult, error) {
	var out HeartbeatResult
	if err := checkSpace(space); err != nil {
		return out, err
	}
	body := struct {
		Heartbeats []Heartbeat `json:"heartbeats"`
	}{nonNil(hbs)}
	err := c.do(ctx, request{method: http.MethodPost, segments: []string{"v1", "spaces", space, "heartbeats"}, body: body}, &out)
	return out, err
}

// Leave ends the presence of 1 to 10,000 members at once (their last seen
// is remembered) and answers how many were present: POST
// /v1/spaces/{space}/leave.
func (c *Client) Leave(ctx context.Context, space string, members []MemberRef) (int64, error) {
	if err := checkSpace(space); err != nil {
		return 0, err
	}
	var out struct {
		Left int64 `json:"left"`
	}
	err := c.do(ctx, request{method: http.MethodPost, segments: []string{"v1", "spaces", space, "leave"}, body: membersBody{nonNil(members)}}, &out)
	return out.Left, err
}

// Member answers one member's status and last seen in space: GET
// /v1/spaces/{space}/members/{id}. A member never seen is not an error:
// it is offline with a nil LastSeenMs.
func (c *Client) Member(ctx context.Context, space string, m MemberRef) (Member, error) {
	var out Member
	if err := checkSpace(space); err != nil {
		return out, err
	}
	if err := checkID("member", m.ID); err != nil {
		return out, err
	}
	var q url.Values
	if m.Kind != "" {
		q = url.Values{"kind": {string(m.Kind)}}
	}
	err := c.do(ctx, request{method: http.MethodGet, segments: []string{"v1", "spaces", space, "members", m.ID}, query: q}, &out)
	return out, err
}

// Status answers 1 to 10,000 members' status and last seen in space, in
// the order asked: POST /v1/spaces/{space}/status.
func (c *Client) Status(ctx context.Context, space string, members []MemberRef) ([]Member, error) {
	if err := checkSpace(space); err != nil {
		return nil, err
	}
	var out membersAnswer
	err := c.do(ctx, request{method: http.MethodPost, segments: []string{"v1", "spaces", space, "status"}, body: membersBody{nonNil(members)}}, &out)
	return out.Members, err
}

// Online answers one page of who is online in space: GET
// /v1/spaces/{space}/online. Pass the page's NextCursor back as
// opts.Cursor, with the same options, for the next page; or use
// [Client.ForEachOnline].
func (c *Client) Online(ctx context.Context, space string, opts *OnlineOptions) (OnlinePage, error) {
	var out OnlinePage
	if err := checkSpace(space); err != nil {
		return out, err
	}
	var o OnlineOptions
	if opts != nil {
		o = *opts
	}
	q := url.Values{}
	if o.Window != 0 {
		w, err := duration("window", o.Window)
		if err != nil {
			return out, err
		}
		q.Set("window", w)
	}
	if o.Kinds != "" {
		q.Set("kind", string(o.Kinds))
	}
	if o.Order != "" {
		q.Set("order", string(o.Order))
	}
	if err := checkLimit(o.Limit); err != nil {
		return out, err
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	err := c.do(ctx, request{method: http.MethodGet, segments: []string{"v1", "spaces", space, "online"}, query: q}, &out)
	return out, err
}

// ForEachOnline calls fn for every member online in space, page by page
// (opts.Cursor is where it starts), holding one page at a time. It stops
// at fn's first error and returns it. Paging never skips or repeats a
// member whose heartbeat did not change meanwhile.
func (c *Client) ForEachOnline(ctx context.Context, space string, opts *OnlineOptions, fn func(Member) error) error {
	var o OnlineOptions
	if opts != nil {
		o = *opts
	}
	for {
		page, err := c.Online(ctx, space, &o)
		if err != nil {
			return err
		}
		for _, m := range page.Members {
			if err := fn(m); err != nil {
				return err
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		o.Cursor = page.NextCursor
	}
}

// Count answers how many members are online in space, users and guests
// apart: GET /v1/spaces/{space}/count. window zero: the space's window.
func (c *Client) Count(ctx context.Context, space string, window time.Duration) (Count, error) {
	var out Count
	if err := checkSpace(space); err != nil {
		return out, err
	}
	var q url.Values
	if window != 0 {
		w, err := duration("window", window)
		if err != nil {
			return out, err
		}
		q = url.Values{"window": {w}}
	}
	err := c.do(ctx, request{method: http.MethodGet, segments: []string{"v1", "spaces", space, "count"}, query: q}, &out)
	return out, err
}

// OnlineAmong answers which of 1 to 10,000 members are online in space,
// most recent first: POST /v1/spaces/{space}/online-among.
func (c *Client) OnlineAmong(ctx context.Context, space string, members []MemberRef, opts *ListOptions) ([]Member, error) {
	if err := checkSpace(space); err != nil {
		return nil, err
	}
	body := struct {
		Members []MemberRef `json:"members"`
		Window  string      `json:"window,omitempty"`
		Limit   int         `json:"limit,omitempty"`
	}{Members: nonNil(members)}
	if opts != nil {
		if opts.Window != 0 {
			w, err := duration("window", opts.Window)
			if err != nil {
				return nil, err
			}
			body.Window = w
		}
		if err := checkLimit(opts.Limit); err != nil {
			return nil, err
		}
		body.Limit = opts.Limit
	}
	var out membersAnswer
	err := c.do(ctx, request{method: http.MethodPost, segments: []string{"v1", "spaces", space, "online-among"}, body: body}, &out)
	return out.Members, err
}

// SetFriends replaces user's friend set (global, at most 5,000 users; an
// empty list clears it) and answers its new size: PUT /v1/friends/{user}.
func (c *Client) SetFriends(ctx context.Context, user string, friends []string) (int64, error) {
	return c.friendsCall(ctx, http.MethodPut, user, "", friends)
}

// AddFriends adds to user's friend set and answers its new size: POST
// /v1/friends/{user}/add.
func (c *Client) AddFriends(ctx context.Context, user string, friends []string) (int64, error) {
	return c.friendsCall(ctx, http.MethodPost, user, "add", friends)
}

// RemoveFriends removes from user's friend set and answers its new size:
// POST /v1/friends/{user}/remove.
func (c *Client) RemoveFriends(ctx context.Context, user string, friends []string) (int64, error) {
	return c.friendsCall(ctx, http.MethodPost, user, "remove", friends)
}

func (c *Client) friendsCall(ctx context.Context, method, user, verb string, friends []string) (int64, error) {
	if err := checkID("user", user); err != nil {
		return 0, err
	}
	segments := []string{"v1", "friends", user}
	if verb != "" {
		segments = append(segments, verb)
	}
	body := struct {
		Friends []string `json:"friends"`
	}{nonNil(friends)}
	var out struct {
		Friends int64 `json:"friends"`
	}
	err := c.do(ctx, request{method: method, segments: segments, body: body}, &out)
	return out.Friends, err
}

// Friends answers user's friend set: GET /v1/friends/{user}.
func (c *Client) Friends(ctx context.Context, user string) ([]string, error) {
	if err := checkID("user", user); err != nil {
		return nil, err
	}
	var out struct {
		Friends []string `json:"friends"`
	}
	err := c.do(ctx, request{method: http.MethodGet, segments: []string{"v1", "friends", user}}, &out)
	return out.Friends, err
}

// OnlineFriends answers which of user's friends are online in space, most
// recent first: GET /v1/spaces/{space}/friends/{user}/online.
func (c *Client) OnlineFriends(ctx context.Context, space, user string, opts *ListOptions) ([]Member, error) {
	if err := checkSpace(space); err != nil {
		return nil, err
	}
	if err := checkID("user", user); err != nil {
		return nil, err
	}
	q, err := listQuery(opts)
	if err != nil {
		return nil, err
	}
	var out membersAnswer
	err = c.do(ctx, request{method: http.MethodGet, segments: []string{"v1", "spaces", space, "friends", user, "online"}, query: q}, &out)
	return out.Members, err
}

// SpaceConfig answers space's time policy: GET /v1/spaces/{space}/config.
func (c *Client) SpaceConfig(ctx context.Context, space string) (SpaceConfig, error) {
	var out SpaceConfig
	if err := checkSpace(space); err != nil {
		return out, err
	}
	err := c.do(ctx, request{method: http.MethodGet, segments: []string{"v1", "spaces", space, "config"}}, &out)
	return out, err
}

// SetSpaceConfig sets space's time policy and answers the new one: PUT
// /v1/spaces/{space}/config. The four thresholds are required; a nil
// RememberMs, RememberGuests or GraceMs keeps what the space has.
func (c *Client) SetSpaceConfig(ctx context.Context, space string, cfg SpaceConfig) (SpaceConfig, error) {
	var out SpaceConfig
	if err := checkSpace(space); err != nil {
		return out, err
	}
	err := c.do(ctx, request{method: http.MethodPut, segments: []string{"v1", "spaces", space, "config"}, body: cfg}, &out)
	return out, err
}

// Spaces answers a page of spaces by name, with their member counts: GET
// /v1/spaces. Pass the last name as opts.After for the next page.
func (c *Client) Spaces(ctx context.Context, opts *SpacesOptions) ([]SpaceInfo, error) {
	q := url.Values{}
	if opts != nil {
		if opts.After != "" {
			q.Set("after", opts.After)
		}
		if err := checkLimit(opts.Limit); err != nil {
			return nil, err
		}
		if opts.Limit != 0 {
			q.Set("limit", strconv.Itoa(opts.Limit))
		}
	}
	var out struct {
		Spaces []SpaceInfo `json:"spaces"`
	}
	err := c.do(ctx, request{method: http.MethodGet, segments: []string{"v1", "spaces"}, query: q}, &out)
	return out.Spaces, err
}

// History answers space's online count over the last rng (zero: one
// hour; at most 24 h), sampled every 10 s, oldest first: GET
// /v1/spaces/{space}/history.
func (c *Client) History(ctx context.Context, space string, rng time.Duration) (History, error) {
	var out History
	if err := checkSpace(space); err != nil {
		return out, err
	}
	var q url.Values
	if rng != 0 {
		r, err := duration("range", rng)
		if err != nil {
			return out, err
		}
		q = url.Values{"range": {r}}
	}
	err := c.do(ctx, request{method: http.MethodGet, segments: []string{"v1", "spaces", space, "history"}, query: q}, &out)
	return out, err
}

// User answers a user's last seen anywhere (the newest over every space,
// and which): GET /v1/users/{id}.
func (c *Client) User(ctx context.Context, id string) (SeenAnywhere, error) {
	var out SeenAnywhere
	if err := checkID("user", id); err != nil {
		return out, err
	}
	err := c.do(ctx, request{method: http.MethodGet, segments: []string{"v1", "users", id}}, &out)
	return out, err
}

// UsersStatus answers 1 to 10,000 users' last seen anywhere, in the order
// asked: POST /v1/users/status.
func (c *Client) UsersStatus(ctx context.Context, ids []string) ([]SeenAnywhere, error) {
	body := struct {
		IDs []string `json:"ids"`
	}{nonNil(ids)}
	var out struct {
		Users []SeenAnywhere `json:"users"`
	}
	err := c.do(ctx, request{method: http.MethodPost, segments: []string{"v1", "users", "status"}, body: body}, &out)
	return out.Users, err
}

// EraseUser forgets a user everywhere (presence, remembered last seen,
// its friend set and its place in others'), for account deletion and
// erasure requests: DELETE /v1/users/{id}. Erasing an unknown user is not
// an error. Stop its heartbeats and tokens first, or it comes back.
func (c *Client) EraseUser(ctx context.Context, id string) (Erasure, error) {
	var out Erasure
	if err := checkID("user", id); err != nil {
		return out, err
	}
	err := c.do(ctx, request{method: http.MethodDelete, segments: []string{"v1", "users", id}}, &out)
	return out, err
}

// MintToken mints a WebSocket token for a browser (write scope): POST
// /v1/tokens.
func (c *Client) MintToken(ctx context.Context, req TokenRequest) (Token, error) {
	var out Token
	if err := checkID("token's user", req.User); err != nil {
		return out, err
	}
	if req.TTL < 0 {
		return out, invalid("token TTL is negative (%s)", req.TTL)
	}
	body := struct {
		TokenRequest
		TTLs int64 `json:"ttl_s,omitempty"`
	}{TokenRequest: req}
	if req.TTL > 0 {
		body.TTLs = int64((req.TTL + time.Second - 1) / time.Second)
	}
	body.Spaces = nonNil(req.Spaces)
	err := c.do(ctx, request{method: http.MethodPost, segments: []string{"v1", "tokens"}, body: body, want: http.StatusCreated}, &out)
	return out, err
}

// Webhooks answers the webhooks' state on this server (write scope): GET
// /v1/webhooks.
func (c *Client) Webhooks(ctx context.Context) (WebhooksState, error) {
	var out WebhooksState
	err := c.do(ctx, request{method: http.MethodGet, segments: []string{"v1", "webhooks"}}, &out)
	out.Endpoints = nonNil(out.Endpoints)
	return out, err
}

// Healthy checks GET /healthz: nil while the server process runs.
func (c *Client) Healthy(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodGet, segments: []string{"healthz"}}, nil)
}

// Ready checks GET /readyz: nil when the store answers; an *Error with
// Code "not-ready" or "store-unavailable" (503, Retry-After) otherwise.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, request{method: http.MethodGet, segments: []string{"readyz"}}, nil)
}

// Metrics answers the Prometheus text of GET /metrics.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	var b []byte
	err := c.do(ctx, request{method: http.MethodGet, segments: []string{"metrics"}}, &b)
	return string(b), err
}

// OpenAPI answers the server's OpenAPI document, GET /openapi.json.
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	var b []byte
	err := c.do(ctx, request{method: http.MethodGet, segments: []string{"openapi.json"}}, &b)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, errors.New("herenow: GET /openapi.json: the answer is not JSON")
	}
	return json.RawMessage(b), nil
}

type membersBody struct {
	Members []MemberRef `json:"members"`
}

type membersAnswer struct {
	Members []Member `json:"members"`
}

func listQuery(opts *ListOptions) (url.Values, error) {
	q := url.Values{}
	if opts == nil {
		return q, nil
	}
	if opts.Window != 0 {
		w, err := duration("window", opts.Window)
		if err != nil {
			return nil, err
		}
		q.Set("window", w)
	}
	if err := checkLimit(opts.Limit); err != nil {
		return nil, err
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	return q, nil
}

// nonNil makes a nil slice an empty one, so it is sent as [] (the server
// answers empty-batch) rather than null (bad-json).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
