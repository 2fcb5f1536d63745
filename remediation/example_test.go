package remediation_test

import (
	"fmt"
	"time"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/power"
	"github.com/rebootkit/rebootkit/remediation"
)

// One phased remediation, decision by decision, with the world changing as
// the reboot controller and the kubelet would make it change.
func ExampleConfig_Decide() {
	var cfg remediation.Config
	o := remediation.Observed{
		Machine:  remediation.Machine{Name: "worker-1", UID: "6b7c", NeedsRemediation: true, NodeName: "worker-1"},
		Node:     remediation.Node{Exists: true, Name: "worker-1", Labels: map[string]string{"rack": "r7"}},
		Host:     remediation.Host{Power: power.StateOn},
		MayStart: true,
	}
	now := fake.Epoch
	for step := 0; step < 7; step++ {
		d := cfg.Decide(o, now)
		fmt.Printf("%-17s %s\n", d.State.Phase, d.Reason)
		o.State = d.State
		if d.AddRebootAnnotation {
			// The reboot controller powers it off and holds evidence of it.
			o.Host = remediation.Host{RebootAnnotation: true, Requested: true, Fenced: true, Power: power.StateOff}
		}
		if d.DeleteNode {
			o.Node = remediation.Node{}
		}
		if d.RemoveRebootAnnotation {
			o.Host = remediation.Host{PoweredOn: true, Power: power.StateOn} // and powers it on
		}
		if d.State.Phase == remediation.PhaseWaitingForNode && !o.Node.Exists {
			o.Node = remediation.Node{Exists: true, Name: "worker-1", Ready: true} // kubelet is back
		}
		if d.RestoreLabels != nil {
			o.Node.Labels = d.RestoreLabels
		}
		if d.RemoveNeedsRemediation {
			o.Machine.NeedsRemediation = false
		}
		now = now.Add(10 * time.Second)
	}
	// Output:
	// power-off-requested attempt 1: power off
	// node-deleted      host fenced: delete the node
	// powering-on       node fenced: power on
	// waiting-for-node  host on: wait for the node
	// waiting-for-node  node back: restore its labels and annotations
	// waiting-for-node  node back: remove the needs-remediation annotation
	// done              node back: done
}

// The seed's truth table.
func ExampleTable() {
	fmt.Println(remediation.Table(remediation.TableInput{NodeRef: true, NeedsRemediation: true, PoweredOn: false, RebootAnnotation: true}))
	fmt.Println(remediation.Table(remediation.TableInput{}))
	// Output:
	// Delete node
	// nothing
}
