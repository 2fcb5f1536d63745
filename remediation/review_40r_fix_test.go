package remediation_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestStrayAdmissionAdmitsNoNewAttempt: an admission kept (or taken
// again) only because a finished Machine's own host is off for a stale
// request of its (State.StraySeen) is the storm guard's count of that
// host, not an admission of a new attempt: unhealthy again, the Machine
// starts one only if the storm guard lets it (Observed.MayStart), and it
// keeps its admission meanwhile.
func TestStrayAdmissionAdmitsNoNewAttempt(t *testing.T) {
	now := time.Now()
	t0 := now.Add(-2 * time.Hour)
	cfg := remediation.Config{PollInterval: time.Second, Timeout: time.Minute, MinHealthyPeriod: time.Minute}
	o := remediation.Observed{
		Machine: remediation.Machine{Name: "m1", UID: "u1", NodeName: "m1", NeedsRemediation: true},
		Node:    remediation.Node{Exists: true, Name: "m1", UID: "n1"},
		Host:    remediation.Host{Name: "h2", OffAfterRequest: true, Power: power.StateOff},
		State: remediation.State{Phase: remediation.PhaseDone, Attempt: 1, Started: t0, RequestedAt: t0, Host: "h2",
			Finished: t0.Add(10 * time.Minute), StraySeen: now.Add(-time.Minute)},
		Admitted:    true,
		GuardReason: "2 of 2 machines of cluster c unhealthy, more than the limit 1",
	}
	d := cfg.Decide(o, now)
	require.Equal(t, remediation.PhaseDone, d.State.Phase, "no new attempt while the storm guard refuses: %s", d.Reason)
	require.False(t, d.AddRebootAnnotation)
	require.False(t, d.Release, "h2 may be off for m1's stale request: kept")
	require.Contains(t, d.State.Message, "storm guard")

	o.MayStart = true
	d = cfg.Decide(o, now)
	require.Equal(t, remediation.PhasePowerOffRequested, d.State.Phase, "the storm guard lets it: a new attempt on h2 (%s)", d.Reason)
	require.True(t, d.State.StraySeen.IsZero(), "the attempt holds h2 by its own admission")

	// Not admitted (released before the stale request landed): admitted
	// again while h2 may be off for it, whatever the limit.
	o.Machine.NeedsRemediation, o.Admitted, o.MayStart = false, false, false
	d = cfg.Decide(o, now)
	require.True(t, d.Admit, "%s", d.Reason)
	require.False(t, d.Release)

	// h2 read on since: the sighting is forgotten and the admission goes.
	o.Admitted, o.Host.Power, o.Host.ConfirmedOn, o.Host.PoweredOn = true, power.StateOn, true, true
	d = cfg.Decide(o, now)
	require.True(t, d.State.StraySeen.IsZero())
	require.True(t, d.Release, "%s", d.Reason)
	require.NotContains(t, d.State.Message, "may be off")
}
