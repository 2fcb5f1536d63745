package reboot_test

import (
	"flag"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/internal/scenario"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/reboot"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of scenario files")

// A scenario file is a story: blocks of commands, each followed by a line
// "----" and the output the commands print. Commands:
//
//	host online=true power=on     start a host (resets everything)
//	annotate KEY [VALUE]          add or replace an annotation
//	unannotate KEY                a client removes its annotation
//	power on|off|transitioning|unknown   what the next reads observe
//	advance DURATION              let time pass (negative: the wall clock jumps back)
//	jump DURATION                 the wall clock alone jumps (forward or back)
//	quiet DURATION                set the time since the last power-on (monotonic);
//	                              a host starts with 1h, a power-on resets it to 0
//	stalereads DURATION           set Config.StaleReads (default 30s)
//	offsettle DURATION            set Config.OffSettle
//	changed                       the next decide sees the record changed by someone else
//	next-call busy|failed|unsupported    the next power call fails so
//	online true|false             set Spec.Online
//	deprovision true|false        set Deprovisioned
//	decide                        decide, print, apply status and removals
//
// The monotonic ages of the status's PendingRebootSince and LastRequestSeen
// (Observed.SincePending, SinceRequest) start when a decide writes them and
// grow with advance; OffFor is the age of the latest decide, in the current
// run of Off readings, at least OffSettle old (as the Reconciler tracks it).
//
//	fenced DURATION               ask Fenced(epoch+DURATION) at the current clock
//
// The clock starts at fake.Epoch; times print as offsets from it.
func TestScenarios(t *testing.T) {
	scenario.Run(t, "testdata/*.txt", *rewrite, func() func(string, *strings.Builder) error {
		s := &scenarioState{now: fake.Epoch}
		return s.run
	})
}

type scenarioState struct {
	o        reboot.Observed
	now      time.Time
	nextFail power.Class
	cfg      reboot.Config
	offReads []time.Duration // monotonic times of the decides of the current run of Off readings
	mono     time.Duration
}

func (s *scenarioState) run(line string, w *strings.Builder) error {
	f := strings.Fields(line)
	arg := func(i int) string {
		if i < len(f) {
			return f[i]
		}
		return ""
	}
	switch f[0] {
	case "host":
		s.o = reboot.Observed{Annotations: map[string]string{}, Online: true, Power: power.StateOn, QuietFor: time.Hour,
			SincePending: time.Hour, SinceRequest: time.Hour}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			if err := s.set(k, v); err != nil {
				return err
			}
		}
	case "annotate":
		s.o.Annotations[arg(1)] = strings.Join(f[2:], " ")
	case "unannotate":
		delete(s.o.Annotations, arg(1))
	case "power", "online", "deprovision", "softtimeout":
		return s.set(f[0], arg(1))
	case "advance":
		d, err := time.ParseDuration(arg(1))
		if err != nil {
			return err
		}
		s.now = s.now.Add(d)
		if d > 0 {
			s.o.QuietFor += d
			s.o.SincePending += d
			s.o.SinceRequest += d
			s.mono += d
		}
	case "changed":
		s.o.Changed = true
	case "stalereads", "offsettle":
		d, err := time.ParseDuration(arg(1))
		if err != nil {
			return err
		}
		if f[0] == "stalereads" {
			s.cfg.StaleReads = d
		} else {
			s.cfg.OffSettle = d
		}
	case "jump", "quiet":
		d, err := time.ParseDuration(arg(1))
		if err != nil {
			return err
		}
		if f[0] == "jump" {
			s.now = s.now.Add(d)
		} else {
			s.o.QuietFor = d
		}
	case "next-call":
		switch arg(1) {
		case "busy":
			s.nextFail = power.ClassBusy
		case "failed":
			s.nextFail = power.ClassFailed
		case "unsupported":
			s.nextFail = power.ClassUnsupported
		default:
			return fmt.Errorf("unknown class %q", arg(1))
		}
	case "fenced":
		d, err := time.ParseDuration(arg(1))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "fenced(%s): %v\n", rel(fake.Epoch.Add(d)), s.o.Status.Fenced(fake.Epoch.Add(d), s.now))
	case "decide":
		if s.o.Power == power.StateOff {
			// As the Reconciler: the latest Off reading (decide) at
			// least OffSettle old, of an unbroken run.
			s.offReads = append(s.offReads, s.mono)
			for len(s.offReads) > 1 && s.mono-s.offReads[1] >= s.cfg.OffSettle {
				s.offReads = s.offReads[1:]
			}
			s.o.OffFor = s.mono - s.offReads[0]
		}
		d := s.cfg.Decide(s.o, s.now)
		s.o.Changed = false
		w.WriteString(describe(d))
		if d.UpdateStatus {
			if !d.Status.PendingRebootSince.Equal(s.o.Status.PendingRebootSince) {
				s.o.SincePending = 0
			}
			if !d.Status.LastRequestSeen.Equal(s.o.Status.LastRequestSeen) {
				s.o.SinceRequest = 0
			}
			s.o.Status = d.Status
			for _, k := range d.RemoveAnnotations {
				delete(s.o.Annotations, k)
			}
		}
		if d.Power == reboot.ActionPowerOn {
			s.o.QuietFor = 0
		}
		if d.Power != reboot.ActionNone {
			repeats := 0
			if s.o.LastCall.Action == d.Power && s.o.LastCall.Mode == d.Mode {
				repeats = s.o.LastCall.Repeats + 1
			}
			s.o.LastCall = reboot.Call{Action: d.Power, Mode: d.Mode, Class: s.nextFail, At: s.now, For: d.For, Repeats: repeats}
			s.nextFail = power.ClassNone
		}
	default:
		return fmt.Errorf("unknown command %q", f[0])
	}
	return nil
}

func (s *scenarioState) set(k, v string) error {
	switch k {
	case "online":
		s.o.Online = v == "true"
	case "deprovision":
		s.o.Deprovisioned = v == "true"
	case "softtimeout":
		d, err := time.ParseDuration(v)
		s.cfg.SoftTimeout = d
		return err
	case "power":
		m := map[string]power.State{"on": power.StateOn, "off": power.StateOff,
			"transitioning": power.StateTransitioning, "unknown": power.StateUnknown}
		st, ok := m[v]
		if !ok {
			return fmt.Errorf("unknown power state %q", v)
		}
		if st != power.StateOff && st != power.StateUnknown {
			s.offReads = nil
		}
		s.o.Power = st
	default:
		return fmt.Errorf("unknown setting %q", k)
	}
	return nil
}

func rel(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return "+" + t.Sub(fake.Epoch).String()
}

// describe prints a decision the way scenario files show it.
func describe(d reboot.Decision) string {
	var b strings.Builder
	act := d.Power.String()
	if d.Power == reboot.ActionPowerOff {
		act += "(" + d.Mode.String() + ")"
	}
	fmt.Fprintf(&b, "phase=%s power=%s requeue=%s\n", d.Phase, act, d.RequeueAfter)
	if d.UpdateStatus {
		st := d.Status
		fmt.Fprintf(&b, "persist: pendingRebootSince=%s lastPoweredOn=%s lastPoweredOff=%s mode=%s",
			rel(st.PendingRebootSince), rel(st.LastPoweredOn), rel(st.LastPoweredOff), st.Mode)
		if !st.LastRequestSeen.Equal(st.PendingRebootSince) && !st.LastRequestSeen.IsZero() {
			fmt.Fprintf(&b, " lastRequestSeen=%s", rel(st.LastRequestSeen))
		}
		if !st.OnConfirmed.IsZero() {
			fmt.Fprintf(&b, " onConfirmed=%s", rel(st.OnConfirmed))
		}
		if !st.HoldBroken.IsZero() {
			fmt.Fprintf(&b, " holdBroken=%s", rel(st.HoldBroken))
		}
		if !st.RewriteSeen.IsZero() {
			fmt.Fprintf(&b, " rewriteSeen=%s", rel(st.RewriteSeen))
		}
		if !st.LastRewriteSeen.IsZero() {
			fmt.Fprintf(&b, " lastRewriteSeen=%s", rel(st.LastRewriteSeen))
		}
		if !st.OfflineSince.IsZero() {
			fmt.Fprintf(&b, " offlineSince=%s offlineMode=%s", rel(st.OfflineSince), st.OfflineMode)
		}
		b.WriteString("\n")
	}
	if len(d.RemoveAnnotations) > 0 {
		fmt.Fprintf(&b, "remove: %s\n", strings.Join(d.RemoveAnnotations, " "))
	}
	var reqs []string
	for _, r := range d.Requests {
		reqs = append(reqs, r.Name+"="+r.Mode.String())
	}
	sort.Strings(reqs)
	if len(reqs) > 0 {
		fmt.Fprintf(&b, "requests: %s\n", strings.Join(reqs, " "))
	}
	for _, w := range d.Warnings {
		fmt.Fprintf(&b, "warning: %v\n", w)
	}
	fmt.Fprintf(&b, "reason: %s\n", d.Reason)
	return b.String()
}
