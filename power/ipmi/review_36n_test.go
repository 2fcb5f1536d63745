package ipmi_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/ipmi/ipmitest"
)

// TestReview36nSoftShutdownUnknownOutcomeIsLost (review 36 round 14): a
// soft shutdown answered C3h ("timeout while processing command,
// response unavailable") or CEh ("command response could not be
// provided") may have been carried out (here it was): Off reports it as
// a lost answer (busy, no protocol status, so reboot counts it as
// landing up to LostLanding later), and it is not sent again.
func TestReview36nSoftShutdownUnknownOutcomeIsLost(t *testing.T) {
	ctx := context.Background()
	for _, cc := range []uint8{0xc3, 0xce} {
		b, _ := newBMC(t, fake.PowerConfig{Initial: power.StateOn})
		c := connect(t, b)
		b.FailNext(ipmitest.SoftOff, cc, true)
		err := c.Off(ctx, power.ModeSoft)
		require.Error(t, err)
		assert.Equal(t, power.ClassBusy, power.Classify(err), "cc %#x: %v", cc, err)
		var pe *power.Error
		require.True(t, errors.As(err, &pe))
		assert.Zero(t, pe.Status, "cc %#x: an unknown outcome is no answer: %v", cc, err)
		n := 0
		for _, cmd := range b.Commands() {
			if cmd == ipmitest.SoftOff {
				n++
			}
		}
		assert.Equal(t, 1, n, "cc %#x: one soft shutdown in all", cc)
	}
}
