package kube

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// sentHold holds a host until StaleReads after the Until of the
// power-on its record shows sent, or after its Returned if earlier; a
// Returned after Until, or one that does not parse, is ignored; an Until
// that does not parse holds the host with an error that says the fix
// (not ErrInFlight: it does not end by itself).
func TestSentHoldEndsStaleReadsAfterUntilOrReturned(t *testing.T) {
	p := &Powers{Namespace: "ns", StaleReads: time.Second}
	now := time.Now()
	rec := func(until, returned string) *v1alpha1.RebootRecord {
		return &v1alpha1.RebootRecord{Spec: v1alpha1.RebootRecordSpec{PowerOnSent: &v1alpha1.PowerOnSent{
			Address: "redfish://bmc", At: stamp(now.Add(-time.Minute)), Until: until, Returned: returned}}}
	}
	assert.NoError(t, p.sentHold(&v1alpha1.RebootRecord{}, "h1"), "nothing sent")
	assert.ErrorIs(t, p.sentHold(rec(stamp(now.Add(10*time.Second)), ""), "h1"), ErrInFlight, "may still land")
	assert.ErrorIs(t, p.sentHold(rec(stamp(now.Add(-500*time.Millisecond)), ""), "h1"), ErrInFlight, "StaleReads after Until not over")
	assert.NoError(t, p.sentHold(rec(stamp(now.Add(-2*time.Second)), ""), "h1"), "settled")
	assert.NoError(t, p.sentHold(rec(stamp(now.Add(10*time.Second)), stamp(now.Add(-2*time.Second))), "h1"), "answered long ago")
	assert.ErrorIs(t, p.sentHold(rec(stamp(now.Add(10*time.Second)), stamp(now.Add(-500*time.Millisecond))), "h1"), ErrInFlight,
		"answered less than StaleReads ago")
	assert.ErrorIs(t, p.sentHold(rec(stamp(now.Add(10*time.Second)), "garbage"), "h1"), ErrInFlight, "a Returned that does not parse is ignored")
	assert.ErrorIs(t, p.sentHold(rec(stamp(now.Add(-500*time.Millisecond)), stamp(now.Add(time.Hour))), "h1"), ErrInFlight,
		"a Returned after Until is ignored")
	err := p.sentHold(rec("garbage", ""), "h1")
	require.Error(t, err)
	assert.False(t, errors.Is(err, ErrInFlight))
	assert.Contains(t, err.Error(), "kubectl -n ns patch rebootrecord h1")
}
