package kube

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/rebootkit/rebootkit/remediation"
)

// heldMachines is a MachineStore whose every read says the host is held.
type heldMachines struct {
	remediation.MachineStore
	err error
}

func (h heldMachines) Get(context.Context, string) (remediation.MachineRecord, error) {
	return remediation.MachineRecord{}, h.err
}

// TestReview41i_MachineRemediationWaitsAtPollInterval: a Machine
// remediation whose host is held (the host lock, ErrHostHeld, or an
// earlier admission of its name kept while its host is held,
// remediation.ErrHostHeld) waits and is looked at again every poll
// interval. Before, both were errors for the work queue, retried with
// its exponential back-off (up to 1000 s) long after the host was free.
func TestReview41i_MachineRemediationWaitsAtPollInterval(t *testing.T) {
	for _, held := range []error{ErrHostHeld, remediation.ErrHostHeld} {
		c := &RemediationController{Namespace: "ns", Reconciler: &remediation.Reconciler{
			Machines: heldMachines{err: fmt.Errorf("host h1: %w", held)},
			Config:   remediation.Config{PollInterval: 300 * time.Millisecond}}}
		res, err := c.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "m1"}})
		require.NoError(t, err, "%v: an error for the work queue's back-off", held)
		assert.Equal(t, 300*time.Millisecond, res.RequeueAfter, "%v", held)
	}
}
