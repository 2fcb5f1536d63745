package reboot_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

var fakeEpoch = fake.Epoch

func BenchmarkParseAnnotations(b *testing.B) {
	ann := map[string]string{
		"reboot.metal3.io":             "",
		"reboot.metal3.io/remediation": `{"mode":"hard","uid":"6c1f2f3e-0d7e-4a55-9b1e-2b9d6e0f1a22"}`,
		"reboot.metal3.io/drain":       `{"mode":"soft"}`,
		"kubectl.kubernetes.io/last":   "x",
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = reboot.ParseAnnotations(ann, reboot.Policy{})
	}
}

// settled returns o with the status two earlier passes left: the request
// seen, and (if the power reads off 40 s later) the evidence recorded.
func settled(o reboot.Observed, at time.Time) reboot.Observed {
	o.QuietFor = time.Hour
	p := o.Power
	o.Power = power.StateOn
	o.Status = reboot.Decide(o, at).Status
	o.Power = p
	o.SincePending, o.SinceRequest = 40*time.Second, 40*time.Second
	o.Status = reboot.Decide(o, at.Add(40*time.Second)).Status
	return o
}

// BenchmarkDecide measures each phase through DecideInto with a reused
// Decision, as a controller that keeps one per worker would: a pass that
// changes nothing allocates nothing.
func BenchmarkDecide(b *testing.B) {
	client := func(k string) string {
		return reboot.RequestValue(power.ModeHard, fakeEpoch.Add(1234567*time.Nanosecond))
	}
	cases := []struct {
		name string
		o    reboot.Observed
	}{
		{"idle", reboot.Observed{Annotations: map[string]string{"app": "x"}, Online: true, Power: power.StateOn,
			Status: reboot.Status{LastPoweredOn: fakeEpoch}, QuietFor: time.Hour}},
		{"new-request", reboot.Observed{Annotations: map[string]string{"reboot.metal3.io": ""}, Online: true, Power: power.StateOn, QuietFor: time.Hour}},
		{"powering-off", settled(reboot.Observed{Annotations: map[string]string{"reboot.metal3.io/a": client("a")}, Online: true, Power: power.StateOn}, fakeEpoch)},
		{"held-off", settled(reboot.Observed{Annotations: map[string]string{"reboot.metal3.io/a": client("a"), "reboot.metal3.io/b": `{"mode":"hard"}`},
			Online: true, Power: power.StateOff}, fakeEpoch)},
		{"power-on", settled(reboot.Observed{Annotations: map[string]string{"reboot.metal3.io": ""}, Online: true, Power: power.StateOff}, fakeEpoch)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			now := fakeEpoch.Add(time.Minute)
			var d reboot.Decision
			reboot.DefaultConfig().DecideInto(&d, tc.o, now)
			b.ReportAllocs()
			for b.Loop() {
				reboot.DefaultConfig().DecideInto(&d, tc.o, now)
			}
		})
	}
}

// BenchmarkDecideKeys measures a held-off pass with k keyed requests: the
// cost grows as k log k (the sort), not k².
func BenchmarkDecideKeys(b *testing.B) {
	for _, k := range []int{1, 10, 100, 1000} {
		b.Run(fmt.Sprintf("keys=%d", k), func(b *testing.B) {
			ann := map[string]string{}
			for i := 0; i < k; i++ {
				ann[fmt.Sprintf("reboot.metal3.io/client-%04d", i)] = reboot.RequestValue(power.ModeHard, fakeEpoch.Add(time.Duration(i)))
			}
			o := settled(reboot.Observed{Annotations: ann, Online: true, Power: power.StateOff}, fakeEpoch)
			now := fakeEpoch.Add(time.Minute)
			var d reboot.Decision
			reboot.DefaultConfig().DecideInto(&d, o, now)
			b.ReportAllocs()
			for b.Loop() {
				reboot.DefaultConfig().DecideInto(&d, o, now)
			}
		})
	}
}

// TestUnchangedPassAllocatesNothing pins the zero-allocation promise of
// DecideInto for a held host.
func TestUnchangedPassAllocatesNothing(t *testing.T) {
	o := settled(reboot.Observed{Annotations: map[string]string{
		"reboot.metal3.io/a": reboot.RequestValue(power.ModeHard, fakeEpoch.Add(time.Millisecond)),
		"reboot.metal3.io/b": `{"mode":"hard"}`}, Online: true, Power: power.StateOff}, fakeEpoch)
	now := fakeEpoch.Add(time.Minute)
	var d reboot.Decision
	reboot.DefaultConfig().DecideInto(&d, o, now)
	if d.UpdateStatus || d.Power != reboot.ActionNone {
		t.Fatalf("not an unchanged pass: %+v", d)
	}
	if n := testing.AllocsPerRun(100, func() { reboot.DefaultConfig().DecideInto(&d, o, now) }); n != 0 {
		t.Fatalf("an unchanged held-off pass allocates %v times", n)
	}
}
