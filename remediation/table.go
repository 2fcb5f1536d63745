package remediation

import "fmt"

// Annotation keys of the protocol.
const (
	// NeedsRemediationAnnotation is set on the Machine by the health checker.
	NeedsRemediationAnnotation = "host.metal3.io/external-remediation"
	// RebootAnnotation is the reboot package's keyed annotation that this
	// remediator owns on the host.
	RebootAnnotation = "reboot.metal3.io/machine-remediation"
	// RebootKey is the key of RebootAnnotation.
	RebootKey = "machine-remediation"
	// OutOfServiceTaint is the Kubernetes taint that, with effect NoExecute,
	// lets workloads and volumes move off a node that is known to be down.
	OutOfServiceTaint = "node.kubernetes.io/out-of-service"
)

// TableInput is one row's condition in the seed's truth table.
type TableInput struct {
	NodeRef          bool // the Machine's node ref exists
	NeedsRemediation bool // the Machine has NeedsRemediationAnnotation
	PoweredOn        bool // the host is powered on
	RebootAnnotation bool // the host has RebootAnnotation
}

// TableAction is the action of the seed's truth table. The zero value is
// TableNothing.
type TableAction int

const (
	// TableNothing: do nothing.
	TableNothing TableAction = iota
	// TableAddRebootAnnotation: add RebootAnnotation to the host.
	TableAddRebootAnnotation
	// TableDeleteNode: delete the Node (the host is off).
	TableDeleteNode
	// TableRemoveNeedsRemediation: remove NeedsRemediationAnnotation from
	// the Machine.
	TableRemoveNeedsRemediation
	// TableRemoveRebootAnnotation: remove RebootAnnotation from the host,
	// so that it powers on.
	TableRemoveRebootAnnotation
)

// String returns the action as the seed's table words it (with
// "annotation" spelt right).
func (a TableAction) String() string {
	switch a {
	case TableNothing:
		return "nothing"
	case TableAddRebootAnnotation:
		return "Add reboot annotation"
	case TableDeleteNode:
		return "Delete node"
	case TableRemoveNeedsRemediation:
		return "Remove needs-remediation annotation"
	case TableRemoveRebootAnnotation:
		return "Remove reboot annotation"
	}
	return fmt.Sprintf("TableAction(%d)", int(a))
}

// Table is the seed's stateless truth table, all 16 rows (the seed lists
// 15; the missing row, nothing at all, is "nothing"). It loops when the
// health checker re-adds its annotation after the node was deleted: use
// Phased (Config.Decide) unless you need the seed's exact behaviour.
func Table(in TableInput) TableAction {
	switch {
	case in.NeedsRemediation && in.PoweredOn && !in.RebootAnnotation:
		return TableAddRebootAnnotation // rows 0110 and 1110
	case in.NodeRef && in.NeedsRemediation && !in.PoweredOn && in.RebootAnnotation:
		return TableDeleteNode // row 1101
	case !in.NodeRef && in.NeedsRemediation && !in.PoweredOn && in.RebootAnnotation:
		return TableRemoveNeedsRemediation // row 0101
	case !in.NeedsRemediation && !in.PoweredOn && in.RebootAnnotation:
		return TableRemoveRebootAnnotation // rows 0001 and 1001
	}
	return TableNothing
}
