package remediation_test

import (
	"context"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/remediation"
)

// TestRebootHostsPoweredOnNeedsFreshOnReading (issue 41, review 41b): the
// reboot controller writes Status.LastPoweredOn before it sends the
// power-on, which the BMC may refuse. With Power set, RebootHosts counts
// the host powered on only on an On reading taken at least StaleReads plus
// a second after that record (reboot.Client.Up's rule). On the old code
// PoweredOn was true on the record alone, with the host reading Off.
// Without Power (review 40o), the controller's own confirmation
// (Status.OnConfirmed) is needed instead of the record alone.
func TestRebootHostsPoweredOnNeedsFreshOnReading(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	req := remediation.Request{Value: `{"mode":"hard"}`, At: t0}
	onAt := t0.Add(3 * time.Second) // the record; window ends at onAt+0.5s+1s
	for _, tc := range []struct {
		name      string
		power     power.State // StateUnknown: no Power
		now       time.Time
		poweredOn bool
		confirmed bool // the controller's own On reading (Status.OnConfirmed)
	}{
		{name: "no Power: the record alone", now: t0.Add(10 * time.Second), poweredOn: false},
		{name: "no Power: confirmed by the controller", now: t0.Add(10 * time.Second), poweredOn: true, confirmed: true},
		{name: "reads Off (the BMC refused the power-on)", power: power.StateOff, now: t0.Add(10 * time.Second), poweredOn: false},
		{name: "reads On within the stale window", power: power.StateOn, now: onAt.Add(1400 * time.Millisecond), poweredOn: false},
		{name: "reads On past the stale window", power: power.StateOn, now: onAt.Add(1500 * time.Millisecond), poweredOn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := reboot.Status{LastRequestSeen: t0, LastPoweredOff: t0.Add(time.Second), LastPoweredOn: onAt}
			if tc.confirmed {
				st.OnConfirmed = onAt
			}
			hosts := fake.NewRebootHosts(reboot.Host{Name: "h1", Online: true, Status: st})
			r := &remediation.RebootAPIHosts{Hosts: hosts, Now: func() time.Time { return tc.now }, StaleReads: 500 * time.Millisecond,
				HostOf: func(context.Context, string) (string, error) { return "h1", nil }}
			if tc.power != power.StateUnknown {
				p := fake.NewPower(func() time.Time { return tc.now }, fake.PowerConfig{Initial: tc.power})
				r.Power = func(string) (power.Controller, error) { return p, nil }
			}
			h, err := r.Get(context.Background(), "m1", req)
			if err != nil {
				t.Fatal(err)
			}
			if h.PoweredOn != tc.poweredOn {
				t.Errorf("PoweredOn %v, want %v (power %v)", h.PoweredOn, tc.poweredOn, h.Power)
			}
			if !h.OffAfterRequest {
				t.Error("OffAfterRequest false with LastPoweredOff after the request")
			}
		})
	}
}
