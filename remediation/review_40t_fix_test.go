package remediation_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// endingGuard is a leadership Guard whose lease ends when end is called:
// every hold granted so far is cancelled (its context done), and every
// Hold after is refused.
type endingGuard struct {
	mu      sync.Mutex
	ended   bool
	cancels []context.CancelFunc
}

func (g *endingGuard) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ended = true
	for _, c := range g.cancels {
		c()
	}
}

func (g *endingGuard) Hold(ctx context.Context) (context.Context, context.CancelFunc, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended {
		return nil, nil, reboot.ErrNotLeader
	}
	c, cancel := context.WithCancel(ctx)
	g.cancels = append(g.cancels, cancel)
	return c, cancel, nil
}

// ctxBlindHosts is findingHosts whose RemoveRebootRequest ignores its
// context's end (a store of one's own that does not check it), and whose
// RebootRequests takes long enough for the lease to end (end).
type ctxBlindHosts struct {
	*findingHosts
	end func()
}

func (h *ctxBlindHosts) RebootRequests(ctx context.Context) ([]remediation.Request, error) {
	reqs, err := h.findingHosts.RebootRequests(ctx)
	h.end() // the lease ends while the requests are read
	return reqs, err
}

func (h *ctxBlindHosts) RemoveRebootRequest(_ context.Context, machine string, req remediation.Request) error {
	return h.findingHosts.RemoveRebootRequest(context.Background(), machine, req)
}

// TestReview40_RemoveOrphansChecksLeaseBeforeRemoval: removeOrphans runs
// under the Guard (TestReview40_RemoveOrphansUnguarded) and checks the
// hold again before each removal: a lease that ends while it reads the
// requests and the Machines stops it before it removes one, even through
// a RequestRemover that does not check its context.
func TestReview40_RemoveOrphansChecksLeaseBeforeRemoval(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute)
	c := fake.NewCluster()
	hosts := fake.NewRebootHosts(
		reboot.Host{Name: "h1", Online: true, Annotations: map[string]string{remediation.RebootAnnotation: remediation.RebootValue("u9", t0)}})
	a, _ := c.GetAdmissions(ctx)
	a.Machines = []string{"m0"} // an old record: no Requests, no Members
	require.NoError(t, c.PutAdmissions(ctx, a))
	g := &endingGuard{}
	hs := &ctxBlindHosts{end: g.end, findingHosts: &findingHosts{hosts: hosts, names: []string{"h1"}, RebootAPIHosts: &remediation.RebootAPIHosts{Hosts: hosts, Now: time.Now, OwnerOnline: true,
		HostOf: func(context.Context, string) (string, error) {
			return "", fmt.Errorf("m0: %w", remediation.ErrNotFound)
		}}}}
	r := &remediation.Reconciler{Machines: c, Nodes: c.Nodes(), Admissions: c, Hosts: hs, Now: time.Now, Guard: g,
		Limit: remediation.MaxCount(1), Config: remediation.Config{PollInterval: 50 * time.Millisecond}}
	_, err := r.Reconcile(ctx, "m0")
	require.ErrorIs(t, err, reboot.ErrNotLeader)
	h1, err := hosts.Get(ctx, "h1")
	require.NoError(t, err)
	require.Contains(t, h1.Annotations, remediation.RebootAnnotation, "a request removed after the lease ended while the requests were read")
	a, _ = c.GetAdmissions(ctx)
	require.True(t, a.Has("m0"), "the admission is kept")
}
