package reboot_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReconcilerPersistsBeforePowerCall(t *testing.T) {
	ctx := context.Background()
	clk := fake.NewClock(time.Time{})
	pw := fake.NewPower(clk.Now, fake.PowerConfig{})
	store := fake.NewRebootHosts(reboot.Host{Name: "h", Online: true,
		Annotations: map[string]string{reboot.Annotation: ""}})
	var logs bytes.Buffer
	r := &reboot.Reconciler{Hosts: store, Now: clk.Now,
		Power:  func(string) (power.Controller, error) { return pw, nil },
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}

	// A conflict: nothing is written and no power call is made.
	store.FailUpdates(1)
	_, err := r.Reconcile(ctx, "h")
	require.ErrorIs(t, err, reboot.ErrConflict)
	for _, c := range pw.Calls() {
		assert.Equal(t, fake.OpState, c.Op, "no power call after a failed write")
	}

	// A busy power-off: the status was persisted, the pass asks to requeue.
	pw.FailNext(fake.OpOff, fake.Fault{Kind: fake.FaultBusy})
	res, err := r.Reconcile(ctx, "h")
	require.NoError(t, err)
	assert.ErrorIs(t, res.PowerErr, power.ErrBusy)
	assert.True(t, res.Requeue)
	h, _ := store.Get(ctx, "h")
	assert.True(t, h.Status.Pending())

	// The next pass waits for the retry delay instead of hammering the BMC.
	res, err = r.Reconcile(ctx, "h")
	require.NoError(t, err)
	assert.Equal(t, reboot.ActionNone, res.Decision.Power)
	assert.Equal(t, 10*time.Second, res.RequeueAfter)
	assert.Contains(t, logs.String(), "powerError")

	_, err = r.Reconcile(ctx, "missing")
	assert.ErrorIs(t, err, reboot.ErrNotFound)
}

func TestReconcilerPowerLookupError(t *testing.T) {
	store := fake.NewRebootHosts(reboot.Host{Name: "h"})
	boom := errors.New("no BMC configured")
	r := &reboot.Reconciler{Hosts: store, Now: fake.NewClock(time.Time{}).Now,
		Power: func(string) (power.Controller, error) { return nil, boom }}
	_, err := r.Reconcile(context.Background(), "h")
	assert.ErrorIs(t, err, boom)
	assert.True(t, strings.Contains(err.Error(), "h"))
}
