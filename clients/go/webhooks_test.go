package herenow

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Receiving webhooks: Standard Webhooks verification (the specification's
// published test vector, tampering, freshness, malformed headers, secrets).
// The payload, deduplication, the handler and a real server's delivery are
// in webhooks_payload_test.go. The same cases as the Python client's
// tests/test_webhooks.py.

// The Standard Webhooks specification's published test vector (the
// reference libraries' tests); herenow's own signer is tested against the
// same one (crates/herenow-server/src/webhooks/sign.rs).
const (
	vecSecret         = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vecMsgID          = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vecTimestamp      = int64(1614265330)
	vecPayload        = `{"test": 2432232314}`
	vecSignature      = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	vecWrongSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=" // one bit off
)

// fixedClock is a clock that stays put.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

func clockAt(unix int64) Clock { return fixedClock(time.Unix(unix, 0)) }

func whsec(raw string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(raw)) }

// verifier is a verifier whose clock is the vector's time (plus skew).
func verifier(t *testing.T, skew int64, secrets ...string) *WebhookVerifier {
	t.Helper()
	if len(secrets) == 0 {
		secrets = []string{vecSecret}
	}
	v, err := NewWebhookVerifier(secrets, &WebhookOptions{Clock: clockAt(vecTimestamp + skew)})
	if err != nil {
		t.Fatalf("NewWebhookVerifier: %v", err)
	}
	return v
}

// vecHeaders are the vector's headers; override sets (or, with "",
// blanks) some.
func vecHeaders(override ...string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", vecMsgID)
	h.Set("webhook-timestamp", strconv.FormatInt(vecTimestamp, 10))
	h.Set("webhook-signature", vecSignature)
	for i := 0; i+1 < len(override); i += 2 {
		h.Set(override[i], override[i+1])
	}
	return h
}

// refused asserts err is a verification error with this reason.
func refused(t *testing.T, err error, reason WebhookReason) {
	t.Helper()
	var e *WebhookVerificationError
	if !errors.As(err, &e) || e.Reason != reason {
		t.Fatalf("want a verification error %q, got %T %v", reason, err, err)
	}
	if !errors.Is(err, ErrWebhookVerification) || errors.Is(err, ErrWebhookPayload) || errors.Is(err, ErrInvalidInput) {
		t.Fatalf("errors.Is does not tell %v apart", err)
	}
	if !strings.Contains(err.Error(), string(reason)) {
		t.Fatalf("the message %q does not say %q", err, reason)
	}
}

func TestWebhookPublishedVectorSignsAndVerifies(t *testing.T) {
	v := verifier(t, 0)
	if got := v.Sign(vecMsgID, vecTimestamp, []byte(vecPayload)); got != vecSignature {
		t.Fatalf("Sign = %s, want %s", got, vecSignature)
	}
	if err := v.Verify(vecHeaders(), []byte(vecPayload)); err != nil {
		t.Fatal(err)
	}
	// The secret without its prefix, or with spaces around.
	for _, s := range []string{strings.TrimPrefix(vecSecret, "whsec_"), "  " + vecSecret + "\n"} {
		if err := verifier(t, 0, s).Verify(vecHeaders(), []byte(vecPayload)); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
	}
	// Base64 padded or not: the same key.
	padded := whsec("a key of 23 bytes, !!!!")
	if !strings.HasSuffix(padded, "=") {
		t.Fatalf("%s has no padding", padded)
	}
	if verifier(t, 0, padded).Sign("m", 1, nil) != verifier(t, 0, strings.TrimRight(padded, "=")).Sign("m", 1, nil) {
		t.Fatal("padding changes the key")
	}
}

func TestWebhookPublishedWrongSignatureIsRefused(t *testing.T) {
	refused(t, verifier(t, 0).Verify(vecHeaders("webhook-signature", vecWrongSignature), []byte(vecPayload)), WebhookNoMatchingSignature)
}

func TestWebhookTamperedRequestIsRefused(t *testing.T) {
	v := verifier(t, 0)
	refused(t, v.Verify(vecHeaders(), []byte(`{"test": 2432232315}`)), WebhookNoMatchingSignature)
	refused(t, v.Verify(vecHeaders(), []byte(vecPayload+" ")), WebhookNoMatchingSignature)
	refused(t, v.Verify(vecHeaders("webhook-id", "msg_other"), []byte(vecPayload)), WebhookNoMatchingSignature)
	// The timestamp is signed: moving it (within the tolerance) breaks it.
	refused(t, v.Verify(vecHeaders("webhook-timestamp", strconv.FormatInt(vecTimestamp+1, 10)), []byte(vecPayload)), WebhookNoMatchingSignature)
	other := verifier(t, 0, whsec("another secret of 24 byte"))
	refused(t, other.Verify(vecHeaders(), []byte(vecPayload)), WebhookNoMatchingSignature)
}

func TestWebhookSeveralSignaturesAndSecrets(t *testing.T) {
	v := verifier(t, 0)
	mixed := strings.Join([]string{
		"v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
		"v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=",
		"v1a,not-ours",
		"garbage",
		"v1,***not base64***",
		vecSignature,
	}, " ")
	if err := v.Verify(vecHeaders("webhook-signature", mixed), []byte(vecPayload)); err != nil {
		t.Fatal(err)
	}
	// Only other schemes or broken entries: nothing to match.
	refused(t, v.Verify(vecHeaders("webhook-signature", "v1a,abc v2,abc junk"), []byte(vecPayload)), WebhookNoMatchingSignature)
	// Rotating the receiver's secret: any one of the list may match.
	old := whsec("the old secret, 24 bytes")
	if err := verifier(t, 0, old, vecSecret).Verify(vecHeaders(), []byte(vecPayload)); err != nil {
		t.Fatal(err)
	}
	refused(t, verifier(t, 0, old).Verify(vecHeaders(), []byte(vecPayload)), WebhookNoMatchingSignature)
	// Sign uses the first secret.
	rotated := verifier(t, 0, old, vecSecret)
	if rotated.Sign(vecMsgID, vecTimestamp, []byte(vecPayload)) == vecSignature {
		t.Fatal("Sign did not use the first secret")
	}
}

func TestWebhookHeadersInAnyCase(t *testing.T) {
	v := verifier(t, 0)
	for _, names := range [][3]string{
		{"webhook-id", "webhook-timestamp", "webhook-signature"},
		{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"},
		{"WEBHOOK-ID", "WEBHOOK-TIMESTAMP", "WEBHOOK-SIGNATURE"},
	} {
		// Keys as given, not canonicalised (a header built by hand).
		h := http.Header{
			names[0]: {vecMsgID},
			names[1]: {strconv.FormatInt(vecTimestamp, 10)},
			names[2]: {vecSignature},
		}
		if err := v.Verify(h, []byte(vecPayload)); err != nil {
			t.Fatalf("%v: %v", names, err)
		}
	}
}

func TestWebhookMissingOrEmptyHeaderIsRefused(t *testing.T) {
	v := verifier(t, 0)
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		h := vecHeaders()
		h.Del(name)
		refused(t, v.Verify(h, []byte(vecPayload)), WebhookMissingHeader)
		refused(t, v.Verify(vecHeaders(name, "  "), []byte(vecPayload)), WebhookMissingHeader)
		h[http.CanonicalHeaderKey(name)] = []string{}
		refused(t, v.Verify(h, []byte(vecPayload)), WebhookMissingHeader)
	}
	refused(t, v.Verify(nil, []byte(vecPayload)), WebhookMissingHeader)
}

func TestWebhookTimestampNotIntegerSecondsIsRefused(t *testing.T) {
	v := verifier(t, 0)
	for _, stamp := range []string{"hello", "1614265330.0", "-1614265330", "+1614265330", "1e9", "0x60380f72", "١٦١٤٢٦٥٣٣٠", strings.Repeat("9", 13), "1614265330 1"} {
		refused(t, v.Verify(vecHeaders("webhook-timestamp", stamp), []byte(vecPayload)), WebhookBadHeader)
	}
	refused(t, v.Verify(vecHeaders("webhook-timestamp", ""), []byte(vecPayload)), WebhookMissingHeader)
}

func TestWebhookFreshnessWithinToleranceEitherWay(t *testing.T) {
	body := []byte(vecPayload)
	for _, skew := range []int64{300, -300, 0} {
		if err := verifier(t, skew).Verify(vecHeaders(), body); err != nil {
			t.Fatalf("skew %d: %v", skew, err)
		}
	}
	refused(t, verifier(t, 301).Verify(vecHeaders(), body), WebhookTimestampTooOld)
	refused(t, verifier(t, -301).Verify(vecHeaders(), body), WebhookTimestampTooNew)
	// A stale request is refused even with a valid signature, and a
	// tolerance of one's own applies.
	short, err := NewWebhookVerifier([]string{vecSecret}, &WebhookOptions{Tolerance: 10 * time.Second, Clock: clockAt(vecTimestamp + 11)})
	if err != nil {
		t.Fatal(err)
	}
	refused(t, short.Verify(vecHeaders(), body), WebhookTimestampTooOld)
	if short.Tolerance() != 10*time.Second {
		t.Fatalf("tolerance %s", short.Tolerance())
	}
	// Without a clock, the system's: the vector (2021) is long stale.
	sys, err := NewWebhookVerifier([]string{vecSecret}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sys.Tolerance() != DefaultWebhookTolerance {
		t.Fatalf("default tolerance %s", sys.Tolerance())
	}
	refused(t, sys.Verify(vecHeaders(), body), WebhookTimestampTooOld)
	// And a fresh one passes it.
	now := time.Now().Unix()
	h := vecHeaders("webhook-timestamp", strconv.FormatInt(now, 10), "webhook-signature", sys.Sign(vecMsgID, now, body))
	if err := sys.Verify(h, body); err != nil {
		t.Fatal(err)
	}
}

func TestWebhookOversizedHeadersAreRefusedBeforeAnyWork(t *testing.T) {
	v := verifier(t, 0)
	refused(t, v.Verify(vecHeaders("webhook-id", strings.Repeat("m", 257)), []byte(vecPayload)), WebhookBadHeader)
	refused(t, v.Verify(vecHeaders("webhook-signature", strings.Repeat(vecSignature+" ", 200)), []byte(vecPayload)), WebhookBadHeader)
	// Oversized and stale: the size is checked first.
	refused(t, verifier(t, 10_000).Verify(vecHeaders("webhook-id", strings.Repeat("m", 257)), []byte(vecPayload)), WebhookBadHeader)
	// At the bounds: accepted as far as size goes (then the signature).
	refused(t, v.Verify(vecHeaders("webhook-id", strings.Repeat("m", 256)), []byte(vecPayload)), WebhookNoMatchingSignature)
	// Past 32 entries, the rest is not looked at.
	many := strings.Repeat("v1,AAAA ", 32) + vecSignature
	refused(t, v.Verify(vecHeaders("webhook-signature", many), []byte(vecPayload)), WebhookNoMatchingSignature)
	if err := v.Verify(vecHeaders("webhook-signature", strings.Repeat("v1,AAAA ", 31)+vecSignature), []byte(vecPayload)); err != nil {
		t.Fatal(err)
	}
}

func TestWebhookUnusableSecretIsAConfigurationError(t *testing.T) {
	for _, bad := range [][]string{{"whsec_not base64!"}, {"whsec_"}, {""}, {"   "}, {"whsec_abcde"}, {"whsec_ab\ncd"}, {vecSecret, "whsec_*"}, {}, nil} {
		v, err := NewWebhookVerifier(bad, nil)
		if !errors.Is(err, ErrInvalidInput) || v != nil {
			t.Fatalf("%q: want ErrInvalidInput, got %v", bad, err)
		}
		if errors.Is(err, ErrWebhookVerification) || strings.Contains(err.Error(), "MfKQ") {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	if _, err := NewWebhookVerifier([]string{vecSecret}, &WebhookOptions{Tolerance: -time.Second}); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("negative tolerance: %v", err)
	}
	// Printing a verifier shows no secret.
	v := verifier(t, 0)
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(vecSecret, "whsec_"))
	decimal := strings.Trim(fmt.Sprint(key[:6]), "[]")                                         // 49 242 …
	hex := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%#v", key[:6]), "[]byte{"), "}") // 0x31, 0xf2, …
	for _, s := range []string{fmt.Sprint(v), fmt.Sprintf("%+v", *v), fmt.Sprintf("%#v", v), fmt.Sprintf("%#v", *v)} {
		if strings.Contains(s, "MfKQ") || strings.Contains(s, decimal) || strings.Contains(s, hex) {
			t.Fatalf("the secret shows: %s", s)
		}
	}
}
