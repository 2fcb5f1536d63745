package reboot_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
)

// TestWithPrefix (issue 40, point 7): a store whose reboot API lives under
// reboot.example.com: a client's request is written under that prefix,
// the Reconciler fences on it (ground truth: off after the request) and
// removes nothing of it, and a metal3 annotation in the same store
// (someone else's protocol) is neither acted on nor removed. Before, the
// keys were constants: the store had to speak reboot.metal3.io.
func TestWithPrefix(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	hw := fake.NewPower(clk.Real, fake.PowerConfig{})
	raw := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true})
	hosts, err := reboot.WithPrefix(raw, "reboot.example.com")
	require.NoError(t, err)
	_, isWatcher := hosts.(reboot.HostWatcher)
	assert.True(t, isWatcher, "a watching store stays one")

	// Someone else's metal3 request: not ours.
	require.NoError(t, raw.Mutate("h", func(h *reboot.Host) { h.Annotations = map[string]string{reboot.Annotation: ""} }))
	r := &reboot.Reconciler{Hosts: hosts, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return hw, nil }, Config: reboot.Config{StaleReads: 5 * time.Second}}
	for i := 0; i < 5; i++ {
		_, err := r.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Second)
	}
	assert.Equal(t, 0, hw.Cycles(), "acted on a metal3 key in a store of another prefix")
	assert.True(t, hw.HardwareOn())

	c := &reboot.Client{Hosts: hosts, Key: "fencing", Now: clk.Now}
	tk, err := c.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	stored, _ := raw.Get(ctx, "h")
	assert.Contains(t, stored.Annotations, "reboot.example.com/fencing")
	assert.Contains(t, stored.Annotations, reboot.Annotation, "the metal3 key is kept as it was")
	requested := clk.Real()
	for i := 0; ; i++ {
		require.Less(t, i, 100, "never fenced")
		_, err := r.Reconcile(ctx, "h")
		require.NoError(t, err)
		if ok, _ := c.Fenced(ctx, tk); ok {
			break
		}
		clk.Advance(time.Second)
	}
	assert.True(t, hw.WasOffDuring(requested, clk.Real()))
	stored, _ = raw.Get(ctx, "h")
	assert.Contains(t, stored.Annotations, reboot.Annotation)
	assert.Contains(t, stored.Annotations, "reboot.example.com/fencing")

	for _, bad := range []string{"", "reboot.metal3.io", "Reboot.Example.com", "a/b", "-x.com"} {
		_, err := reboot.WithPrefix(raw, bad)
		assert.ErrorIs(t, err, reboot.ErrInvalidKey, bad)
	}
}

// TestWithPrefixConformance runs the conformance kit through WithPrefix
// over the fake store.
func TestWithPrefixConformance(t *testing.T) {
	reboottest.Check(t, func(h reboot.Host) (reboottest.Stores, error) {
		raw := fake.NewRebootHosts(h)
		s, err := reboot.WithPrefix(raw, "reboot.example.com")
		if err != nil {
			return reboottest.Stores{}, err
		}
		other, err := reboot.WithPrefix(raw.Other(), "reboot.example.com")
		return reboottest.Stores{Hosts: s, Other: other}, err
	})
}
