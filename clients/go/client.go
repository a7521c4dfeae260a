package herenow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultBaseURL is where herenow serves by default.
const DefaultBaseURL = "http://127.0.0.1:7700"

// Defaults of [Options].
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMaxResponseBytes = 32 << 20
)

// Options configures a [Client]. The zero value talks to DefaultBaseURL
// with no API key.
type Options struct {
	// BaseURL is the server, e.g. "https://presence.internal:7700";
	// empty: DefaultBaseURL. A path prefix (behind a proxy) is kept.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer KEY" on /v1 requests;
	// empty: none (a server without --api-key).
	APIKey string
	// HTTPClient sends the requests; nil: a client of its own whose
	// transport keeps up to MaxIdleConnsPerHost connections to the server
	// for reuse. Its Timeout must be zero for event streams to last: use
	// Timeout below for requests.
	HTTPClient *http.Client
	// Timeout bounds each request, from sending to the whole answer read
	// (not event streams, which last; see StreamOptions.IdleTimeout).
	// Zero: DefaultTimeout; negative: none but the context's.
	Timeout time.Duration
	// MaxResponseBytes bounds an answer's body; a longer one is an error.
	// Zero: DefaultMaxResponseBytes (a 10,000-member status batch with
	// full metadata is about 12 MiB).
	MaxResponseBytes int64
	// MaxIdleConnsPerHost sizes the pool of the client's own transport
	// (ignored with HTTPClient); zero: 32.
	MaxIdleConnsPerHost int
	// UserAgent is sent with every request; empty: "herenow-go".
	UserAgent string
	// Breaker is the circuit breaker of the calls made for pages (the
	// [Presence] helpers) and of the [Heartbeater]; nil: the process's
	// shared one for this BaseURL ([BreakerFor]). Plain Client calls do
	// not go through it: they always ask the server.
	Breaker *Breaker
}

// Client calls a herenow server. It is safe for concurrent use; make one
// and share it, so connections are reused.
type Client struct {
	base      *url.URL
	apiKey    string
	http      *http.Client
	timeout   time.Duration
	maxBody   int64
	userAgent string
	breaker   *Breaker
}

// New makes a client. It fails only on a BaseURL that is not an absolute
// http(s) URL.
func New(opts Options) (*Client, error) {
	raw := opts.BaseURL
	if raw == "" {
		raw = DefaultBaseURL
	}
	base, err := url.Parse(raw)
	if err != nil {
		return nil, invalid("base URL %q: %v", raw, err)
	}
	if (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, invalid("base URL %q is not an absolute http(s) URL", raw)
	}
	if base.RawQuery != "" || base.Fragment != "" {
		return nil, invalid("base URL %q has a query or fragment", raw)
	}
	base.Path = strings.TrimRight(base.Path, "/")
	base.RawPath = ""
	c := &Client{
		base:      base,
		apiKey:    opts.APIKey,
		http:      opts.HTTPClient,
		timeout:   opts.Timeout,
		maxBody:   opts.MaxResponseBytes,
		userAgent: opts.UserAgent,
		breaker:   opts.Breaker,
	}
	if c.breaker == nil {
		c.breaker = BreakerFor(base.String())
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBody <= 0 {
		c.maxBody = DefaultMaxResponseBytes
	}
	if c.userAgent == "" {
		c.userAgent = "herenow-go"
	}
	if c.http == nil {
		idle := opts.MaxIdleConnsPerHost
		if idle <= 0 {
			idle = 32
		}
		c.http = &http.Client{Transport: newTransport(idle)}
	}
	return c, nil
}

// newTransport is http.DefaultTransport's setup with a pool sized for
// one busy server (the default keeps 2 idle connections per host, so a
// busy client would open and close connections all the time).
func newTransport(idlePerHost int) *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          idlePerHost * 2,
		MaxIdleConnsPerHost:   idlePerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: 0, // per call, through the context
	}
}

// BaseURL is the server this client calls.
func (c *Client) BaseURL() string { return c.base.String() }

// Breaker is this client's circuit breaker (see [Options.Breaker]).
func (c *Client) Breaker() *Breaker { return c.breaker }

// CloseIdleConnections closes the pooled connections that are idle.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// endpoint builds the URL of path segments, each escaped as one path
// segment (so an id holding "/" or "?" stays one segment).
func (c *Client) endpoint(query url.Values, segments ...string) (*url.URL, string) {
	var raw strings.Builder
	raw.WriteString(c.base.EscapedPath())
	for _, s := range segments {
		raw.WriteByte('/')
		if s == "." || s == ".." {
			// A dot segment would be folded away by any proxy or
			// client that normalises paths; escaped it stays an id.
			raw.WriteString(strings.Repeat("%2E", len(s)))
			continue
		}
		raw.WriteString(url.PathEscape(s))
	}
	u := *c.base
	u.RawPath = raw.String()
	if p, err := url.PathUnescape(u.RawPath); err == nil {
		u.Path = p
	}
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	return &u, u.RawPath
}

// request is one API call.
type request struct {
	method   string
	segments []string
	query    url.Values
	body     any
	// want is the status of success; 0: any 2xx.
	want int
}

// do sends r and decodes a 2xx answer's JSON into out (unless out is
// nil); any other answer is an *Error.
func (c *Client) do(ctx context.Context, r request, out any) error {
	resp, path, cancel, err := c.send(ctx, r, "application/json", c.timeout)
	if err != nil {
		return err
	}
	defer cancel()
	defer drainClose(resp.Body)
	return c.decode(r.method, path, resp, out)
}

// send performs the request; the caller must close the body and then call
// cancel. timeout bounds the whole exchange (negative: none).
func (c *Client) send(ctx context.Context, r request, accept string, timeout time.Duration) (*http.Response, string, context.CancelFunc, error) {
	u, path := c.endpoint(r.query, r.segments...)
	if ctx == nil {
		return nil, path, nil, invalid("%s %s: a nil context", r.method, path)
	}
	cancel := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	var body io.Reader
	if r.body != nil {
		buf, err := json.Marshal(r.body)
		if err != nil {
			cancel()
			return nil, path, nil, fmt.Errorf("herenow: %s %s: encoding the body: %w", r.method, path, err)
		}
		body = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), body)
	if err != nil {
		cancel()
		return nil, path, nil, fmt.Errorf("herenow: %s %s: %w", r.method, path, err)
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		return nil, path, nil, fmt.Errorf("herenow: %s %s: %w", r.method, path, err)
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if r.want != 0 {
		ok = resp.StatusCode == r.want
	}
	if !ok {
		defer cancel()
		defer drainClose(resp.Body)
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
		return nil, path, nil, errorFromResponse(r.method, path, resp, b)
	}
	return resp, path, cancel, nil
}

// decode reads a 2xx answer's JSON body, bounded, into out.
func (c *Client) decode(method, path string, resp *http.Response, out any) error {
	if out == nil {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
	if err != nil {
		return fmt.Errorf("herenow: %s %s: reading the answer: %w", method, path, err)
	}
	if int64(len(b)) > c.maxBody {
		return fmt.Errorf("herenow: %s %s: the answer is over the client's limit of %d bytes (Options.MaxResponseBytes)", method, path, c.maxBody)
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = b
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("herenow: %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// drainClose reads a little of what is left so the connection can be
// reused, then closes the body.
func drainClose(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	_ = body.Close()
}

// duration formats a Go duration for a query string or a body (the
// server reads humantime: "1500ms"). Sub-millisecond durations round up,
// so a positive duration never becomes zero.
func duration(what string, d time.Duration) (string, error) {
	if d < 0 {
		return "", invalid("%s is negative (%s)", what, d)
	}
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	return fmt.Sprintf("%dms", ms), nil
}

func checkSpace(space string) error {
	if space == "" {
		return invalid("the space name is empty")
	}
	return nil
}

func checkID(what, id string) error {
	if id == "" {
		return invalid("the %s id is empty", what)
	}
	return nil
}

func checkLimit(limit int) error {
	if limit < 0 {
		return invalid("limit %d is negative", limit)
	}
	return nil
}
