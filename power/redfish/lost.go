package redfish

import (
	"sync"
	"time"
)

// lostWindows holds, per BMC endpoint and system, when the last reset POST
// that got no HTTP answer returned (Controller.lostReset) and when its
// window ends, so that a new Controller for the same system (the Pool's
// next login after a retired or abandoned session, or after Pool.Forget)
// keeps its window (TestReview36l_LostLandingWindowDiesWithItsController).
// It is bounded without forgetting an open window: once full, the entries
// whose window ended are dropped; if it is still full, the entry whose
// window ends first is dropped and the registry's floor takes it: every
// system it holds no entry for counts as inside the latest dropped
// window, from the latest dropped return until the latest dropped window
// end (TestReview36m_LostWindowEvictedByOtherBMCs).
var lostWindows = lostRegistry{max: 4096}

type lostRegistry struct {
	mu  sync.Mutex
	max int
	m   map[string]lostEntry
	// floor is what a system without an entry counts as: the latest
	// return and window end of the open entries dropped (zero: none).
	floor lostEntry
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
	if e, ok := r.m[key]; ok {
		r.m[key] = lostEntry{at: later(e.at, at), until: later(e.until, until)}
		return
	}
	if len(r.m) >= r.max {
		for k, e := range r.m {
			if !e.until.After(at) {
				delete(r.m, k) // its window ended
			}
		}
	}
	if len(r.m) >= r.max {
		var first string
		for k, e := range r.m {
			if first == "" || e.until.Before(r.m[first].until) {
				first = k
			}
		}
		e := r.m[first]
		delete(r.m, first)
		r.floor = lostEntry{at: later(r.floor.at, e.at), until: later(r.floor.until, e.until)}
	}
	r.m[key] = lostEntry{at: at, until: until}
}

// last returns the return of the last lost reset of key and when its
// window ends (zero if none); for a key without an entry, the floor.
func (r *lostRegistry) last(key string) lostEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[key]; ok {
		return e
	}
	return r.floor
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
