package redfish_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
)

// Review 39 round 12 (point 2): OnChecked's check runs after the
// adapter's state read has been answered and before the reset is posted
// (ground truth: the BMC's own request count and reset log); a check that
// refuses posts nothing and its error matches power.ErrNotSent and the
// check's error; a host that reads On is sent nothing and check is not
// called.
func TestOnCheckedChecksAfterTheReadAndRefusalPostsNothing(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
	c := r.connect(t)
	var _ power.CheckedOner = c
	r.hw.OutOfBandOff()

	no := errors.New("no longer wanted")
	before := r.bmc.Requests()
	calls := 0
	err := c.OnChecked(ctx, func(context.Context) error {
		calls++
		assert.Greater(t, r.bmc.Requests(), before, "the state read was answered before the check")
		assert.Empty(t, r.bmc.Resets(), "nothing posted before the check")
		return no
	})
	require.Error(t, err)
	assert.ErrorIs(t, err, no)
	assert.ErrorIs(t, err, power.ErrNotSent)
	assert.Equal(t, 1, calls)
	assert.Empty(t, r.bmc.Resets(), "refused: no reset posted")
	assert.False(t, r.hw.HardwareOn())

	atCheck := 0
	require.NoError(t, c.OnChecked(ctx, func(context.Context) error { atCheck = r.bmc.Requests(); return nil }))
	assert.Equal(t, []string{"On"}, r.bmc.Resets())
	assert.Equal(t, atCheck+1, r.bmc.Requests(), "the reset is the only request after the check")
	assert.True(t, r.hw.HardwareOn())

	calls = 0
	require.NoError(t, c.OnChecked(ctx, func(context.Context) error { calls++; return nil }))
	assert.Zero(t, calls, "a host that reads On is sent nothing, and nothing is checked")
	assert.Len(t, r.bmc.Resets(), 1)
}

// Review 39 round 13 (point 1): a reset POST refused 401 (the session
// expired: nothing applied) is posted again only after the re-login and
// a second call of check, made once that login was answered; a check
// that refuses then posts nothing more, and the error matches
// power.ErrNotSent and the check's error (ground truth: the BMC's login
// count and the hardware). Before the fix check ran once, before the
// refused POST, and the retry went out unchecked.
func TestOnCheckedChecksAgainAfterRelogin(t *testing.T) {
	r := newRig(t, redfishtest.Quirks{}, fake.PowerConfig{})
	c := r.connect(t)
	r.hw.OutOfBandOff()
	no := errors.New("no longer wanted")
	logins := r.bmc.Logins()
	var atCalls []int
	r.bmc.FailNextReset(http.StatusUnauthorized, false)
	err := c.OnChecked(ctx, func(context.Context) error {
		atCalls = append(atCalls, r.bmc.Logins())
		if len(atCalls) > 1 {
			return no
		}
		return nil
	})
	require.Error(t, err)
	assert.ErrorIs(t, err, no)
	assert.ErrorIs(t, err, power.ErrNotSent)
	assert.Equal(t, []int{logins, logins + 1}, atCalls, "checked before the first POST and again after the re-login")
	assert.False(t, r.hw.HardwareOn(), "the retried POST was refused by its check: the host stays off")

	calls := 0
	r.bmc.FailNextReset(http.StatusUnauthorized, false)
	require.NoError(t, c.OnChecked(ctx, func(context.Context) error { calls++; return nil }))
	assert.Equal(t, 2, calls)
	assert.True(t, r.hw.HardwareOn())
}
