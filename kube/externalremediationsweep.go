package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/rebootkit/rebootkit/remediation"
)

// Sweep returns the PowerCycleRemediations the external section of the
// admission record (SectionExternal) admits that no longer exist: each
// needs a pass (Reconcile) that removes its request from its host and
// releases its admission once the host is not held. No event names a
// remediation deleted while no manager ran, and a gone pass kept for its
// host is requeued in memory only (lost on a restart or a leader
// failover). A remediation that cannot be read is skipped (the others are
// returned) and its error returned with them.
func (c *ExternalRemediationController) Sweep(ctx context.Context) ([]string, error) {
	adm := &Admissions{Client: c.Client, Namespace: c.Namespace, Section: SectionExternal}
	a, err := adm.GetAdmissions(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube: sweep external admissions: %w", err)
	}
	s := c.store()
	var out []string
	var errs []error
	for _, name := range a.Machines {
		_, err := s.get(ctx, name)
		switch {
		case errors.Is(err, remediation.ErrNotFound):
			out = append(out, name)
		case err != nil:
			errs = append(errs, fmt.Errorf("kube: sweep external admissions: %w", err))
		}
	}
	return out, errors.Join(errs...)
}

// sweepEvery runs Sweep at once and then every SweepEvery (default
// DefaultAdmissionSweep) until ctx ends, handing each name found to
// enqueue.
func (c *ExternalRemediationController) sweepEvery(ctx context.Context, enqueue func(name string)) {
	t := time.NewTicker(cmp.Or(c.SweepEvery, DefaultAdmissionSweep))
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		names, err := c.Sweep(sctx) // a failed sweep is tried again at the next tick
		if err != nil {
			logf.FromContext(ctx).Error(err, "external admission sweep")
		}
		cancel()
		for _, n := range names {
			enqueue(n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
