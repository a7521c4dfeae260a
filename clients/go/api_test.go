package herenow

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestHeartbeatThenOnlineListsTheMember(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	res, err := c.Heartbeat(cx, sp, Heartbeat{ID: "ada", Meta: Meta{"name": "Ada Lovelace"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 1 || res.Joined != 1 {
		t.Fatalf("first heartbeat: %+v", res)
	}
	res, err = c.Heartbeat(cx, sp, Heartbeat{ID: "ada"})
	if err != nil || res.Accepted != 1 || res.Joined != 0 {
		t.Fatalf("second heartbeat: %+v %v", res, err)
	}
	page, err := c.Online(cx, sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Members) != 1 || page.Members[0].ID != "ada" || page.Members[0].Kind != KindUser ||
		page.Members[0].Status != StatusOnline || page.Members[0].LastSeenMs == nil {
		t.Fatalf("online: %+v", page)
	}
	if page.NextCursor != "" || page.WindowMs != 600_000 || page.Order != OrderRecent {
		t.Fatalf("page: cursor %q window %d order %q", page.NextCursor, page.WindowMs, page.Order)
	}
	m, err := c.Member(cx, sp, User("ada"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != StatusOnline || m.Meta["name"] != "Ada Lovelace" {
		t.Fatalf("member: %+v", m)
	}
	if seen, ok := m.LastSeen(); !ok || time.Since(seen) > time.Minute || time.Until(seen) > time.Minute {
		t.Fatalf("last seen %v %v", seen, ok)
	}
}

func TestUnknownMemberIsOfflineNeverSeen(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	m, err := c.Member(cx, sp, User("nobody"))
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != "nobody" || m.Status != StatusOffline || m.LastSeenMs != nil {
		t.Fatalf("unknown member: %+v", m)
	}
	if _, ok := m.LastSeen(); ok {
		t.Fatal("LastSeen of a never-seen member is ok")
	}
	// A guest with a user's id is another member.
	if _, err := c.Heartbeat(cx, sp, Heartbeat{ID: "twin"}); err != nil {
		t.Fatal(err)
	}
	g, err := c.Member(cx, sp, Guest("twin"))
	if err != nil || g.Kind != KindGuest || g.Status != StatusOffline {
		t.Fatalf("guest twin: %+v %v", g, err)
	}
}

func TestBatchHeartbeatsCountAndStatusInOrder(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	res, err := c.Heartbeats(cx, sp, []Heartbeat{{ID: "a"}, {ID: "b"}, {ID: "10.0.0.7", Kind: KindGuest}})
	if err != nil || res.Accepted != 3 || res.Joined != 3 {
		t.Fatalf("batch: %+v %v", res, err)
	}
	n, err := c.Count(cx, sp, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if n != (Count{Users: 2, Guests: 1, Total: 3, WindowMs: 300_000}) {
		t.Fatalf("count: %+v", n)
	}
	st, err := c.Status(cx, sp, []MemberRef{User("b"), User("nobody"), Guest("10.0.0.7"), User("a")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range st {
		got = append(got, string(m.Kind)+":"+m.ID+":"+string(m.Status))
	}
	want := "user:b:online user:nobody:offline guest:10.0.0.7:online user:a:online"
	if strings.Join(got, " ") != want {
		t.Fatalf("status: %v", got)
	}
	all, err := c.Online(cx, sp, &OnlineOptions{Kinds: All, Order: OrderID})
	if err != nil || len(all.Members) != 3 || all.Members[0].ID != "10.0.0.7" {
		t.Fatalf("kind=all order=id: %+v %v", all, err)
	}
	guests, err := c.Online(cx, sp, &OnlineOptions{Kinds: Guests})
	if err != nil || len(guests.Members) != 1 || guests.Members[0].Kind != KindGuest {
		t.Fatalf("guests: %+v %v", guests, err)
	}
}

func TestOnlinePagesWithCursorNeitherSkipNorRepeat(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	var hbs []Heartbeat
	for _, id := range []string{"m1", "m2", "m3", "m4", "m5"} {
		hbs = append(hbs, Heartbeat{ID: id})
	}
	if _, err := c.Heartbeats(cx, sp, hbs); err != nil {
		t.Fatal(err)
	}
	first, err := c.Online(cx, sp, &OnlineOptions{Limit: 2, Order: OrderID})
	if err != nil || len(first.Members) != 2 || first.NextCursor == "" {
		t.Fatalf("first page: %+v %v", first, err)
	}
	var seen []string
	pages := 0
	err = c.ForEachOnline(cx, sp, &OnlineOptions{Limit: 2, Order: OrderID}, func(m Member) error {
		seen = append(seen, m.ID)
		pages++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, ",") != "m1,m2,m3,m4,m5" {
		t.Fatalf("paged: %v", seen)
	}
	stop := errors.New("enough")
	n := 0
	err = c.ForEachOnline(cx, sp, &OnlineOptions{Limit: 2}, func(Member) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Fatalf("ForEachOnline stops at fn's error: %v after %d", err, n)
	}
	if _, err := c.Online(cx, sp, &OnlineOptions{Cursor: "not-a-cursor"}); err == nil {
		t.Fatal("a forged cursor was accepted")
	} else {
		mustProblem(t, err, 400, CodeBadCursor)
	}
}

func TestLeaveRemembersLastSeen(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	if _, err := c.Heartbeat(cx, sp, Heartbeat{ID: "grace"}); err != nil {
		t.Fatal(err)
	}
	left, err := c.Leave(cx, sp, []MemberRef{User("grace"), User("never-here")})
	if err != nil || left != 1 {
		t.Fatalf("leave: %d %v", left, err)
	}
	m, err := c.Member(cx, sp, User("grace"))
	if err != nil || m.Status != StatusOffline || m.LastSeenMs == nil {
		t.Fatalf("after leave: %+v %v", m, err)
	}
	page, err := c.Online(cx, sp, nil)
	if err != nil || len(page.Members) != 0 {
		t.Fatalf("a member who left is listed: %+v %v", page, err)
	}
	if _, err := c.Leave(cx, sp, nil); err == nil {
		t.Fatal("an empty leave was accepted")
	} else {
		mustProblem(t, err, 400, CodeEmptyBatch)
	}
}

func TestOnlineAmongAnAdHocList(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	if _, err := c.Heartbeats(cx, sp, []Heartbeat{{ID: "x"}, {ID: "y"}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.OnlineAmong(cx, sp, []MemberRef{User("x"), User("z")}, &ListOptions{Window: time.Minute, Limit: 10})
	if err != nil || len(got) != 1 || got[0].ID != "x" {
		t.Fatalf("online among: %+v %v", got, err)
	}
	if _, err := c.OnlineAmong(cx, sp, []MemberRef{User("x")}, &ListOptions{Limit: 1001}); err == nil {
		t.Fatal("limit 1001 accepted")
	} else {
		mustProblem(t, err, 400, CodeBadLimit)
	}
}

func TestFriendsSetAddRemoveAndOnline(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	ann, bob, cy, dee := uid(t, "ann"), uid(t, "bob"), uid(t, "cy"), uid(t, "dee")
	if n, err := c.SetFriends(cx, ann, []string{bob, cy}); err != nil || n != 2 {
		t.Fatalf("set: %d %v", n, err)
	}
	if n, err := c.AddFriends(cx, ann, []string{dee}); err != nil || n != 3 {
		t.Fatalf("add: %d %v", n, err)
	}
	if n, err := c.RemoveFriends(cx, ann, []string{bob}); err != nil || n != 2 {
		t.Fatalf("remove: %d %v", n, err)
	}
	fs, err := c.Friends(cx, ann)
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(fs)
	want := []string{cy, dee}
	sort.Strings(want)
	if strings.Join(fs, ",") != strings.Join(want, ",") {
		t.Fatalf("friends: %v, want %v", fs, want)
	}
	if _, err := c.Heartbeats(cx, sp, []Heartbeat{{ID: cy}, {ID: bob}}); err != nil {
		t.Fatal(err)
	}
	on, err := c.OnlineFriends(cx, sp, ann, &ListOptions{Window: 10 * time.Minute, Limit: 50})
	if err != nil || len(on) != 1 || on[0].ID != cy {
		t.Fatalf("online friends: %+v %v", on, err)
	}
	if n, err := c.SetFriends(cx, ann, nil); err != nil || n != 0 {
		t.Fatalf("clear: %d %v", n, err)
	}
	if fs, err := c.Friends(cx, ann); err != nil || len(fs) != 0 {
		t.Fatalf("cleared friends: %v %v", fs, err)
	}
}

func TestSpaceConfigReadWriteAndRefusal(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	cfg, err := c.SpaceConfig(cx, sp)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OnlineMs != 60_000 || cfg.AwayMs != 300_000 || cfg.WindowMs != 600_000 || cfg.RetentionMs != 900_000 ||
		cfg.RememberMs == nil || *cfg.RememberMs != 30*24*3600*1000 || cfg.RememberGuests == nil || *cfg.RememberGuests ||
		cfg.GraceMs == nil || *cfg.GraceMs != 5000 {
		t.Fatalf("defaults: %+v", cfg)
	}
	set, err := c.SetSpaceConfig(cx, sp, SpaceConfig{OnlineMs: 30_000, AwayMs: 120_000, WindowMs: 300_000, RetentionMs: 600_000})
	if err != nil {
		t.Fatal(err)
	}
	if set.OnlineMs != 30_000 || set.WindowMs != 300_000 || set.RememberMs == nil || *set.RememberMs != *cfg.RememberMs {
		t.Fatalf("set (remember kept): %+v", set)
	}
	yes, day := true, int64(86_400_000)
	set, err = c.SetSpaceConfig(cx, sp, SpaceConfig{OnlineMs: 30_000, AwayMs: 120_000, WindowMs: 300_000, RetentionMs: 600_000, RememberMs: &day, RememberGuests: &yes})
	if err != nil || *set.RememberMs != day || !*set.RememberGuests {
		t.Fatalf("set remember: %+v %v", set, err)
	}
	again, err := c.SpaceConfig(cx, sp)
	if err != nil || again.AwayMs != 120_000 || *again.RememberMs != day {
		t.Fatalf("read back: %+v %v", again, err)
	}
	_, err = c.SetSpaceConfig(cx, sp, SpaceConfig{OnlineMs: 500_000, AwayMs: 1_000, WindowMs: 1_000, RetentionMs: 2_000})
	mustProblem(t, err, 400, CodeBadConfig)
}

func TestSpacesListAndPaging(t *testing.T) {
	c, cx := client(t), ctx(t)
	base := space(t)
	a, b := base+"-a", base+"-b"
	if _, err := c.Heartbeats(cx, a, []Heartbeat{{ID: "u1"}, {ID: "g1", Kind: KindGuest}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(cx, b, Heartbeat{ID: "u2"}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Spaces(cx, &SpacesOptions{After: base, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Space != a || got[1].Space != b {
		t.Fatalf("spaces after %s: %+v", base, got)
	}
	if got[0].Members.Users != 1 || got[0].Members.Guests != 1 || got[1].Members.Users != 1 {
		t.Fatalf("counts: %+v", got)
	}
	next, err := c.Spaces(cx, &SpacesOptions{After: a, Limit: 1})
	if err != nil || len(next) != 1 || next[0].Space != b {
		t.Fatalf("next page: %+v %v", next, err)
	}
	if all, err := c.Spaces(cx, nil); err != nil || len(all) == 0 {
		t.Fatalf("first page: %d %v", len(all), err)
	}
}

func TestHistory(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	if _, err := c.Heartbeat(cx, sp, Heartbeat{ID: "h"}); err != nil {
		t.Fatal(err)
	}
	h, err := c.History(cx, sp, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.IntervalMs != 10_000 {
		t.Fatalf("interval: %+v", h)
	}
	for _, s := range h.Samples {
		if s.AtMs <= 0 || s.Users < 0 || s.Guests < 0 {
			t.Fatalf("sample: %+v", s)
		}
	}
	if _, err := c.History(cx, sp, 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	_, err = c.History(cx, sp, 25*time.Hour)
	mustProblem(t, err, 400, CodeBadRange)
}

func TestUsersLastSeenAnywhere(t *testing.T) {
	c, cx := client(t), ctx(t)
	older, newer := space(t), space(t)
	u := uid(t, "wanderer")
	past := time.Now().Add(-30 * time.Second).UnixMilli()
	if _, err := c.Heartbeat(cx, older, Heartbeat{ID: u, AtMs: past}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(cx, newer, Heartbeat{ID: u}); err != nil {
		t.Fatal(err)
	}
	s, err := c.User(cx, u)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID != u || s.Status != StatusOnline || s.Space != newer || s.LastSeenMs == nil || *s.LastSeenMs <= past {
		t.Fatalf("user: %+v", s)
	}
	nobody := uid(t, "nobody")
	all, err := c.UsersStatus(cx, []string{nobody, u})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].ID != nobody || all[0].LastSeenMs != nil || all[0].Space != "" ||
		all[0].Status != StatusOffline || all[1].ID != u || all[1].Space != newer {
		t.Fatalf("users status: %+v", all)
	}
	_, err = c.UsersStatus(cx, nil)
	mustProblem(t, err, 400, CodeEmptyBatch)
	_, err = c.UsersStatus(cx, []string{"ok", "bad\x07id"})
	mustProblem(t, err, 400, CodeBadMemberID)
	// The user called "status" is a user like any other.
	if s, err := c.User(cx, "status"); err != nil || s.ID != "status" {
		t.Fatalf("the user named status: %+v %v", s, err)
	}
}

func TestEraseUserForgetsEverywhere(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	eve, x, y := uid(t, "eve"), uid(t, "x"), uid(t, "y")
	if _, err := c.Heartbeat(cx, sp, Heartbeat{ID: eve}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetFriends(cx, eve, []string{x}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetFriends(cx, y, []string{eve, x}); err != nil {
		t.Fatal(err)
	}
	er, err := c.EraseUser(cx, eve)
	if err != nil {
		t.Fatal(err)
	}
	if er.Presence != 1 || !er.FriendSet || er.ListedBy != 1 {
		t.Fatalf("erasure: %+v", er)
	}
	s, err := c.User(cx, eve)
	if err != nil || s.LastSeenMs != nil || s.Status != StatusOffline {
		t.Fatalf("after erasure: %+v %v", s, err)
	}
	if fs, err := c.Friends(cx, y); err != nil || len(fs) != 1 || fs[0] != x {
		t.Fatalf("y's friends after erasure: %v %v", fs, err)
	}
	if m, err := c.Member(cx, sp, User(eve)); err != nil || m.LastSeenMs != nil {
		t.Fatalf("member after erasure: %+v %v", m, err)
	}
	again, err := c.EraseUser(cx, eve)
	if err != nil || again != (Erasure{}) {
		t.Fatalf("second erasure: %+v %v", again, err)
	}
}

func TestMintToken(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	before := time.Now()
	tok, err := c.MintToken(cx, TokenRequest{User: "ann", Spaces: []string{sp}, TTL: 90 * time.Second, Watch: WatchAny})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(tok.Token, ".") != 2 {
		t.Fatalf("not a JWT: %q", tok.Token)
	}
	exp := time.UnixMilli(tok.ExpiresAtMs)
	if exp.Before(before.Add(80*time.Second)) || exp.After(before.Add(100*time.Second)) {
		t.Fatalf("expiry %v for a 90 s token minted at %v", exp, before)
	}
	guest, err := c.MintToken(cx, TokenRequest{User: "10.1.2.3", Kind: KindGuest, Spaces: []string{"*"}})
	if err != nil || guest.Token == "" {
		t.Fatalf("guest token: %+v %v", guest, err)
	}
	_, err = c.MintToken(cx, TokenRequest{User: "ann", Spaces: nil})
	mustProblem(t, err, 400, CodeBadSpaces)
	_, err = c.MintToken(cx, TokenRequest{User: "ann", Spaces: []string{sp}, TTL: 48 * time.Hour})
	mustProblem(t, err, 400, CodeBadTTL)
	_, err = c.MintToken(cx, TokenRequest{User: "ann", Spaces: []string{"bad space"}})
	mustProblem(t, err, 400, CodeBadSpaceName)
}

func TestOperationalEndpoints(t *testing.T) {
	c, cx := client(t), ctx(t)
	if err := c.Healthy(cx); err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(cx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(cx, space(t), Heartbeat{ID: "metric"}); err != nil {
		t.Fatal(err)
	}
	m, err := c.Metrics(cx)
	if err != nil || !strings.Contains(m, "herenow_heartbeats_total") {
		t.Fatalf("metrics: %v %.200s", err, m)
	}
	doc, err := c.OpenAPI(cx)
	if err != nil || !strings.Contains(string(doc), "/v1/spaces/{space}/heartbeats") {
		t.Fatalf("openapi: %v %.100s", err, doc)
	}
}

// The OpenAPI document names every operation; this client must call each
// one. A new endpoint on the server fails this test until it is covered.
func TestEveryOpenAPIPathIsCovered(t *testing.T) {
	c, cx := client(t), ctx(t)
	doc, err := c.OpenAPI(cx)
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{
		"get /v1/spaces": true, "post /v1/spaces/{space}/heartbeat": true,
		"post /v1/spaces/{space}/heartbeats": true, "post /v1/spaces/{space}/leave": true,
		"get /v1/spaces/{space}/members/{id}": true, "post /v1/spaces/{space}/status": true,
		"get /v1/spaces/{space}/online": true, "get /v1/spaces/{space}/count": true,
		"post /v1/spaces/{space}/online-among": true, "get /v1/spaces/{space}/friends/{user}/online": true,
		"get /v1/spaces/{space}/config": true, "put /v1/spaces/{space}/config": true,
		"get /v1/spaces/{space}/history": true, "get /v1/spaces/{space}/events": true,
		"get /v1/friends/{user}": true, "put /v1/friends/{user}": true,
		"post /v1/friends/{user}/add": true, "post /v1/friends/{user}/remove": true,
		"get /v1/users/{id}": true, "delete /v1/users/{id}": true, "post /v1/users/status": true,
		"post /v1/tokens": true, "post /v1/watch": true,
		// The user called "status": the batch route's path, documented
		// apart; User and EraseUser call it for that id.
		"get /v1/users/status": true, "delete /v1/users/status": true,
		"get /healthz": true, "get /readyz": true, "get /metrics": true,
		"get /v1/webhooks": true,
		// The WebSocket is for browsers (/client.js); a Go backend mints
		// their tokens.
		"get /v1/ws": true,
	}
	var spec struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc, &spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Paths) == 0 {
		t.Fatal("no paths in the OpenAPI document")
	}
	operations := 0
	for path, ops := range spec.Paths {
		for method := range ops {
			switch method {
			case "get", "put", "post", "delete", "patch":
			default:
				continue
			}
			operations++
			if !covered[method+" "+path] {
				t.Errorf("%s %s is not covered by the Go client", strings.ToUpper(method), path)
			}
		}
	}
	if operations < 23 {
		t.Fatalf("only %d operations in the OpenAPI document", operations)
	}
}

func TestProblemsMapToTypedErrors(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	long := strings.Repeat("x", 300)
	_, err := c.Member(cx, sp, User(long))
	e := mustProblem(t, err, 400, CodeBadMemberID)
	if !strings.HasSuffix(e.Type, "/"+CodeBadMemberID) || e.Title == "" || e.Detail == "" || e.Retryable() {
		t.Fatalf("problem fields: %+v", e)
	}
	if e.Method != http.MethodGet || !strings.Contains(e.Path, "/members/") || !strings.Contains(e.Error(), "bad-member-id") {
		t.Fatalf("problem names the request: %+v / %v", e, e)
	}
	_, err = c.Heartbeat(cx, sp, Heartbeat{ID: long})
	mustProblem(t, err, 400, CodeBadMemberID)
	_, err = c.Heartbeats(cx, sp, nil)
	mustProblem(t, err, 400, CodeEmptyBatch)
	big := make([]Heartbeat, 10_001)
	for i := range big {
		big[i] = Heartbeat{ID: "b"}
	}
	_, err = c.Heartbeats(cx, sp, big)
	mustProblem(t, err, 400, CodeBatchTooLarge)
	_, err = c.Heartbeat(cx, "bad space!", Heartbeat{ID: "a"})
	mustProblem(t, err, 400, CodeBadSpaceName)
	_, err = c.Online(cx, sp, &OnlineOptions{Limit: 5000})
	mustProblem(t, err, 400, CodeBadLimit)
	_, err = c.Online(cx, sp, &OnlineOptions{Kinds: "robots"})
	mustProblem(t, err, 400, CodeBadKind)
	_, err = c.Online(cx, sp, &OnlineOptions{Order: "random"})
	mustProblem(t, err, 400, CodeBadOrder)
	_, err = c.Member(cx, sp, MemberRef{ID: "a", Kind: "robot"})
	mustProblem(t, err, 400, CodeBadKind)
	_, err = c.Heartbeat(cx, sp, Heartbeat{ID: "a", Meta: Meta{"blob": strings.Repeat("m", 2048)}})
	mustProblem(t, err, 400, CodeBadMetadata)
	_, err = c.Heartbeat(cx, sp, Heartbeat{ID: "a", AtMs: time.Now().Add(time.Hour).UnixMilli()})
	mustProblem(t, err, 400, CodeBadTime)
	_, err = c.Count(cx, sp, 48*time.Hour)
	mustProblem(t, err, 400, CodeBadWindow)
}

func TestIDsWithReservedCharactersRoundTrip(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	for _, id := range []string{"a/b", "c d?e#f", "100%", "é✓", "..", "x+y&z=1"} {
		if _, err := c.Heartbeat(cx, sp, Heartbeat{ID: id}); err != nil {
			t.Fatalf("heartbeat %q: %v", id, err)
		}
		m, err := c.Member(cx, sp, User(id))
		if err != nil || m.ID != id || m.Status != StatusOnline {
			t.Fatalf("member %q: %+v %v", id, m, err)
		}
		if _, err := c.SetFriends(cx, uid(t, "owner"), []string{id}); err != nil {
			t.Fatalf("friends with %q: %v", id, err)
		}
	}
	owner := "owner/with slash " + uid(t, "o")
	if _, err := c.SetFriends(cx, owner, []string{"a/b"}); err != nil {
		t.Fatal(err)
	}
	if on, err := c.OnlineFriends(cx, sp, owner, nil); err != nil || len(on) != 1 || on[0].ID != "a/b" {
		t.Fatalf("online friends of %q: %+v %v", owner, on, err)
	}
}

func TestInputsRefusedBeforeSending(t *testing.T) {
	c, sp, cx := client(t), space(t), ctx(t)
	checks := map[string]error{}
	_, checks["empty space"] = c.Heartbeat(cx, "", Heartbeat{ID: "a"})
	_, checks["empty id"] = c.Heartbeat(cx, sp, Heartbeat{})
	_, checks["empty member id"] = c.Member(cx, sp, MemberRef{})
	_, checks["negative window"] = c.Online(cx, sp, &OnlineOptions{Window: -time.Second})
	_, checks["negative limit"] = c.Online(cx, sp, &OnlineOptions{Limit: -1})
	_, checks["negative count window"] = c.Count(cx, sp, -time.Minute)
	_, checks["negative range"] = c.History(cx, sp, -time.Minute)
	_, checks["empty user"] = c.User(cx, "")
	_, checks["empty erase"] = c.EraseUser(cx, "")
	_, checks["empty friends owner"] = c.SetFriends(cx, "", []string{"a"})
	_, checks["negative ttl"] = c.MintToken(cx, TokenRequest{User: "a", Spaces: []string{sp}, TTL: -time.Second})
	_, checks["empty watch"] = c.Watch(cx, WatchRequest{}, nil)
	_, checks["empty events space"] = c.Events(cx, "", nil)
	var nilCtx context.Context
	_, checks["nil context"] = c.Count(nilCtx, sp, 0)
	for name, err := range checks {
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%s: want ErrInvalidInput, got %v", name, err)
		}
	}
	for _, bad := range []string{"ftp://x", "127.0.0.1:7700", "http://", "http://h/?q=1", "::"} {
		if _, err := New(Options{BaseURL: bad}); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("New(%q): %v", bad, err)
		}
	}
}

func TestAPIKeysMapToTypedErrors(t *testing.T) {
	a, sp, cx := auxServer(t), space(t), ctx(t)
	none := clientOf(t, a.url, Options{})
	_, err := none.Count(cx, sp, 0)
	mustProblem(t, err, 401, CodeMissingAPIKey)
	wrong := clientOf(t, a.url, Options{APIKey: "not-a-key"})
	_, err = wrong.Count(cx, sp, 0)
	mustProblem(t, err, 401, CodeUnknownAPIKey)
	read := clientOf(t, a.url, Options{APIKey: readKey})
	_, err = read.Heartbeat(cx, sp, Heartbeat{ID: "a"})
	mustProblem(t, err, 403, CodeInsufficientScope)
	_, err = read.EraseUser(cx, "a")
	mustProblem(t, err, 403, CodeInsufficientScope)
	write := clientOf(t, a.url, Options{APIKey: writeKey})
	if _, err := write.Heartbeat(cx, sp, Heartbeat{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if n, err := read.Count(cx, sp, 0); err != nil || n.Users != 1 {
		t.Fatalf("read key counts: %+v %v", n, err)
	}
	if _, err := read.Status(cx, sp, []MemberRef{User("a")}); err != nil {
		t.Fatalf("read key status (a read-only POST): %v", err)
	}
	if err := none.Healthy(cx); err != nil {
		t.Fatalf("healthz needs no key: %v", err)
	}
}

func TestRetryAfterOnServiceUnavailable(t *testing.T) {
	a, sp, cx := auxServer(t), space(t), ctx(t)
	c := clientOf(t, a.url, Options{APIKey: readKey})
	first, err := c.Events(cx, sp, &StreamOptions{NoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if ev, err := first.Next(); err != nil || ev.Type != EventSnapshot {
		t.Fatalf("first stream: %+v %v", ev, err)
	}
	_, err = c.Events(cx, sp, nil)
	e := mustProblem(t, err, 503, CodeTooManyStreams)
	if e.RetryAfter != 5*time.Second || !e.Retryable() {
		t.Fatalf("retry after: %+v", e)
	}
	// docs/API.md says /v1/watch needs the read scope; the server asks
	// for write (see the report), so this uses the write key.
	w := clientOf(t, a.url, Options{APIKey: writeKey})
	_, err = w.Watch(cx, WatchRequest{Users: []string{"a"}}, nil)
	mustProblem(t, err, 503, CodeTooManyStreams)
}

// A client keeps its connections: many calls, one TCP connection.
func TestConnectionsAreReused(t *testing.T) {
	p := newCutProxy(t, main_.url)
	c, sp, cx := clientOf(t, p.url(), Options{}), space(t), ctx(t)
	for i := 0; i < 20; i++ {
		if _, err := c.Heartbeat(cx, sp, Heartbeat{ID: "r"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Member(cx, sp, User("nobody")); err != nil {
			t.Fatal(err)
		}
	}
	// Refusals too: the problem body is read, so the connection stays.
	for i := 0; i < 5; i++ {
		_, err := c.Heartbeats(cx, sp, nil)
		mustProblem(t, err, 400, CodeEmptyBatch)
	}
	if n := p.accepted.Load(); n != 1 {
		t.Fatalf("%d connections for 45 sequential calls", n)
	}
}
