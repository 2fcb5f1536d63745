package inventory

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
)

// The review-38 worlds: newWorld's fleet with the first server's BMC
// accepting a power-off that takes effect late (or never).

// softOffSent gives ids[0] the power pc (on the world's clock), opens the
// fleet (closed when the test ends), starts a plan and runs the world a
// second at a time, for two minutes at most, until ids[0]'s BMC saw a
// power-off; it returns that BMC. The caller checks what it saw.
func (w *world) softOffSent(t *testing.T, ids []string, pc fake.PowerConfig) *advBMC {
	t.Helper()
	b := w.bmcs[ids[0]]
	b.p = fake.NewPower(w.clk.Real, pc)
	w.open()
	t.Cleanup(func() { w.close() })
	w.newPlan()
	for i := 0; i < 120 && len(b.offs) == 0; i++ {
		w.run(ids, time.Second)
	}
	return b
}
