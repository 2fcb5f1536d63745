package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// TestSentHoldTaskOverdue (review 39 round 14): a record whose power-on
// the pinned BMC accepted as a task (PowerOnSent.Task) holds the host
// until its Until plus StaleReads, and past that, with no Returned, for
// good (ErrTaskOverdue, ErrInFlight, the fix named); a Returned (the task
// ended) ends the wait StaleReads after it.
func TestSentHoldTaskOverdue(t *testing.T) {
	p := &Powers{Namespace: "ns", StaleReads: 100 * time.Millisecond}
	now := time.Now()
	rec := func(until time.Time, task, returned string) *v1alpha1.RebootRecord {
		return &v1alpha1.RebootRecord{Spec: v1alpha1.RebootRecordSpec{PowerOnSent: &v1alpha1.PowerOnSent{
			Address: "redfish://old", At: stamp(now.Add(-time.Hour)), Until: stamp(until), Task: task, Returned: returned}}}
	}
	err := p.sentHold(rec(now.Add(time.Minute), "/redfish/v1/TaskService/Tasks/1", ""), "h1")
	assert.ErrorIs(t, err, ErrInFlight, "waits to Until")
	assert.NotErrorIs(t, err, ErrTaskOverdue)
	err = p.sentHold(rec(now.Add(-time.Minute), "/redfish/v1/TaskService/Tasks/1", ""), "h1")
	assert.ErrorIs(t, err, ErrTaskOverdue, "past Until with no Returned: left as it is")
	assert.ErrorIs(t, err, ErrInFlight)
	assert.Contains(t, err.Error(), "/redfish/v1/TaskService/Tasks/1")
	assert.Contains(t, err.Error(), `"powerOnSent":null`, "says the fix")
	assert.NoError(t, p.sentHold(rec(now.Add(time.Minute), "/redfish/v1/TaskService/Tasks/1", stamp(now.Add(-time.Second))), "h1"),
		"the task ended a second ago: settled")
	assert.NoError(t, p.sentHold(rec(now.Add(-time.Minute), "", ""), "h1"), "no task: the call's deadline bounds the wait")
}
