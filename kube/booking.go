package kube

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// sentPatch is the merge-patch value of spec.powerOnSent that replaces
// the whole booking with s: every field is named, and those s leaves
// empty are removed (null), so that nothing of an earlier booking (its
// Returned, its Task) survives into this one; a JSON merge patch of
// s's fields alone would keep them
// (TestReview39aa_BookingKeepsStaleReturnedHoldsNobody,
// TestMarkSentReplacesEndedBooking).
func sentPatch(s *v1alpha1.PowerOnSent) map[string]any {
	m := map[string]any{"address": s.Address, "at": s.At, "until": s.Until, "returned": nil, "task": nil}
	if s.Returned != "" {
		m["returned"] = s.Returned
	}
	if s.Task != "" {
		m["task"] = s.Task
	}
	return m
}

// changeBooking rewrites the booking (spec.powerOnSent) of host name's
// record if it still shows the booking made at at: change gets that
// booking and returns the merge-patch value to write (nil removes the
// booking) and whether to write it. The write is a compare-and-swap on
// the record read (uncached, through Powers.Secrets), retried on a
// conflict markReturnedTries times, bounded by Powers.Timeout under
// parent. It reports whether it was written; a record that shows
// another booking (or none), a Client that cannot write or a failed
// write leave the record as it is.
func (p *Powers) changeBooking(parent context.Context, name, at string, change func(s *v1alpha1.PowerOnSent) (any, bool)) bool {
	w, ok := p.Client.(client.Writer)
	if !ok || at == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(parent, p.readTimeout())
	defer cancel()
	key := types.NamespacedName{Namespace: p.Namespace, Name: name}
	for range markReturnedTries {
		var rec v1alpha1.RebootRecord
		if p.Secrets.Get(ctx, key, &rec) != nil {
			return false
		}
		s := rec.Spec.PowerOnSent
		if s == nil || s.At != at {
			return false // another booking since, or removed
		}
		v, write := change(s)
		if !write {
			return false
		}
		err := w.Patch(ctx, &rec, casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"powerOnSent": v}}))
		if err == nil {
			return true
		}
		if !apierrors.IsConflict(err) {
			return false
		}
	}
	return false
}

// writeBooking is the one rule of every path that books a send (bookSend,
// the normal path's; markSent, the pinned path's): it writes sent as
// rec's whole booking (sentPatch), in a compare-and-swap on rec (the
// record of host name, read uncached), only if rec shows no booking that
// still holds the host (sentHold: a command that may still land, a task
// not read ended): a live booking is never written over, whoever made it
// (TestReview39ab_PinnedOnReplacesLiveBookingHostHandedOverWhileTaskRuns).
// held is that hold (nothing written); err is the write's.
func (p *Powers) writeBooking(ctx context.Context, w client.Writer, rec *v1alpha1.RebootRecord, name string, sent *v1alpha1.PowerOnSent) (held, err error) {
	if held := p.sentHold(rec, name); held != nil {
		return held, nil
	}
	return nil, w.Patch(ctx, rec, casPatch(rec.ResourceVersion, map[string]any{"spec": map[string]any{"powerOnSent": sentPatch(sent)}}))
}
