package redfish

import (
	"sync"
	"time"
)

// lostWindows holds, per BMC endpoint and system, when the last reset POST
// that got no HTTP answer returned (Controller.lostReset), so that a new
// Controller for the same system (the Pool's next login after a retired
// or abandoned session, or after Pool.Forget) keeps its window
// (TestReview36l_LostLandingWindowDiesWithItsController). It is bounded:
// once full, the entry whose window ends first is dropped.
var lostWindows = lostRegistry{max: 4096}

type lostRegistry struct {
	mu  sync.Mutex
	max int
	m   map[string]lostEntry
}

// lostEntry is a lost reset's return and when its window ends.
type lostEntry struct{ at, until time.Time }

func lostKey(endpoint, system string) string { return endpoint + "\x00" + system }

// note records a lost reset that returned at, whose window ends at until.
func (r *lostRegistry) note(key string, at, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[string]lostEntry)
	}
	if e, ok := r.m[key]; ok && !at.After(e.at) {
		return
	}
	if _, ok := r.m[key]; !ok && len(r.m) >= r.max {
		var first string
		for k, e := range r.m {
			if first == "" || e.until.Before(r.m[first].until) {
				first = k
			}
		}
		delete(r.m, first)
	}
	r.m[key] = lostEntry{at: at, until: until}
}

// last returns the return of the last lost reset of key (zero if none).
func (r *lostRegistry) last(key string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[key].at
}
