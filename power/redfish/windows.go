package redfish

// This file: the reset and press windows of every system, kept per BMC
// endpoint and system for the whole process, so that every Controller
// for the same system (the Pool's next login after an eviction, a retired
// or abandoned session, a Target change, Pool.Forget and a new Target:
// whatever its login, credentials or Target) sees the same windows.

import (
	"container/heap"
	"strings"
	"sync"
	"time"
)

// windows holds, per BMC endpoint (its Origin) and system, the windows
// of its resets and presses (sysWindows), so that a new Controller for
// the same system keeps them (TestReview36l_LostLandingWindowDiesWithItsController,
// TestReview35ad_EvictedSessionForgetsPressWindowPoweringFencedHostOn,
// TestReview35ad_ForgottenHostForgetsResetWindowPoweringFencedHostOn,
// TestReview35ae_RespelledEndpointForgetsResetWindowPoweringFencedHostOn).
// A record is kept until its windows all ended, measured with the
// settings of the Controller that noted each and with the longest
// settings any Controller of the process has used (span: a Controller
// checks a window with its own settings too,
// TestReview35ae_CloseDropsWindowTheNextControllerStillNeeds), and goes
// then: a min-heap of the records by that end lets every operation pop
// up to expireBatch ended records (O(log n) each), so that the registry
// does not keep hosts that came and went
// (TestReview35ae_WaveOfForgottenHostsStaysInRegistry) and no operation
// scans it (TestReview35ae_FullWindowRegistryCostsAFullScanPerReset).
// It is bounded without forgetting an open window: once full, the record
// whose windows end first is dropped and the registry's floor takes it:
// every system it holds no record for counts as inside the latest
// dropped window, from the latest dropped start until the latest dropped
// end, and so does a system's new record while the floor is open
// (TestReview36m_LostWindowEvictedByOtherBMCs). The bound holds every
// system of a 65,536-host wave of resets inside one window (about 7
// minutes) without the floor (each record a few hundred bytes).
var windows = windowRegistry{max: 1 << 16}

// expireBatch bounds the ended records one registry operation drops (or
// re-files after span grew): the lock is held for a bounded time.
const expireBatch = 256

type windowRegistry struct {
	mu  sync.Mutex
	max int
	m   map[string]*sysWindows
	// h orders m's records by exp, the earliest first.
	h recHeap
	// floor is what a system without a record counts as: inside a lost
	// reset's window from the latest start until the latest end of the
	// open records dropped (zero: none).
	floor window
	// span is the longest LostLanding + SoftTimeout + StaleReads of any
	// Controller of the process (widen, at Connect): a record is kept
	// until span after its latest window began, the longest any
	// Controller checks a window for.
	span time.Duration
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

	// key is the record's key in the registry; exp when it may go (end,
	// or span after anchor, the later; re-filed, never earlier, as span
	// grows); idx its place in the registry's heap.
	key string
	exp time.Time
	idx int
}

// end is when the last of w's windows ends.
func (w *sysWindows) end() time.Time {
	e := later(w.reset.until, w.lost.until)
	e = later(e, w.queued.until)
	e = later(e, w.press.until)
	return later(e, w.pushOverUntil)
}

// anchor is when the latest of w's windows began, the end of a press's
// shutdown included.
func (w *sysWindows) anchor() time.Time { return later(w.start(), w.pushOverAt) }

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

// entry returns key's record, made if missing at now (the caller holds
// r.mu): a new record inherits the floor while it is open. Records
// ended by now go first.
func (r *windowRegistry) entry(key string, now time.Time) *sysWindows {
	if r.m == nil {
		r.m = make(map[string]*sysWindows)
	}
	r.expire(now)
	if w, ok := r.m[key]; ok {
		return w
	}
	r.makeRoom(now)
	w := &sysWindows{key: key}
	if now.Before(r.floor.until) {
		w.lost = r.floor // it counted as inside the floor: it still does
	}
	r.m[key] = w
	w.exp = r.expiry(w)
	heap.Push(&r.h, w)
	return w
}

// expiry is when w may go: when its windows all ended, with the settings
// they were noted with and with the longest any Controller of the
// process has used (span after anchor).
func (r *windowRegistry) expiry(w *sysWindows) time.Time {
	e := w.end()
	if a := w.anchor(); r.span > 0 && !a.IsZero() {
		e = later(e, a.Add(r.span))
	}
	return e
}

// refile sets w's place in the heap after its windows changed (the
// caller holds r.mu).
func (r *windowRegistry) refile(w *sysWindows) {
	w.exp = r.expiry(w)
	heap.Fix(&r.h, w.idx)
}

// drop removes record w (the caller holds r.mu).
func (r *windowRegistry) drop(w *sysWindows) {
	heap.Remove(&r.h, w.idx)
	delete(r.m, w.key)
}

// expire drops up to expireBatch records whose windows ended by now, the
// earliest first (a record filed before span grew is re-filed instead,
// counted in the batch).
func (r *windowRegistry) expire(now time.Time) {
	for range expireBatch {
		if len(r.h) == 0 || r.h[0].exp.After(now) {
			return
		}
		if w := r.h[0]; r.expiry(w).After(now) {
			r.refile(w)
		} else {
			r.drop(w)
		}
	}
}

// makeRoom drops, if the registry is full, the record whose windows end
// first into the floor (if they had not ended by now), with the floor
// ending where the record's windows end under the current span.
func (r *windowRegistry) makeRoom(now time.Time) {
	if len(r.m) < r.max || len(r.h) == 0 {
		return
	}
	for range expireBatch { // records filed before span grew
		if w := r.h[0]; r.expiry(w).After(w.exp) {
			r.refile(w)
			continue
		}
		break
	}
	w := r.h[0]
	r.drop(w)
	// The floor takes the record's windows under the current span (it may
	// still be filed under an older, shorter one once the batch ran out).
	if until := r.expiry(w); until.After(now) {
		r.floor = r.floor.merge(window{at: w.start(), until: until})
	}
}

// widen makes the registry keep every record at least span after its
// latest window began (a Controller's LostLanding + SoftTimeout +
// StaleReads, at Connect).
func (r *windowRegistry) widen(span time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.span = max(r.span, span)
}

// recHeap is a min-heap of records by exp (container/heap).
type recHeap []*sysWindows

func (h recHeap) Len() int           { return len(h) }
func (h recHeap) Less(i, j int) bool { return h[i].exp.Before(h[j].exp) }
func (h recHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *recHeap) Push(x any) {
	w := x.(*sysWindows)
	w.idx = len(*h)
	*h = append(*h, w)
}
func (h *recHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	w.idx = -1
	return w
}

// noteReset records o for key.
func (r *windowRegistry) noteReset(key string, o resetOutcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.entry(key, o.returned)
	defer r.refile(w)
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
	r.refile(w)
}

// taskEnded records that key's task monitor was read ended at: if it is
// the task of key's latest reset (queued), that reset reached the
// hardware by then, and its windows count from then as an answered
// reset's (the settings' lengths as in resetOutcome).
func (r *windowRegistry) taskEnded(key, monitor string, at time.Time, stale, pressSpan time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire(at)
	w, ok := r.m[key]
	if !ok || monitor == "" || w.queuedMonitor != monitor || at.Before(w.queued.at) {
		return
	}
	defer r.refile(w)
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
	r.expire(now)
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
			r.refile(w)
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

// dropEnded drops key's record if its windows all ended by now (with
// the longest settings any Controller used too: see expiry), and the
// other records ended by now (expire).
func (r *windowRegistry) dropEnded(key string, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire(now)
	if w, ok := r.m[key]; ok && !r.expiry(w).After(now) {
		r.drop(w)
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
