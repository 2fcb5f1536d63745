package plan_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
)

// boltWorld is the world of the bbolt PutView reviews (issue 37 rounds 10
// and 11): a BoltStore in a file of its own, a clock, and n servers.
type boltWorld struct {
	ctx     context.Context
	path    string
	s       *plan.BoltStore
	clk     *fake.Clock
	servers []plan.Server
}

func newBoltWorld(t *testing.T, n int) *boltWorld {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plans.db")
	s, err := plan.OpenBolt(path)
	require.NoError(t, err)
	clk := fake.NewClock(time.Time{})
	return &boltWorld{ctx: context.Background(), path: path, s: s, clk: clk, servers: resumeServers(clk, n)}
}

// inFlight is a running plan uuid over servers whose reboot 0 has job-1
// in flight.
func (w *boltWorld) inFlight(t *testing.T, uuid string, servers []plan.Server) plan.Plan {
	t.Helper()
	p := runningPlanOf(t, uuid, servers, w.clk.Now())
	at := w.clk.Now()
	p.Reboots[0].Step, p.Reboots[0].JobUUID, p.Reboots[0].StartedAt = plan.StepJob, "job-1", &at
	return p
}

// createOver creates a plan over the first server after a PutView that
// returned perr: one of the two must be refused (what says what the
// view did).
func (w *boltWorld) createOver(t *testing.T, perr error, what string) {
	t.Helper()
	cerr := w.s.Create(w.ctx, runningPlanOf(t, "q2", w.servers[:1], w.clk.Now()))
	assert.True(t, perr != nil || cerr != nil, "%s (%v), then a plan over its server (%v): one must be refused", what, perr, cerr)
}

// reopen closes the store and opens its file afresh: what a new
// executor reads (ground truth of what was written).
func (w *boltWorld) reopen(t *testing.T) *plan.BoltStore {
	t.Helper()
	require.NoError(t, w.s.Close())
	truth, err := plan.OpenBolt(w.path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = truth.Close() })
	return truth
}
