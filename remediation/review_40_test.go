package remediation_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/remediation"
)

// TestReview40_NounsRewriteNames: Config.Nouns puts "the caller's nouns"
// into the messages, but it rewrites words by a regular expression over
// the whole message, names included: \b matches at '-', so a machine
// named "node-3" in a group named "machine-room" (everyday inventory
// names) is reported as "server-3" of "server-room". The storm guard's
// refusal, persisted in State.Message for the operator, then names a
// server that does not exist.
func TestReview40_NounsRewriteNames(t *testing.T) {
	fleet := []remediation.FleetMachine{
		{Name: "node-1", Cluster: "machine-room", Unhealthy: true},
		{Name: "node-2", Cluster: "machine-room", Unhealthy: true},
		{Name: "node-3", Cluster: "machine-room", Unhealthy: true},
		{Name: "node-4", Cluster: "machine-room"},
	}
	ok, why := remediation.MayStart(fleet, "node-3", remediation.MaxCount(1))
	if ok {
		t.Fatalf("the storm guard admitted node-3: %s", why)
	}
	cfg := remediation.Config{Nouns: remediation.Nouns{Machine: "server", Node: "server", Group: "rack"}}
	o := remediation.Observed{
		Machine:  remediation.Machine{Name: "node-3", NeedsRemediation: true, Cluster: "machine-room"},
		MayStart: false, GuardReason: why,
	}
	d := cfg.Decide(o, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for what, msg := range map[string]string{"State.Message": d.State.Message, "Reason": d.Reason} {
		if msg == "" {
			continue
		}
		t.Logf("%s: %q", what, msg)
		if strings.Contains(why, "machine-room") && !strings.Contains(msg, "machine-room") {
			t.Errorf("%s %q: the group's name machine-room was rewritten (the guard said %q)", what, msg, why)
		}
	}
	// The guard's own reason for a machine it does not know names it.
	_, why = remediation.MayStart(fleet, "node-9", remediation.MaxCount(1))
	o.Machine.Name, o.GuardReason = "node-9", why
	d = cfg.Decide(o, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if !strings.Contains(d.State.Message+d.Reason, "node-9") {
		t.Errorf("the machine's name node-9 was rewritten: message %q, reason %q (the guard said %q)", d.State.Message, d.Reason, why)
	}
}
