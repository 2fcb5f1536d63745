package power_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReview35as_FenceConnectRefusedGivesBackPass (review 35as; power/doc.go
// "one power command per back-off window (the first fence is tried: it
// costs at most one more refused request; later ones wait for the window
// to end)"; issue 35 item 2, lock-out budget). A and B share the
// credentials on one chassis (basic auth); B is connected. A's blade
// refuses A's requests (401) before A ever connected: A's connect is
// refused, the check answers the credentials (ErrSystemRefused), A backs
// off alone. A remediation retries A's fence every 5 s. Each fence takes
// the window's fence pass, its connect (the login in acquire) sends A's
// system read, which the BMC refuses, and acquire's error path
// (pool_login.go acquire: giveBackFenceLocked on any error) gives the pass
// back although a request reached the BMC and was refused: every retry
// is a refused request. Ground truth: the 401s the emulator served for
// system 1.
func TestReview35as_FenceConnectRefusedGivesBackPass(t *testing.T) {
	clk := newClock()
	ch := newHooked35aq(t, clk, 2)
	pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
	ctx := context.Background()
	a := pool.Controller("a", ch.target("1"))
	b := pool.Controller("b", ch.target("2"))
	_, err := b.State(ctx)
	require.NoError(t, err)

	ch.deny1.Store(true) // A's blade refuses, for ever
	clk.Advance(time.Second)
	_, errA := a.State(ctx)
	t.Logf("A's first read (its connect), its blade refusing: %v", errA)
	require.ErrorIs(t, errA, power.ErrSystemRefused, "precondition: the check answered the credentials")

	start, ss0 := len(ch.refusals()), ch.ssReads.Load()
	fences := 0
	for i := 0; i < 12; i++ { // one minute of fences every 5 s
		clk.Advance(5 * time.Second)
		err := a.Off(ctx, power.ModeHard)
		if i < 3 {
			t.Logf("fence %d: %v", i+1, err)
		}
		fences++
	}
	refused := len(ch.refusals()) - start
	t.Logf("%d fences of A in a minute: %d requests refused (401) by the BMC, %d SessionService reads (checks)", fences, refused, ch.ssReads.Load()-ss0)
	assert.LessOrEqual(t, refused, 3, "401s the BMC served in one minute for A's fences retried every 5 s (doc: one fence per back-off window, AuthBackoff 30 s)")
}

// TestReview35as_RotationUnconnectedFencesPerMinute (review 35as;
// power/doc.go "with the default AuthBackoff (30 s) at most two per host
// in a minute, reads or fences retried every 5 s alike"; issue 35 item 2:
// a rotation must not lock the account out). n hosts share the
// credentials with one connected neighbour; the password is rotated
// before the n hosts connected (a remediation that starts after the
// rotation, or hosts added, or the Pool restarted); the BMC's check
// resources answer junk (VerdictUnknown: each refusal is the host's
// own) or are served to anyone (CredentialsWork). Each host's fence is
// retried every 5 s: each connect is refused, and acquire gives the
// window's fence pass back on its error, so every retry sends a refused
// request (and a check). Ground truth: the 401s the emulator served.
func TestReview35as_RotationUnconnectedFencesPerMinute(t *testing.T) {
	for _, mode := range []string{"junk", "anyone"} {
		for _, n := range []int{1, 10} {
			clk := newClock()
			ch := newHooked35aq(t, clk, n+1)
			pool := newPool(t, clk, power.PoolConfig{CallTimeout: 5 * time.Second, ConnectTimeout: 5 * time.Second})
			ctx := context.Background()
			nb := pool.Controller("nb", ch.target(strconv.Itoa(n+1)))
			_, err := nb.State(ctx)
			require.NoError(t, err)
			const rotated = "Rotated-n3w"
			ch.b.SetCredentials("admin", rotated)
			hook := func(w http.ResponseWriter, r *http.Request) bool {
				p := strings.TrimSuffix(r.URL.Path, "/")
				if p != "/redfish/v1/SessionService" && p != "/redfish/v1/Systems" {
					return false
				}
				if mode == "junk" {
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write([]byte(`{"status":"ok"}`))
					return true
				}
				r2 := r.Clone(r.Context())
				r2.SetBasicAuth("admin", rotated) // served to anyone
				rec := httptest.NewRecorder()
				ch.b.ServeHTTP(rec, r2)
				for k, v := range rec.Header() {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
				return true
			}
			ch.hook.Store(&hook)
			hosts := make([]power.Controller, n)
			for i := range hosts {
				hosts[i] = pool.Controller(fmt.Sprintf("h%d", i+1), ch.target(strconv.Itoa(i+1)))
			}
			step := 5 * time.Second / time.Duration(n)
			for round := 0; round < 36; round++ {
				for i := range hosts {
					clk.Advance(step)
					_ = hosts[i].Off(ctx, power.ModeSoft)
				}
			}
			r := ch.refusals()
			perMin := maxPerMinute(r)
			t.Logf("check %s: hosts=%d, fences every 5 s after a rotation, never connected: at most %d refused in a minute, %d in 3 minutes", mode, n, perMin, len(r))
			assert.LessOrEqual(t, perMin, 2*n, "check %s: hosts=%d: 401s the BMC served in one minute (doc: at most two per host)", mode, n)
		}
	}
}
