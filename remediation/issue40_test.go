package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestUnknownHostIsAnError (issue 40, point 9): a HostOf that names a host
// the reboot store does not have (a typo in one's own mapping) is an error
// that names the machine, the host and the fix, not a missing host, which
// waits for the timeout and then escalates (deleting the Machine). With
// HostsMayVanish (BareMetalHosts deleted mid-remediation) it stays
// Missing. The old RebootHosts answered Missing in both cases.
func TestUnknownHostIsAnError(t *testing.T) {
	ctx := context.Background()
	hosts := fake.NewRebootHosts(reboot.Host{Name: "db-1", Online: true})
	rh := &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now,
		HostOf: func(context.Context, string) (string, error) { return "db-l", nil }}
	_, err := rh.Get(ctx, "m1", remediation.Request{})
	require.ErrorIs(t, err, remediation.ErrUnknownHost)
	assert.Contains(t, err.Error(), "m1")
	assert.Contains(t, err.Error(), "db-l")
	assert.Contains(t, err.Error(), "fix HostOf")

	rh.HostsMayVanish = true
	h, err := rh.Get(ctx, "m1", remediation.Request{})
	require.NoError(t, err)
	assert.True(t, h.Missing)
}

// TestNounsInMessages (issue 40, point 6): with Config.Nouns, the storm
// guard's refusal persisted in State.Message speaks of the caller's
// servers and pools, not of machines of cluster X, and the next pass does
// not write the same message again. Before, the words were Cluster API's.
func TestNounsInMessages(t *testing.T) {
	fleet := []remediation.FleetMachine{{Name: "db-1", Cluster: "db", Unhealthy: true, Remediating: true}, {Name: "db-2", Cluster: "db", Unhealthy: true}}
	may, why := remediation.MayStart(fleet, "db-2", remediation.MaxCount(1))
	require.False(t, may)
	o := remediation.Observed{Machine: remediation.Machine{Name: "db-2", UID: "db-2", NodeName: "db-2", Cluster: "db", NeedsRemediation: true},
		Node: remediation.Node{Exists: true, Name: "db-2"}, MayStart: may, GuardReason: why}
	cfg := remediation.Config{Nouns: remediation.Nouns{Machine: "server", Group: "pool", Unhealthy: "unhealthy flag"}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := cfg.Decide(o, now)
	require.True(t, d.UpdateState)
	assert.Contains(t, d.State.Message, "2 of 2 servers of pool db unhealthy")
	assert.NotContains(t, d.State.Message, "machine")
	assert.NotContains(t, d.State.Message, "cluster")
	o.State = d.State
	again := cfg.Decide(o, now.Add(time.Minute))
	assert.False(t, again.UpdateState, "the same message written again: %q vs %q", again.State.Message, o.State.Message)
	// Without Nouns, Cluster API's words.
	assert.Contains(t, remediation.Config{}.Decide(remediation.Observed{Machine: o.Machine, Node: o.Node, MayStart: may, GuardReason: why}, now).State.Message, "machines of cluster db")
}

// TestNounsGuardReasonForms: every form of the storm guard's reason is
// rendered in the caller's words with its names and numbers kept, and a
// noun with '%' in it does not break the format.
func TestNounsGuardReasonForms(t *testing.T) {
	n := remediation.Config{Nouns: remediation.Nouns{Machine: "100% server", Group: "rack", HealthCheck: "probe"}}
	fleet := []remediation.FleetMachine{
		{Name: "node-1", Cluster: "machine-room", HealthCheck: "node-check", Unhealthy: true},
		{Name: "node-2", Cluster: "machine-room", HealthCheck: "node-check", Unhealthy: true},
		{Name: "node-3", Cluster: "machine-room", HealthCheck: "node-check"},
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, limit := range []remediation.MaxUnhealthy{remediation.MaxCount(1), remediation.MaxCount(5)} {
		may, why := remediation.MayStart(fleet, "node-2", limit)
		if may {
			continue // admitted: no message
		}
		d := n.Decide(remediation.Observed{Machine: remediation.Machine{Name: "node-2", NeedsRemediation: true}, GuardReason: why}, now)
		assert.Equal(t, "storm guard: 2 of 3 100% servers of rack machine-room under probe node-check unhealthy, more than the limit 1 (1)", d.State.Message)
	}
}
