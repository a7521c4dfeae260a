package herenow

import (
	"context"
	"fmt"
	"time"
)

// DefaultQueryTimeout bounds each query a [Presence] helper makes.
const DefaultQueryTimeout = 2 * time.Second

// PresenceOptions configures [NewPresence]. The zero value is the
// defaults.
type PresenceOptions struct {
	// Timeout bounds each query (a page's own context bounds it too).
	// Zero: DefaultQueryTimeout (2 s).
	Timeout time.Duration
	// Unknown is what a view renders (its String) while presence is
	// unknown: herenow failed, timed out, or its breaker is open. Empty:
	// nothing. Never "Nobody is online" or an empty last seen.
	Unknown string
	// Limit bounds the members WhosOnline lists (1 to 1,000); zero: 10.
	Limit int
	// Clock tells LastSeenView how long ago; zero value SystemClock.
	Clock Clock
}

// Presence is the query helpers meant for rendering pages (the Go side of
// Django's template tags): each answers a view at once that is either
// known or "unknown", never an error, and each goes through the client's
// [Breaker], so while herenow is down or hung a page pays at most one
// timeout, once, and then none until the breaker's back-off ends. Views
// render with String (in html/template: {{.}}), the unknown ones as
// PresenceOptions.Unknown. It is safe for concurrent use.
type Presence struct {
	client  *Client
	space   string
	timeout time.Duration
	unknown string
	limit   int
	clock   Clock
}

// NewPresence makes the page helpers of space.
func NewPresence(client *Client, space string, opts PresenceOptions) (*Presence, error) {
	if client == nil {
		return nil, invalid("a nil client")
	}
	if err := checkSpace(space); err != nil {
		return nil, err
	}
	if opts.Timeout < 0 || opts.Limit < 0 || opts.Limit > 1000 {
		return nil, invalid("presence options out of range")
	}
	p := &Presence{client: client, space: space, timeout: orDuration(opts.Timeout, DefaultQueryTimeout),
		unknown: opts.Unknown, limit: orInt(opts.Limit, 10), clock: opts.Clock}
	if p.clock == nil {
		p.clock = SystemClock
	}
	return p, nil
}

// call runs one query through the breaker, bounded by the timeout; nil
// when it answered.
func (p *Presence) call(ctx context.Context, q func(context.Context) error) error {
	b := p.client.breaker
	if !b.Allow() {
		return ErrUnavailable
	}
	if ctx == nil {
		ctx = context.Background()
	}
	cx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	err := q(cx)
	b.Report(err)
	return err
}

// WhosOnlineView is the who's-online box: the count and the first
// members (users, most recent first).
type WhosOnlineView struct {
	// Known is false when herenow could not say (Err says why).
	Known   bool
	Count   Count
	Members []Member
	Err     error
	unknown string
}

// String renders "2 users and 1 guest online", "Nobody is online." when
// known to be empty, or the Unknown text.
func (v WhosOnlineView) String() string {
	if !v.Known {
		return v.unknown
	}
	if v.Count.Total == 0 {
		return "Nobody is online."
	}
	return fmt.Sprintf("%s and %s online", plural(v.Count.Users, "user"), plural(v.Count.Guests, "guest"))
}

func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// WhosOnline answers the space's count and its first Limit users online.
func (p *Presence) WhosOnline(ctx context.Context) WhosOnlineView {
	v := WhosOnlineView{unknown: p.unknown}
	if v.Err = p.call(ctx, func(cx context.Context) (err error) {
		v.Count, err = p.client.Count(cx, p.space, 0)
		return err
	}); v.Err != nil {
		return v
	}
	if v.Err = p.call(ctx, func(cx context.Context) error {
		page, err := p.client.Online(cx, p.space, &OnlineOptions{Limit: p.limit})
		v.Members = page.Members
		return err
	}); v.Err != nil {
		v.Members = nil
		return v
	}
	v.Known = true
	return v
}

// CountView is the space's count, or unknown.
type CountView struct {
	Known bool
	Count
	Err     error
	unknown string
}

// String renders the total online ("3") or the Unknown text.
func (v CountView) String() string {
	if !v.Known {
		return v.unknown
	}
	return fmt.Sprint(v.Total)
}

// Count answers how many are online in the space.
func (p *Presence) Count(ctx context.Context) CountView {
	v := CountView{unknown: p.unknown}
	v.Err = p.call(ctx, func(cx context.Context) (err error) {
		v.Count, err = p.client.Count(cx, p.space, 0)
		return err
	})
	v.Known = v.Err == nil
	return v
}

// OnlineView is whether one member is online in the space.
type OnlineView struct {
	Known  bool
	Online bool
	// Member is the server's answer (status, last seen, meta).
	Member  Member
	Err     error
	unknown string
}

// String renders "online", "away", "offline", or the Unknown text.
func (v OnlineView) String() string {
	if !v.Known {
		return v.unknown
	}
	return string(v.Member.Status)
}

// Online answers whether m is online in the space.
func (p *Presence) Online(ctx context.Context, m MemberRef) OnlineView {
	v := OnlineView{unknown: p.unknown}
	v.Err = p.call(ctx, func(cx context.Context) (err error) {
		v.Member, err = p.client.Member(cx, p.space, m)
		return err
	})
	v.Known = v.Err == nil
	v.Online = v.Known && v.Member.Status == StatusOnline
	return v
}

// LastSeenView is a user's last seen anywhere.
type LastSeenView struct {
	Known bool
	// Seen is the server's answer (status, last seen, where).
	Seen    SeenAnywhere
	Err     error
	unknown string
	now     time.Time
}

// String renders "online", "last seen 5 minutes ago", "never seen", or
// the Unknown text (never an empty last seen for an unknown one).
func (v LastSeenView) String() string {
	if !v.Known {
		return v.unknown
	}
	if v.Seen.Status == StatusOnline {
		return "online"
	}
	at, ok := v.Seen.LastSeen()
	if !ok {
		return "never seen"
	}
	return "last seen " + ago(v.now.Sub(at))
}

// ago words a duration the way a page says it.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return plural(int64(d/time.Minute), "minute") + " ago"
	case d < 48*time.Hour:
		return plural(int64(d/time.Hour), "hour") + " ago"
	default:
		return plural(int64(d/(24*time.Hour)), "day") + " ago"
	}
}

// LastSeen answers user's last seen anywhere.
func (p *Presence) LastSeen(ctx context.Context, user string) LastSeenView {
	v := LastSeenView{unknown: p.unknown, now: p.clock.Now()}
	v.Err = p.call(ctx, func(cx context.Context) (err error) {
		v.Seen, err = p.client.User(cx, user)
		return err
	})
	v.Known = v.Err == nil
	return v
}
