package kube

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/rebootkit/rebootkit/reboot"
	"github.com/rebootkit/rebootkit/reboot/reboottest"
	"github.com/rebootkit/rebootkit/remediation"
	"github.com/rebootkit/rebootkit/remediation/remediationtest"
)

// TestRebootHostsConformance runs the reboot store conformance kit's
// contract checks on RebootHosts over a real API server (issue 40, point
// 4). The rapid state machine on this store is TestRebootStateMachineOnAPIServer's.
func TestRebootHostsConformance(t *testing.T) {
	needAPIServer(t)
	c := adminClient(t)
	reboottest.Contract(t, func(h reboot.Host) (reboottest.Stores, error) {
		ns := newNamespace(t, c)
		newBMH(t, c, ns, h.Name)
		return reboottest.Stores{
			Hosts: &RebootHosts{Client: c, Namespace: ns},
			// A second client on the same API server, as a fencing
			// client's process has it.
			Other: &RebootHosts{Client: adminClient(t), Namespace: ns},
		}, nil
	})
}

// TestRemediationStoresConformance runs the remediation store conformance
// kit's contract checks on Machines (Cluster API Machines), Nodes and
// Admissions (a ConfigMap) over a real API server (issue 40, point 4): the
// compare-and-swap of the state and of the admission record, ErrNotFound,
// a Node deleted only with the UID read. The state machine on these
// stores runs in TestExternalRemediation* and the remediation controller
// tests against the same API server.
func TestRemediationStoresConformance(t *testing.T) {
	needAPIServer(t)
	c := adminClient(t)
	remediationtest.Contract(t, func(machines []remediation.Machine, nodes []remediation.Node) (remediationtest.Stores, error) {
		ctx := context.Background()
		ns := newNamespace(t, c)
		for _, m := range machines {
			cm := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m.Name, Labels: map[string]string{}},
				Spec: clusterv1.MachineSpec{ClusterName: m.Cluster, Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("boot")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "Metal3Machine", Name: m.Name + "-m3m"}}}
			if m.ControlPlane {
				cm.Labels[clusterv1.MachineControlPlaneLabel] = ""
			}
			if m.NeedsRemediation {
				cm.Annotations = map[string]string{remediation.NeedsRemediationAnnotation: ""}
			}
			if err := c.Create(ctx, cm); err != nil {
				return remediationtest.Stores{}, err
			}
			cm.Status.NodeRef = clusterv1.MachineNodeReference{Name: m.NodeName}
			if err := c.Status().Update(ctx, cm); err != nil {
				return remediationtest.Stores{}, err
			}
		}
		// Nodes are cluster-scoped: the kit's names (s1, s2) are used by no
		// other test of this package; they are deleted at Close.
		var made []string
		for _, n := range nodes {
			cn := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: n.Labels, Annotations: n.Annotations}}
			if err := c.Create(ctx, cn); err != nil {
				return remediationtest.Stores{}, err
			}
			made = append(made, n.Name)
			st := corev1.ConditionFalse
			if n.Ready {
				st = corev1.ConditionTrue
			}
			cn.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}
			if err := c.Status().Update(ctx, cn); err != nil {
				return remediationtest.Stores{}, err
			}
		}
		return remediationtest.Stores{
			Machines: &Machines{Client: c, Namespace: ns},
			// A second client on the same API server, as a second
			// reconciler's process has it.
			OtherMachines: &Machines{Client: adminClient(t), Namespace: ns},
			Nodes:         &Nodes{Client: c},
			Admissions:    &Admissions{Client: c, Namespace: ns},
			// A second client on the same API server, as a second
			// reconciler's process has it.
			OtherAdmissions: &Admissions{Client: adminClient(t), Namespace: ns},
			Close: func() {
				for _, n := range made {
					_ = c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
				}
			},
		}, nil
	})
}
