package kube

import (
	"context"
	"errors"
	"fmt"
	"sync"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/reboot"
)

var _ reboot.HostWatcher = (*RebootHosts)(nil)

// ErrNoWatch: RebootHosts.Watch without RebootHosts.Informers (the
// reboot Client then polls).
var ErrNoWatch = errors.New("kube: no informers to watch hosts with")

// Watch implements reboot.HostWatcher with the informers of
// RebootHosts.Informers (a manager's cache): a value after every change
// of the host or of its RebootRecord the informers see, coalesced into a
// buffer of one; the channel is closed when ctx is done. A reboot Client
// should read through a direct client (a cache may not yet show the
// request it just wrote, which it would take for a removed request): a
// change the informers report is then always visible to its read.
func (s *RebootHosts) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	if s.Informers == nil {
		return nil, ErrNoWatch
	}
	ch := make(chan struct{}, 1)
	var mu sync.Mutex
	closed := false
	notify := func(obj any) {
		if o, ok := obj.(client.Object); ok && (o.GetName() != name || o.GetNamespace() != s.Namespace) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, n any) { notify(n) },
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			notify(o)
		},
	}
	type reg struct {
		inf cache.Informer
		r   toolscache.ResourceEventHandlerRegistration
	}
	var regs []reg
	remove := func() {
		for _, r := range regs {
			_ = r.inf.RemoveEventHandler(r.r)
		}
	}
	for _, obj := range []client.Object{&metal3.BareMetalHost{}, &v1alpha1.RebootRecord{}} {
		inf, err := s.Informers.GetInformer(ctx, obj)
		if err != nil {
			remove()
			return nil, fmt.Errorf("kube: watch host %s/%s: %w", s.Namespace, name, err)
		}
		r, err := inf.AddEventHandler(h)
		if err != nil {
			remove()
			return nil, fmt.Errorf("kube: watch host %s/%s: %w", s.Namespace, name, err)
		}
		regs = append(regs, reg{inf, r})
	}
	go func() {
		<-ctx.Done()
		remove()
		mu.Lock()
		closed = true
		close(ch)
		mu.Unlock()
	}()
	return ch, nil
}
