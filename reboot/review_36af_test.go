package reboot_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/rebootcheck"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview36af_ReleasedOnHostPressedOff: a BMC whose power-on is a
// press of the power button (fake.ButtonAll: OnToggler). A keyed hard
// fence is carried out (the host off, held). While it is held, someone
// powers the host on out of band (A2: anyone may, at any time); the
// controller powers it off again, and the host is powered on again out
// of band late, just before the client releases its hold. The first
// pass after the release reads On and decides heldOff's "released, and
// powered on by someone else meanwhile: power on": on this BMC that
// power-on is a press, sent to a host that runs, which shuts it down.
// Doc.go: "A pass that reads it never powers the host on (some BMCs can
// only toggle, and a toggle sent to a host that is off powers it on)",
// and issue 36 item 1: no toggle unless a reading that cannot be an
// echo shows the opposite state. The released host is Online, reads On
// and runs: it must not be powered off after the release (ground truth).
func TestReview36af_ReleasedOnHostPressedOff(t *testing.T) {
	ctx := context.Background()
	w := newReview36World()
	clk, store := w.clk, w.store
	pw := fake.NewPower(clk.Real, fake.PowerConfig{Button: fake.ButtonAll, SoftDelay: 20 * time.Second,
		Report: fake.Report{Stale: 5 * time.Second, NoTransitioning: true}})
	w.Power = pw
	rec := w.newRec()
	start := clk.Real()
	review36uLoop(t, rec, clk, start.Add(10*time.Minute), start)
	require.True(t, pw.HardwareOn(), "the setup: the host runs")
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) {
		h.Annotations = map[string]string{reboot.AnnotationPrefix + "fence": `{"mode":"hard"}`}
	}))
	at := clk.Real()
	review36uLoop(t, rec, clk, at.Add(10*time.Minute), start)
	require.False(t, pw.HardwareOn(), "the setup: the fence powered the host off; truth %s", rebootcheck.DescribeTruth(pw))
	h, err := store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, h.Status.LastPoweredOff.IsZero(), "the setup: evidence %+v", h.Status)
	// Someone powers the held host on just before the client releases
	// it (the controller would power it off again, but the release
	// comes first).
	pw.OutOfBandOn()
	clk.Advance(time.Second)
	require.NoError(t, store.Mutate("h", func(h *reboot.Host) { h.Annotations = nil }))
	clk.Advance(20 * time.Second) // the read shows the host on by now
	rel := clk.Real()
	require.True(t, pw.HardwareOn())
	review36uLoop(t, rec, clk, rel.Add(20*time.Minute), start)
	h, err = store.Get(ctx, "h")
	require.NoError(t, err)
	require.False(t, pw.WasOffDuring(rel, clk.Real()),
		"a released, Online host that runs and reads On was powered off by the controller's own power-on press (ButtonAll); on calls after release %d; status %+v; truth %s",
		review36xCount(pw, fake.OpOn, rel), h.Status, rebootcheck.DescribeTruth(pw))
}
