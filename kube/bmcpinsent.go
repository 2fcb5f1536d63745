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
)

// errNotOwed is why an attempt of a power-on through a pinned BMC sent
// nothing: the power-on was no longer owed when its check ran (markSent).
type errNotOwed struct{ why string }

func (e errNotOwed) Error() string { return "the power-on was not sent: " + e.why }

// sendPinnedOn sends o's power-on through pc (the pinned BMC's
// controller) with markSent as its check (power.CheckedOner; a
// controller without it sends nothing): after the
// BMC's last answer before the On (its login, its state read), the host
// and record are read again and the sending recorded; nothing lies
// between that check and the On but the command itself.
func (p *Powers) sendPinnedOn(ctx context.Context, pc power.Controller, old *metal3.BareMetalHost, o *pinnedOn) error {
	err := onCheckedOf(ctx, pc, func(ctx context.Context) error { return p.markSent(ctx, old, o) })
	var no errNotOwed
	if errors.As(err, &no) {
		return no
	}
	if err != nil {
		return fmt.Errorf("power-on: %w", err)
	}
	return nil
}

// markSent is the check of o's power-on (the host old, a copy of its
// BareMetalHost): it reads the host and its record again, uncached
// (stillOwed), and, if the power-on is still owed, records that it is
// being sent and until when it may land (RebootRecordSpec.PowerOnSent:
// Until is ctx's deadline, the latest instant the call may reach the
// BMC) in a compare-and-swap on the record it read, so that a write made
// since that reading (spec.bmc restored, a new mark) sends nothing; o.sent
// is set once it is written. Any error: the On is not sent.
func (p *Powers) markSent(ctx context.Context, old *metal3.BareMetalHost, o *pinnedOn) error {
	rec, why := p.stillOwed(ctx, old, o)
	if why != "" {
		return errNotOwed{why}
	}
	w, ok := p.Client.(client.Writer)
	if !ok {
		return errNotOwed{"this Client cannot record the power-on in the record before it is sent"}
	}
	now := time.Now()
	until, ok := ctx.Deadline()
	if !ok {
		until = now.Add(pinnedReadLimit)
	}
	sent := &v1alpha1.PowerOnSent{Address: o.pin.Address, At: stamp(now), Until: stamp(until)}
	if err := w.Patch(ctx, rec, casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"powerOnSent": sent}})); err != nil {
		return errNotOwed{fmt.Sprintf("it could not be recorded in the reboot record first (%v)", mapError("record of", p.Namespace, old.Name, err))}
	}
	p.mu.Lock()
	o.sent = true
	p.mu.Unlock()
	return nil
}

// sentHold is nil unless rec, the record of host name, shows a power-on
// through a pinned BMC (PowerOnSent) that may still land on the host or
// be echoed by a reading of it: until StaleReads after its Until. Then
// an error wrapping ErrInFlight, so that no replica sends the host
// anything nor takes evidence from it meanwhile, whatever it keeps in
// memory (a restart, a new leader). A PowerOnSent that does not parse
// (only the controller writes it) holds the host until it is removed.
func (p *Powers) sentHold(rec *v1alpha1.RebootRecord, name string) error {
	s := rec.Spec.PowerOnSent
	if s == nil {
		return nil
	}
	until, err := time.Parse(time.RFC3339Nano, s.Until)
	if err != nil {
		return fmt.Errorf("kube: host %s: its reboot record's powerOnSent.until does not parse, so rebootkit cannot tell whether a "+
			"power-on through its previously pinned BMC %q may still land: the host is left as it is; once that is past, remove it: "+
			"kubectl -n %s patch rebootrecord %s --type=merge -p '{\"spec\":{\"powerOnSent\":null}}'", name, s.Address, p.Namespace, name)
	}
	if at := until.Add(p.staleReads()); time.Now().Before(at) {
		return fmt.Errorf("host %s: a power-on through its previously pinned BMC %q was sent at %s and may land until %s; the host's "+
			"power is read again from %s on: %w", name, s.Address, s.At, s.Until, at.UTC().Format(time.RFC3339Nano), ErrInFlight)
	}
	return nil
}
