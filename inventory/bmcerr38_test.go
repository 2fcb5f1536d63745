package inventory

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/power"
)

// TestOldBMCErrorClearedAfterRestart: a BMC error recorded by a previous
// run of the executor goes from the status (and so from show and watch)
// at the first call that succeeds after a restart (issue 38, B.11; old
// code: only an error of this run was ever cleared, so the old one stayed
// for good).
func TestOldBMCErrorClearedAfterRestart(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.open()
	w.f.noteCall(ids[0], "state", errors.New("connection refused"))
	h, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	require.NotEmpty(t, h.LastError.Message)
	require.False(t, h.LastError.Cleared)
	w.close()
	w.open() // a new process
	defer w.close()
	w.f.noteCall(ids[0], "state", nil)
	h, err = w.f.hosts.load(ids[0])
	require.NoError(t, err)
	assert.True(t, h.LastError.Cleared, "the old error is gone once a call succeeds")
	h.LastError.Job = "j1"
	assert.Empty(t, jobObs(JobRecord{UUID: "j1"}, h).Error, "a cleared error is not shown as its job's error")
}

// TestBackoffRefusalsNotCounted: calls the Pool refuses during a login
// back-off reach no BMC: they are not counted as BMC errors and do not
// rewrite the host record (their countdown changes every second); the
// login's own error stands (issue 38, B.11; old code: each refusal
// counted, about 119 "auth" errors in 2 minutes for 3 logins, and each
// rewrote the record).
func TestBackoffRefusalsNotCounted(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.open()
	defer w.close()
	counted := 0
	w.f.opts.OnBMCError = func(string) { counted++ }
	w.f.noteCall(ids[0], "connect", &power.Error{Op: "connect", Class: power.ClassFailed, Status: 401, Message: "authentication failed", Err: power.ErrAuth})
	require.Equal(t, 1, counted)
	before, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	for i := range 30 {
		w.f.noteCall(ids[0], "state", &power.Error{Op: "state", Class: power.ClassFailed,
			Message: fmt.Sprintf("login not tried: logins to the BMC with these credentials failed 1 time(s) in a row, next try in %ds", 30-i), Err: power.ErrBackoff})
	}
	assert.Equal(t, 1, counted, "refusals of the Pool are not BMC errors")
	after, err := w.f.hosts.load(ids[0])
	require.NoError(t, err)
	assert.Equal(t, before.Version, after.Version, "the host record is not rewritten")
	assert.Equal(t, BMCAuth, after.LastError.Class, "the login's error stands")
}
