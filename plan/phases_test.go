package plan_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/plan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPhasesRecordedFromTheFleet (issue 27): the executor records each
// reboot's phases in the store as the fleet reports them, on whole plans
// and on views (BoltStore), and they are the fleet's ground truth: drained
// after the queue and the drain, off and on at the end of the shutdown,
// healthy once boot and services are over; a failed job has its drain
// only.
func TestPhasesRecordedFromTheFleet(t *testing.T) {
	for _, views := range []bool{false, true} {
		t.Run(fmt.Sprintf("views=%v", views), func(t *testing.T) {
			ctx := context.Background()
			clk := fake.NewClock(time.Time{})
			var servers []fake.FleetServer
			for i := 0; i < 8; i++ {
				servers = append(servers, fake.FleetServer{UUID: fmt.Sprintf("u%03d", i), Hostname: fmt.Sprintf("cn%03d", i), Platform: "1",
					Core: i < 2, Headnode: i == 0, Queue: time.Duration(5+i) * time.Second, Drain: time.Duration(20+3*i) * time.Second,
					Shutdown: 15 * time.Second, Boot: time.Duration(100+10*i) * time.Second, Services: 40 * time.Second, FailJob: i == 5})
			}
			fleet := fake.NewFleet(clk.Now, "", servers...)
			var store plan.Store = fake.NewPlanStore()
			if views {
				bs, err := plan.OpenBolt(filepath.Join(t.TempDir(), "plans.db"))
				require.NoError(t, err)
				defer bs.Close()
				store = bs
			}
			p, _, err := plan.Create(fleet.Servers(), plan.CreateOptions{UUID: "phases", Target: "2", Select: plan.SelectAll,
				Concurrency: plan.Count(3), FailureBudget: plan.Count(1)})
			require.NoError(t, err)
			p, err = plan.Run(p)
			require.NoError(t, err)
			require.NoError(t, store.Create(ctx, p))
			exec := &plan.Executor{Fleet: fleet, Store: store, Now: clk.Now}
			for i := 0; i < 2000; i++ {
				v, err := exec.Pass(ctx, "phases")
				if errors.Is(err, fake.ErrUnavailable) { // the headnode reboots, the executor with it
					clk.Advance(5 * time.Second)
					continue
				}
				require.NoError(t, err)
				if !v.Unfinished() {
					break
				}
				clk.Advance(5 * time.Second)
			}
			final, err := store.Get(ctx, "phases")
			require.NoError(t, err)
			require.False(t, final.Unfinished(), plan.Table(final))
			created := map[string]time.Time{}
			for _, st := range fleet.Starts() {
				created[st.Server] = st.At
			}
			byID := map[string]fake.FleetServer{}
			for _, s := range servers {
				byID[s.UUID] = s
			}
			for _, r := range final.Reboots {
				s := byID[r.ServerUUID]
				c, ok := created[r.ServerUUID]
				require.True(t, ok, "%s: a job was created", r.ServerHostname)
				require.NotNil(t, r.Phases, "%s: phases recorded", r.ServerHostname)
				drained := c.Add(s.Queue + s.Drain)
				off := drained.Add(s.Shutdown)
				healthy := off.Add(s.Boot + s.Services)
				ph := *r.Phases
				require.NotNil(t, ph.Drained, r.ServerHostname)
				assert.Equal(t, drained, *ph.Drained, "%s drained", r.ServerHostname)
				if s.FailJob {
					assert.Equal(t, plan.StepFailed, r.Step)
					assert.Nil(t, ph.Off, "%s: never powered off", r.ServerHostname)
					continue
				}
				require.Equal(t, plan.StepDone, r.Step, r.ServerHostname)
				require.True(t, ph.Off != nil && ph.On != nil && ph.Healthy != nil, "%s: %+v", r.ServerHostname, ph)
				assert.Equal(t, off, *ph.Off, "%s off", r.ServerHostname)
				assert.Equal(t, off, *ph.On, "%s on", r.ServerHostname)
				assert.Equal(t, healthy, *ph.Healthy, "%s healthy", r.ServerHostname)
				assert.False(t, r.OperationalAt.Before(healthy), "%s: operational after healthy", r.ServerHostname)
			}
		})
	}
}
