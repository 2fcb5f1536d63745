package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotOurs: a power command was not sent, or was cancelled before it
// went out, because the host, read again, is no longer rebootkit's
// (Ownership.Ours): the baremetal-operator took it back meanwhile.
var ErrNotOurs = errors.New("kube: the host is no longer rebootkit's")

// ownerPoll is how often a host is read again, uncached, while a power
// command of it runs (watchOwner).
const ownerPoll = 250 * time.Millisecond

type ownerCheckKey struct{}

// withOwnerCheck attaches to ctx check, which reads a host again and
// returns an error wrapping ErrNotOurs once it is no longer rebootkit's:
// every power command under ctx is watched by it (watchOwner).
func withOwnerCheck(ctx context.Context, check func(context.Context) error) context.Context {
	return context.WithValue(ctx, ownerCheckKey{}, check)
}

// watchOwner is ctx, cancelled (cause: an error wrapping ErrNotOurs)
// once the owner check attached to ctx (withOwnerCheck), run now and
// every ownerPoll, finds the host no longer rebootkit's: a power command
// under it is not sent once that is read (the adapters and the pool check
// their context before a request goes out), whatever the path (the
// normal path's, Async's background calls, the reset path's). Without a
// check it is ctx. stop ends the watch.
func watchOwner(ctx context.Context) (context.Context, context.CancelFunc) {
	check, _ := ctx.Value(ownerCheckKey{}).(func(context.Context) error)
	wctx, cancel := context.WithCancelCause(ctx)
	if check == nil {
		return wctx, func() { cancel(nil) }
	}
	if err := check(wctx); errors.Is(err, ErrNotOurs) {
		cancel(err)
		return wctx, func() { cancel(nil) }
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(ownerPoll)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-wctx.Done():
				return
			case <-t.C:
				if err := check(wctx); errors.Is(err, ErrNotOurs) {
					cancel(err)
					return
				}
			}
		}
	}()
	return wctx, func() {
		close(done)
		cancel(nil)
	}
}

// ownerCheck is the check (withOwnerCheck) of host key by own, reading
// it through r (uncached): an error wrapping ErrNotOurs if it is gone,
// replaced (another UID than uid) or no longer rebootkit's; any other
// read failure is returned as it is (the watch goes on).
func ownerCheck(r client.Reader, own Ownership, key types.NamespacedName, uid types.UID) func(context.Context) error {
	return func(ctx context.Context) error {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var bmh metal3.BareMetalHost
		if err := r.Get(rctx, key, &bmh); err != nil {
			if ctx.Err() == nil && client.IgnoreNotFound(err) == nil {
				return fmt.Errorf("%w: host %s is gone", ErrNotOurs, key.Name)
			}
			return err
		}
		if bmh.UID != uid {
			return fmt.Errorf("%w: host %s was replaced", ErrNotOurs, key.Name)
		}
		if ours, why := own.Ours(&bmh); !ours {
			return fmt.Errorf("%w: %s", ErrNotOurs, why)
		}
		return nil
	}
}
