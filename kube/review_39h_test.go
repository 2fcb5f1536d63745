package kube

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metal3 "github.com/metal3-io/baremetal-operator/apis/metal3.io/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/kube/api/v1alpha1"
	"github.com/rebootkit/rebootkit/power/redfish/redfishtest"
	"github.com/rebootkit/rebootkit/reboot"
)

// TestReview39h_ResetRequestWithdrawnWithRedirectSendsCredentials (issue
// 39 round 8, point 2). doc.go, Guarantees: "without [config/admission],
// a spec.bmc changed during a pending reboot is not used (ErrBMCChanged),
// nor after the pending reboot's requests were removed in the same write,
// until an administrator names it in the record's BMCChanged mark (one
// exception: a host whose pinned BMC reads Off ...)". On the normal path
// that holds (checkPin reads the pinned BMC and marks the record). On the
// reset path (spec.disablePowerOff) it does not: a reboot client (the
// shipped reboot-client role, no admission policy) asks for a reboot, the
// reset path pins its request to BMC 1 and resets the host, and then the
// client, in one write, removes its request and points spec.bmc at its
// own endpoint. The pass that sees no request clears the reset state and
// its pin with no look at spec.bmc (reset.go, d.Clear: writeReset with
// nil state), and the next pass ("with no request, power follows
// spec.online") reads the power through the client's endpoint: the
// host's bound password is sent there. The pinned BMC reads On (the host
// runs), so the exception does not apply. Ground truth: the client
// endpoint's own login log.
func TestReview39h_ResetRequestWithdrawnWithRedirectSendsCredentials(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	// The client's endpoint (BMC 2) accepts any login, as a phishing endpoint would.
	const stale = 5 * time.Second // the request stays pending after its reset
	w := startPinWorld39(t, ctx, pinOpts39{host: func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }, stale: stale, powersStale: true})
	direct, ns, hw1, evil, srv1, srv2, rec := w.direct, w.ns, w.hw1, w.bmc2, w.srv1, w.srv2, w.rec

	rc := rebootClient(t, ns, "client")
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	require.Eventually(t, func() bool { return len(hw1.Resets()) == 1 }, 10*time.Second, 20*time.Millisecond, "premise: the request's reset")
	var record v1alpha1.RebootRecord
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record))
	require.NotNil(t, record.Spec.BMC, "premise: the pending reset request pins the BMC")
	require.Equal(t, redfishAt(srv1), record.Spec.BMC.Address)
	// The reboot client, in one write: its request goes, spec.bmc points at its endpoint.
	redirected := time.Now()
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		delete(h.Annotations, reboot.Annotation)
		h.Spec.BMC.Address = redfishAt(srv2)
	}))
	time.Sleep(4 * time.Second)
	require.True(t, hw1.WasOnAt(time.Now()), "setup: the host runs (its pinned BMC reads On: the exception does not apply)")
	var leaked []redfishtest.LoginRecord
	for _, l := range evil.LoginLog() {
		if l.Credentials == redfishtest.Fingerprint("admin", "pw-1") && !l.At.Before(redirected) {
			leaked = append(leaked, l)
		}
	}
	_ = direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record)
	require.Empty(t, leaked, "a reboot client removed its reset request and redirected spec.bmc in one write (no admission policy): "+
		"the host's password was sent to the client's endpoint %d times (pin now %+v, mark %+v); events %q",
		len(leaked), record.Spec.BMC, record.Spec.BMCChanged, drainEvents(rec))
}

// TestReview39h_InFlightPowerOnLandsAfterFirstSeenOffEchoCounted (issue
// 39 round 8, point 2; wired as the binary wires it: Async over
// Powers.Controller, Powers.Done). Round 7's rule counts a pinned BMC's
// Off only if its reading began StaleReads after the later of the pass
// that first found the requests gone with the BMC changed and the last
// power command the record shows, "so that it cannot echo the host off
// from before a power-on" (doc.go). Both instants are decision times;
// neither covers a power-on that is still in flight (Async runs it in
// the background, and checkPin runs at every pass meanwhile, before the
// asyncController) and lands after them. A normal-path hard reboot pins
// BMC 1 and powers the host off; the administrator sets
// spec.disablePowerOff; the reset path finds the host off and sends a
// power-on through BMC 1, which carries it out 5 s later (a slow BMC).
// While it is in flight a reboot client (no admission policy) removes the
// request and points spec.bmc at its endpoint in one write. The reset
// state (and its Sending) is cleared at once, checkPin first finds the
// requests gone, reads Off (too early: kept), and StaleReads (6 s) later
// reads again: BMC 1, which reports up to 3 s stale (StaleReads covers
// it), echoes the Off from before the power-on it carried out at +5 s.
// The Off counts: the client's endpoint gets the host's password while
// the host has been running for over a second. Ground truth: hw1's own
// power history and the endpoint's login log.
func TestReview39h_InFlightPowerOnLandsAfterFirstSeenOffEchoCounted(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	hw1 := fake.NewPower(time.Now, fake.PowerConfig{Report: fake.Report{Stale: 3 * time.Second}})
	const landing = 5 * time.Second
	var landedMu sync.Mutex
	var sentOn, landed time.Time
	onArrived := make(chan struct{}, 1)
	slow := func(bmc1 http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "Actions/ComputerSystem.Reset") {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if strings.Contains(string(body), `"On"`) {
					landedMu.Lock()
					sentOn = time.Now()
					landedMu.Unlock()
					select {
					case onArrived <- struct{}{}:
					default:
					}
					time.Sleep(landing) // a slow BMC: it carries the power-on out, and answers, 5 s later
					landedMu.Lock()
					landed = time.Now()
					landedMu.Unlock()
				}
			}
			bmc1.ServeHTTP(w, r)
		})
	}
	const stale = 6 * time.Second
	pw := startPinWorld39(t, ctx, pinOpts39{hw1: hw1, wrap1: slow, stale: stale, powersStale: true,
		call: 15 * time.Second, connect: 5 * time.Second, async: true})
	direct, ns, evil, srv2, rec := pw.direct, pw.ns, pw.bmc2, pw.srv2, pw.rec

	rc := rebootClient(t, ns, "client")
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, `{"mode":"hard"}`)
	}))
	require.Eventually(t, func() bool { return !hw1.WasOnAt(time.Now()) }, 10*time.Second, 10*time.Millisecond, "premise: the hard reboot powers the host off")
	off := time.Now()
	var record v1alpha1.RebootRecord
	require.NoError(t, direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record))
	require.NotNil(t, record.Spec.BMC, "premise: the pending reboot pins BMC 1")
	// Past the BMC's staleness, before the normal path's evidence: reset-only.
	time.Sleep(time.Until(off.Add(3500 * time.Millisecond)))
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) { h.Spec.DisablePowerOff = true }))
	select {
	case <-onArrived:
	case <-time.After(20 * time.Second):
		t.Fatalf("premise: the reset path powers the off host on; calls %v, events %q", hw1.Calls(), drainEvents(rec))
	}
	time.Sleep(300 * time.Millisecond)
	redirected := time.Now()
	require.NoError(t, change(ctx, rc, ns, "h1", func(h *metal3.BareMetalHost) {
		delete(h.Annotations, reboot.Annotation)
		h.Spec.BMC.Address = redfishAt(srv2)
	}))
	time.Sleep(stale + landing)
	landedMu.Lock()
	on, sent := landed, sentOn
	landedMu.Unlock()
	require.False(t, on.IsZero(), "premise: the power-on landed")
	require.False(t, hw1.WasOffDuring(on.Add(100*time.Millisecond), time.Now()), "premise: the host runs since the power-on landed")
	var leaked []time.Time
	for _, l := range evil.LoginLog() {
		if l.Credentials == redfishtest.Fingerprint("admin", "pw-1") && l.At.After(redirected) {
			leaked = append(leaked, l.At)
		}
	}
	_ = direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &record)
	require.Empty(t, leaked, "the pinned BMC's Off, an echo of the state before the power-on sent at %s and carried out at %s "+
		"(after the pass that first found the request gone, redirected at %s), counted: the client's endpoint got the host's "+
		"password at %v while the host ran (pin now %+v, mark %+v); events %q", sent.Format("15:04:05.000"), on.Format("15:04:05.000"),
		redirected.Format("15:04:05.000"), leaked, record.Spec.BMC, record.Spec.BMCChanged, drainEvents(rec))
}

// TestReview39h_ResetHostPoweredOnThroughNewBMCKeepsPinLocksOut (issue
// 39 round 8, point 2/3). doc.go (Powers): when the requests are gone and
// spec.bmc is no longer the pinned one, "If that reads Off (the withdrawn
// reboot may have powered the host off), the host is powered back on
// through its new BMC, with no evidence taken, and the pin goes", and "A
// host is thus never locked out by the pin of a reboot no longer asked
// for". On the normal path the pin goes with the pass that powers the
// host on (TestBMCReplacedAfterHoldWithdrawnNormalPath). On the reset path
// it does not: round 7's endNormal drops the normal path's pin only while
// spec.bmc is still the pinned one, and writeReset keeps it otherwise. A
// hard reboot powers the host off (pinned to BMC 1); the administrator
// makes the host reset-only, replaces its BMC (BMC 2 reaches the same
// machine) and withdraws the request, in one write (no admission
// policy). The pinned BMC reads Off, the reset path powers the host on
// through BMC 2, and the pin stays: the next reading of BMC 1 (now On)
// marks the record BMCChanged, and a later reset request is refused
// (ErrBMCChanged) for good. Ground truth: the machine's own resets and
// the record read directly.
func TestReview39h_ResetHostPoweredOnThroughNewBMCKeepsPinLocksOut(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	hw := fake.NewPower(time.Now, fake.PowerConfig{})
	// The replacement BMC (BMC 2): the same machine.
	const stale = time.Second
	w := startPinWorld39(t, ctx, pinOpts39{hw1: hw, hw2: hw, stale: stale, powersStale: true})
	direct, ns, srv2, rec := w.direct, w.ns, w.srv2, w.rec
	record := func() v1alpha1.RebootRecord {
		var r v1alpha1.RebootRecord
		_ = direct.Get(ctx, types.NamespacedName{Namespace: ns, Name: "h1"}, &r)
		return r
	}

	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, `{"mode":"hard"}`)
	}))
	require.Eventually(t, func() bool { return !hw.WasOnAt(time.Now()) }, 10*time.Second, 5*time.Millisecond, "premise: the hard reboot powers the host off")
	require.NotNil(t, record().Spec.BMC, "premise: the pending reboot pins BMC 1")
	// The administrator, in one write: reset-only, the new BMC, the request withdrawn.
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		h.Spec.DisablePowerOff = true
		h.Spec.BMC.Address = redfishAt(srv2)
		delete(h.Annotations, reboot.Annotation)
	}))
	require.Eventually(t, func() bool { return hw.WasOnAt(time.Now()) }, 15*time.Second, 20*time.Millisecond,
		"premise: the pinned BMC reads Off and the host is powered back on through it; events %q", drainEvents(rec))
	// Since issue 39 round 9 the new BMC is used only once accepted (the
	// host is powered back on through the pinned one): the administrator
	// accepts it.
	acceptBMC(t, ctx, direct, ns, "h1", 5*time.Second)
	time.Sleep(3 * stale)
	r := record()
	// A new reset request.
	asked := time.Now()
	require.NoError(t, change(ctx, direct, ns, "h1", func(h *metal3.BareMetalHost) {
		metav1.SetMetaDataAnnotation(&h.ObjectMeta, reboot.Annotation, "")
	}))
	reset := assert.Eventually(t, func() bool {
		for _, at := range hw.Resets() {
			if at.After(asked) {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond)
	require.Nil(t, r.Spec.BMC, "the host was powered back on through its new BMC, yet the withdrawn reboot's pin stays (mark %+v)", r.Spec.BMCChanged)
	require.Nil(t, r.Spec.BMCChanged, "the host is marked BMCChanged by the pin of a reboot no longer asked for")
	require.True(t, reset, "a reset request made after the power-on is never answered; events %q", drainEvents(rec))
}
