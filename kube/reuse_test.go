package kube

import (
	"context"
	"errors"
	"sync"
	"testing"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/nodereuse"
)

// TestReuseHostsOnAPIServer: the node-reuse store on real BareMetalHosts:
// what selection needs is read (state, reuse label, paused, unhealthy),
// and of several machines claiming concurrently through nodereuse.Claim,
// each available host goes to exactly one of them.
func TestReuseHostsOnAPIServer(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	c := adminClient(t)
	ns := newNamespace(t, c)
	pool := nodereuse.MachineDeployment("md-1")
	label, err := pool.LabelValue()
	require.NoError(t, err)
	for _, name := range []string{"free-1", "free-2", "reserved", "paused", "sick"} {
		h := newBMH(t, c, ns, name)
		switch name {
		case "reserved":
			h.Labels[nodereuse.Label] = label
		case "paused":
			h.Annotations = map[string]string{metal3.PausedAnnotation: ""}
		case "sick":
			h.Annotations = map[string]string{UnhealthyAnnotation: ""}
		}
		require.NoError(t, c.Update(ctx, h))
		h.Status.Provisioning.State = metal3.StateAvailable
		h.Status.OperationalStatus = metal3.OperationalStatusOK
		require.NoError(t, c.Status().Update(ctx, h))
	}
	s := &ReuseHosts{Client: c, Namespace: ns}
	hosts, err := s.List(ctx)
	require.NoError(t, err)
	by := map[string]nodereuse.Host{}
	for _, h := range hosts {
		by[h.Name] = h
	}
	assert.Equal(t, nodereuse.StateAvailable, by["free-1"].State)
	assert.Equal(t, label, by["reserved"].Labels[nodereuse.Label])
	assert.True(t, by["paused"].Paused)
	assert.True(t, by["sick"].Unhealthy)

	// A stale version loses.
	require.NoError(t, s.SetLabel(ctx, "sick", by["sick"].Version, "x"))
	assert.ErrorIs(t, s.SetLabel(ctx, "sick", by["sick"].Version, "y"), nodereuse.ErrConflict)

	// Five machines claim at once; three hosts can be claimed (free-1,
	// free-2, reserved; paused and unhealthy ones never): three claims
	// succeed, each on its own host, the others find nothing.
	var mu sync.Mutex
	won := map[string]string{}
	var wg sync.WaitGroup
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			consumer := []string{"m-a", "m-b", "m-c", "m-d", "m-e"}[i]
			sel, err := nodereuse.Claim(ctx, s, nodereuse.Request{Pool: pool, Seed: uint64(i)}, consumer, 10)
			if err != nil && !errors.Is(err, nodereuse.ErrConflict) {
				t.Errorf("%s: %v", consumer, err)
				return
			}
			if err == nil && sel.Host != "" && sel.Outcome == nodereuse.OutcomePick {
				mu.Lock()
				if other, dup := won[sel.Host]; dup {
					t.Errorf("host %s claimed by %s and %s", sel.Host, other, consumer)
				}
				won[sel.Host] = consumer
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	assert.Len(t, won, 3, "%v", won)
	assert.NotContains(t, won, "paused")
	assert.NotContains(t, won, "sick")
	hosts, err = s.List(ctx)
	require.NoError(t, err)
	for _, h := range hosts {
		if consumer, ok := won[h.Name]; ok {
			assert.Equal(t, consumer, h.ConsumerRef)
		}
	}
}
