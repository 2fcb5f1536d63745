package redfish

// This file: the reset and press windows of every system, kept per BMC
// endpoint and system for the whole process, so that every Controller
// for the same system (the Pool's next login after an eviction, a retired
// or abandoned session, a Target change, Pool.Forget and a new Target:
// whatever its login, credentials or Target) sees the same windows.

import (
	"strings"
	"sync"
	"time"
)

// windows holds, per BMC endpoint and system, the windows of its resets
// and presses (sysWindows), so that a new Controller for the same system
// keeps them (TestReview36l_LostLandingWindowDiesWithItsController,
// TestReview35ad_EvictedSessionForgetsPressWindowPoweringFencedHostOn,
// TestReview35ad_ForgottenHostForgetsResetWindowPoweringFencedHostOn).
// Entries whose windows all ended are dropped (swept once the registry
// doubled since the last sweep, and at a Controller's Close), so that
// it does not grow with hosts that came and went. It is bounded without
// forgetting an open window: once full, the entries whose windows ended
// are dropped; if it is still full, the entry whose windows end first is
// dropped and the registry's floor takes it: every system it holds no
// entry for counts as inside the latest dropped window, from the latest
// dropped start until the latest dropped end, and so does a system's new
// entry while the floor is open (TestReview36m_LostWindowEvictedByOtherBMCs).
// The bound holds every system of a 65,536-host wave of resets inside
// one window (about 7 minutes) without the floor (each entry a few
// hundred bytes).
var windows = windowRegistry{max: 1 << 16}

type windowRegistry struct {
	mu  sync.Mutex
	max int
	m   map[string]*sysWindows
	// floor is what a system without an entry counts as: inside a lost
	// reset's window from the latest start until the latest end of the
	// open entries dropped (zero: none).
	floor window
	// sweepAt: the size at which the next note sweeps the ended entries.
	sweepAt int
}

// window is a span from at until until (zero: none).
type window struct{ at, until time.Time }

func (w window) merge(o window) window {
	return window{at: later(w.at, o.at), until: later(w.until, o.until)}
}

// sysWindows are one system's windows. Each end (until) is computed with
// the settings of the Controller that noted it; a Controller checks them
// with its own settings too (resetQuiet, pressSafe).
type sysWindows struct {
	// reset: the last reset POST handed to the HTTP client, from when it
	// returned (or began, the later) until StaleReads after.
	reset window
	// lost: the last reset POST that got no HTTP answer, or was queued
	// (202) and is no longer the system's latest reset before its task
	// was read ended, from its return until LostLanding + SoftTimeout +
	// StaleReads after.
	lost window
	// queued: the last reset answered 202 Accepted, while it is the
	// system's latest reset and its task was not read ended: its window
	// is a lost one's; monitor names its task (empty: none), press says
	// it was a press for a power-off.
	queued        window
	queuedMonitor string
	queuedPress   bool
	// press: the last press for a power-off that may have pressed, from
	// its return until SoftTimeout + StaleReads after; pushOK: answered
	// with success (or its task read ended); pushOverAt: when a read
	// begun StaleReads after it completed an unbroken run of Off reads
	// OffSettle long (its shutdown over), pushOverUntil StaleReads after;
	// pushOffRun: when the current run began (zero: none).
	press         window
	pushOK        bool
	pushOverAt    time.Time
	pushOverUntil time.Time
	pushOffRun    time.Time
}

// end is when the last of w's windows ends.
func (w *sysWindows) end() time.Time {
	e := later(w.reset.until, w.lost.until)
	e = later(e, w.queued.until)
	e = later(e, w.press.until)
	return later(e, w.pushOverUntil)
}

// start is when the latest of w's windows began.
func (w *sysWindows) start() time.Time {
	s := later(w.reset.at, w.lost.at)
	s = later(s, w.queued.at)
	return later(s, w.press.at)
}

// windowKey names endpoint's system in the registry: by the endpoint's
// Origin and the system's URI without a trailing slash, so that every
// spelling of one BMC and system is one key
// (TestReview35ae_RespelledEndpointForgetsResetWindowPoweringFencedHostOn).
func windowKey(endpoint, system string) string { return originKey(originOf(endpoint), system) }

// originKey is windowKey of an endpoint whose Origin is origin.
func originKey(origin, system string) string { return origin + "\x00" + strings.TrimRight(system, "/") }

// resetOutcome is what a reset POST handed to the HTTP client left: when
// it began and returned, and its windows' lengths in the settings of the
// Controller that sent it.
type resetOutcome struct {
	began, returned time.Time
	stale, lostSpan time.Duration // StaleReads; LostLanding + SoftTimeout + StaleReads
	pressSpan       time.Duration // SoftTimeout + StaleReads
	// lost: no HTTP answer (the BMC may still apply it); queued: answered
	// 202 Accepted, its task monitor monitor (empty: none named).
	lost, queued bool
	monitor      string
	// offPress: a press for a power-off that may have pressed (not
	// refused for its credentials).
	offPress bool
}

// entry returns key's entry, made if missing at now (the caller holds
// r.mu): a new entry inherits the floor while it is open.
func (r *windowRegistry) entry(key string, now time.Time) *sysWindows {
	if r.m == nil {
		r.m = make(map[string]*sysWindows)
	}
	if w, ok := r.m[key]; ok {
		return w
	}
	r.makeRoom(now)
	w := &sysWindows{}
	if now.Before(r.floor.until) {
		w.lost = r.floor // it counted as inside the floor: it still does
	}
	r.m[key] = w
	return w
}

// makeRoom sweeps the entries whose windows ended by now once the
// registry doubled since the last sweep (or is full), and, if it is
// still full, drops the entry whose windows end first into the floor.
func (r *windowRegistry) makeRoom(now time.Time) {
	if len(r.m) >= r.sweepAt || len(r.m) >= r.max {
		live := make(map[string]*sysWindows, len(r.m))
		for k, w := range r.m {
			if w.end().After(now) {
				live[k] = w
			}
		}
		r.m = live // a new map: a swept one keeps its buckets
		r.sweepAt = max(64, 2*len(r.m))
	}
	if len(r.m) >= r.max {
		var first string
		for k, w := range r.m {
			if first == "" || w.end().Before(r.m[first].end()) {
				first = k
			}
		}
		w := r.m[first]
		delete(r.m, first)
		r.floor = r.floor.merge(window{at: w.start(), until: w.end()})
	}
}

// noteReset records o for key.
func (r *windowRegistry) noteReset(key string, o resetOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.entry(key, o.returned)
	at := later(o.began, o.returned)
	w.reset = w.reset.merge(window{at: at, until: at.Add(o.stale)})
	if !w.queued.at.IsZero() {
		// An earlier queued reset is no longer the latest: it stays a
		// lost one, whatever its task is read to say later.
		w.lost = w.lost.merge(w.queued)
		w.queued, w.queuedMonitor, w.queuedPress = window{}, "", false
	}
	span := window{at: at, until: at.Add(o.lostSpan)}
	switch {
	case o.lost:
		w.lost = w.lost.merge(span)
	case o.queued:
		w.queued, w.queuedMonitor, w.queuedPress = span, o.monitor, o.offPress
	}
	if o.offPress {
		w.press = window{at: at, until: later(w.press.until, at.Add(o.pressSpan))}
		w.pushOK = !o.lost && !o.queued
		w.pushOverAt, w.pushOverUntil, w.pushOffRun = time.Time{}, time.Time{}, time.Time{}
	}
}

// note records, for key, a lost reset that returned at, whose window ends
// at until.
func (r *windowRegistry) note(key string, at, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.entry(key, at)
	w.lost = w.lost.merge(window{at: at, until: until})
}

// taskEnded records that key's task monitor was read ended at: if it is
// the task of key's latest reset (queued), that reset reached the
// hardware by then, and its windows count from then as an answered
// reset's (the settings' lengths as in resetOutcome).
func (r *windowRegistry) taskEnded(key, monitor string, at time.Time, stale, pressSpan time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.m[key]
	if !ok || monitor == "" || w.queuedMonitor != monitor || at.Before(w.queued.at) {
		return
	}
	w.reset = w.reset.merge(window{at: at, until: at.Add(stale)})
	if w.queuedPress {
		w.press = window{at: at, until: later(w.press.until, at.Add(pressSpan))}
		w.pushOK = true
		w.pushOverAt, w.pushOverUntil, w.pushOffRun = time.Time{}, time.Time{}, time.Time{}
	}
	w.queued, w.queuedMonitor, w.queuedPress = window{}, "", false
}

// observe records a read of key's system begun at sent and answered at
// now: off, whether it read Off. Taken StaleReads (stale) after a press
// that was answered, an unbroken run of Off reads OffSettle (settle)
// long shows the hardware off after it: its shutdown is over. (A BMC may
// say Off up to OffSettle before the hardware is off.) A system without
// an entry gets none.
func (r *windowRegistry) observe(key string, off bool, sent, now time.Time, stale, settle time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.m[key]
	if !ok {
		return
	}
	if !off {
		w.pushOffRun = time.Time{}
		return
	}
	if w.pushOK && w.pushOverAt.IsZero() && sent.Sub(w.press.at) >= stale {
		if w.pushOffRun.IsZero() {
			w.pushOffRun = sent
		}
		if sent.Sub(w.pushOffRun) >= settle {
			w.pushOverAt, w.pushOverUntil = now, now.Add(stale)
		}
	}
}

// get returns a copy of key's windows; for a key without an entry, the
// floor as a lost reset's window.
func (r *windowRegistry) get(key string) sysWindows {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.m[key]; ok {
		return *w
	}
	return sysWindows{lost: r.floor}
}

// dropEnded drops key's entry if its windows all ended by now.
func (r *windowRegistry) dropEnded(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.m[key]; ok && !w.end().After(now) {
		delete(r.m, key)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
