package nodereuse

import (
	"context"
	"errors"
	"fmt"
)

// LabelDecision says how to change a host's reuse label at deprovisioning.
type LabelDecision struct {
	// SetLabel: set Label to Value on the host (before it is released).
	SetLabel bool
	Value    string
	Reason   string
}

// Deprovision decides the reuse label of a host that a machine of pool is
// releasing: with reuse enabled (the template's nodeReuse), the host is
// labelled for the pool, so that the pool's next machines find it again. With
// reuse disabled nothing changes. It is an error only if the pool is
// invalid.
func Deprovision(h Host, pool Pool, reuse bool) (LabelDecision, error) {
	v, err := pool.LabelValue()
	if err != nil {
		return LabelDecision{}, err
	}
	switch {
	case !reuse:
		return LabelDecision{Reason: "node reuse disabled for " + v}, nil
	case h.Labels[Label] == v:
		return LabelDecision{Reason: "already labelled for " + v}, nil
	}
	return LabelDecision{SetLabel: true, Value: v, Reason: "node reuse enabled: reserve for " + v}, nil
}

// Store errors.
var (
	// ErrConflict: the host changed since it was listed, or another
	// machine claimed it first.
	ErrConflict = errors.New("nodereuse: host changed or already claimed")
)

// HostStore lists and claims hosts. Claims use optimistic concurrency, so
// that two controllers (or two machines in one pass) never get one host.
type HostStore interface {
	// List returns every host.
	List(ctx context.Context) ([]Host, error)
	// Claim sets the consumer reference of host name to consumer, and
	// removes Label if removeLabel, in one write, if the host's version is
	// still version and it has no consumer. Otherwise it returns an error
	// wrapping ErrConflict.
	Claim(ctx context.Context, name, version, consumer string, removeLabel bool) error
	// SetLabel sets Label to value if the host's version is still version
	// (ErrConflict otherwise).
	SetLabel(ctx context.Context, name, version, value string) error
}

// Claim lists hosts, selects one for consumer and claims it, retrying
// with a fresh list when the claim conflicts (at most attempts times,
// default 3). It returns the selection that was carried out; for
// OutcomeRequeue and OutcomeNoHost nothing was written.
func Claim(ctx context.Context, store HostStore, req Request, consumer string, attempts int) (Selection, error) {
	if attempts <= 0 {
		attempts = 3
	}
	var lastErr error
	for i := 0; i < attempts; i++ {
		hosts, err := store.List(ctx)
		if err != nil {
			return Selection{}, fmt.Errorf("nodereuse: list hosts: %w", err)
		}
		sel, err := Select(hosts, req)
		if err != nil || sel.Outcome != OutcomePick {
			return sel, err
		}
		version := ""
		for _, h := range hosts {
			if h.Name == sel.Host {
				version = h.Version
			}
		}
		err = store.Claim(ctx, sel.Host, version, consumer, sel.RemoveLabel)
		if err == nil {
			return sel, nil
		}
		if !errors.Is(err, ErrConflict) {
			return Selection{}, fmt.Errorf("nodereuse: claim %s for %s: %w", sel.Host, consumer, err)
		}
		lastErr = err
	}
	return Selection{}, fmt.Errorf("nodereuse: claim for %s: %d attempts: %w", consumer, attempts, lastErr)
}
