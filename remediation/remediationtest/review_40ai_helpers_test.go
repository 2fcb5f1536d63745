package remediationtest_test

import (
	"context"

	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/remediation"
)

// The fake Cluster's handles with their writes blind to the context (each
// sent with context.Background()): the stores
// TestReview40ai_ContractPassesStoresIgnoringContext first found in
// fake.Cluster itself, which now refuses a write whose context has ended.

// blindCluster is a fake.Cluster whose MachineStore and AdmissionStore
// writes ignore their context (Watch and reads are the cluster's).
type blindCluster struct{ *fake.Cluster }

func (c blindCluster) SaveState(_ context.Context, name, version string, s remediation.State) error {
	return c.Cluster.SaveState(context.Background(), name, version, s)
}

func (c blindCluster) RemoveNeedsRemediation(_ context.Context, name string) error {
	return c.Cluster.RemoveNeedsRemediation(context.Background(), name)
}

func (c blindCluster) Delete(_ context.Context, name string) error {
	return c.Cluster.Delete(context.Background(), name)
}

func (c blindCluster) PutAdmissions(_ context.Context, a remediation.Admissions) error {
	return c.Cluster.PutAdmissions(context.Background(), a)
}

// blindMachines is a second MachineStore handle whose writes ignore their
// context.
type blindMachines struct{ remediation.MachineStore }

func (m blindMachines) SaveState(_ context.Context, name, version string, s remediation.State) error {
	return m.MachineStore.SaveState(context.Background(), name, version, s)
}

func (m blindMachines) RemoveNeedsRemediation(_ context.Context, name string) error {
	return m.MachineStore.RemoveNeedsRemediation(context.Background(), name)
}

func (m blindMachines) Delete(_ context.Context, name string) error {
	return m.MachineStore.Delete(context.Background(), name)
}

// blindAdmissions is a second AdmissionStore handle whose writes ignore
// their context.
type blindAdmissions struct{ remediation.AdmissionStore }

func (a blindAdmissions) PutAdmissions(_ context.Context, adm remediation.Admissions) error {
	return a.AdmissionStore.PutAdmissions(context.Background(), adm)
}

// blindNodes is the cluster's NodeStore with writes that ignore their
// context.
type blindNodes struct{ *fake.ClusterNodes }

func (n blindNodes) Delete(_ context.Context, name, uid string) error {
	return n.ClusterNodes.Delete(context.Background(), name, uid)
}

func (n blindNodes) SetOutOfService(_ context.Context, name string, on bool) error {
	return n.ClusterNodes.SetOutOfService(context.Background(), name, on)
}

func (n blindNodes) AddMetadata(_ context.Context, name string, labels, annotations map[string]string) error {
	return n.ClusterNodes.AddMetadata(context.Background(), name, labels, annotations)
}
