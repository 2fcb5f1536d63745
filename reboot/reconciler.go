package reboot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// Store errors. Implementations of HostStore return them (wrapped is fine).
var (
	// ErrNotFound: no host of that name.
	ErrNotFound = errors.New("reboot: host not found")
	// ErrConflict: the host changed since it was read (optimistic
	// concurrency); read again and decide again.
	ErrConflict = errors.New("reboot: host changed since it was read")
)

// Host is the stored host record the Reconciler reads and writes.
type Host struct {
	// Name identifies the host.
	Name string
	// Version is the store's opaque version of the record (a Kubernetes
	// resourceVersion); Update fails with ErrConflict unless it is current.
	Version string
	// Annotations, Online, Deprovisioned and Status are as in Observed.
	Annotations   map[string]string
	Online        bool
	Deprovisioned bool
	Status        Status
}

// HostStore reads and writes host records.
type HostStore interface {
	// Get returns the host or an error wrapping ErrNotFound.
	Get(ctx context.Context, name string) (Host, error)
	// Update writes h's Annotations and Status if h.Version is the current
	// version, and returns the record with its new version. It returns an
	// error wrapping ErrConflict if the version is stale. It must write
	// annotations and status atomically, or annotations first.
	Update(ctx context.Context, h Host) (Host, error)
}

// Result is what one Reconcile pass did and when to run the next.
type Result struct {
	// Decision is the decision applied.
	Decision Decision
	// PowerErr is the error of the power call made, if any; it is also
	// fed into the next pass.
	PowerErr error
	// RequeueAfter is when to reconcile this host again; zero with Requeue
	// false means only when the host changes.
	RequeueAfter time.Duration
	// Requeue asks for another pass at once (after a failed power call, so
	// that the next decision can act on the failure).
	Requeue bool
}

// Reconciler applies decisions for hosts: it reads the host and its power
// state, decides, persists status and annotation removals, then makes the
// power call. It is safe for concurrent use on different hosts; callers must
// not reconcile one host from two goroutines at once (controller work queues
// guarantee this).
type Reconciler struct {
	// Hosts is the host store.
	Hosts HostStore
	// Power returns the power controller of a host.
	Power func(name string) (power.Controller, error)
	// Now is the controller's clock.
	Now func() time.Time
	// Config tunes decisions.
	Config Config
	// Logger, if set, receives one line per pass that does something.
	Logger *slog.Logger
	// Monotonic returns the time elapsed on a monotonic clock (one that
	// never jumps). nil uses the process's monotonic clock. It measures
	// Observed.QuietFor: how long since this Reconciler last sent a
	// power-on to a host, or since its first pass.
	Monotonic func() time.Duration

	mu      sync.Mutex
	last    map[string]Call
	lastOn  map[string]time.Duration
	started bool
	start   time.Duration
}

// processStart anchors the default monotonic clock.
var processStart = time.Now()

func (r *Reconciler) monotonic() time.Duration {
	if r.Monotonic != nil {
		return r.Monotonic()
	}
	return time.Since(processStart)
}

// Forget drops what the Reconciler remembers of a host's last power call,
// as a process restart would: the host counts as possibly powered on just
// now, so Off readings are evidence again only after Config.StaleReads.
func (r *Reconciler) Forget(name string) {
	m := r.monotonic()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, name)
	if r.lastOn == nil {
		r.lastOn = map[string]time.Duration{}
	}
	r.lastOn[name] = m
}

// quietFor returns how long since the last power-on this Reconciler sent
// to the host, or since its first pass.
func (r *Reconciler) quietFor(name string, m time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started {
		r.started, r.start = true, m
	}
	since := r.start
	if on, ok := r.lastOn[name]; ok && on > since {
		since = on
	}
	return m - since
}

// Reconcile runs one pass for the named host.
func (r *Reconciler) Reconcile(ctx context.Context, name string) (Result, error) {
	h, err := r.Hosts.Get(ctx, name)
	if err != nil {
		return Result{}, fmt.Errorf("reboot: get host %s: %w", name, err)
	}
	pc, err := r.Power(name)
	if err != nil {
		return Result{}, fmt.Errorf("reboot: power controller for %s: %w", name, err)
	}
	// The clocks are read before the power state: the evidence a reading
	// gives is stamped no later than the reading.
	now := r.Now()
	quiet := r.quietFor(name, r.monotonic())
	state, perr := pc.State(ctx)
	if perr != nil {
		state = power.StateUnknown
	}
	r.mu.Lock()
	last := r.last[name]
	r.mu.Unlock()

	d := r.Config.Decide(Observed{
		Annotations:   h.Annotations,
		Online:        h.Online,
		Deprovisioned: h.Deprovisioned,
		Status:        h.Status,
		Power:         state,
		LastCall:      last,
		QuietFor:      quiet,
	}, now)
	res := Result{Decision: d, RequeueAfter: d.RequeueAfter}

	if d.UpdateStatus {
		nh := h
		nh.Status = d.Status
		if len(d.RemoveAnnotations) > 0 {
			nh.Annotations = make(map[string]string, len(h.Annotations))
			for k, v := range h.Annotations {
				nh.Annotations[k] = v
			}
			for _, k := range d.RemoveAnnotations {
				delete(nh.Annotations, k)
			}
		}
		if _, err := r.Hosts.Update(ctx, nh); err != nil {
			return res, fmt.Errorf("reboot: update host %s: %w", name, err)
		}
	}

	if d.Power != ActionNone {
		var err error
		if d.Power == ActionPowerOn {
			// Noted before the call: from now on an Off reading may echo
			// the state before it, whatever the call returns.
			m := r.monotonic()
			r.mu.Lock()
			if r.lastOn == nil {
				r.lastOn = map[string]time.Duration{}
			}
			r.lastOn[name] = m
			r.mu.Unlock()
			err = pc.On(ctx)
		} else {
			err = pc.Off(ctx, d.Mode)
		}
		call := Call{Action: d.Power, Mode: d.Mode, Class: power.Classify(err), At: r.Now()}
		r.mu.Lock()
		if r.last == nil {
			r.last = map[string]Call{}
		}
		r.last[name] = call
		r.mu.Unlock()
		res.PowerErr = err
		if err != nil {
			res.Requeue, res.RequeueAfter = true, 0
		}
	}
	if r.Logger != nil && (d.UpdateStatus || d.Power != ActionNone || len(d.Warnings) > 0) {
		attrs := []slog.Attr{slog.String("host", name), slog.String("phase", d.Phase.String()),
			slog.String("power", d.Power.String()), slog.String("reason", d.Reason)}
		if d.Power == ActionPowerOff {
			attrs = append(attrs, slog.String("mode", d.Mode.String()))
		}
		if res.PowerErr != nil {
			attrs = append(attrs, slog.String("powerError", res.PowerErr.Error()))
		}
		for _, w := range d.Warnings {
			attrs = append(attrs, slog.String("warning", w.Error()))
		}
		r.Logger.LogAttrs(ctx, slog.LevelInfo, "reboot decision", attrs...)
	}
	return res, nil
}
