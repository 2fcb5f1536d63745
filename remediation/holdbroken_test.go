package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestRebootHostsNotFencedAfterHoldBroken (issue 39, point 8): once the
// reboot controller reports its hold broken (someone powered the held
// host on after the evidence), the remediation's host is not Fenced: its
// Node must not be deleted while the host runs fresh processes. On the
// old code Fenced stayed true.
func TestRebootHostsNotFencedAfterHoldBroken(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	req := remediation.Request{Value: `{"mode":"hard"}`, At: t0}
	for _, tc := range []struct {
		broken time.Time
		fenced bool
	}{
		{broken: time.Time{}, fenced: true},
		{broken: t0.Add(5 * time.Second), fenced: false},
	} {
		st := reboot.Status{PendingRebootSince: t0, LastRequestSeen: t0, LastPoweredOff: t0.Add(2 * time.Second), HoldBroken: tc.broken}
		hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true, Status: st,
			Annotations: map[string]string{remediation.RebootAnnotation: req.Value}})
		r := &remediation.RebootAPIHosts{Hosts: hosts, Now: func() time.Time { return t0.Add(10 * time.Second) },
			HostOf: func(context.Context, string) (string, error) { return "h1", nil }}
		h, err := r.Get(context.Background(), "m1", req)
		if err != nil {
			t.Fatal(err)
		}
		if h.Fenced != tc.fenced {
			t.Errorf("hold broken at %v: Fenced %v, want %v", tc.broken, h.Fenced, tc.fenced)
		}
	}
}
