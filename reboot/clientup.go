package reboot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// ErrNoPower: Up was asked of a Client without Power.
var ErrNoPower = errors.New("reboot: the client has no Power to read the host's power with")

// upPrecision covers the stored timestamps' precision (Config.Precision,
// 1 s by default): LastPoweredOn may be up to that much earlier than the
// power-on.
const upPrecision = time.Second

// Up reports whether the host the ticket rebooted reads on after the
// reboot: Done is true, and a power reading of On, taken now, cannot echo
// the state from before the power-on (it is taken at least StaleReads plus
// a second after Status.LastPoweredOn, by assumption A1). Done says the
// power-on was decided; Up that the host has been on since. It needs
// Client.Power; a read that fails or is not On answers false.
func (c *Client) Up(ctx context.Context, t Ticket) (bool, error) {
	if c.Power == nil {
		return false, ErrNoPower
	}
	h, err := c.Hosts.Get(ctx, t.Host)
	if err != nil {
		return false, fmt.Errorf("reboot: up %s: %w", t.Host, err)
	}
	if _, present := h.Annotations[t.Annotation]; present || !h.Status.LastPoweredOn.After(t.At) || h.Status.Pending() {
		return false, nil
	}
	pc, err := c.Power(t.Host)
	if err != nil {
		return false, fmt.Errorf("reboot: up %s: power controller: %w", t.Host, err)
	}
	// The clock before the reading: the reading is no older than this.
	now := c.Now()
	if now.Before(UpReadFrom(h, c.StaleReads)) {
		return false, nil
	}
	s, err := pc.State(ctx)
	return err == nil && s == power.StateOn, nil
}

// UpReadFrom is the earliest time a power reading of h taken then (the
// clock read before the reading) can tell that h is on after its last
// power-on: StaleReads plus a second after Status.LastPoweredOn, by
// assumption A1. The host's StaleReads count, else stale, else the
// Config default. Status.LastPoweredOn is written before the power-on is
// sent, so it alone does not say the host is on.
func UpReadFrom(h Host, stale time.Duration) time.Time {
	if h.StaleReads > 0 {
		stale = h.StaleReads
	}
	if stale <= 0 {
		stale = Config{}.withDefaults().StaleReads
	}
	return h.Status.LastPoweredOn.Add(stale + upPrecision)
}

// WaitUp waits until Up is true, an error, or ctx is done, reading the
// host and its power every Client.Poll.
func (c *Client) WaitUp(ctx context.Context, t Ticket) error {
	tick := time.NewTicker(c.poll())
	defer tick.Stop()
	for {
		ok, err := c.Up(ctx, t)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}
