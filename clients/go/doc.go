// Package herenow is a Go client for the herenow presence server: who is
// online in a space, when everyone else was last seen, online friends and
// counts, live presence events, and a contact list's live status.
//
// It is the standard library only, and has five parts:
//
//   - [Client] covers the whole HTTP API of docs/API.md: heartbeats,
//     leaves, status and last seen (per space and anywhere), who's online
//     with cursor paging, counts, friends, space configuration, spaces,
//     history, erasure, WebSocket tokens and the operational endpoints.
//     Every call takes a [context.Context], is bounded by a timeout, and
//     reuses connections. Answers are typed structs; a refusal is an
//     [*Error] carrying the problem's stable Code, the HTTP Status and
//     Retry-After, for use with [errors.As].
//   - [Client.Events] and [Client.Watch] read the server's event streams
//     (Server-Sent Events) and resume after a dropped stream: they
//     reconnect with backoff and hand over the fresh picture the server
//     opens every stream with, marked Reconnected, which replaces what the
//     reader knew (the server keeps no replay log, so a fresh picture is
//     the resume mechanism, as after lag).
//   - [Heartbeater] and [Middleware] make a net/http site's visitors
//     present: each request heartbeats its user (or a guest by IP or
//     cookie), debounced to at most one heartbeat per member per interval,
//     sent in batches (gathered for a flush interval) by a background
//     goroutine so no response waits for herenow, and when herenow fails
//     the site logs once per interval and drives on; Close is bounded.
//   - [Presence] is the queries a page renders (who's online, a member
//     online, a user's last seen, the count): each answers a view that is
//     known or unknown, never an error, through the [Breaker] shared per
//     process and server, so while herenow is down or hung a page pays at
//     most one timeout and then answers "unknown" at once until the
//     breaker's back-off ends and one probe goes through.
//   - [WebhookVerifier] and [WebhookHandler] receive herenow's webhooks:
//     the Standard Webhooks signature (webhook-id, webhook-timestamp,
//     webhook-signature) checked in constant time against one or more
//     whsec_ secrets, the timestamp within a tolerance (5 minutes), the
//     body parsed into a typed [WebhookBatch]; refusals are a
//     [*WebhookVerificationError] or a [*WebhookPayloadError]
//     ([ErrWebhookVerification], [ErrWebhookPayload] for errors.Is). A
//     [Deduplicator] recognises redelivered events by id.
//
// What it is not: a WebSocket client. Browsers are present through
// /v1/ws with the server's /client.js; a Go backend mints their tokens
// with [Client.MintToken].
//
// Every process-local structure is bounded: the debounce table
// ([HeartbeaterOptions.MaxTracked]), the send queue
// ([HeartbeaterOptions.QueueSize], drops counted), the size of a response
// ([Options.MaxResponseBytes]) and of one stream event
// ([StreamOptions.MaxEventBytes]), a webhook request's body
// ([MaxWebhookBodyBytes]) and headers, and the [Deduplicator]'s memory.
package herenow
