package herenow

import (
	"time"
)

// Kind is a member's namespace: users and guests with the same id are two
// members.
type Kind string

// The two kinds of member.
const (
	// KindUser is an authenticated user (the server's default).
	KindUser Kind = "user"
	// KindGuest is an anonymous visitor (an IP, a cookie).
	KindGuest Kind = "guest"
)

// Status is a member's presence by its space's thresholds.
type Status string

// The three statuses.
const (
	// StatusOnline: seen within the space's online_ms.
	StatusOnline Status = "online"
	// StatusAway: seen within the space's away_ms.
	StatusAway Status = "away"
	// StatusOffline: seen longer ago, never seen, left, or erased.
	StatusOffline Status = "offline"
)

// KindFilter says which kinds a listing holds.
type KindFilter string

// The kinds a listing may hold.
const (
	// Users only (the server's default).
	Users KindFilter = "users"
	// Guests only.
	Guests KindFilter = "guests"
	// All: users and guests.
	All KindFilter = "all"
)

// Order is a listing's order.
type Order string

// The orders of a listing.
const (
	// OrderRecent: most recently seen first (the default wherever the
	// server's store keeps last-seen times).
	OrderRecent Order = "recent"
	// OrderID: by id.
	OrderID Order = "id"
)

// Meta is a member's metadata: a JSON object of at most 1 KiB. Numbers
// decode as float64, as encoding/json does.
type Meta = map[string]any

// MemberRef names a member in a request. The zero Kind means a user.
type MemberRef struct {
	// ID is 1–256 bytes of UTF-8 without control characters.
	ID string `json:"id"`
	// Kind is KindUser or KindGuest; empty means a user.
	Kind Kind `json:"kind,omitempty"`
}

// User names a user.
func User(id string) MemberRef { return MemberRef{ID: id, Kind: KindUser} }

// Guest names a guest.
func Guest(id string) MemberRef { return MemberRef{ID: id, Kind: KindGuest} }

// Heartbeat says a member was seen.
type Heartbeat struct {
	// ID is 1–256 bytes of UTF-8 without control characters.
	ID string `json:"id"`
	// Kind is KindUser or KindGuest; empty means a user.
	Kind Kind `json:"kind,omitempty"`
	// Meta replaces the member's metadata when non-nil.
	Meta Meta `json:"meta,omitempty"`
	// AtMs is an explicit time, ms since the UNIX epoch (for imports;
	// needs a write key, at most 60 s in the future); 0: the server's now.
	AtMs int64 `json:"at_ms,omitempty"`
}

// HeartbeatResult is the answer to heartbeats.
type HeartbeatResult struct {
	// Accepted heartbeats.
	Accepted int64 `json:"accepted"`
	// Joined: members that were not present before.
	Joined int64 `json:"joined"`
	// Stale: heartbeats older than what the server already had.
	Stale int64 `json:"stale"`
}

// Member is a member's presence in a space.
type Member struct {
	ID     string `json:"id"`
	Kind   Kind   `json:"kind"`
	Status Status `json:"status"`
	// LastSeenMs is the last heartbeat of a present member, or the
	// remembered time its presence ended; nil when never seen, erased or
	// past the space's remember horizon.
	LastSeenMs *int64 `json:"last_seen_ms"`
	// Meta is the member's metadata, if any.
	Meta Meta `json:"meta,omitempty"`
}

// LastSeen is LastSeenMs as a time; ok is false when it is nil.
func (m Member) LastSeen() (t time.Time, ok bool) { return msTime(m.LastSeenMs) }

// Ref names this member in a request.
func (m Member) Ref() MemberRef { return MemberRef{ID: m.ID, Kind: m.Kind} }

// OnlineOptions shapes a "who's online" page. The zero value asks for the
// server's defaults.
type OnlineOptions struct {
	// Window: seen within this; zero: the space's window.
	Window time.Duration
	// Kinds: Users (default), Guests or All.
	Kinds KindFilter
	// Order: OrderRecent or OrderID; empty: the store's default
	// (OrderRecent, or OrderID on a store that keeps no last-seen times),
	// which the page's Order names.
	Order Order
	// Limit: 1 to 1,000 members per page; zero: 100.
	Limit int
	// Cursor: the previous page's NextCursor, with the same query.
	Cursor string
}

// OnlinePage is one page of who's online.
type OnlinePage struct {
	Members []Member `json:"members"`
	// NextCursor is empty on the last page.
	NextCursor string `json:"next_cursor"`
	// WindowMs is the window the page was taken over.
	WindowMs int64 `json:"window_ms"`
	// Order is the order of Members: the one asked for, or the store's
	// default when none was (empty from a server older than this field).
	Order Order `json:"order"`
}

// Count is how many members are online, users and guests apart.
type Count struct {
	Users    int64 `json:"users"`
	Guests   int64 `json:"guests"`
	Total    int64 `json:"total"`
	WindowMs int64 `json:"window_ms"`
}

// ListOptions bounds the online-among and online-friends answers. The
// zero value asks for the server's defaults.
type ListOptions struct {
	// Window: seen within this; zero: the space's window.
	Window time.Duration
	// Limit: 1 to 1,000; zero: 100.
	Limit int
}

// SpaceConfig is a space's time policy, in ms: 0 < online ≤ away ≤
// retention ≤ 24h and 0 < window ≤ retention.
type SpaceConfig struct {
	OnlineMs    int64 `json:"online_ms"`
	AwayMs      int64 `json:"away_ms"`
	WindowMs    int64 `json:"window_ms"`
	RetentionMs int64 `json:"retention_ms"`
	// RememberMs: how long a last seen is remembered after presence ends
	// (0: not at all). Always set in answers; nil in SetSpaceConfig keeps
	// what the space has.
	RememberMs *int64 `json:"remember_ms,omitempty"`
	// RememberGuests: whether guests are remembered too. Always set in
	// answers; nil in SetSpaceConfig keeps what the space has.
	RememberGuests *bool `json:"remember_guests,omitempty"`
	// GraceMs: how long a member whose last live connection ended without
	// a goodbye (a page reload, a dropped network, its server stopping)
	// stays present; a connection of the same user back within it shows
	// nobody anything (0: none; at most 300,000). Always set in answers;
	// nil in SetSpaceConfig keeps what the space has.
	GraceMs *int64 `json:"grace_ms,omitempty"`
}

// SpaceInfo is one space in the list of spaces.
type SpaceInfo struct {
	Space string `json:"space"`
	// Members stored in the space now, users and guests apart.
	Members MemberCounts `json:"members"`
}

// MemberCounts counts a space's members, users and guests apart.
type MemberCounts struct {
	Users  int64 `json:"users"`
	Guests int64 `json:"guests"`
}

// SpacesOptions pages the list of spaces. The zero value asks for the
// first 100.
type SpacesOptions struct {
	// After: list spaces after this name (the last of the previous page).
	After string
	// Limit: 1 to 1,000; zero: 100.
	Limit int
}

// History is a space's online count, sampled every IntervalMs, oldest
// first.
type History struct {
	IntervalMs int64    `json:"interval_ms"`
	Samples    []Sample `json:"samples"`
}

// Sample is one point of a History.
type Sample struct {
	AtMs   int64 `json:"at_ms"`
	Users  int64 `json:"users"`
	Guests int64 `json:"guests"`
}

// SeenAnywhere is a user's last seen over every space.
type SeenAnywhere struct {
	ID string `json:"id"`
	// Status is the best over the spaces the user is present in.
	Status Status `json:"status"`
	// LastSeenMs is the newest last seen over every space; nil when never
	// seen, past every horizon, or erased.
	LastSeenMs *int64 `json:"last_seen_ms"`
	// Space is where LastSeenMs is from; empty when LastSeenMs is nil.
	Space string `json:"space"`
}

// LastSeen is LastSeenMs as a time; ok is false when it is nil.
func (s SeenAnywhere) LastSeen() (t time.Time, ok bool) { return msTime(s.LastSeenMs) }

// Erasure says what erasing a user forgot. All zero for a user unknown or
// already erased.
type Erasure struct {
	// Presence: spaces the user was present in.
	Presence int64 `json:"presence"`
	// Remembered: remembered last-seen times forgotten.
	Remembered int64 `json:"remembered"`
	// FriendSet: whether the user had a friend set.
	FriendSet bool `json:"friend_set"`
	// ListedBy: friend sets the user was removed from.
	ListedBy int64 `json:"listed_by"`
}

// WatchGrant says whom a WebSocket token's socket may watch.
type WatchGrant string

// The watch grants of a token.
const (
	// WatchFriends: its user's friends only (the server's default).
	WatchFriends WatchGrant = "friends"
	// WatchAny: any user (trusted clients only).
	WatchAny WatchGrant = "any"
	// WatchNone: nobody.
	WatchNone WatchGrant = "none"
)

// TokenRequest asks for a WebSocket token for a browser.
type TokenRequest struct {
	// User is the member id the socket is present as.
	User string `json:"user"`
	// Kind: empty means a user.
	Kind Kind `json:"kind,omitempty"`
	// Spaces: 1 to 32 names, or []string{"*"} for every space.
	Spaces []string `json:"spaces"`
	// TTL: 1 s to 24 h, in whole seconds; zero: one hour.
	TTL time.Duration `json:"-"`
	// Watch: empty means WatchFriends.
	Watch WatchGrant `json:"watch,omitempty"`
}

// Token is a minted WebSocket token.
type Token struct {
	// Token is the JWT to hand to the browser.
	Token string `json:"token"`
	// ExpiresAtMs is its expiry, ms since the UNIX epoch.
	ExpiresAtMs int64 `json:"expires_at_ms"`
}

func msTime(ms *int64) (time.Time, bool) {
	if ms == nil {
		return time.Time{}, false
	}
	return time.UnixMilli(*ms), true
}

// EndpointHealth is a webhook endpoint's state.
type EndpointHealth string

// The states of a webhook endpoint.
const (
	// EndpointOK: its last request succeeded (or none was needed yet).
	EndpointOK EndpointHealth = "ok"
	// EndpointRetrying: fewer than five failures in a row; retrying.
	EndpointRetrying EndpointHealth = "retrying"
	// EndpointFailing: five or more failures in a row, or its last batch
	// was given up.
	EndpointFailing EndpointHealth = "failing"
)

// WebhooksState is GET /v1/webhooks: each endpoint's state on the server
// asked, and the store's outbox. Enabled is false, with no endpoints and a
// nil Outbox, on a server without webhooks.
type WebhooksState struct {
	Enabled bool `json:"enabled"`
	// Consumer is this server's name in the outbox; empty without webhooks.
	Consumer  string            `json:"consumer"`
	Endpoints []WebhookEndpoint `json:"endpoints"`
	Outbox    *WebhookOutbox    `json:"outbox"`
}

// WebhookEndpoint is one endpoint in [WebhooksState]; its secret is never
// shown, a URL's password or query reads "***".
type WebhookEndpoint struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Events are the event types it wants.
	Events []string `json:"events"`
	// Spaces is the glob its spaces must match; nil: every space.
	Spaces *string        `json:"spaces"`
	State  EndpointHealth `json:"state"`
	Queue  struct {
		// Depth: events waiting for it on this server; Limit: how many
		// it may hold (more are dropped as overflow).
		Depth int64 `json:"depth"`
		Limit int64 `json:"limit"`
	} `json:"queue"`
	// Delivered events (answered 2xx).
	Delivered int64 `json:"delivered"`
	// Retried requests, and Failed ones (timeouts, connection errors,
	// non-2xx).
	Retried int64 `json:"retried"`
	Failed  int64 `json:"failed"`
	// Dropped events it will never get, by reason.
	Dropped struct {
		Overflow int64 `json:"overflow"`
		Rejected int64 `json:"rejected"`
		Expired  int64 `json:"expired"`
	} `json:"dropped"`
	FailuresInRow int64  `json:"failures_in_row"`
	LastSuccessMs *int64 `json:"last_success_ms"`
	// LastError is the last failed request, nil if none.
	LastError *struct {
		AtMs  int64  `json:"at_ms"`
		Error string `json:"error"`
	} `json:"last_error"`
}

// WebhookOutbox is the store's outbox: events kept until every endpoint
// finished them (Depth), of which claimed by a server (Pending), and those
// its cap trimmed before delivery (Trimmed).
type WebhookOutbox struct {
	Depth   int64 `json:"depth"`
	Pending int64 `json:"pending"`
	Trimmed int64 `json:"trimmed"`
}
