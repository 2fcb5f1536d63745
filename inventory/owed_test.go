package inventory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/fake"
)

// TestOwedListsWhatOnlyThisFileDoes (review 37 round 24): Owed lists a
// server while its job lives (OwedJob), and, once the job has given up on
// its power cycle at the job timeout (every power-on refused, busy), while
// the server may be off (OwedPower, naming the job and its plan), also
// after the job ended; once the BMC answers and the server reads on, and
// no power-off can land any more, nothing. Ground truth: the fake
// hardware's power state.
func TestOwedListsWhatOnlyThisFileDoes(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	id := ids[0]
	p := w.bmcs[id].p
	refuse := true
	p.SetConfig(fake.PowerConfig{Lag: time.Second, SoftDelay: 5 * time.Second, Faults: func(c fake.Call) fake.Fault {
		if c.Op == fake.OpOn && refuse {
			return fake.Fault{Kind: fake.FaultBusy}
		}
		return fake.Fault{}
	}})
	w.open()
	defer func() { _ = w.f.Close() }()
	owed := func() []Owed {
		o, err := w.f.Owed()
		require.NoError(t, err)
		return o
	}
	require.Empty(t, owed())
	w.newPlan()
	w.run(ids, 3*time.Second)
	jobs, err := w.f.Jobs()
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	job := jobs[0]
	require.Equal(t, []Owed{{Server: id, Hostname: "cn0", Plan: "p1", Job: job.UUID, What: OwedJob}}, owed(), "a live job")

	for range 3600 {
		w.run(ids, time.Second)
		if j, _, _ := w.f.job(job.UUID); j.Over() {
			break
		}
	}
	j, _, err := w.f.job(job.UUID)
	require.NoError(t, err)
	require.True(t, j.Over(), "the job gave up at the job timeout: %+v", j)
	require.False(t, p.HardwareOn(), "the server is off (its power-on refused)")
	assert.Equal(t, []Owed{{Server: id, Hostname: "cn0", Plan: "p1", Job: job.UUID, What: OwedPower}}, owed(), "the job ended; the server's power-on is owed")

	refuse = false
	for i := 0; i < 1800 && len(owed()) > 0; i++ {
		w.run(ids, time.Second)
	}
	assert.True(t, p.HardwareOn(), "powered on once the BMC answers")
	assert.Empty(t, owed(), "nothing owed once the power cycle settled")
}
