package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/rebootkit/rebootkit/remediation"
)

// hostAdmissions is the storm guard's admission record that is also a
// lock per host, over both sections of the shared record (Admissions): a
// write that adds a remediation of a host another one holds, of either
// controller, or changes an entry's host to one another holds, is refused
// (ErrHostHeld), and a remediation is admitted before it acts and
// released after it let go of its host, so at most one remediation,
// Machine-annotation or PowerCycleRemediation, holds a host. An entry's
// host is the one its recorded request names
// (remediation.Admissions.Requests, written with the admission), else the
// one hostOf names for it now; the other section's are
// remediation.Admissions.Others. Only the entries the write adds or whose
// recorded host it changes, compared with the record as read (at the
// version the write's compare-and-swap is on), are checked: the others
// count as holders, but a mapping that drifted since they were admitted
// (hostOf now naming a host another remediation holds) never blocks a
// write that removes entries or leaves them as they were.
type hostAdmissions struct {
	remediation.AdmissionStore
	hostOf func(ctx context.Context, name string) (string, error)
}

// PutAdmissions implements remediation.AdmissionStore. The other
// section's holders come first (they were admitted before this write),
// then this section's entries the write leaves as they were; the
// Reconciler appends the remediation it admits to the record it read, so
// an earlier name is the holder.
func (a *hostAdmissions) PutAdmissions(ctx context.Context, adm remediation.Admissions) error {
	read, err := a.AdmissionStore.GetAdmissions(ctx)
	if err != nil {
		return err
	}
	if read.Version != adm.Version {
		// Not the record the write was read at: its compare-and-swap
		// fails anyway; every entry counts as added meanwhile.
		read = remediation.Admissions{}
	}
	holder := map[string]string{}
	for _, o := range slices.Sorted(maps.Keys(adm.Others)) {
		if h := adm.Others[o]; h != "" {
			if _, ok := holder[h]; !ok {
				holder[h] = "of the other controller " + o
			}
		}
	}
	var claims []string
	for _, m := range adm.Machines {
		if !read.Has(m) || read.Requests[m].Host != adm.Requests[m].Host {
			claims = append(claims, m)
			continue
		}
		// Left as it was: a holder, never refused (a host it cannot
		// tell holds nothing it can check).
		if h, err := a.hostFor(ctx, adm, m); err == nil && h != "" {
			if _, ok := holder[h]; !ok {
				holder[h] = m
			}
		}
	}
	for _, m := range claims {
		h, err := a.hostFor(ctx, adm, m)
		if errors.Is(err, remediation.ErrNotFound) || h == "" && err == nil {
			continue
		}
		if err != nil {
			return err
		}
		if other, ok := holder[h]; ok && other != m {
			return fmt.Errorf("%w: host %s is held by remediation %s until it is released; %s waits", ErrHostHeld, h, other, m)
		}
		holder[h] = m
	}
	return a.AdmissionStore.PutAdmissions(ctx, adm)
}

// hostFor is the host of the entry m of adm: its recorded request's, else
// the one hostOf names now.
func (a *hostAdmissions) hostFor(ctx context.Context, adm remediation.Admissions, m string) (string, error) {
	if h := adm.Requests[m].Host; h != "" {
		return h, nil
	}
	return a.hostOf(ctx, m)
}
