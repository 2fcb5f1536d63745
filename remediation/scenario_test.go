package remediation_test

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
	"github.com/rebootkit/rebootkit/remediation"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of scenario files")

// Scenario files (testdata/*.txt) tell a phased remediation as a story:
// blocks of commands, "----", and what the decision printed. Commands:
//
//	config timeout=10m retries=1 taint=false
//	machine needs=true owner=true
//	node exists=true ready=true [label k=v]
//	host power=on|off|transitioning annotation=true|false
//	                what the reboot protocol answers: off = fenced for the
//	                current request (if its annotation is ours), on = the
//	                controller powered it on after the request
//	storm ok|blocked
//	advance DURATION
//	decide        decide, print, persist the state, apply the node/host effects
//
// Applying a decision changes the observed world the way a cooperative
// cluster would: deleting the node removes it, the reboot annotation
// appears or goes, restored labels appear on the node.
func TestScenarios(t *testing.T) {
	scenario.Run(t, "testdata/*.txt", *rewrite, func() func(string, *strings.Builder) error {
		w := &world{now: fake.Epoch, o: remediation.Observed{MayStart: true,
			Machine: remediation.Machine{Name: "m0", UID: "uid-0", NodeName: "n0"},
			Node:    remediation.Node{Exists: true, Name: "n0", Ready: true},
			Host:    remediation.Host{Power: power.StateOn}}}
		return w.run
	})
}

type world struct {
	cfg remediation.Config
	o   remediation.Observed
	now time.Time
}

// sync derives the reboot protocol's answers from the power state the
// story sets: off with our request present is fenced; on with no request
// is powered on by the controller.
func (w *world) sync() {
	w.o.Host.Fenced = w.o.Host.Power == power.StateOff && w.o.Host.Requested
	w.o.Host.PoweredOn = w.o.Host.Power == power.StateOn && !w.o.Host.RebootAnnotation
}

func kv(fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

func (w *world) run(line string, out *strings.Builder) error {
	f := strings.Fields(line)
	a := kv(f[1:])
	switch f[0] {
	case "config":
		if v, ok := a["timeout"]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return err
			}
			w.cfg.Timeout = d
		}
		if v, ok := a["retries"]; ok {
			fmt.Sscan(v, &w.cfg.RetryLimit)
		}
		w.cfg.OutOfService = a["taint"] == "true"
	case "machine":
		if v, ok := a["needs"]; ok {
			w.o.Machine.NeedsRemediation = v == "true"
		}
		if v, ok := a["owner"]; ok {
			w.o.Machine.HasControllerOwner = v == "true"
		}
	case "node":
		if v, ok := a["exists"]; ok {
			if v == "true" && !w.o.Node.Exists {
				w.o.Node = remediation.Node{Name: "n0"}
			}
			w.o.Node.Exists = v == "true"
		}
		if v, ok := a["ready"]; ok {
			w.o.Node.Ready = v == "true"
		}
		for _, fld := range f[1:] {
			if v, ok := strings.CutPrefix(fld, "label="); ok {
				k, val, _ := strings.Cut(v, ":")
				if w.o.Node.Labels == nil {
					w.o.Node.Labels = map[string]string{}
				}
				w.o.Node.Labels[k] = val
			}
		}
	case "host":
		if v, ok := a["annotation"]; ok {
			w.o.Host.RebootAnnotation = v == "true"
			w.o.Host.Requested = v == "true"
		}
		if v, ok := a["power"]; ok {
			w.o.Host.Power = map[string]power.State{"on": power.StateOn, "off": power.StateOff, "transitioning": power.StateTransitioning}[v]
		}
		w.sync()
	case "storm":
		w.o.MayStart = a["ok"] != "" || f[1] == "ok"
		w.o.GuardReason = ""
		if !w.o.MayStart {
			w.o.GuardReason = "3 of 3 machines unhealthy, more than the limit 40% (1)"
		}
	case "advance":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			return err
		}
		w.now = w.now.Add(d)
	case "decide":
		d := w.cfg.Decide(w.o, w.now)
		out.WriteString(describe(d))
		w.o.State = d.State
		if d.Admit {
			w.o.Admitted = true
		}
		if d.Release {
			w.o.Admitted = false
		}
		if d.AddRebootAnnotation {
			w.o.Host.RebootAnnotation, w.o.Host.Requested = true, true
		}
		if d.RemoveRebootAnnotation {
			w.o.Host.RebootAnnotation, w.o.Host.Requested = false, false
		}
		w.sync()
		if d.DeleteNode {
			w.o.Node = remediation.Node{Name: "n0"}
		}
		if d.TaintNode {
			w.o.Node.OutOfService = true
		}
		if d.RemoveTaint {
			w.o.Node.OutOfService = false
		}
		for k, v := range d.RestoreLabels {
			if w.o.Node.Labels == nil {
				w.o.Node.Labels = map[string]string{}
			}
			w.o.Node.Labels[k] = v
		}
		if d.RemoveNeedsRemediation {
			w.o.Machine.NeedsRemediation = false
		}
	default:
		return fmt.Errorf("unknown command %q", f[0])
	}
	return nil
}

func describe(d remediation.Decision) string {
	var acts []string
	add := func(b bool, s string) {
		if b {
			acts = append(acts, s)
		}
	}
	add(d.Admit, "admit")
	add(d.AddRebootAnnotation, "add-reboot-annotation")
	add(d.DeleteNode, "delete-node")
	add(d.TaintNode, "taint-node")
	add(d.RemoveRebootAnnotation, "remove-reboot-annotation")
	if len(d.RestoreLabels) > 0 {
		var ks []string
		for k, v := range d.RestoreLabels {
			ks = append(ks, k+"="+v)
		}
		sort.Strings(ks)
		acts = append(acts, "restore-labels("+strings.Join(ks, ",")+")")
	}
	add(d.RemoveTaint, "remove-taint")
	add(d.RemoveNeedsRemediation, "remove-needs-remediation")
	add(d.DeleteMachine, "delete-machine")
	add(d.Release, "release")
	if len(acts) == 0 {
		acts = []string{"none"}
	}
	st := d.State
	s := fmt.Sprintf("phase=%s attempt=%d", st.Phase, st.Attempt)
	if st.Canceled {
		s += " canceled"
	}
	if d.UpdateState {
		s += " (persist)"
	}
	return fmt.Sprintf("%s\nactions: %s\nreason: %s\n", s, strings.Join(acts, " "), d.Reason)
}
