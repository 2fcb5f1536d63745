package reboot_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

func TestClientRoundTrip(t *testing.T) {
	w := newWorld(t, fake.PowerConfig{Lag: 2 * time.Second}, reboot.Host{Online: true})
	c := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
	tk, err := c.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	assert.Equal(t, "reboot.metal3.io/fencing", tk.Annotation)
	require.NoError(t, reboot.Validate(tk.Annotation, tk.Value), "the client writes valid values")
	reqs, _ := reboot.ParseAnnotations(w.host(t).Annotations, reboot.Policy{})
	require.Len(t, reqs, 1)
	assert.Equal(t, power.ModeHard, reqs[0].Mode)

	f, err := c.Fenced(w.ctx, tk)
	require.NoError(t, err)
	assert.False(t, f)
	for i := 0; i < 40 && !f; i++ { // StaleReads (30 s) after the request
		w.pass(t)
		w.clk.Advance(time.Second)
		f, err = c.Fenced(w.ctx, tk)
		require.NoError(t, err)
	}
	require.True(t, f)
	assert.True(t, w.pw.WasOffDuring(tk.At, w.clk.Real()))
	done, err := c.Done(w.ctx, tk)
	require.NoError(t, err)
	assert.False(t, done, "not done while held")

	require.NoError(t, c.Release(w.ctx, tk))
	require.NoError(t, c.Release(w.ctx, tk), "releasing twice is fine")
	for i := 0; i < 10 && !done; i++ {
		w.pass(t)
		w.clk.Advance(time.Second)
		done, err = c.Done(w.ctx, tk)
		require.NoError(t, err)
	}
	assert.True(t, done)
	assert.True(t, w.pw.HardwareOn())
}

// A request written again (same key, new value) is a new request: the
// controller's evidence for the old one does not fence the new T.
func TestClientRequestAgainIsNew(t *testing.T) {
	w := newWorld(t, fake.PowerConfig{}, reboot.Host{Online: true})
	c := &reboot.Client{Hosts: w.store, Key: "fencing", Now: w.clk.Now}
	tk, err := c.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	for i := 0; i < 35; i++ {
		w.pass(t)
		w.clk.Advance(time.Second)
	}
	f, _ := c.Fenced(w.ctx, tk)
	require.True(t, f)
	w.clk.Advance(300 * time.Millisecond)
	tk2, err := c.Request(w.ctx, "h", power.ModeHard)
	require.NoError(t, err)
	_, err = c.Fenced(w.ctx, tk)
	assert.ErrorIs(t, err, reboot.ErrReplaced, "the old ticket's annotation was replaced")
	f, err = c.Fenced(w.ctx, tk2)
	require.NoError(t, err)
	assert.False(t, f, "the new request is not fenced by old evidence")
	for i := 0; i < 35 && !f; i++ {
		w.pass(t)
		w.clk.Advance(time.Second)
		f, err = c.Fenced(w.ctx, tk2)
		require.NoError(t, err)
	}
	assert.True(t, f)
}

func TestClientErrors(t *testing.T) {
	store := fake.NewRebootHosts(reboot.Host{Name: "h"})
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	_, err := (&reboot.Client{Hosts: store, Key: "", Now: clk.Now}).Request(ctx, "h", power.ModeHard)
	assert.ErrorIs(t, err, reboot.ErrInvalidKey, "the bare annotation has no client side")
	_, err = (&reboot.Client{Hosts: store, Key: "-x", Now: clk.Now}).Request(ctx, "h", power.ModeHard)
	assert.ErrorIs(t, err, reboot.ErrInvalidKey)
	c := &reboot.Client{Hosts: store, Key: "k", Now: clk.Now}
	_, err = c.Request(ctx, "missing", power.ModeHard)
	assert.ErrorIs(t, err, reboot.ErrNotFound)

	// Conflicts are retried; a second writer between every read and write
	// makes it give up with ErrConflict after Retries.
	store.FailUpdates(3)
	_, err = c.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err, "three conflicts are retried")
	store.SetInterloper(func(string) {
		_ = store.Mutate("h", func(h *reboot.Host) { h.Annotations["x"] = clk.Now().String() })
		clk.Advance(time.Nanosecond)
	})
	_, err = (&reboot.Client{Hosts: store, Key: "k2", Now: clk.Now, Retries: 3}).Request(ctx, "h", power.ModeHard)
	assert.ErrorIs(t, err, reboot.ErrConflict)

	// WaitFenced gives up with the context.
	store.SetInterloper(nil)
	tk, err := c.Request(ctx, "h", power.ModeHard)
	require.NoError(t, err)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	c.Poll = time.Millisecond
	err = c.WaitFenced(wctx, tk)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
}

// FencedFor is sound on its own: with no evidence, no answer.
func TestFencedForNoEvidence(t *testing.T) {
	tk := reboot.Ticket{Host: "h", Annotation: "reboot.metal3.io/k", Value: `{"mode":"hard"}`, At: fake.Epoch}
	assert.False(t, reboot.FencedFor(reboot.Status{}, tk, fake.Epoch.Add(time.Hour)))
}
