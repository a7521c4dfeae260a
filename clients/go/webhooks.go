package herenow

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Receiving herenow's webhooks (docs/API.md, "Webhooks"). herenow signs
// each request the Standard Webhooks way (https://www.standardwebhooks.com/):
//
//   - webhook-id: the message id, the same on every retry of a batch;
//   - webhook-timestamp: the attempt's time, integer Unix seconds;
//   - webhook-signature: space-separated "v1,<base64>" signatures, each the
//     HMAC-SHA256 of "{id}.{timestamp}.{body}" under the secret's bytes
//     (the secret is written "whsec_" and their base64).
//
// A [WebhookVerifier] checks all three; [ParseWebhookBatch] reads a
// verified body as typed events; [WebhookVerifier.Receive] does both, and
// [WebhookHandler] wraps it all in an http.Handler. The payload's types,
// the parser and the [Deduplicator] are in webhooks_payload.go.

// Webhook constants.
const (
	// DefaultWebhookTolerance is how far a webhook-timestamp may be from
	// now, either way, unless [WebhookOptions.Tolerance] says otherwise.
	DefaultWebhookTolerance = 5 * time.Minute
	// WebhookSecretPrefix starts a Standard Webhooks secret.
	WebhookSecretPrefix = "whsec_"
	// MaxWebhookBodyBytes bounds the body [WebhookHandler] reads: herenow
	// sends at most 256 KiB per batch; past this the answer is 413.
	MaxWebhookBodyBytes = 1 << 20
)

// Bounds on what a request may make a verifier parse, checked before any
// other work: far above what herenow sends (one signature, a 36-byte id,
// a 10-digit timestamp), far below what would cost anything. The same as
// the Python client's.
const (
	maxWebhookID              = 256
	maxWebhookTimestampDigits = 12
	maxWebhookSignatureHeader = 8 * 1024
	maxWebhookSignatures      = 32
)

// The webhook headers, canonical (http.Header's keys).
var (
	headerWebhookID        = http.CanonicalHeaderKey("webhook-id")
	headerWebhookTimestamp = http.CanonicalHeaderKey("webhook-timestamp")
	headerWebhookSignature = http.CanonicalHeaderKey("webhook-signature")
)

// ErrWebhookVerification is matched (errors.Is) by every
// [*WebhookVerificationError]: the request is not a genuine, fresh
// herenow webhook.
var ErrWebhookVerification = errors.New("herenow: webhook verification failed")

// ErrWebhookPayload is matched (errors.Is) by every
// [*WebhookPayloadError]: a correctly signed body that is not a herenow
// batch.
var ErrWebhookPayload = errors.New("herenow: webhook payload is not a presence.events batch")

// WebhookReason says why a webhook request was refused.
type WebhookReason string

// The reasons of a [*WebhookVerificationError].
const (
	// WebhookMissingHeader: webhook-id, webhook-timestamp or
	// webhook-signature is absent or blank.
	WebhookMissingHeader WebhookReason = "missing-header"
	// WebhookBadHeader: a header is oversized, or the timestamp is not
	// integer Unix seconds.
	WebhookBadHeader WebhookReason = "bad-header"
	// WebhookTimestampTooOld: the timestamp is more than the tolerance in
	// the past (a replayed request, or a clock far behind).
	WebhookTimestampTooOld WebhookReason = "timestamp-too-old"
	// WebhookTimestampTooNew: the timestamp is more than the tolerance in
	// the future.
	WebhookTimestampTooNew WebhookReason = "timestamp-too-new"
	// WebhookNoMatchingSignature: no v1 signature matches any secret.
	WebhookNoMatchingSignature WebhookReason = "no-matching-signature"
)

// WebhookVerificationError is a request that is not a genuine, fresh
// herenow webhook: answer it 401 and do nothing with its body. It matches
// [ErrWebhookVerification] with errors.Is.
type WebhookVerificationError struct {
	// Reason is stable and machine-readable.
	Reason WebhookReason
	// Detail says more, for people.
	Detail string
}

func (e *WebhookVerificationError) Error() string {
	return "herenow: webhook refused: " + string(e.Reason) + ": " + e.Detail
}

// Is makes errors.Is(err, ErrWebhookVerification) true.
func (e *WebhookVerificationError) Is(target error) bool { return target == ErrWebhookVerification }

func refuse(reason WebhookReason, format string, args ...any) error {
	return &WebhookVerificationError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// WebhookOptions configures a [WebhookVerifier]. The zero value is the
// defaults.
type WebhookOptions struct {
	// Tolerance is how far webhook-timestamp may be from now, either way:
	// an older request is refused even when correctly signed, so a
	// captured request cannot be replayed later. Zero:
	// DefaultWebhookTolerance (5 minutes); negative is refused.
	Tolerance time.Duration
	// Clock tells the time (tests); nil: SystemClock.
	Clock Clock
}

// WebhookVerifier checks herenow's webhook requests against one or more
// secrets. It is immutable and safe for concurrent use; its secrets are
// never printed.
type WebhookVerifier struct {
	keys      []*webhookKey
	tolerance time.Duration
	clock     Clock
}

// webhookKey is a decoded secret, behind a pointer so that printing a
// verifier shows an address, not the key.
type webhookKey struct{ b []byte }

// NewWebhookVerifier makes a verifier for an endpoint's secrets: "whsec_"
// and base64 (the prefix may be left out), as given to herenow's
// --webhook-secret or secret=. Give several while rotating a secret: a
// request signed with any one of them passes. An unusable secret (not
// base64, empty) or no secret at all is refused here, wrapping
// [ErrInvalidInput], never at verification time; the error never quotes
// a secret.
func NewWebhookVerifier(secrets []string, opts *WebhookOptions) (*WebhookVerifier, error) {
	if len(secrets) == 0 {
		return nil, invalid("no webhook secret given")
	}
	v := &WebhookVerifier{tolerance: DefaultWebhookTolerance, clock: SystemClock}
	if opts != nil {
		if opts.Tolerance < 0 {
			return nil, invalid("webhook tolerance %s is negative", opts.Tolerance)
		}
		if opts.Tolerance > 0 {
			v.tolerance = opts.Tolerance
		}
		if opts.Clock != nil {
			v.clock = opts.Clock
		}
	}
	for i, s := range secrets {
		key, err := decodeWebhookSecret(s)
		if err != nil {
			return nil, invalid("webhook secret #%d: %s", i+1, err)
		}
		v.keys = append(v.keys, &webhookKey{b: key})
	}
	return v, nil
}

func decodeWebhookSecret(s string) ([]byte, error) {
	text := strings.TrimPrefix(strings.TrimSpace(s), WebhookSecretPrefix)
	if text == "" {
		return nil, errors.New("the secret is empty")
	}
	// Standard base64, padded or not (the decoder would skip line breaks:
	// no secret has one).
	key, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(text, "="))
	if err != nil || strings.ContainsAny(text, "\r\n") {
		return nil, errors.New("a webhook secret is whsec_ and base64; what follows whsec_ is not base64")
	}
	if len(key) == 0 {
		return nil, errors.New("the secret is empty")
	}
	return key, nil
}

// String hides the secrets.
func (v *WebhookVerifier) String() string {
	return fmt.Sprintf("herenow.WebhookVerifier(%d secrets, tolerance %s)", len(v.keys), v.tolerance)
}

// Tolerance is how far a webhook-timestamp may be from now.
func (v *WebhookVerifier) Tolerance() time.Duration { return v.tolerance }

func (k *webhookKey) digest(msgID, timestamp string, body []byte) []byte {
	mac := hmac.New(sha256.New, k.b)
	mac.Write([]byte(msgID))
	mac.Write([]byte{'.'})
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return mac.Sum(nil)
}

// Sign is the webhook-signature herenow would send for this message
// under the verifier's first secret: "v1,<base64>". For tests of a
// receiver.
func (v *WebhookVerifier) Sign(msgID string, timestamp int64, body []byte) string {
	d := v.keys[0].digest(msgID, strconv.FormatInt(timestamp, 10), body)
	return "v1," + base64.StdEncoding.EncodeToString(d)
}

// webhookHeader is the first value of a header, whatever the case of its name
// (http.Header built by hand may hold non-canonical keys).
func webhookHeader(h http.Header, canonical string) (string, bool) {
	if vs, ok := h[canonical]; ok {
		if len(vs) == 0 {
			return "", false
		}
		return vs[0], true
	}
	for k, vs := range h {
		if len(vs) > 0 && strings.EqualFold(k, canonical) {
			return vs[0], true
		}
	}
	return "", false
}

func requiredHeader(h http.Header, canonical string) (string, error) {
	v, _ := webhookHeader(h, canonical)
	v = strings.TrimSpace(v)
	if v == "" {
		return "", refuse(WebhookMissingHeader, "no %s header", strings.ToLower(canonical))
	}
	return v, nil
}

// Verify checks a webhook request's Standard Webhooks signature: header
// is the request's (names in any case), body its raw bytes exactly as
// received, before any JSON parsing. It answers nil, or a
// [*WebhookVerificationError]: a header missing, oversized or malformed
// (checked before any other work), a timestamp out of tolerance (checked
// before the signature: a stale request is refused whoever signed it),
// or no v1 signature matching any secret (compared in constant time,
// every signature against every secret).
func (v *WebhookVerifier) Verify(header http.Header, body []byte) error {
	msgID, err := requiredHeader(header, headerWebhookID)
	if err != nil {
		return err
	}
	stamp, err := requiredHeader(header, headerWebhookTimestamp)
	if err != nil {
		return err
	}
	signatures, err := requiredHeader(header, headerWebhookSignature)
	if err != nil {
		return err
	}
	if len(msgID) > maxWebhookID {
		return refuse(WebhookBadHeader, "webhook-id is too long")
	}
	if !allDigits(stamp) || len(stamp) > maxWebhookTimestampDigits {
		return refuse(WebhookBadHeader, "webhook-timestamp is not integer Unix seconds")
	}
	if len(signatures) > maxWebhookSignatureHeader {
		return refuse(WebhookBadHeader, "webhook-signature is too long")
	}

	secs, err := strconv.ParseInt(stamp, 10, 64) // at most 12 digits: fits
	if err != nil {
		return refuse(WebhookBadHeader, "webhook-timestamp is not integer Unix seconds")
	}
	at, now := time.Unix(secs, 0), v.clock.Now()
	if at.Before(now.Add(-v.tolerance)) {
		return refuse(WebhookTimestampTooOld, "webhook-timestamp is %d s old", int64(now.Sub(at)/time.Second))
	}
	if at.After(now.Add(v.tolerance)) {
		return refuse(WebhookTimestampTooNew, "webhook-timestamp is %d s ahead", int64(at.Sub(now)/time.Second))
	}

	entries := strings.Fields(signatures)
	if len(entries) > maxWebhookSignatures {
		entries = entries[:maxWebhookSignatures]
	}
	offered := make([][]byte, 0, len(entries))
	for _, entry := range entries {
		version, encoded, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue // another scheme (v1a: asymmetric), or noise
		}
		sig, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			continue
		}
		offered = append(offered, sig)
	}
	if len(offered) == 0 {
		return refuse(WebhookNoMatchingSignature, "no v1 signature in the request")
	}
	matched := false
	for _, key := range v.keys {
		expected := key.digest(msgID, stamp, body)
		for _, candidate := range offered {
			// Constant time, and every candidate compared: how many
			// signatures matched, or which, is not timed.
			if hmac.Equal(expected, candidate) {
				matched = true
			}
		}
	}
	if !matched {
		return refuse(WebhookNoMatchingSignature, "no signature matches the secret")
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Receive is [WebhookVerifier.Verify], then [ParseWebhookBatch]: the
// request's typed events (with WebhookID set from the webhook-id header),
// or a [*WebhookVerificationError] or a [*WebhookPayloadError].
func (v *WebhookVerifier) Receive(header http.Header, body []byte) (*WebhookBatch, error) {
	if err := v.Verify(header, body); err != nil {
		return nil, err
	}
	batch, err := ParseWebhookBatch(body)
	if err != nil {
		return nil, err
	}
	batch.WebhookID, _ = requiredHeader(header, headerWebhookID)
	return batch, nil
}

// WebhookHandler is an http.Handler for herenow's webhook requests: it
// reads the body (at most [MaxWebhookBodyBytes]), verifies and parses it
// with v, and hands the batch to handle with the request's context. Its
// answers tell herenow what to do with the batch:
//
//   - 204 when handle returns nil: delivered;
//   - 500 when handle returns an error: herenow retries the same batch
//     later (same webhook-id and event ids), so handle may fail rather
//     than lose events;
//   - 401 for a request that fails verification, 400 for a verified body
//     that is not a batch, 413 past MaxWebhookBodyBytes, 405 for a method
//     other than POST: herenow drops such a batch at once.
//
// Delivery is at least once: deduplicate by event ID (a [Deduplicator]
// within one process, a unique index in a database across several).
// Answer quickly: herenow waits --webhook-timeout (10 s) before retrying.
// It panics if v or handle is nil.
func WebhookHandler(v *WebhookVerifier, handle func(ctx context.Context, batch *WebhookBatch) error) http.Handler {
	if v == nil || handle == nil {
		panic("herenow: WebhookHandler needs a verifier and a function")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "webhooks are POST", http.StatusMethodNotAllowed)
			return
		}
		if r.ContentLength > MaxWebhookBodyBytes {
			http.Error(w, "webhook body too large", http.StatusRequestEntityTooLarge)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxWebhookBodyBytes))
		if err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				http.Error(w, "webhook body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "cannot read the webhook body", http.StatusBadRequest)
			return
		}
		batch, err := v.Receive(r.Header, body)
		if err != nil {
			var refused *WebhookVerificationError
			switch {
			case errors.As(err, &refused):
				http.Error(w, "webhook refused: "+string(refused.Reason), http.StatusUnauthorized)
			default:
				http.Error(w, "webhook body is not a presence.events batch", http.StatusBadRequest)
			}
			return
		}
		if err := handle(r.Context(), batch); err != nil {
			// Not the error's text: it is the receiver's business.
			http.Error(w, "webhook handler failed; retry later", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
