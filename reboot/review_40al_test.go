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
)

// TestReview40al_PrefixRenamesForeignKeyIntoMetal3Request: WithPrefix
// says a metal3 key in the store is "written back as it was" and keys
// that are not the reboot API are the store's own. A store annotation
// that merely starts with the escape WithPrefix uses internally
// ("rebootkit.invalid/metal3.", a valid annotation name anyone may write)
// is passed through unchanged by Get but unescaped by Update: the
// Reconciler's first status write renames the user's annotation
// "rebootkit.invalid/metal3.reboot.metal3.io" to "reboot.metal3.io",
// creating a metal3 reboot request (someone else's protocol, which may
// act on it) and losing the user's key. Ground truth: the raw store.
func TestReview40al_PrefixRenamesForeignKeyIntoMetal3Request(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	hw := fake.NewPower(clk.Real, fake.PowerConfig{})
	const foreign = "rebootkit.invalid/metal3.reboot.metal3.io"
	raw := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true,
		Annotations: map[string]string{foreign: "user data", "team.example.com/owner": "x"}})
	hosts, err := reboot.WithPrefix(raw, "reboot.example.com")
	require.NoError(t, err)
	r := &reboot.Reconciler{Hosts: hosts, Now: clk.Now, Monotonic: clk.Monotonic,
		Power: func(string) (power.Controller, error) { return hw, nil }, Config: reboot.Config{StaleReads: 5 * time.Second}}
	c := &reboot.Client{Hosts: hosts, Key: "fencing", Now: clk.Now}
	_, err = c.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		_, err := r.Reconcile(ctx, "h")
		require.NoError(t, err)
		clk.Advance(time.Second)
	}
	require.Greater(t, raw.Updates(), 1, "the Reconciler wrote the record")
	stored, err := raw.Get(ctx, "h")
	require.NoError(t, err)
	assert.NotContains(t, stored.Annotations, reboot.Annotation,
		"a metal3 reboot request appeared in the store that nobody wrote")
	assert.Equal(t, "user data", stored.Annotations[foreign], "the user's annotation was renamed or lost")
}

// TestReview40al_PrefixCollisionLosesMetal3Request: a store holding both
// someone else's metal3 request "reboot.metal3.io" and an annotation
// "rebootkit.invalid/metal3.reboot.metal3.io" maps both to one key in
// Get; a plain read-modify-write through WithPrefix (what Client and the
// Reconciler do) then loses one of them: the metal3 key is not "written
// back as it was" (its value may be the other's) and the other key is
// gone.
func TestReview40al_PrefixCollisionLosesMetal3Request(t *testing.T) {
	ctx := context.Background()
	const foreign = "rebootkit.invalid/metal3.reboot.metal3.io"
	raw := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true,
		Annotations: map[string]string{reboot.Annotation: "metal3's", foreign: "user data"}})
	hosts, err := reboot.WithPrefix(raw, "reboot.example.com")
	require.NoError(t, err)
	h, err := hosts.Get(ctx, "h")
	require.NoError(t, err)
	_, err = hosts.Update(ctx, h)
	require.NoError(t, err)
	stored, err := raw.Get(ctx, "h")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{reboot.Annotation: "metal3's", foreign: "user data"}, stored.Annotations,
		"an unchanged read-modify-write through WithPrefix changed the store's annotations")
}
