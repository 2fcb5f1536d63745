package power_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resetCounter35ar counts the power actions (POST ...Actions/ComputerSystem.Reset)
// the BMC served for system id (ground truth: what reached the BMC).
func resetCounter35ar(ch *hooked35aq, id string) *atomic.Int64 {
	var n atomic.Int64
	hook := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/"+id+"/Actions/") {
			n.Add(1)
		}
		return false
	}
	ch.hook.Store(&hook)
	return &n
}

// TestReview35ar_CancelledFenceTakesWindowsPass (review 35ar; issue 35
// item 1 "A fencing request for A is refused although its credentials
// are right"; power/doc.go "one power command per back-off window (the
// first fence is tried: it costs at most one more refused request;
// later ones wait for the window to end)"). A and B share the
// credentials on one chassis. A's blade answers 401 once (an
// intermittent per-blade refusal): the check answers the credentials,
// ErrSystemRefused, A backs off alone. The blade answers again at once.
// A fence of A whose caller's context had already ended (a remediation
// that ran out of its deadline) takes the window's fence pass
// (fenceTriedLocked sets entry.fenced before anything is sent) and
// sends nothing; the real fence a second later is refused for the rest
// of the window, although no fence of A reached the BMC in it, A's
// credentials work and its blade answers (ground truth: the power
// actions the BMC served for system 1, and a direct read). With
// ownFails grown (MaxAuthBackoff 30 min) the fence is refused for up to
// 30 minutes for a request that was never sent.
func TestReview35ar_CancelledFenceTakesWindowsPass(t *testing.T) {
	clk := newClock()
	ch := newHooked35aq(t, clk, 2)
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	_, err = b.State(ctx)
	require.NoError(t, err)
	resets := resetCounter35ar(ch, "1")

	clk.Advance(5 * time.Second)
	ch.deny1.Store(true)
	_, errA := a.State(ctx)
	t.Logf("A's read, its blade refusing once: %v", errA)
	require.ErrorIs(t, errA, power.ErrSystemRefused, "precondition: the check answered the credentials")
	ch.deny1.Store(false) // the blade answers again
	ch.directState(t, "1")

	clk.Advance(time.Second)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	errGone := a.Off(gone, power.ModeHard)
	t.Logf("A's fence by a caller already gone: %v", errGone)
	require.Error(t, errGone)
	require.Zero(t, resets.Load(), "precondition: the gone caller's fence sent nothing")

	clk.Advance(time.Second)
	errFence := a.Off(ctx, power.ModeHard)
	t.Logf("A's fence a second later: %v (power actions the BMC served for system 1: %d)", errFence, resets.Load())
	assert.NoError(t, errFence, "A's fence refused: the window's one fence pass went to a caller that sent nothing; A's credentials and blade work")
	assert.Equal(t, int64(1), resets.Load(), "ground truth: no fence of A reached the BMC")
}

// rotationProtected35ar: n hosts on one chassis share the credentials
// (basic auth, the emulator protects SessionService and the Systems
// collection); the password is rotated and each host calls op every
// 5 s for three minutes. It returns the most 401s the BMC served in a
// minute, and in all (ground truth: the emulator's refusals).
func rotationProtected35ar(t *testing.T, n int, op func(context.Context, power.Controller)) (int, int) {
	clk := newClock()
	ch := newHooked35aq(t, clk, n)
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	hosts := make([]power.Controller, n)
	for i := range hosts {
		hosts[i] = pool.Controller(fmt.Sprintf("h%d", i+1), ch.target(strconv.Itoa(i+1)))
		_, err := hosts[i].State(ctx)
		require.NoError(t, err)
	}
	step := 5 * time.Second / time.Duration(n)
	ch.b.SetCredentials("admin", "Rotated-n3w")
	for round := 0; round < 36; round++ {
		for i := range hosts {
			clk.Advance(step)
			op(ctx, hosts[i])
		}
	}
	r := ch.refusals()
	return maxPerMinute(r), len(r)
}

// TestReview35ar_RotationProtectedCheckFencesPerMinute (review 35ar;
// power/doc.go "where a BMC that protects its check resources sees
// about two a minute for all the hosts of the credentials"; issue 35
// item 1/2). Fences retried every 5 s by every host after a rotation,
// on a BMC that protects its check resources (the emulator as is).
func TestReview35ar_RotationProtectedCheckFencesPerMinute(t *testing.T) {
	ops := map[string]func(context.Context, power.Controller){
		"read":  func(ctx context.Context, h power.Controller) { _, _ = h.State(ctx) },
		"fence": func(ctx context.Context, h power.Controller) { _ = h.Off(ctx, power.ModeSoft) },
	}
	for _, name := range []string{"read", "fence"} {
		for _, n := range []int{1, 2, 10, 100} {
			perMin, total := rotationProtected35ar(t, n, ops[name])
			t.Logf("%s: hosts=%d: refused requests: at most %d in a minute, %d in 3 minutes", name, n, perMin, total)
			assert.LessOrEqual(t, perMin, 3, "%s: hosts=%d: 401s the BMC served in one minute after a rotation with a protected check (doc: about two a minute for all the hosts)", name, n)
		}
	}
}

// TestReview35ar_CancelledFenceRefusesFenceForMinutes (review 35ar;
// the duration of TestReview35ar_CancelledFenceTakesWindowsPass; REVIEW.md
// "Durations, not only states"). A's blade refused A's reads a few times
// in a row (its own back-off grown to minutes, AuthBackoff doubling),
// then answers again. One fence by a caller already gone (nothing sent)
// takes the window's fence pass; the remediation's fence, retried every
// 30 s, is refused until the window ends, minutes during which A's
// credentials and blade work and no fence of A reached the BMC (ground
// truth: the power actions served for system 1).
func TestReview35ar_CancelledFenceRefusesFenceForMinutes(t *testing.T) {
	clk := newClock()
	ch := newHooked35aq(t, clk, 2)
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := a.State(ctx)
	require.NoError(t, err)
	_, err = b.State(ctx)
	require.NoError(t, err)
	resets := resetCounter35ar(ch, "1")

	ch.deny1.Store(true)
	window := 30 * time.Second
	for i := 0; i < 4; i++ { // A's reads refused at each end of its own back-off
		clk.Advance(window + time.Second)
		_, errA := a.State(ctx)
		require.ErrorIs(t, errA, power.ErrSystemRefused, "precondition: the check answered the credentials (read %d)", i+1)
		window *= 2
	}
	ch.deny1.Store(false) // the blade answers again
	ch.directState(t, "1")

	clk.Advance(time.Second)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, a.Off(gone, power.ModeHard))
	require.Zero(t, resets.Load(), "precondition: the gone caller's fence sent nothing")

	var refusedFor time.Duration
	for ; refusedFor < 30*time.Minute; refusedFor += 30 * time.Second {
		clk.Advance(30 * time.Second)
		if a.Off(ctx, power.ModeHard) == nil {
			break
		}
	}
	t.Logf("A's fence refused for %s after a fence that sent nothing (power actions served for system 1: %d)", refusedFor, resets.Load())
	assert.Zero(t, refusedFor, "A's fence, retried every 30 s, refused for %s with working credentials and blade: the window's one fence pass went to a caller that sent nothing", refusedFor)
}

// TestReview35ar_RotationUnprovenReadsAndFencesPerMinute (review 35ar;
// power/doc.go "with the default AuthBackoff (30 s) at most two per host
// in a minute, reads or fences retried every 5 s alike"). Each host is
// read and fenced every 5 s after a rotation on a BMC whose check gets
// no authenticated answer (VerdictUnknown). Ground truth: the 401s the
// emulator served.
func TestReview35ar_RotationUnprovenReadsAndFencesPerMinute(t *testing.T) {
	both := func(ctx context.Context, h power.Controller) {
		_, _ = h.State(ctx)
		_ = h.Off(ctx, power.ModeSoft)
	}
	for _, n := range []int{1, 2, 10} {
		perMin, total := rotationOp35aq(t, n, "junk", both)
		t.Logf("hosts=%d, read and fence every 5 s: refused requests: at most %d in a minute, %d in 3 minutes", n, perMin, total)
		assert.LessOrEqual(t, perMin, 2*n, "hosts=%d: 401s served in one minute (doc: at most two per host)", n)
	}
}
