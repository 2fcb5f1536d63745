package inventory

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rebootkit/rebootkit/plan"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/power/redfish"
)

// Issue 38, point 16: the inventory's paper cuts an operator met.

const twoRedfish = `
defaults:
  bmc: {username: admin, password_env: BMC_PASSWORD, insecure: true, basic_auth: true}
servers:
  - uuid: a
    hostname: node-a
    bmc: {redfish: "https://10.0.0.1"}
    health: {tcp: "10.0.1.1:22"}
  - uuid: b
    hostname: node-b
    bmc: {redfish: "https://10.0.0.2", insecure: false, basic_auth: false}
    health: {tcp: "10.0.1.2:22"}
`

// TestServerFalseOverridesDefaultTrue: a server's insecure: false and
// basic_auth: false win over defaults of true, as the README says ("a
// server's own value wins"). Before, both were ORed with the default: the
// server skipped certificate verification although it said not to.
func TestServerFalseOverridesDefaultTrue(t *testing.T) {
	inv, err := Parse([]byte(twoRedfish))
	require.NoError(t, err)
	a, _ := inv.Server("node-a")
	b, _ := inv.Server("node-b")
	assert.True(t, inv.BMCOf(a).InsecureSkipVerify(), "node-a inherits insecure: true")
	assert.True(t, inv.BMCOf(a).UseBasicAuth(), "node-a inherits basic_auth: true")
	assert.False(t, inv.BMCOf(b).InsecureSkipVerify(), "node-b's insecure: false wins")
	assert.False(t, inv.BMCOf(b).UseBasicAuth(), "node-b's basic_auth: false wins")
}

// TestCipherSuiteOnlySupported: only the cipher suites the IPMI adapter
// speaks (3 and 17) are accepted; cipher_suite: 99 was accepted and
// failed only at the first login.
func TestCipherSuiteOnlySupported(t *testing.T) {
	for _, cs := range []string{"99", "1", "-3", "2"} {
		doc := strings.Replace(good, `bmc: {ipmi: "10.0.0.11",`, `bmc: {ipmi: "10.0.0.11", cipher_suite: `+cs+`,`, 1)
		_, err := Parse([]byte(doc))
		if assert.ErrorIs(t, err, ErrInvalid, cs) {
			assert.Contains(t, err.Error(), "cipher_suite", cs)
			assert.Contains(t, err.Error(), "3 (the default) or 17", cs)
		}
	}
	for _, cs := range []string{"3", "17"} {
		doc := strings.Replace(good, `bmc: {ipmi: "10.0.0.11",`, `bmc: {ipmi: "10.0.0.11", cipher_suite: `+cs+`,`, 1)
		_, err := Parse([]byte(doc))
		assert.NoError(t, err, cs)
	}
	doc := strings.Replace(good, "password_env: BMC_PASSWORD", "password_env: BMC_PASSWORD\n    cipher_suite: 99", 1)
	_, err := Parse([]byte(doc))
	assert.ErrorIs(t, err, ErrInvalid, "a bad default is refused too")
}

// TestHostnamesDifferingInCaseRefused: hostnames are names of machines
// (DNS is case-insensitive): two servers whose hostnames differ only in
// case would be one machine to an operator, and the executor's own server
// is identified case aside. Before, both were accepted.
func TestHostnamesDifferingInCaseRefused(t *testing.T) {
	doc := strings.Replace(good, "hostname: compute-1", "hostname: HN0", 1)
	_, err := Parse([]byte(doc))
	if assert.ErrorIs(t, err, ErrInvalid) {
		assert.Contains(t, err.Error(), "hn0")
	}
}

// TestTwoServersOneBMCRefused: two servers naming the same BMC (the same
// Redfish service and system, or the same IPMI address) would power each
// other off. Before, Load, the dry run and the executor accepted them.
func TestTwoServersOneBMCRefused(t *testing.T) {
	for name, repl := range map[string][2]string{
		"same redfish":             {`"https://10.0.0.2", insecure`, `"https://10.0.0.1", insecure`},
		"same redfish, port, case": {`"https://10.0.0.2", insecure`, `"HTTPS://10.0.0.1:443/", insecure`},
		"same system":              {`"https://10.0.0.2", insecure`, `"https://10.0.0.1", system: "1", insecure`},
	} {
		doc := strings.Replace(twoRedfish, repl[0], repl[1], 1)
		if name == "same system" {
			doc = strings.Replace(doc, `{redfish: "https://10.0.0.1"}`, `{redfish: "https://10.0.0.1", system: "1"}`, 1)
		}
		_, err := Parse([]byte(doc))
		if assert.ErrorIs(t, err, ErrInvalid, name) {
			assert.Contains(t, err.Error(), "node-a", name)
		}
	}
	// Two systems of one Redfish service are two servers.
	doc := strings.Replace(twoRedfish, `{redfish: "https://10.0.0.1"}`, `{redfish: "https://10.0.0.1", system: "1"}`, 1)
	doc = strings.Replace(doc, `"https://10.0.0.2", insecure`, `"https://10.0.0.1", system: "2", insecure`, 1)
	_, err := Parse([]byte(doc))
	assert.NoError(t, err, "two systems of one BMC")
	// IPMI: one system per address.
	ipmi := strings.Replace(good, `{redfish: "https://10.0.0.10"}`, `{ipmi: "10.0.0.11:623"}`, 1)
	_, err = Parse([]byte(ipmi))
	assert.ErrorIs(t, err, ErrInvalid, "same IPMI address")
}

// TestNoSessionServiceSaysBasicAuthKey: when a later login (a session
// that expired, a BMC reset) finds no SessionService, the Redfish
// adapter's advice to a library user, "set BasicAuth", reaches show and
// watch as the inventory key an operator sets: basic_auth: true (issue
// 38, point 16; old code: the first connect was reworded, a re-login's
// error went out as the adapter wrote it).
func TestNoSessionServiceSaysBasicAuthKey(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.open()
	defer w.close()
	w.f.noteCall(ids[0], "state", fmt.Errorf("server cn0: %w", &power.Error{Op: "connect", Class: power.ClassUnsupported,
		Message: "the service root links no SessionService (sushy-tools has none): set BasicAuth", Err: redfish.ErrNoSessionService}))
	st, err := w.f.Status()
	require.NoError(t, err)
	require.Len(t, st, 1)
	require.NotNil(t, st[0].LastError)
	msg := st[0].LastError.Text()
	assert.Contains(t, msg, "basic_auth: true", msg)
	assert.NotContains(t, msg, "BasicAuth", msg)
	assert.Equal(t, BMCConfig, st[0].LastError.Class)
}

// TestPowerCommandsLoggedAtInfo: the executor's -v (Info) log names
// every power command sent to a BMC, with the server's hostname and the
// answer (issue 38, point 16; old code: job steps only, the reboot
// decisions at Debug, no power operation even with -v).
func TestPowerCommandsLoggedAtInfo(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.open()
	defer w.close()
	var buf strings.Builder
	w.f.opts.Logger = slog.New(slog.NewTextHandler(&syncWriter{w: &buf}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	w.newPlan()
	w.run(ids, 5*time.Minute)
	require.Equal(t, 1, w.bmcs[ids[0]].p.Cycles(), "power-cycled (ground truth)")
	out := buf.String()
	assert.Regexp(t, `msg="power command accepted" server=cn0 op="off (soft|hard)"`, out)
	assert.Regexp(t, `msg="power command accepted" server=cn0 op=on`, out)
}

// syncWriter serialises writes (the fleet logs from several goroutines).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// TestReportOffPhaseFromHardware: the plan's report draws the power-off
// phase up to the hardware's power-off (the first Off reading after the
// power-off was sent), not up to the instant the job could rely on it as
// fencing evidence, StaleReads later (issue 38, point 16; old code: the
// "power off" bar included the executor's confirmation wait, 20 s and
// more here, and the "held off" bar lost as much).
func TestReportOffPhaseFromHardware(t *testing.T) {
	w, ids := newWorld(t, 1, 1)
	w.open()
	defer w.close()
	w.newPlan()
	w.run(ids, 5*time.Minute)
	p, err := w.store.Get(w.ctx(), w.plans[0])
	require.NoError(t, err)
	require.Equal(t, plan.StepDone, p.Reboots[0].Step, plan.Table(p))
	ph := p.Reboots[0].Phases
	require.NotNil(t, ph)
	require.NotNil(t, ph.Off)
	var offAt time.Time
	for _, c := range w.bmcs[ids[0]].p.Truth() {
		if !c.On {
			offAt = c.At
			break
		}
	}
	require.False(t, offAt.IsZero(), "powered off (ground truth)")
	assert.False(t, ph.Off.Before(offAt.Truncate(time.Second)), "never before the hardware went off: %s < %s", ph.Off, offAt)
	assert.LessOrEqual(t, ph.Off.Sub(offAt), 3*time.Second, "off at %s, reported %s: the confirmation wait is not the power-off's", offAt, ph.Off)
	require.NotNil(t, ph.On)
	assert.True(t, ph.On.After(*ph.Off), "held off between")
}
