package herenow

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"time"
)

// GuestPolicy says how the middleware names a visitor who is not signed
// in.
type GuestPolicy int

// The guest policies.
const (
	// GuestsByIP heartbeats a guest named by the client's IP address (the
	// default; see MiddlewareOptions.ClientIP behind a proxy).
	GuestsByIP GuestPolicy = iota
	// GuestsByCookie heartbeats a guest named by a random id kept in a
	// cookie, minted on its first request: visitors behind one NAT are
	// told apart, and a client without cookies is a new guest each time.
	GuestsByCookie
	// GuestsOff heartbeats signed-in users only.
	GuestsOff
)

// DefaultGuestCookie is the cookie of GuestsByCookie.
const DefaultGuestCookie = "herenow_guest"

// MiddlewareOptions configures [Middleware]. The zero value treats
// everyone as a guest by IP.
type MiddlewareOptions struct {
	// Identify answers the request's signed-in user (say, from your
	// session); ok false: a guest. Nil: everyone is a guest. It runs on
	// the request's goroutine: keep it cheap, no network.
	Identify func(r *http.Request) (m MemberRef, ok bool)
	// IdentifyMeta is Identify with the user's metadata (say,
	// Meta{"name": "Ada"}), sent with the user's heartbeat as Django's
	// and Express's middleware do; when set, it is used instead of
	// Identify. Same rules: cheap, no network.
	IdentifyMeta func(r *http.Request) (m MemberRef, meta Meta, ok bool)
	// Guests says how visitors that Identify does not know are named:
	// GuestsByIP (the default), GuestsByCookie (opt-in: a first-party
	// cookie of a random id, HttpOnly, SameSite=Lax, set when a guest has
	// none; visitors behind one address are told apart) or GuestsOff.
	Guests GuestPolicy
	// ClientIP answers the client's address for GuestsByIP; nil: the
	// host of r.RemoteAddr. Behind a proxy, read the proxy's header here
	// (and only from a proxy you trust).
	ClientIP func(r *http.Request) string
	// GuestCookie names the cookie of GuestsByCookie; empty:
	// DefaultGuestCookie.
	GuestCookie string
	// GuestCookieMaxAge is the cookie's lifetime; zero: 30 days.
	GuestCookieMaxAge time.Duration
	// Skip, if set, exempts requests (health checks, static files) from
	// heartbeats.
	Skip func(r *http.Request) bool
}

// Middleware makes every request's visitor present through h: the user
// Identify names, or a guest. The heartbeat is queued, never awaited: the
// request goes on at once, and whatever herenow does (down, slow,
// refusing) the request never fails because of it. Debouncing, batching,
// bounds and the log line per interval are h's.
func Middleware(h *Heartbeater, opts MiddlewareOptions) func(http.Handler) http.Handler {
	cookie := opts.GuestCookie
	if cookie == "" {
		cookie = DefaultGuestCookie
	}
	maxAge := opts.GuestCookieMaxAge
	if maxAge <= 0 {
		maxAge = 30 * 24 * time.Hour
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if opts.Skip == nil || !opts.Skip(r) {
				if m, meta, ok := visitor(w, r, opts, cookie, maxAge); ok {
					h.BeatMeta(m, meta)
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// visitor names the request's member; ok false: nobody to heartbeat.
func visitor(w http.ResponseWriter, r *http.Request, opts MiddlewareOptions, cookie string, maxAge time.Duration) (MemberRef, Meta, bool) {
	if opts.IdentifyMeta != nil {
		if m, meta, ok := opts.IdentifyMeta(r); ok && m.ID != "" {
			return m, meta, true
		}
	} else if opts.Identify != nil {
		if m, ok := opts.Identify(r); ok && m.ID != "" {
			return m, nil, true
		}
	}
	m, ok := guest(w, r, opts, cookie, maxAge)
	return m, nil, ok
}

// guest names a visitor nobody identified; ok false: nobody to heartbeat.
func guest(w http.ResponseWriter, r *http.Request, opts MiddlewareOptions, cookie string, maxAge time.Duration) (MemberRef, bool) {
	switch opts.Guests {
	case GuestsByIP:
		ip := ""
		if opts.ClientIP != nil {
			ip = opts.ClientIP(r)
		} else if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			ip = host
		} else {
			ip = r.RemoteAddr
		}
		if ip == "" {
			return MemberRef{}, false
		}
		return Guest(ip), true
	case GuestsByCookie:
		if c, err := r.Cookie(cookie); err == nil && validGuestID(c.Value) {
			return Guest(c.Value), true
		}
		id, err := newGuestID()
		if err != nil {
			return MemberRef{}, false
		}
		http.SetCookie(w, &http.Cookie{
			Name:     cookie,
			Value:    id,
			Path:     "/",
			MaxAge:   int(maxAge / time.Second),
			HttpOnly: true,
			Secure:   r.TLS != nil,
			SameSite: http.SameSiteLaxMode,
		})
		return Guest(id), true
	}
	return MemberRef{}, false
}

// guestIDLen is the length of a minted guest id: 16 random bytes, hex.
const guestIDLen = 32

func newGuestID() (string, error) {
	var b [guestIDLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// validGuestID accepts only ids this middleware mints, so a forged cookie
// cannot name an arbitrary (or oversized) member.
func validGuestID(s string) bool {
	if len(s) != guestIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
