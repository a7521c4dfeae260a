package herenow

import "sort"

// WatchState is a contact list's current picture, kept from a
// [WatchStream]'s events with Apply: watched users by id. A resync (after
// lag or a reconnect) replaces the picture once its last page is in, so
// nobody blinks out between pages. It is bounded by what the server
// watches (5,000 users per stream). Not safe for concurrent use.
type WatchState struct {
	users map[string]WatchedUser
	// next collects a resync's pages until the last one.
	next map[string]WatchedUser
}

// NewWatchState makes an empty picture.
func NewWatchState() *WatchState {
	return &WatchState{users: make(map[string]WatchedUser)}
}

// Apply folds one event into the picture and reports which users' status
// changed (as the stream's order says; for a resync, those whose status
// differs from before, and those that are gone).
func (s *WatchState) Apply(ev WatchEvent) (changed []string) {
	switch ev.Type {
	case WatchWatching:
		page := ev.Watching
		if page == nil {
			return nil
		}
		if !page.Resync {
			for _, u := range page.Users {
				if old, ok := s.users[u.ID]; !ok || old.Status != u.Status {
					changed = append(changed, u.ID)
				}
				s.users[u.ID] = u
			}
			return changed
		}
		if s.next == nil {
			s.next = make(map[string]WatchedUser, len(s.users))
		}
		for _, u := range page.Users {
			s.next[u.ID] = u
		}
		if !page.Last {
			return nil
		}
		for id, u := range s.next {
			if old, ok := s.users[id]; !ok || old.Status != u.Status {
				changed = append(changed, id)
			}
		}
		for id := range s.users {
			if _, ok := s.next[id]; !ok {
				changed = append(changed, id)
			}
		}
		s.users, s.next = s.next, nil
		sort.Strings(changed)
		return changed
	case WatchStatus:
		if ev.Status == nil {
			return nil
		}
		u := *ev.Status
		if s.next != nil {
			s.next[u.ID] = u
		}
		s.users[u.ID] = u
		return []string{u.ID}
	case WatchUnwatched:
		for _, id := range ev.Unwatched {
			if s.next != nil {
				delete(s.next, id)
			}
			if _, ok := s.users[id]; ok {
				delete(s.users, id)
				changed = append(changed, id)
			}
		}
		return changed
	}
	return nil
}

// User answers one watched user's state.
func (s *WatchState) User(id string) (WatchedUser, bool) {
	u, ok := s.users[id]
	return u, ok
}

// Users answers every watched user, by id.
func (s *WatchState) Users() []WatchedUser {
	out := make([]WatchedUser, 0, len(s.users))
	for _, u := range s.users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Len is how many users are watched.
func (s *WatchState) Len() int { return len(s.users) }
