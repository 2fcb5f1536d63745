package kube

import (
	"bytes"
	"context"
	"fmt"
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

// taskOn39o wraps a Redfish BMC so that, while armed, the first reset
// POST with ResetType On is answered at once 202 Accepted with a task
// monitor, and carried out by the hardware (land) only delay later; the
// task monitor is served truthfully (TaskState Running until the
// power-on landed, then Completed), so a client that follows it knows
// when the On may no longer land. answered gets the instant of the 202.
func taskOn39o(h http.Handler, armed *atomic.Bool, delay time.Duration, land func(), answered chan<- time.Time) http.Handler {
	const monitor = "/redfish/v1/TaskService/Tasks/39o"
	var once, landed atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.TrimSuffix(r.URL.Path, "/") == monitor {
			state, code := "Running", http.StatusAccepted
			if landed.Load() {
				state, code = "Completed", http.StatusOK
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = fmt.Fprintf(w, `{"@odata.id":%q,"Id":"39o","TaskState":%q,"TaskStatus":"OK"}`, monitor, state)
			return
		}
		if armed.Load() && r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"ResetType":"On"`)) && once.CompareAndSwap(false, true) {
				w.Header().Set("Location", monitor)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_, _ = fmt.Fprintf(w, `{"@odata.id":%q,"Id":"39o","TaskState":"Running"}`, monitor)
				answered <- time.Now()
				time.AfterFunc(delay, func() { land(); landed.Store(true) })
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// TestReview39_QueuedOnLandsAfterDeadlineUnfencesHost: the round-13 fix
// (power.Queued) makes the owed pinned power-on that the BMC answered
// 202 Accepted wait, in memory (settledAt) and in the record (no
// Returned), until the call's deadline (Until) plus StaleReads, and
// kube/doc.go says "The wait assumes that a BMC carries the On out, if
// ever, before the call's deadline". A 202 is the BMC saying the
// opposite: it took the On as a task that it carries out later, on its
// own time line, not bound by the HTTP call's deadline (power.Queued's
// own doc: "it may take effect up to the call's deadline or later"), and
// it hands the client a task monitor that says when it is done. Here the
// task runs 13 s (the pool's CallTimeout is 5 s, StaleReads 0.5 s), its
// monitor truthfully Running until then. spec.bmc is restored with a
// keyed hard hold right after the 202: the controller waits to Until +
// StaleReads, reads the host Off (the task has not run), reports the
// keyed request fenced (LastPoweredOff), and then rebootkit's own
// queued power-on runs the host it reported fenced. Ground truth: the
// pinned BMC's hardware must stay off from the first instant the record
// reports the keyed request fenced (a correct controller may also not
// report it fenced within the scene). Today it is reported fenced about
// 10.3 s after the 202 (LastPoweredOff), and the task's On lands at 13 s;
// on a machine so loaded that the report comes after the landing the
// test passes (the hold powers the host off again first): it cannot
// fail wrongly. Correct: an On answered 202 is in
// flight until its task monitor says it ended (Completed, Exception,
// Killed...) or the host reads On, bounded by a documented task limit
// after which the host is left as it is (ErrInFlight, an event that
// says the fix), not until the HTTP call's deadline; the record keeps
// it (the monitor's URI) so that a restarted controller or a new leader
// waits as well.
func TestReview39_QueuedOnLandsAfterDeadlineUnfencesHost(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	const landDelay = 13 * time.Second
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
		return taskOn39o(h, armed, landDelay, land, answered)
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
	}, 3*time.Second, 5*time.Millisecond, "premise: the sending controller records the On as sent")
	restored := time.Now()
	require.NoError(t, change(ctx, s.direct, s.ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.BMC.Address = redfishAt(s.srv1)
		hold39m(h)
	}))
	require.False(t, landed.Load(), "premise: the queued On has not landed when spec.bmc is restored")
	var fencedAt time.Time
	deadline := at.Add(landDelay + time.Second)
	for time.Now().Before(deadline) {
		var r v1alpha1.RebootRecord
		var h metal3.BareMetalHost
		if fencedAt.IsZero() && s.direct.Get(ctx, key, &h) == nil && s.direct.Get(ctx, key, &r) == nil {
			if st, ok := recordStatus(&r, &h, true); ok && st.Fenced(restored, time.Now()) {
				fencedAt = time.Now()
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.True(t, landed.Load(), "premise: the queued On landed")
	require.NoError(t, s.direct.Get(ctx, key, &rec))
	if fencedAt.IsZero() {
		return // the wait held: correct
	}
	assert.True(t, s.hw1.OffThroughout(fencedAt, time.Now()),
		"a host reported fenced for a keyed request (at %v after the 202, %v after the restore; PowerOnSent until %s) stays off "+
			"while it is held: a power-on the BMC accepted as a task (202, monitor Running) may land after the call's deadline "+
			"(transitions %+v; calls %+v; events %q)",
		fencedAt.Sub(at), fencedAt.Sub(restored), untilOf39o(&rec), s.hw1.Transitions(), s.hw1.Calls(), drainEvents(s.rec))
}

// untilOf39o is the record's PowerOnSent.Until, if any.
func untilOf39o(rec *v1alpha1.RebootRecord) string {
	if rec.Spec.PowerOnSent == nil {
		return "(none)"
	}
	return rec.Spec.PowerOnSent.Until
}
