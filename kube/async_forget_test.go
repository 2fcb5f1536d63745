package kube

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/power"
)

// TestAsyncForgetHostDuringCallPrunedAtItsEnd: a host deleted while a
// call of it is in flight (forgetHost then returns early) has what Async
// keeps of it (the call's late answer) dropped once that call ends.
func TestAsyncForgetHostDuringCallPrunedAtItsEnd(t *testing.T) {
	hung := &hangs{release: make(chan struct{})}
	done := make(chan string, 1)
	a := &Async{Wait: 20 * time.Millisecond, Done: func(h string) { done <- h },
		Power: func(string) (power.Controller, error) { return hung, nil }}
	pc, err := a.Controller("gone")
	require.NoError(t, err)
	require.ErrorIs(t, pc.On(context.Background()), ErrInFlight, "premise: the call outlives its pass")
	a.forgetHost("gone") // deleted meanwhile
	close(hung.release)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	_, answer := a.answers["gone"]
	assert.False(t, answer, "the deleted host's late answer is kept")
	assert.Empty(t, a.forgotten)
	_, ended := a.ended["gone"]
	assert.False(t, ended, "the deleted host's answered call end is kept")
}
