package herenow_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"time"

	herenow "github.com/herenow/herenow/clients/go"
)

// These examples are compiled with the tests; only those with an Output
// comment run (the others need a server at the default address).

func Example() {
	ctx := context.Background()
	c, err := herenow.New(herenow.Options{BaseURL: "http://127.0.0.1:7700", APIKey: "KEY"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx, "lobby", herenow.Heartbeat{ID: "ada", Meta: herenow.Meta{"name": "Ada"}}); err != nil {
		var e *herenow.Error
		if errors.As(err, &e) && e.Retryable() {
			log.Printf("herenow is busy; retry in %s", e.RetryAfter)
		}
		log.Fatal(err)
	}
	page, err := c.Online(ctx, "lobby", &herenow.OnlineOptions{Window: 5 * time.Minute, Limit: 50})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range page.Members {
		fmt.Println(m.ID, m.Status)
	}
}

func ExampleMiddleware() {
	c, err := herenow.New(herenow.Options{})
	if err != nil {
		log.Fatal(err)
	}
	beats, err := herenow.NewHeartbeater(c, "site", herenow.HeartbeaterOptions{Interval: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer beats.Close(context.Background())

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	presence := herenow.Middleware(beats, herenow.MiddlewareOptions{
		// Your session's user; everyone else is a guest by IP.
		Identify: func(r *http.Request) (herenow.MemberRef, bool) {
			if u := r.Header.Get("X-User"); u != "" {
				return herenow.User(u), true
			}
			return herenow.MemberRef{}, false
		},
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", presence(mux)))
}

func ExampleClient_Watch() {
	ctx := context.Background()
	c, err := herenow.New(herenow.Options{})
	if err != nil {
		log.Fatal(err)
	}
	stream, err := c.Watch(ctx, herenow.WatchRequest{FriendsOf: "ann"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()
	contacts := herenow.NewWatchState()
	for {
		ev, err := stream.Next() // resumes by itself after a drop
		if err != nil {
			log.Fatal(err)
		}
		for _, id := range contacts.Apply(ev) {
			u, _ := contacts.User(id)
			fmt.Println(id, "is", u.Status)
		}
	}
}

func ExampleClient_Events() {
	ctx := context.Background()
	c, err := herenow.New(herenow.Options{})
	if err != nil {
		log.Fatal(err)
	}
	stream, err := c.Events(ctx, "lobby", &herenow.StreamOptions{
		OnDrop: func(err error) { log.Printf("lobby events dropped (%v); resuming", err) },
	})
	if err != nil {
		log.Fatal(err)
	}
	defer stream.Close()
	present := map[herenow.MemberRef]herenow.Status{}
	for {
		ev, err := stream.Next()
		if err != nil {
			log.Fatal(err)
		}
		switch {
		case ev.Snapshot != nil: // the first, and after lag or a reconnect
			present = map[herenow.MemberRef]herenow.Status{}
			for _, m := range ev.Snapshot.Members {
				present[m.Ref()] = m.Status
			}
		case ev.Change != nil && ev.Change.Type == herenow.EventLeave:
			delete(present, ev.Change.Ref())
		case ev.Change != nil:
			present[ev.Change.Ref()] = ev.Change.Status
		}
		fmt.Println(len(present), "here")
	}
}

func ExampleWebhookHandler() {
	// The endpoint's secret, as given to herenow serve --webhook
	// URL,secret=whsec_… (or --webhook-secret). While rotating it, give
	// the old and the new.
	verifier, err := herenow.NewWebhookVerifier([]string{os.Getenv("HERENOW_WEBHOOK_SECRET")}, nil)
	if err != nil {
		log.Fatal(err) // not whsec_ and base64
	}
	seen := herenow.NewDeduplicator(0) // delivery is at least once
	http.Handle("/hooks/presence", herenow.WebhookHandler(verifier, func(ctx context.Context, batch *herenow.WebhookBatch) error {
		for _, e := range seen.Fresh(batch.Events) {
			switch e.Type {
			case herenow.WebhookJoin:
				log.Printf("%s came to %s", e.Member, e.Space)
			case herenow.WebhookLeave:
				log.Printf("%s left %s (%s)", e.Member, e.Space, e.Reason)
			}
		}
		return nil // 204; an error answers 500 and herenow retries the batch
	}))
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", nil))
}

func ExampleWebhookVerifier_Receive() {
	verifier, err := herenow.NewWebhookVerifier([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	// A request as herenow sends it (Sign is for tests like this one).
	body := []byte(`{"type": "presence.events", "timestamp": "2026-11-22T10:00:00.000Z",
		"data": {"events": [{"id": "8c1f-17", "type": "join", "space": "lobby",
		"at_ms": 1700000000000, "member": "ann", "kind": "user", "status": "online",
		"last_seen_ms": 1700000000000, "meta": {"page": "/"}}]}}`)
	now := time.Now().Unix()
	header := http.Header{}
	header.Set("webhook-id", "msg_2b7c")
	header.Set("webhook-timestamp", strconv.FormatInt(now, 10))
	header.Set("webhook-signature", verifier.Sign("msg_2b7c", now, body))

	batch, err := verifier.Receive(header, body)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range batch.Events {
		fmt.Println(e.Type, e.Space, e.Member, e.Status, string(e.Meta))
	}

	// Tampered with: refused, and why.
	_, err = verifier.Receive(header, append(body, ' '))
	var refused *herenow.WebhookVerificationError
	fmt.Println(errors.Is(err, herenow.ErrWebhookVerification), errors.As(err, &refused) && refused.Reason == herenow.WebhookNoMatchingSignature)
	// Output:
	// join lobby ann online {"page": "/"}
	// true true
}

func ExampleNewPresence() {
	c, err := herenow.New(herenow.Options{})
	if err != nil {
		log.Fatal(err)
	}
	// Page queries: never an error; "unknown" (here "?") at once while
	// herenow is down or hung (the client's breaker is open).
	p, err := herenow.NewPresence(c, "site", herenow.PresenceOptions{Unknown: "?"})
	if err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		who := p.WhosOnline(r.Context())
		fmt.Fprintf(w, "%s; you were %s\n", who, p.LastSeen(r.Context(), r.Header.Get("X-User")))
	})
}
