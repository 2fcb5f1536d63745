package reboot_test

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

var fakeEpoch = fake.Epoch

var sink reboot.Decision

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

func BenchmarkDecide(b *testing.B) {
	cases := map[string]reboot.Observed{
		"idle": {Annotations: map[string]string{"app": "x"}, Online: true, Power: power.StateOn,
			Status: reboot.Status{LastPoweredOn: fakeEpoch}},
		"new-request": {Annotations: map[string]string{"reboot.metal3.io": ""}, Online: true, Power: power.StateOn},
		"held-off": {Annotations: map[string]string{"reboot.metal3.io/a": "", "reboot.metal3.io/b": `{"mode":"hard"}`},
			Online: true, Power: power.StateOff,
			Status: reboot.Status{PendingRebootSince: fakeEpoch, LastPoweredOff: fakeEpoch, Seen: []string{"reboot.metal3.io/a", "reboot.metal3.io/b"}, LastRequestSeen: fakeEpoch, Mode: power.ModeHard}},
		"power-on": {Annotations: map[string]string{"reboot.metal3.io": ""}, Online: true, Power: power.StateOff,
			Status: reboot.Status{PendingRebootSince: fakeEpoch, Seen: []string{"reboot.metal3.io"}, LastRequestSeen: fakeEpoch}},
	}
	for name, o := range cases {
		b.Run(name, func(b *testing.B) {
			now := fakeEpoch.Add(time.Minute)
			b.ReportAllocs()
			for b.Loop() {
				sink = reboot.Decide(o, now)
			}
		})
	}
}
