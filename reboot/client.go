package reboot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// ErrReplaced: the client's annotation was removed or rewritten by someone
// else while the client held it, so the request it made is gone.
var ErrReplaced = errors.New("reboot: the client's request annotation was removed or replaced")

// Client is the client side of the reboot protocol, for fencing agents and
// remediation controllers: add a keyed (phased) request, wait until the
// host is fenced, release it, wait until the reboot is done. It speaks to
// the same HostStore as the controller, so that client and controller
// cannot disagree about the protocol.
//
// A Client is safe for concurrent use. Its clock must be the controller's
// clock or agree with it (both usually read the same NTP-synchronised wall
// clock); Fenced also accepts the controller's own "covers this request"
// answer, which does not compare clocks at all.
type Client struct {
	// Hosts is the store the controller reads.
	Hosts HostStore
	// Key is this client's key: its annotation is reboot.metal3.io/{Key}.
	// It must be a valid annotation name segment. The bare annotation has
	// no client side: use Key for anything that waits for an answer.
	Key string
	// Now is the client's clock.
	Now func() time.Time
	// Poll is how often the Wait methods read the host when the store
	// cannot tell them of changes (HostWatcher). With a watch they read it
	// on every change, and every 30 Polls in any case. Default 1 s.
	Poll time.Duration
	// Retries is how many conflicting writes Request and Release retry
	// before they give up. Default 10.
	Retries int
	// Power, if set, reads a host's power for Up and WaitUp.
	Power func(host string) (power.Controller, error)
	// StaleReads is how old a power reading may be (reboot's assumption
	// A1), for Up: the host's own Host.StaleReads if set, else this,
	// else the controller's default (30 s).
	StaleReads time.Duration
}

// Ticket is one request made by a Client: what Fenced, Release and Done
// need to know about it.
type Ticket struct {
	// Host is the host's name.
	Host string
	// Annotation is the full annotation key written.
	Annotation string
	// Value is the annotation value written (mode and a request stamp).
	Value string
	// At is the client's time taken before the annotation was written: the
	// fencing decision point T of the seed. Every process that ran on the
	// host at At is stopped once Fenced is true.
	At time.Time
}

// Annotation returns the annotation key of this client.
func (c *Client) Annotation() string { return AnnotationPrefix + c.Key }

func (c *Client) poll() time.Duration {
	if c.Poll > 0 {
		return c.Poll
	}
	return time.Second
}

func (c *Client) retries() int {
	if c.Retries > 0 {
		return c.Retries
	}
	return 10
}

// RequestValue returns the annotation value a Client writes: the mode and
// the request time, which makes every request distinct (the controller
// tells a request written again from the one it already saw by its value).
// It is always valid JSON, and the controller ignores the extra field.
func RequestValue(mode power.Mode, at time.Time) string {
	b, _ := json.Marshal(struct {
		Mode        string `json:"mode"`
		RequestedAt string `json:"requestedAt"`
	}{mode.String(), at.UTC().Format(time.RFC3339Nano)})
	return string(b)
}

// Request asks for a phased reboot of host in mode (use power.ModeHard for
// fencing: a soft shutdown may take minutes). It takes T (Ticket.At) before
// writing, then adds its annotation with a versioned write, retrying on
// conflicts. An annotation of this client already present is replaced: the
// new request starts a new wait.
func (c *Client) Request(ctx context.Context, host string, mode power.Mode) (Ticket, error) {
	at := c.Now()
	return c.RequestWith(ctx, host, RequestValue(mode, at), at)
}

// RequestWith is Request with the caller's value and T: at must have been
// taken (from the controller's clock) before this call, and value must be
// distinct for every request of this client, e.g. by carrying at, so that
// the controller can tell a new request from an old one. Use it when the
// request's T is already persisted elsewhere (the remediation package
// stores it with its attempt).
func (c *Client) RequestWith(ctx context.Context, host, value string, at time.Time) (Ticket, error) {
	if err := validSegment(c.Key); err != nil {
		return Ticket{}, &AnnotationError{Key: c.Annotation(), Err: err}
	}
	t := Ticket{Host: host, Annotation: c.Annotation(), At: at, Value: value}
	err := c.update(ctx, host, func(h *Host) bool {
		if h.Annotations == nil {
			h.Annotations = map[string]string{}
		}
		h.Annotations[t.Annotation] = t.Value
		return true
	})
	if err != nil {
		return Ticket{}, fmt.Errorf("reboot: request %s on %s: %w", t.Annotation, host, err)
	}
	return t, nil
}

// Fenced reports whether every process that ran on the host at t.At is
// known to be stopped: the controller holds evidence that the hardware was
// off at an instant at or after t.At (Status.Fenced), or that it was off
// after the controller first saw this very request (Status.Covers with the
// request among those seen). It returns ErrReplaced if the annotation is
// no longer the one this ticket wrote: the host may be powered on again.
func (c *Client) Fenced(ctx context.Context, t Ticket) (bool, error) {
	h, err := c.Hosts.Get(ctx, t.Host)
	if err != nil {
		return false, fmt.Errorf("reboot: fenced %s: %w", t.Host, err)
	}
	if v, ok := h.Annotations[t.Annotation]; !ok || v != t.Value {
		return false, fmt.Errorf("reboot: fenced %s: %w", t.Host, ErrReplaced)
	}
	return FencedFor(h.Status, t, c.Now()), nil
}

// FencedFor is the pure answer of Client.Fenced for a status read while the
// ticket's annotation is still present, at the client's time now.
func FencedFor(st Status, t Ticket, now time.Time) bool {
	if st.Fenced(t.At, now) {
		return true
	}
	if !st.Covers() {
		return false
	}
	_, found := seenIndex(st.Seen, t.Annotation, t.Value)
	return found
}

// HoldBroken reports when the host was last seen powered on by someone
// else while the controller held it off for this ticket (Status.HoldBroken),
// or the zero time if it was not since t.At. The controller powers such a
// host off again at once; Fenced(t) stays true (the processes that ran at
// t.At did stop), but processes may have run on the host since the
// instant returned: a fencing agent that must keep the host down should
// treat it as an alarm. It returns ErrReplaced like Fenced.
func (c *Client) HoldBroken(ctx context.Context, t Ticket) (time.Time, error) {
	h, err := c.Hosts.Get(ctx, t.Host)
	if err != nil {
		return time.Time{}, fmt.Errorf("reboot: hold of %s: %w", t.Host, err)
	}
	if v, ok := h.Annotations[t.Annotation]; !ok || v != t.Value {
		return time.Time{}, fmt.Errorf("reboot: hold of %s: %w", t.Host, ErrReplaced)
	}
	if b := h.Status.HoldBroken; b.After(t.At) && h.Status.Pending() {
		return b, nil
	}
	return time.Time{}, nil
}

// WaitFenced waits until Fenced is true, an error, or ctx is done: it
// checks on every change of the host's record if the store is a
// HostWatcher, and polls every Poll otherwise.
func (c *Client) WaitFenced(ctx context.Context, t Ticket) error {
	return c.wait(ctx, t.Host, func() (bool, error) { return c.Fenced(ctx, t) })
}

// Release removes the ticket's annotation (if it is still the ticket's),
// letting the controller power the host on once no other client holds it.
func (c *Client) Release(ctx context.Context, t Ticket) error {
	err := c.update(ctx, t.Host, func(h *Host) bool {
		if v, ok := h.Annotations[t.Annotation]; !ok || v != t.Value {
			return false
		}
		delete(h.Annotations, t.Annotation)
		return true
	})
	if err != nil {
		return fmt.Errorf("reboot: release %s on %s: %w", t.Annotation, t.Host, err)
	}
	return nil
}

// Done reports whether the reboot the ticket asked for is over: its
// annotation is gone and the controller powered the host on after t.At
// (the seed's rule: lastPoweredOn later than the request). That is "the
// power-on was decided and sent": the host may still be off (a BMC takes
// seconds) or fail to come on. Up tells when the host reads on after it.
func (c *Client) Done(ctx context.Context, t Ticket) (bool, error) {
	h, err := c.Hosts.Get(ctx, t.Host)
	if err != nil {
		return false, fmt.Errorf("reboot: done %s: %w", t.Host, err)
	}
	_, present := h.Annotations[t.Annotation]
	return !present && h.Status.LastPoweredOn.After(t.At) && !h.Status.Pending(), nil
}

// WaitDone waits until Done is true, an error, or ctx is done (as
// WaitFenced).
func (c *Client) WaitDone(ctx context.Context, t Ticket) error {
	return c.wait(ctx, t.Host, func() (bool, error) { return c.Done(ctx, t) })
}

func (c *Client) wait(ctx context.Context, host string, f func() (bool, error)) error {
	every := c.poll()
	var changed <-chan struct{}
	if w, ok := c.Hosts.(HostWatcher); ok {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if ch, err := w.Watch(wctx, host); err == nil {
			// Subscribed before the first check: no change is missed. A
			// slow poll stays, for answers that change with the clock
			// alone (evidence written by a clock slightly ahead).
			changed, every = ch, 30*every
		}
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		ok, err := f()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case _, open := <-changed:
			if !open {
				changed = nil // the watch ended: poll
				tick.Reset(c.poll())
			}
		}
	}
}

// update reads the host, applies change (false: nothing to write), and
// writes it with a versioned Update, retrying on conflicts.
func (c *Client) update(ctx context.Context, host string, change func(h *Host) bool) error {
	var err error
	for i := 0; i < c.retries(); i++ {
		var h Host
		h, err = c.Hosts.Get(ctx, host)
		if err != nil {
			return err
		}
		h.Annotations = maps.Clone(h.Annotations)
		if !change(&h) {
			return nil
		}
		if err := ctx.Err(); err != nil { // the read outlasted ctx (a Guard's deadline)
			return fmt.Errorf("reboot: update %s: %w", host, err)
		}
		if _, err = c.Hosts.Update(ctx, h); !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return err
}
