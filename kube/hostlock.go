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
// record naming two remediations of one host, of either controller, is
// never written (ErrHostHeld), and a remediation is admitted before it
// acts and released after it let go of its host, so at most one
// remediation, Machine-annotation or PowerCycleRemediation, holds a host.
// An entry's host is the one its recorded request names
// (remediation.Admissions.Requests, written with the admission), else the
// one hostOf names for it now; the other section's are
// remediation.Admissions.Others. The check is over the record written,
// under its compare-and-swap on the version both sections were read at.
type hostAdmissions struct {
	remediation.AdmissionStore
	hostOf func(ctx context.Context, name string) (string, error)
}

// PutAdmissions implements remediation.AdmissionStore. The other
// section's holders come first (they were admitted before this write);
// the Reconciler appends the remediation it admits to the record it read,
// so an earlier name is the holder.
func (a *hostAdmissions) PutAdmissions(ctx context.Context, adm remediation.Admissions) error {
	holder := map[string]string{}
	for _, o := range slices.Sorted(maps.Keys(adm.Others)) {
		if h := adm.Others[o]; h != "" {
			if _, ok := holder[h]; !ok {
				holder[h] = "of the other controller " + o
			}
		}
	}
	for _, m := range adm.Machines {
		h := adm.Requests[m].Host
		if h == "" {
			var err error
			h, err = a.hostOf(ctx, m)
			if errors.Is(err, remediation.ErrNotFound) || h == "" && err == nil {
				continue
			}
			if err != nil {
				return err
			}
		}
		if other, ok := holder[h]; ok {
			return fmt.Errorf("%w: host %s is held by remediation %s until it is released; %s waits", ErrHostHeld, h, other, m)
		}
		holder[h] = m
	}
	return a.AdmissionStore.PutAdmissions(ctx, adm)
}
