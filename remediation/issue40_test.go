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
	rh := &remediation.RebootHosts{Hosts: hosts, Now: time.Now,
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
