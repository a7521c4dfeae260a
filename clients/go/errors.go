package herenow

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Stable problem codes the server answers with (docs/API.md, "Errors").
// Compare [Error.Code] with these, never the detail text.
const (
	CodeBadMemberID       = "bad-member-id"
	CodeBadSpaceName      = "bad-space-name"
	CodeBatchTooLarge     = "batch-too-large"
	CodeEmptyBatch        = "empty-batch"
	CodeBadMetadata       = "bad-metadata"
	CodeBadCursor         = "bad-cursor"
	CodeBadLimit          = "bad-limit"
	CodeBadWindow         = "bad-window"
	CodeBadTime           = "bad-time"
	CodeTooManyFriends    = "too-many-friends"
	CodeBadConfig         = "bad-config"
	CodeGuestFriends      = "guest-friends"
	CodeBadJSON           = "bad-json"
	CodeUnknownField      = "unknown-field"
	CodeUnknownParameter  = "unknown-parameter"
	CodeBadQuery          = "bad-query"
	CodeBadBody           = "bad-body"
	CodeBadPath           = "bad-path"
	CodeBadDuration       = "bad-duration"
	CodeBadRange          = "bad-range"
	CodeBadKind           = "bad-kind"
	CodeBadOrder          = "bad-order"
	CodeBadSpaces         = "bad-spaces"
	CodeBadTTL            = "bad-ttl"
	CodeBadWebhook        = "bad-webhook"
	CodeNothingToWatch    = "nothing-to-watch"
	CodeTooManyWatched    = "too-many-watched"
	CodeMissingAPIKey     = "missing-api-key"
	CodeUnknownAPIKey     = "unknown-api-key"
	CodeInsufficientScope = "insufficient-scope"
	CodeNotFound          = "not-found"
	CodeMethodNotAllowed  = "method-not-allowed"
	CodeBodyTooLarge      = "body-too-large"
	CodeNotJSON           = "not-json"
	CodeUnsupported       = "unsupported"
	CodeStoreUnavailable  = "store-unavailable"
	CodeTimeout           = "timeout"
	CodeTooManyStreams    = "too-many-streams"
	CodeWatchCapacity     = "watch-capacity"
	CodeShuttingDown      = "shutting-down"
	CodeNotReady          = "not-ready"
)

// Error is a refusal from the server: an RFC 9457 problem
// (application/problem+json) with herenow's stable Code, or any other
// non-2xx answer (then Code is empty and Detail holds the start of the
// body). An `error` event that ends a watch stream is an Error too, with
// Status 0.
//
// Use it with errors.As:
//
//	var e *herenow.Error
//	if errors.As(err, &e) && e.Code == herenow.CodeBadMemberID { ... }
type Error struct {
	// Status is the HTTP status (0 for an error event inside a stream).
	Status int
	// Code is the stable, machine-readable problem code, e.g.
	// "bad-member-id"; empty when the answer was not a herenow problem
	// (a proxy's 502 page, say).
	Code string
	// Type is the problem's type URI.
	Type string
	// Title is the problem type's short summary.
	Title string
	// Detail says what went wrong with this request, for people.
	Detail string
	// RetryAfter is the server's Retry-After (sent in whole seconds, with
	// every 503); zero when absent.
	RetryAfter time.Duration
	// Method and Path name the request that was refused.
	Method, Path string
}

// Error formats the refusal for logs: request, status, code and detail.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("herenow: ")
	if e.Method != "" {
		b.WriteString(e.Method)
		b.WriteByte(' ')
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	if e.Status != 0 {
		b.WriteString(strconv.Itoa(e.Status))
		b.WriteByte(' ')
	}
	if e.Code != "" {
		b.WriteString(e.Code)
	} else if e.Status != 0 {
		b.WriteString(http.StatusText(e.Status))
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

// Retryable reports whether the same request may succeed later without
// change: 503 (the store is unavailable, a bound is reached, the server
// is shutting down), 429, 502 and 504, or a stream's store failure.
func (e *Error) Retryable() bool {
	switch e.Status {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	case 0:
		return e.Code == CodeStoreUnavailable || e.Code == CodeTimeout ||
			e.Code == CodeWatchCapacity
	}
	return false
}

// HasCode reports whether err is (or wraps) an [*Error] with this code.
func HasCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// ErrInvalidInput is wrapped by the errors of calls refused before any
// request is sent, because the input cannot be put into a request (an
// empty space name or id, a negative duration or limit). Everything else
// is checked by the server, which answers an [*Error] with its code.
var ErrInvalidInput = errors.New("herenow: invalid input")

// ErrClosed is returned by a [Heartbeater], an [EventStream] or a
// [WatchStream] used after Close.
var ErrClosed = errors.New("herenow: closed")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

// maxProblemBytes bounds how much of an error body is read.
const maxProblemBytes = 64 << 10

// problemBody is the wire form of an RFC 9457 problem.
type problemBody struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

// errorFromResponse builds the Error for a non-2xx answer whose (bounded)
// body is body.
func errorFromResponse(method, path string, resp *http.Response, body []byte) *Error {
	e := &Error{
		Status:     resp.StatusCode,
		Method:     method,
		Path:       path,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
	}
	var p problemBody
	ct := resp.Header.Get("Content-Type")
	isJSON := strings.Contains(ct, "json")
	if isJSON && json.Unmarshal(body, &p) == nil && p.Code != "" {
		e.Code, e.Type, e.Title, e.Detail = p.Code, p.Type, p.Title, p.Detail
		return e
	}
	e.Detail = excerpt(body, 200)
	return e
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an
// HTTP-date (RFC 9110 §10.2.3). Zero when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		const maxSeconds = int64(24 * time.Hour / time.Second)
		if n > maxSeconds {
			n = maxSeconds
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// excerpt is the start of a body, valid UTF-8, for an error message.
func excerpt(b []byte, max int) string {
	s := strings.TrimSpace(string(b))
	if len(s) <= max {
		return strings.ToValidUTF8(s, "?")
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "?") + "…"
}
