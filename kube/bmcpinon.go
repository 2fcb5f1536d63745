package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// pinnedOnFirstRetry and pinnedOnMaxRetry bound the back-off between two
// attempts of a power-on through a pinned BMC (RebootRecord's
// PowerOnThrough): the first retry after pinnedOnFirstRetry, each next
// one twice as late, at most pinnedOnMaxRetry.
const (
	pinnedOnFirstRetry = time.Second
	pinnedOnMaxRetry   = time.Minute
)

// pinnedOn is one attempt of a power-on through a host's pinned BMC, run
// in a goroutine of its own (Powers.pinOn, at most one per host): the On
// call, then, StaleReads after it returned, a State call whose On is the
// only success (an earlier reading may echo the host off from before).
type pinnedOn struct {
	pin   v1alpha1.BMCPin
	done  chan struct{} // closed when the attempt ended
	on    bool          // read On StaleReads after the call (set before done is closed)
	err   error         // why it failed (set before done is closed)
	end   time.Time     // set before done is closed
	fails int           // failed attempts before this one, for the back-off
}

// retryAt is when the attempt after o (failed) may start.
func (o *pinnedOn) retryAt() time.Time {
	d := pinnedOnFirstRetry
	for i := 0; i < o.fails && d < pinnedOnMaxRetry; i++ {
		d *= 2
	}
	return o.end.Add(min(d, pinnedOnMaxRetry))
}

// onEligible is the reboot package's rule for powering a host on, as far
// as checkPin's owed power-on goes: "" if bmh may be powered on, else why
// not (spec.online false: "off; held while Online is false"; being
// deprovisioned; a reboot request, whose reboot is not through the
// pinned BMC).
func onEligible(bmh *metal3.BareMetalHost) string {
	switch {
	case !bmh.Spec.Online:
		return "spec.online is false, so it is left off"
	case Deprovisioned(bmh):
		return "it is being deprovisioned, so it is left off"
	case carriesRequest(bmh):
		return "it carries a reboot request, so it is not powered on"
	}
	return ""
}

// drivePinnedOn carries on the power-on rec (bmh's record, marked
// BMCChanged) owes through its PowerOnThrough BMC: nothing while
// onEligible refuses; otherwise an attempt is started if none runs and
// the last one's back-off is over, and once an attempt read On the
// intent is removed from the record (compare-and-swap). It returns what
// happened, in the operator's words, and whether the power-on is still
// owed and may go on (the host is then requeued soon).
func (p *Powers) drivePinnedOn(ctx context.Context, rec *v1alpha1.RebootRecord, bmh *metal3.BareMetalHost) (string, bool) {
	pin := rec.Spec.PowerOnThrough
	if why := onEligible(bmh); why != "" {
		return fmt.Sprintf("its pinned BMC %q read Off, and %s (it is powered on through that BMC once this no longer holds, "+
			"unless the new BMC is accepted first)", pin.Address, why), false
	}
	on, what := p.pinnedPowerOn(bmh, pin)
	if !on {
		return what, true
	}
	w, ok := p.Client.(client.Writer)
	if !ok {
		return what, false
	}
	patch := casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"powerOnThrough": nil}})
	if err := w.Patch(ctx, rec, patch); err != nil {
		return fmt.Sprintf("%s, but the record could not be updated (%v): the next pass reads the pinned BMC again", what,
			mapError("record of", p.Namespace, bmh.Name, err)), true
	}
	return what, false
}

// pinnedPowerOn reports whether an attempt of powering bmh on through the
// BMC pin names read On, and otherwise what is under way; it starts an
// attempt when none runs and the back-off of the last failed one is over.
// It never waits on the BMC.
func (p *Powers) pinnedPowerOn(bmh *metal3.BareMetalHost, pin *v1alpha1.BMCPin) (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pinOn == nil {
		p.pinOn = map[string]*pinnedOn{}
	}
	o := p.pinOn[bmh.Name]
	if o != nil && o.pin != *pin {
		if !o.finishedOn() {
			return false, fmt.Sprintf("a power-on through its previously pinned BMC is still running; the power-on through %q waits", pin.Address)
		}
		o = nil
	}
	fails := 0
	if o != nil {
		if !o.finishedOn() {
			return false, fmt.Sprintf("its pinned BMC %q read Off: it is being powered back on through that BMC (the call is running)", pin.Address)
		}
		if o.on {
			delete(p.pinOn, bmh.Name)
			return true, fmt.Sprintf("it was powered back on through its pinned BMC %q (read On after the call)", pin.Address)
		}
		if at := o.retryAt(); time.Now().Before(at) {
			return false, fmt.Sprintf("its pinned BMC %q read Off; powering it back on through that BMC failed (%v), %d time(s): "+
				"retried at %s", pin.Address, o.err, o.fails+1, at.UTC().Format(time.RFC3339))
		}
		fails = o.fails + 1
	}
	if p.readCtx == nil {
		p.readCtx, p.readStop = context.WithCancel(context.Background())
	}
	o = &pinnedOn{pin: *pin, done: make(chan struct{}), fails: fails}
	p.pinOn[bmh.Name] = o
	go p.runPinnedOn(p.readCtx, bmh.DeepCopy(), o)
	return false, fmt.Sprintf("its pinned BMC %q read Off: it is being powered back on through that BMC (attempt %d)", pin.Address, fails+1)
}

// finishedOn reports whether o ended.
func (o *pinnedOn) finishedOn() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// runPinnedOn makes o's attempt for the host old (a copy of its
// BareMetalHost) through the BMC o.pin names, under parent (cancelled by
// Close), bounded by the pool's timeouts and pinnedReadLimit, through
// Powers.Guard if set. Its end requeues the host (Powers.Done): at once
// on success, when its back-off is over on failure.
func (p *Powers) runPinnedOn(parent context.Context, old *metal3.BareMetalHost, o *pinnedOn) {
	defer func() {
		p.mu.Lock()
		o.end = time.Now()
		p.mu.Unlock()
		close(o.done)
		if done := p.Done; done != nil {
			if o.on {
				done(old.Name)
			} else {
				time.AfterFunc(time.Until(o.retryAt()), func() { done(old.Name) })
			}
		}
	}()
	ctx, cancel := context.WithTimeout(parent, pinnedReadLimit)
	defer cancel()
	old.Spec.BMC.Address, old.Spec.BMC.CredentialsName = o.pin.Address, o.pin.CredentialsName
	old.Spec.BMC.DisableCertificateVerification = o.pin.DisableCertificateVerification
	key := old.Name + "\x00pinned-on"
	pc, err := p.controllerOf(ctx, key, old)
	if err != nil {
		o.err = err
		return
	}
	defer p.pool().Forget(key)
	if p.Guard != nil {
		pc = p.Guard(pc)
	}
	if err := pc.On(ctx); err != nil {
		o.err = fmt.Errorf("power-on: %w", err)
		return
	}
	stale := p.StaleReads
	if stale <= 0 {
		stale = reboot.DefaultConfig().StaleReads
	}
	t := time.NewTimer(stale) // a reading begun earlier may echo the host off from before the power-on
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		o.err = ctx.Err()
		return
	}
	s, err := pc.State(ctx)
	switch {
	case err != nil:
		o.err = fmt.Errorf("power reading after the power-on: %w", err)
	case s != power.StateOn:
		o.err = errors.New("the power reading after the power-on is " + s.String())
	default:
		o.on = true
	}
}

// forgetPinnedOn drops host name's power-on attempt (a running one goes
// on to its end, unkept) (p.mu held).
func (p *Powers) forgetPinnedOn(name string) {
	delete(p.pinOn, name)
}

// pinnedOnErr is err (wrapping ErrBMCChanged), also wrapping ErrInFlight
// when a power-on owed through the pinned BMC goes on (owed): the
// controller then requeues the host within IdlePoll rather than a
// minute, so that the attempt's outcome is acted on.
func pinnedOnErr(err error, owed bool) error {
	if !owed {
		return err
	}
	return fmt.Errorf("%w (%w)", err, ErrInFlight)
}
