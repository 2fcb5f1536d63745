package remediation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

// ErrUnknownHost: RebootAPIHosts.HostOf named a host the reboot store does
// not have.
var ErrUnknownHost = errors.New("remediation: unknown host")

// Compile-time checks: *RebootAPIHosts is a HostStore and a RequestRemover.
var (
	_ HostStore      = (*RebootAPIHosts)(nil)
	_ RequestRemover = (*RebootAPIHosts)(nil)
	_ RequestReader  = (*RebootAPIHosts)(nil)
)

// RebootHosts is RebootAPIHosts.
//
// Deprecated: use RebootAPIHosts (fake.RebootHosts and kube.RebootHosts
// are reboot.HostStores, another thing).
type RebootHosts = RebootAPIHosts

// RebootAPIHosts is the remediation's HostStore over the reboot API, through
// its client side (reboot.Client), over a reboot.HostStore: it is not one
// itself (fake.RebootHosts and kube.RebootHosts are reboot.HostStores, the
// records the reboot controller reads; this type asks that controller for
// reboots of Machines' hosts): the remediation asks for a phased hard reboot with
// RebootAnnotation, learns that the host is fenced from the reboot
// controller's evidence for that very request (reboot.FencedFor), unless
// the controller reports its hold broken since (Status.HoldBroken after the
// evidence: processes ran on the host again), and that it is back from the controller's power-on after the request, confirmed,
// when Power is set, by an On reading that cannot be stale (see Power).
// It never decides on a power reading alone, which a BMC may echo from
// before a reset.
type RebootAPIHosts struct {
	// Hosts is the reboot controller's host store.
	Hosts reboot.HostStore
	// HostOf maps a Machine to its host's name: "" with a nil error if the
	// Machine has no host (Host.Missing); an error if it cannot tell (the
	// pass fails and is retried).
	HostOf func(ctx context.Context, machine string) (string, error)
	// Now is the clock (the controllers' clock).
	Now func() time.Time
	// Power, if set, gives a host's power controller; its reading fills
	// Host.Power, which Table mode and messages use, and PoweredOn then
	// also needs it On, read at least the host's StaleReads (else
	// StaleReads, else the reboot default) plus a second after the
	// controller's Status.LastPoweredOn, as reboot.Client.Up: that record
	// is written before the power-on is sent, which a BMC may refuse.
	// Without Power, PoweredOn needs the controller's own confirmation
	// instead (Status.OnConfirmed: an On reading after the power-on that
	// cannot be an echo, written by a reboot controller of this version):
	// the record alone never says the host is on, so a host whose BMC
	// refuses the power-on stays held (counted by the storm guard), and
	// a Machine that moves to another host meanwhile waits for that
	// confirmation until its attempt's timeout, then fails.
	Power func(host string) (power.Controller, error)
	// StaleReads is how long a power reading may echo an older state, for
	// hosts that do not set their own (reboot.Host.StaleReads); 0: the
	// reboot default.
	StaleReads time.Duration
	// HostsMayVanish: a host HostOf names that the store does not have
	// counts as Missing (deleted mid-remediation: the attempt waits for
	// it until its timeout, then escalates), as BareMetalHosts may be
	// deleted while their Machine still names them (the kube module sets
	// it). False (the default, for inventories whose host records outlive
	// their machines): it is an error wrapping ErrUnknownHost, the pass
	// fails and is retried, and nothing escalates on a wrong mapping.
	HostsMayVanish bool
	// OwnerOnline: the store fills every host's Online with its owner's
	// wish (kube.RebootHosts: the BareMetalHost's spec.online; the kube
	// module sets it), and Deprovisioned or Unprovisioned when its owner
	// released it. A host with Online false, released, and no request of
	// the Machine's on it is then Host.Offline, not held (for a live
	// Machine, unless a power-on recorded after the request's power-off
	// (or after the request was seen, with no Off reading recorded: a
	// BMC stuck mid power change) was never read On, by Power or,
	// without it, by the controller's
	// Status.OnConfirmed, and the controller began no Online=false
	// enforcement for its owner since (an OfflineSince after that power-on counts
	// only once the controller read the host On after it: readOnAfter):
	// RebootPending; for a Machine that is gone,
	// ReadRequest, whatever its power). Online false on a host not
	// released is one reading its owner may take back (a blip) and
	// releases nothing: the reboot
	// controller keeps it off for its owner ("held while Online is
	// false") and powers it on for no request, so a Machine deleted after
	// its host was released and deprovisioned gives its admission back.
	// False (the default): Online is not trusted for that, since a store
	// may leave it unset, and such a host stays held until it is powered
	// on.
	OwnerOnline bool
	// Retries bounds conflicting writes retried by RemoveRebootAnnotation.
	// Default 10.
	Retries int

	// gone: read for a Machine that is gone (ReadRequest), whose owner
	// released its host: Online false is that release, not a blip.
	gone bool
}

func (r *RebootAPIHosts) client() *reboot.Client {
	return &reboot.Client{Hosts: r.Hosts, Key: RebootKey, Now: r.Now, Retries: r.Retries}
}

// Get implements HostStore. Host.Name is the host HostOf names now; the
// request's evidence is read on req.Host when it is set (the host the
// request was written to), else on that one.
func (r *RebootAPIHosts) Get(ctx context.Context, machine string, req Request) (Host, error) {
	name, err := r.HostOf(ctx, machine)
	if err != nil {
		return Host{}, fmt.Errorf("remediation: host of machine %s: %w", machine, err)
	}
	out := Host{Name: name, Missing: name == "", Power: power.StateUnknown}
	if name != "" && req.Host != "" && req.Host != name {
		// Moved: the current host must exist as before; the evidence
		// comes from the request's host.
		if _, err := r.Hosts.Get(ctx, name); errors.Is(err, reboot.ErrNotFound) {
			if !r.HostsMayVanish {
				return Host{}, r.unknown(machine, name)
			}
			out.Name, out.Missing = "", true
		} else if err != nil {
			return Host{}, err
		}
	}
	target := name
	if req.Host != "" {
		target = req.Host
	}
	if target == "" {
		return out, nil
	}
	return r.read(ctx, machine, name, target, out, req)
}

// read fills out from the host target (the request's host, or name: the
// one HostOf names) for req.
func (r *RebootAPIHosts) read(ctx context.Context, machine, name, target string, out Host, req Request) (Host, error) {
	h, err := r.Hosts.Get(ctx, target)
	if errors.Is(err, reboot.ErrNotFound) {
		if target != name {
			return out, nil // the request's host is gone, and its request with it
		}
		if !r.HostsMayVanish {
			return Host{}, r.unknown(machine, name)
		}
		return Host{Missing: true, Power: power.StateUnknown}, nil
	}
	if err != nil {
		return Host{}, err
	}
	v, present := h.Annotations[RebootAnnotation]
	// Another Machine's request (a host re-used) is not this one's.
	present = present && SameMachine(v, req.Value)
	out.RebootAnnotation, out.Requested = present, present && req.Value != "" && v == req.Value
	if present {
		out.RequestT = RequestTime(v)
	}
	if req.Value != "" && !req.At.IsZero() {
		tk := reboot.Ticket{Host: target, Annotation: RebootAnnotation, Value: req.Value, At: req.At}
		// A hold someone broke (the host powered on behind the
		// controller since its evidence) fences nothing: processes ran
		// on the host since, and a Node deleted now may still run them.
		broken := h.Status.HoldBroken.After(h.Status.LastPoweredOff) && h.Status.HoldBroken.After(req.At)
		out.Fenced = out.Requested && reboot.FencedFor(h.Status, tk, r.Now()) && !broken
		out.PoweredOn = !present && h.Status.LastPoweredOn.After(req.At) && !h.Status.Pending()
		out.ConfirmedOn = h.Status.LastPoweredOn.After(req.At) && h.Status.OnConfirmed.Equal(h.Status.LastPoweredOn)
		if r.Power == nil {
			// The record alone is a power-on decided, not done (a BMC may
			// refuse it): without a reading of its own, the controller's
			// confirmation by an On reading that cannot be an echo.
			out.PoweredOn = out.PoweredOn && out.ConfirmedOn
		}
		out.OffAfterRequest = h.Status.LastPoweredOff.After(req.At)
		out.RebootPending = h.Status.Pending()
	}
	// The reboot controller keeps a host with Online false off ("held
	// while Online is false") and powers it on for no request. Online
	// false alone is one reading of a wish its owner may take back (a
	// blip, after which the controller powers the host on for a pending
	// reboot, or fails to if its BMC refuses): only a host its owner
	// released (deprovisioned or being, or unprovisioned) is let go for
	// it, as kube.OperatorHosts requires.
	out.Offline = r.OwnerOnline && !h.Online && !out.RebootAnnotation && (h.Deprovisioned || h.Unprovisioned)
	if r.Power != nil {
		// The clock before the reading: the reading is no older than this.
		now := r.Now()
		if pc, err := r.Power(target); err == nil {
			if s, err := pc.State(ctx); err == nil {
				out.Power = s
			}
		}
		// LastPoweredOn is written before the power-on is sent (a BMC may
		// refuse it): with Power, only an On reading that cannot echo the
		// state from before the power-on tells that the host is on
		// (reboot.Client.Up's rule).
		from := reboot.UpReadFrom(h, r.StaleReads)
		if out.PoweredOn && now.Before(from) {
			out.PoweredOn, out.UpReadFrom = false, from
		}
		out.PoweredOn = out.PoweredOn && out.Power == power.StateOn
	}
	// A power-on the controller recorded after the request's power-off
	// that was never read On (a BMC refusing it: with Power, no On
	// reading now; without, no Status.OnConfirmed), and no power-off for
	// its owner since (Status.OfflineSince, written when the controller
	// begins an Online=false enforcement: when it powers the host off for
	// it, or when it reads the host Off by a reading that cannot echo with
	// nothing to power off): the reboot is not over.
	// The controller powers the host on for it whenever Online is true,
	// so an owner's Online false-and-back blip does not let the host go
	// (held: RebootPending).
	//
	// Not for a Machine that is gone (ReadRequest) whose host is Offline:
	// its owner released the host (deprovisioned and kept off), the
	// lasting release OwnerOnline describes, whether or not the host was
	// on when it came (the controller writes OfflineSince also for a host
	// already off when Online=false came).
	//
	// Likewise for a power-on recorded after the request for a power-off
	// before it (the request written to a host already off, no power-on
	// recorded in between: a retry's, persisted while its host was off
	// for the attempt before): the host is off for the Machine's requests
	// until it is read On, whatever request's time it is read for.
	//
	// And for a power-on recorded after a request the controller saw at
	// or after the request's time (PendingRebootSince, or LastRequestSeen
	// for a request that joined a pending reboot), whether or not a
	// power-off was recorded: a power-off sent whose Off reading never
	// came (a BMC stuck reading Transitioning) leaves no LastPoweredOff,
	// yet the host may be off for the request
	// (TestReviewSgaa_StuckTransitioningBMCReleasesOffHost).
	//
	// OfflineSince is taken as the owner's power-off of an On host only
	// when the controller read the host On after its last power-on
	// (readOnAfter): it begins the Online=false enforcement on any
	// non-Off reading, Transitioning too, so a BMC stuck reading
	// Transitioning after a refused power-on would otherwise let an
	// owner's blip drop RebootPending while the host is off
	// (TestReviewSgab_StuckTransitioningOwnerBlipReleasesOffHost).
	st := h.Status
	if readOnAfter(st) && !st.LastPoweredOff.After(st.LastPoweredOn) && !st.Pending() {
		out.OnConfirmedAt = st.OnConfirmed
	}
	neverOn := !out.PoweredOn && out.Power != power.StateOn && (r.Power != nil || !out.ConfirmedOn)
	offAt := st.LastPoweredOff.After(req.At) || !st.LastPoweredOff.IsZero() && st.LastPoweredOn.After(req.At) ||
		seenAfter(st, req.At)
	if !(r.gone && out.Offline) && req.Value != "" && !req.At.IsZero() && neverOn &&
		offAt && !st.LastPoweredOn.Before(st.LastPoweredOff) &&
		!(st.OfflineSince.After(st.LastPoweredOn) && readOnAfter(st)) {
		out.RebootPending = true
	}
	return out, nil
}

// ReadRequest implements RequestReader: Get for req on req.Host, without
// HostOf (Host.Name is req.Host); a host the store no longer has is
// Missing. Without req.Host it is Get. The Machine is gone (the
// Reconciler reads through it only for such Machines): with OwnerOnline,
// a host whose owner set Online false and released it (deprovisioned or
// unprovisioned) with no request of the Machine's on it and no reboot
// pending in the controller's status is Offline and
// not held, even if its last power-on was never read On (a BMC that
// refused it): the owner released it.
func (r *RebootAPIHosts) ReadRequest(ctx context.Context, machine string, req Request) (Host, error) {
	if req.Host == "" {
		return r.Get(ctx, machine, req)
	}
	c := *r
	c.HostOf = func(context.Context, string) (string, error) { return req.Host, nil }
	c.HostsMayVanish, c.gone = true, true
	return c.Get(ctx, machine, req)
}

func (r *RebootAPIHosts) unknown(machine, host string) error {
	return fmt.Errorf("remediation: machine %s maps to host %s, which the host store does not have (fix HostOf or add the host): %w",
		machine, host, ErrUnknownHost)
}

// AddRebootAnnotation implements HostStore.
func (r *RebootAPIHosts) AddRebootAnnotation(ctx context.Context, machine string, req Request) error {
	name, err := r.hostFor(ctx, machine, req)
	if err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("remediation: machine %s has no host: %w", machine, ErrNotFound)
	}
	_, err = r.client().RequestWith(ctx, name, req.Value, req.At)
	return err
}

// hostFor is req.Host, or the host HostOf names when it is not set.
func (r *RebootAPIHosts) hostFor(ctx context.Context, machine string, req Request) (string, error) {
	if req.Host != "" {
		return req.Host, nil
	}
	name, err := r.HostOf(ctx, machine)
	if err != nil {
		return "", fmt.Errorf("remediation: host of machine %s: %w", machine, err)
	}
	return name, nil
}

// RemoveRebootAnnotation implements HostStore: RemoveRebootRequest from
// the host HostOf names now.
func (r *RebootAPIHosts) RemoveRebootAnnotation(ctx context.Context, machine string) error {
	return r.RemoveRebootRequest(ctx, machine, Request{})
}

// RemoveRebootRequest implements RequestRemover: it removes the annotation
// from req.Host (the host HostOf names if it is not set), with versioned
// writes, retrying conflicts, if its value is this Machine's (SameMachine
// with req.Value; any value if req.Value is empty): another Machine's
// request on a host this one used to map to is left alone.
func (r *RebootAPIHosts) RemoveRebootRequest(ctx context.Context, machine string, req Request) error {
	name, err := r.hostFor(ctx, machine, req)
	if err != nil {
		return err
	}
	if name == "" {
		return nil // no host, no annotation
	}
	n := r.Retries
	if n <= 0 {
		n = 10
	}
	for i := 0; i < n; i++ {
		var h reboot.Host
		if h, err = r.Hosts.Get(ctx, name); errors.Is(err, reboot.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		if v, ok := h.Annotations[RebootAnnotation]; !ok || !SameMachine(v, req.Value) {
			return nil
		}
		h.Annotations = maps.Clone(h.Annotations)
		delete(h.Annotations, RebootAnnotation)
		if err := ctx.Err(); err != nil { // the reads outlasted the caller's (the Guard's) deadline
			return fmt.Errorf("remediation: remove %s from %s: %w", RebootAnnotation, name, err)
		}
		if _, err = r.Hosts.Update(ctx, h); !errors.Is(err, reboot.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("remediation: remove %s from %s: %w", RebootAnnotation, name, err)
}

// SameMachine reports whether the reboot request value have is of the
// Machine that want names: equal, or both RebootValues naming the same
// Machine UID (of any attempt). An empty want matches any value.
func SameMachine(have, want string) bool {
	if want == "" || have == want {
		return true
	}
	w, ok := requestOwner(want)
	if !ok {
		return false
	}
	h, ok := requestOwner(have)
	return ok && h == w
}

// requestOwner returns the Machine UID a RebootValue names.
func requestOwner(v string) (string, bool) {
	var x struct {
		Machine *string `json:"machine"`
	}
	if json.Unmarshal([]byte(v), &x) != nil || x.Machine == nil || *x.Machine == "" {
		return "", false
	}
	return *x.Machine, true
}

// RequestTime returns the attempt time a reboot request's value carries
// (RebootValue's attempt; zero if it carries none, or v is not one): a
// HostStore fills Host.RequestT with it.
func RequestTime(v string) time.Time {
	var x struct {
		RequestedAt string `json:"requestedAt"`
	}
	if json.Unmarshal([]byte(v), &x) != nil || x.RequestedAt == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, x.RequestedAt)
	if err != nil {
		return time.Time{}
	}
	return t
}

// seenAfter reports whether the reboot controller saw a request at or
// after at (Status.PendingRebootSince, or Status.LastRequestSeen: a
// request joining a pending reboot) and recorded a power-on after it.
func seenAfter(st reboot.Status, at time.Time) bool {
	seen := st.PendingRebootSince
	if st.LastRequestSeen.After(seen) {
		seen = st.LastRequestSeen
	}
	return !seen.IsZero() && !seen.Before(at) && st.LastPoweredOn.After(seen)
}

// readOnAfter reports whether the reboot controller's status shows the
// host read On after its last recorded power-on (Status.OnConfirmed is
// LastPoweredOn): only then is an OfflineSince after that power-on
// evidence that the owner powered an On host off, not the enforcement
// begun on a Transitioning reading of a host the power-on never reached.
func readOnAfter(st reboot.Status) bool {
	return !st.OnConfirmed.IsZero() && st.OnConfirmed.Equal(st.LastPoweredOn)
}
