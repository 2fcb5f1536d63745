package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// pinnedReadWait bounds how long checkPin waits for the pinned BMC's
// reading (as Async.Wait bounds a pass's BMC call). A reading that ended
// after its pass stopped waiting is kept for a later pass: its Off only
// while the reading began at most pinnedReadOffFresh ago (the host may
// have been powered on since), anything else (not known to be off, the
// safe direction) for pinnedReadKeep after it ended. pinnedReadLimit
// bounds a reading. Whatever its age, an Off counts only under the
// reboot package's evidence rule (see pinnedNotBefore).
const (
	pinnedReadWait     = 250 * time.Millisecond
	pinnedReadOffFresh = 2 * time.Second
	pinnedReadKeep     = 30 * time.Second
	pinnedReadLimit    = 5 * time.Minute
)

// pinnedRead is one State call of a host's pinned BMC, run in a goroutine
// of its own (Powers.pinned, at most one per host).
type pinnedRead struct {
	pin   v1alpha1.BMCPin
	done  chan struct{} // closed when the reading ended
	off   bool          // read Off (set before done is closed)
	begin time.Time     // when the reading began
	end   time.Time     // set before done is closed
	// again: this reading was started because an Off reading came too
	// late to be acted on; if its own Off comes too late as well, the
	// host is taken for not known to be off (marked: see checkPin).
	again bool
}

// finished reports whether r ended.
func (r *pinnedRead) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// pinnedReadsOff reports whether the BMC pin names (bmh's BMC when its
// reboot became pending, trusted with its credentials) reads Off: one
// State call through the pool, under a name of its own that is forgotten
// after, run in the background (a login to a dead old BMC takes the
// pool's whole timeouts) and waited for at most pinnedReadWait, so that a
// reconcile worker never waits on it for longer. While it runs, the error
// wraps ErrInFlight (the host is requeued). An Off counts only if its
// reading began at or after notBefore (pinnedNotBefore: the reboot
// package's evidence rule): an earlier one is kept, the error wrapping
// ErrInFlight, and the first pass from notBefore on reads again (any
// other reading, not known to be off, counts at once: the safe
// direction). A reading
// that ends later is kept for the host's next pass, but a late Off is
// acted on only if the reading began at most pinnedReadOffFresh ago: an
// older one starts a fresh reading (ErrInFlight), and if that one's Off
// comes too late as well the BMC is taken for not known to be off. Any
// failure of the call is false (not known to be off).
func (p *Powers) pinnedReadsOff(bmh *metal3.BareMetalHost, pin *v1alpha1.BMCPin, notBefore time.Time) (bool, error) {
	p.mu.Lock()
	if p.pinned == nil {
		p.pinned = map[string]*pinnedRead{}
	}
	p.sweepPinned()
	r := p.pinned[bmh.Name]
	if r != nil && r.pin != *pin {
		if !r.finished() {
			p.mu.Unlock()
			return false, fmt.Errorf("host %s: a power reading of its previously pinned BMC is still running: %w", bmh.Name, ErrInFlight)
		}
		r = nil // another pin's reading: not this one's
	}
	if r != nil && r.finished() && r.off && r.begin.Before(notBefore) {
		// An Off that may echo a state from before a power-on: it never
		// counts, whatever its age; read again once a reading may count.
		if time.Now().Before(notBefore) {
			p.mu.Unlock()
			return false, notYet(bmh, pin, notBefore)
		}
		r = p.startPinned(bmh, pin, false)
	}
	if r != nil && r.finished() && r.off && time.Since(r.begin) > pinnedReadOffFresh {
		// Off, but too old to act on: the host may have been powered on
		// since. Read again, once.
		if r.again {
			delete(p.pinned, bmh.Name)
			p.mu.Unlock()
			return false, nil
		}
		r = p.startPinned(bmh, pin, true)
	}
	if r == nil {
		r = p.startPinned(bmh, pin, false)
	}
	p.mu.Unlock()
	t := time.NewTimer(pinnedReadWait)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
		return false, fmt.Errorf("host %s: a power reading of its pinned BMC %q is still running: %w", bmh.Name, pin.Address, ErrInFlight)
	}
	if r.off && r.begin.Before(notBefore) {
		return false, notYet(bmh, pin, notBefore) // kept: see above
	}
	if r.off && time.Since(r.begin) > pinnedReadOffFresh {
		// Kept: the next pass reads again, or gives up (r.again).
		return false, fmt.Errorf("host %s: the power reading of its pinned BMC %q came too late to act on: %w", bmh.Name, pin.Address, ErrInFlight)
	}
	p.mu.Lock()
	if p.pinned[bmh.Name] == r {
		delete(p.pinned, bmh.Name) // a reading is used once
	}
	p.dropSeen(bmh.Name) // and so is the wait before it
	p.mu.Unlock()
	return r.off, nil
}

// notYet is the error of a pinned Off read before notBefore.
func notYet(bmh *metal3.BareMetalHost, pin *v1alpha1.BMCPin, notBefore time.Time) error {
	return fmt.Errorf("host %s: its pinned BMC %q reads Off, but the reading may echo a state from before a power-on: an Off counts "+
		"only if read from %s on (StaleReads after the later of the pass that first found its requests gone with its BMC changed and "+
		"the last power command its record shows): %w", bmh.Name, pin.Address, notBefore.UTC().Format(time.RFC3339Nano), ErrInFlight)
}

// pinnedSeen is when a Powers first found a host's requests gone with its
// spec.bmc not the one pin names, and the timer that requeues the host
// when its pinned BMC may be read (Powers.Done).
type pinnedSeen struct {
	pin   v1alpha1.BMCPin
	at    time.Time
	timer *time.Timer
}

// pinnedNotBefore is the earliest instant at which a reading of the BMC
// pin names may begin for its Off to count, by the reboot package's
// evidence rule: an Off read at r shows the hardware off at some instant
// in [r-StaleReads, r] (assumption A1), so it shows the host off after
// an instant only if read StaleReads after it. The instant is the later
// of the pass that first found the host's requests gone with its BMC
// changed (on this process's monotonic clock; a restart starts afresh),
// so that a power-on before then (the pending reboot's, or anyone's) is
// never echoed, and last, the last power command the host's record shows
// (lastPowerCommand). StaleReads is Powers.StaleReads (default
// reboot.DefaultConfig's). When Powers.Done is set it is called with the
// host's name at that instant (the host is requeued).
func (p *Powers) pinnedNotBefore(name string, pin *v1alpha1.BMCPin, last time.Time) time.Time {
	stale := p.StaleReads
	if stale <= 0 {
		stale = reboot.DefaultConfig().StaleReads
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]*pinnedSeen{}
	}
	s := p.seen[name]
	if s == nil || s.pin != *pin {
		p.dropSeen(name)
		s = &pinnedSeen{pin: *pin, at: time.Now()}
		if p.Done != nil {
			done := p.Done
			s.timer = time.AfterFunc(stale, func() { done(name) })
		}
		p.seen[name] = s
	}
	at := s.at
	if last.After(at) {
		at = last
	}
	return at.Add(stale)
}

// dropSeen forgets when host name's requests were first found gone (p.mu
// held).
func (p *Powers) dropSeen(name string) {
	if s := p.seen[name]; s != nil && s.timer != nil {
		s.timer.Stop()
	}
	delete(p.seen, name)
}

// lastPowerCommand is the last instant the record rec of bmh shows at
// which rebootkit decided a power command that may change its power
// (with since, when the pin's reboot became pending: its commands come
// after): the normal path's last power-on and press (Status), the reset
// path's last command (ResetAnnotation).
func lastPowerCommand(rec *v1alpha1.RebootRecord, bmh *metal3.BareMetalHost, since time.Time) time.Time {
	last := since
	later := func(t time.Time) {
		if t.After(last) {
			last = t
		}
	}
	if st, ok := recordStatus(rec, bmh, true); ok {
		later(st.LastPoweredOn)
		later(st.LastPress)
	}
	var rs resetRecord
	if raw := rec.Annotations[ResetAnnotation]; raw != "" && json.Unmarshal([]byte(raw), &rs) == nil {
		later(rs.Sending)
	}
	return last
}

// startPinned starts a reading of pin for bmh and keeps it as the host's
// (p.mu held).
func (p *Powers) startPinned(bmh *metal3.BareMetalHost, pin *v1alpha1.BMCPin, again bool) *pinnedRead {
	if p.readCtx == nil {
		p.readCtx, p.readStop = context.WithCancel(context.Background())
	}
	r := &pinnedRead{pin: *pin, done: make(chan struct{}), begin: time.Now(), again: again}
	p.pinned[bmh.Name] = r
	go p.readPinned(p.readCtx, bmh.DeepCopy(), r)
	return r
}

// sweepPinned drops the kept readings that ended more than pinnedReadKeep
// ago, the settled power-on attempts sweepPinnedOn drops, and the task
// readings sweepTasks drops (p.mu held).
func (p *Powers) sweepPinned() {
	p.sweepPinnedOn()
	p.sweepTasks()
	for name, r := range p.pinned {
		if r.finished() && time.Since(r.end) > pinnedReadKeep {
			delete(p.pinned, name)
		}
	}
}

// forgetPinned drops host name's kept readings, of its pinned BMC and
// of a task monitor (a running one goes on to its end, unkept).
func (p *Powers) forgetPinned(name string) {
	p.mu.Lock()
	delete(p.pinned, name)
	delete(p.tasks, name)
	p.dropSeen(name)
	p.forgetPinnedOn(name)
	p.mu.Unlock()
}

// readPinned makes r's State call of the BMC r.pin names, for the host
// old (a copy of its BareMetalHost), bounded by the pool's timeouts and
// pinnedReadLimit, and cancelled by Close (through parent).
func (p *Powers) readPinned(parent context.Context, old *metal3.BareMetalHost, r *pinnedRead) {
	defer func() {
		p.mu.Lock()
		r.end = time.Now()
		p.mu.Unlock()
		close(r.done)
		if p.Done != nil && r.end.Sub(r.begin) >= pinnedReadWait {
			p.Done(old.Name) // its pass stopped waiting: the next one now
		}
	}()
	ctx, cancel := context.WithTimeout(parent, pinnedReadLimit)
	defer cancel()
	old.Spec.BMC.Address, old.Spec.BMC.CredentialsName = r.pin.Address, r.pin.CredentialsName
	old.Spec.BMC.DisableCertificateVerification = r.pin.DisableCertificateVerification
	key := old.Name + "\x00pinned"
	pc, err := p.controllerOf(ctx, key, old)
	if err != nil {
		return
	}
	defer p.pool().Forget(key)
	s, err := pc.State(ctx)
	r.off = err == nil && s == power.StateOff
}
