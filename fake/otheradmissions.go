package fake

import (
	"context"

	"github.com/rebootkit/rebootkit/remediation"
)

// OtherAdmissions returns a second handle on the cluster's admission
// record, as another process (a second reconciler) has it: a
// remediation.AdmissionStore of its own that reads and writes the same
// record, checked and written under the cluster's lock, as processes
// share a record whose compare-and-swap the storage makes atomic. The
// cluster's interloper (SetInterloper) is not called for its writes.
func (c *Cluster) OtherAdmissions() remediation.AdmissionStore { return &otherAdmissions{c: c} }

// otherAdmissions is OtherAdmissions' handle.
type otherAdmissions struct{ c *Cluster }

// GetAdmissions implements remediation.AdmissionStore.
func (o *otherAdmissions) GetAdmissions(ctx context.Context) (remediation.Admissions, error) {
	return o.c.GetAdmissions(ctx)
}

// PutAdmissions implements remediation.AdmissionStore with
// compare-and-swap.
func (o *otherAdmissions) PutAdmissions(ctx context.Context, a remediation.Admissions) error {
	return o.c.putAdmissions(ctx, a)
}
