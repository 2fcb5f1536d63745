package kube

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k8s.io/apimachinery/pkg/types"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
)

// expiredThenSlowLogin39n wraps a Redfish BMC so that, while armed, the
// first reset POST with ResetType On is answered 401 (the session
// expired: the BMC applied nothing, as a BMC does after its session
// timeout or a BMC reboot), and the login that follows it is answered
// only delay after it arrived; loginSeen is closed when that login
// arrives. Every request is logged.
func expiredThenSlowLogin39n(h http.Handler, armed *atomic.Bool, delay time.Duration, loginSeen chan struct{}, log func(string)) http.Handler {
	var refused, slowed atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		log(r.Method + " " + r.URL.Path + " " + string(body))
		if armed.Load() && r.Method == http.MethodPost {
			if bytes.Contains(body, []byte(`"ResetType":"On"`)) && refused.CompareAndSwap(false, true) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"error":{"code":"Base.1.8.NoValidSession","message":"the session expired",` +
					`"@Message.ExtendedInfo":[{"MessageId":"Base.1.8.NoValidSession","Message":"the session expired"}]}}`))
				return
			}
			if refused.Load() && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/SessionService/Sessions") && slowed.CompareAndSwap(false, true) {
				close(loginSeen)
				time.Sleep(delay)
			}
		}
		h.ServeHTTP(w, r)
	})
}

// TestReview39n_OnlineFalseDuringReloginAfterCheckIgnored: the round-12
// fix moves the owed pinned power-on's check (markSent) after the pinned
// BMC's last answer before the command, and kube/doc.go says that what
// follows it is "the record's write and the POST, no answer of the BMC's
// between them". But the redfish adapter's POST runs in withSession: a
// POST answered 401 (the session expired, nothing applied) is followed
// by a re-login, whose answer a slow BMC may give only after seconds
// (reloginTimeout), and then the POST again, with no new check
// (power/redfish/redfish.go withSession, postReset; change calls check
// once, before postReset). So an administrator who sets spec.online
// false while the pinned BMC is slow to answer that login has the host
// powered on by rebootkit anyway, seconds after the write landed, and
// (the record still marked BMCChanged) nothing powers it off again:
// exactly TestReview39m_OnlineFalseDuringPinnedOnStateReadIgnored with
// the slow answer moved from the state read to the re-login. Ground
// truth: the pinned BMC's hardware (no On transition after the write)
// and the BMC's own request log. Correct: the check runs again after any
// BMC answer the adapter waits on before the command (pass check down to
// postReset/withSession and call it after a re-login), or a command
// refused for its session is returned unsent (ErrNotSent) for the caller
// to retry with a fresh check.
func TestReview39n_OnlineFalseDuringReloginAfterCheckIgnored(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	const delay = 2 * time.Second
	reqs := newRequestLog39()
	loginSeen := make(chan struct{})
	s := setup39m(t, ctx, func(h http.Handler, armed *atomic.Bool) http.Handler {
		return expiredThenSlowLogin39n(h, armed, delay, loginSeen, reqs.log)
	})
	select {
	case <-loginSeen:
	case <-time.After(8 * time.Second):
		t.Fatalf("premise: the owed On's POST is refused for its session and a login follows (requests %q; events %q)", reqs.got(), drainEvents(s.rec))
	}
	// The check ran (before the refused POST) and the BMC is answering
	// the re-login: the administrator wants the host off.
	wrote, got := offlineWhileOwed39(t, ctx, s, reqs, delay)
	assert.Empty(t, onsAfter39(s.hw1, wrote),
		"spec.online is false (written %v after the start, the host off): the owed power-on is not sent after that write landed, "+
			"also when its POST is retried after a re-login (transitions %+v; calls %+v; requests %q; events %q)",
		wrote.Sub(reqs.t0), s.hw1.Transitions(), s.hw1.Calls(), got, drainEvents(s.rec))
}

// acceptedOn39n wraps a Redfish BMC so that, while armed, the first reset
// POST with ResetType On is answered at once 202 Accepted with a task
// monitor, and carried out by the hardware (land) only delay later: a BMC
// that queues the power-on as a task, which the redfish adapter
// documents it accepts without following ("callers take the outcome
// from a later State read").
func acceptedOn39n(h http.Handler, armed *atomic.Bool, delay time.Duration, land func(), answered chan<- time.Time) http.Handler {
	var once atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if armed.Load() && r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"ResetType":"On"`)) && once.CompareAndSwap(false, true) {
				w.Header().Set("Location", "/redfish/v1/TaskService/Tasks/39")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_, _ = w.Write([]byte(`{"@odata.id":"/redfish/v1/TaskService/Tasks/39","Id":"39","TaskState":"Running"}`))
				answered <- time.Now()
				time.AfterFunc(delay, land)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// TestReview39n_AcceptedOnShortensRecordWaitAcrossRestart: the round-12
// fix writes PowerOnSent.Returned once the owed pinned power-on's call
// "returned with the BMC's answer (the On landed or was refused by
// then)" (markReturned: err nil or an answered *power.Error), and every
// replica's wait (sentHold) then ends StaleReads after Returned instead
// of after Until. But a nil error from the redfish adapter does not mean
// the On landed: a reset answered 202 Accepted (a task) "succeeds without
// following the task ... callers take the outcome from a later State
// read" (power/redfish/redfish.go package doc). So a controller that
// restarts (or a new leader) after such an answer waits only StaleReads
// past the 202, while the task's power-on, well within Until (the call's
// deadline: the pool's CallTimeout, 5 s here, after the call began),
// is still to come: spec.bmc restored with a keyed hold, the new
// controller reads the pinned BMC Off, reports the keyed request fenced
// (LastPoweredOff), and then rebootkit's own queued On powers the host
// on. Ground truth: the pinned BMC's hardware must stay off from the
// first instant the record reports the keyed request fenced (a correct
// controller may also simply not report it fenced within the window).
// Correct: write Returned only for an answer that says the On was
// carried out or refused (not 202 Accepted; or make the adapter say
// which), else keep the wait to Until.
func TestReview39n_AcceptedOnShortensRecordWaitAcrossRestart(t *testing.T) {
	acceptedOnScene39n(t, true)
}

// TestReview39n_AcceptedOnShortensWaitNoRestart: the same scene with
// no restart: one healthy controller. Both waits it consults at the
// restore are short: the record's (sentHold: Returned, written for the
// 202) and the in-memory one (resolvedHold: StaleReads after the
// attempt's end; runPinnedOn took the 202 as the landing, waited
// StaleReads, read Off since the task had not run, and ended as
// failed). So the keyed request is reported fenced about 1.5 s after
// the 202 and the accepted On lands at 4 s, well before Until. With
// Returned not written for the 202, the record's wait (Until +
// StaleReads) holds and this passes (checked): the root cause is
// markReturned's, as in the restart test; the in-memory wait alone would
// not cover it either.
func TestReview39n_AcceptedOnShortensWaitNoRestart(t *testing.T) {
	acceptedOnScene39n(t, false)
}

// acceptedOnScene39n: the owed On is answered 202 and carried out
// landDelay later; with restart, the controller is replaced after the
// 202; then spec.bmc is restored with a keyed hold.
func acceptedOnScene39n(t *testing.T, restart bool) {
	needAPIServer(t)
	ctx := context.Background()
	const landDelay = 4 * time.Second
	var hwp atomic.Pointer[fake.Power]
	ready := make(chan struct{})
	answered := make(chan time.Time, 1)
	var landed atomic.Bool
	land := func() {
		<-ready
		_ = hwp.Load().On(context.Background())
		landed.Store(true)
	}
	s := setup39m(t, ctx, func(h http.Handler, armed *atomic.Bool) http.Handler {
		return acceptedOn39n(h, armed, landDelay, land, answered)
	})
	hwp.Store(s.hw1)
	close(ready)
	var at time.Time
	select {
	case at = <-answered:
	case <-time.After(8 * time.Second):
		t.Fatalf("premise: the owed On is sent and answered 202 (events %q)", drainEvents(s.rec))
	}
	key := types.NamespacedName{Namespace: s.ns, Name: "h1"}
	var rec v1alpha1.RebootRecord
	require.Eventually(t, func() bool {
		return s.direct.Get(ctx, key, &rec) == nil && rec.Spec.PowerOnSent != nil
	}, 3*time.Second, 5*time.Millisecond, "premise: the sending controller records the On as sent (PowerOnSent %+v)", rec.Spec.PowerOnSent)
	// Whatever the sending controller records once the 202 came back
	// (today: PowerOnSent.Returned) is written by now.
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, s.direct.Get(ctx, key, &rec))
	t.Logf("PowerOnSent at the restart: %+v", *rec.Spec.PowerOnSent)
	// The controller dies; a new one (a restart, the next leader) starts,
	// and spec.bmc is restored with a keyed hold.
	if restart {
		s.stop()
		s.start()
	}
	restored := time.Now()
	require.NoError(t, change(ctx, s.direct, s.ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(s.srv1)
		hold39m(h)
	}))
	require.False(t, landed.Load(), "premise: the queued On has not landed when spec.bmc is restored (%v after the 202)", time.Since(at))
	fencedAt := firstFenced39(ctx, s.direct, s.ns, restored, at.Add(landDelay+2*time.Second))
	require.True(t, landed.Load(), "premise: the queued On landed")
	if fencedAt.IsZero() {
		return // the wait held: correct
	}
	assert.True(t, s.hw1.OffThroughout(fencedAt, time.Now()),
		"a host reported fenced for a keyed request (at %v, %v after the 202, %v after the restore) stays off while it is held: "+
			"a power-on answered 202 Accepted may still land (transitions %+v; calls %+v; events %q)",
		fencedAt, fencedAt.Sub(at), fencedAt.Sub(restored), s.hw1.Transitions(), s.hw1.Calls(), drainEvents(s.rec))
}
