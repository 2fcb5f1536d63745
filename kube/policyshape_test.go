package kube

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestPolicyShape: policyShapeErr takes config/admission's policy and
// binding (the embedded manifest, as the API server defaults them) for
// protecting, and each edit that weakens them for not.
func TestPolicyShape(t *testing.T) {
	want, wantB := shippedPolicy()
	shipped := func() (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
		p, b := want.DeepCopy(), wantB.DeepCopy()
		p.Name, b.Name = "x", "x"
		b.Spec.PolicyName = "x"
		// The API server's defaults.
		p.Spec.MatchConstraints.MatchPolicy = ptr.To(admissionv1.Equivalent)
		p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{}
		p.Spec.MatchConstraints.ObjectSelector = &metav1.LabelSelector{}
		for i := range p.Spec.MatchConstraints.ResourceRules {
			p.Spec.MatchConstraints.ResourceRules[i].Scope = ptr.To(admissionv1.AllScopes)
		}
		return p, b
	}
	p, b := shipped()
	require.NoError(t, policyShapeErr(p, b, "x"), "the shipped manifest, defaulted")
	for what, edit := range map[string]func(*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding){
		"failurePolicy Ignore": func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.FailurePolicy = ptr.To(admissionv1.Ignore)
		},
		"paramKind": func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.ParamKind = &admissionv1.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		},
		"validations true": func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.Validations = []admissionv1.Validation{{Expression: "true"}}
		},
		"one validation dropped": func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.Validations = p.Spec.Validations[1:]
		},
		"variable edited": func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.Variables[0].Expression = "{}"
		},
		"matchCondition false": func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConditions[0].Expression = "false"
		},
		"constraints on a namespace": func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConstraints.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}
		},
		"constraints exclude hosts": func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConstraints.ExcludeResourceRules = p.Spec.MatchConstraints.ResourceRules
		},
		"constraints Exact": func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConstraints.MatchPolicy = ptr.To(admissionv1.Exact)
		},
		"rule without UPDATE": func(p *admissionv1.ValidatingAdmissionPolicy, _ *admissionv1.ValidatingAdmissionPolicyBinding) {
			p.Spec.MatchConstraints.ResourceRules[0].Operations = []admissionv1.OperationType{admissionv1.Create}
		},
		"binding of another policy": func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.PolicyName = "y"
		},
		"binding paramRef": func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ParamRef = &admissionv1.ParamRef{Name: "p"}
		},
		"binding on one namespace": func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
		},
		"binding on some objects": func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.MatchResources = &admissionv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}
		},
		"binding Warn": func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn}
		},
		"binding Deny and Warn": func(_ *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
			b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Deny, admissionv1.Warn}
		},
	} {
		p, b := shipped()
		edit(p, b)
		assert.Error(t, policyShapeErr(p, b, "x"), what)
	}
}

// TestReview39k_EditedBindingDatesFromNow (point 2 of round 10, without
// the namespace-scoped binding of
// TestReview39k_BindingSwitchedToDenyTrustsEarlierRedirect, which point 3
// refuses by itself): the shipped policy and a binding of the shipped
// shape but for validationActions [Warn], switched to [Deny] later, is
// in force now (settle 0) but not since any earlier instant: its
// creationTimestamp says nothing of when it began to deny.
func TestReview39k_EditedBindingDatesFromNow(t *testing.T) {
	needAPIServer(t)
	ctx := context.Background()
	admin := adminClient(t)
	ns := newNamespace(t, admin)
	name := installPolicy(t, admin, ns)
	var b admissionv1.ValidatingAdmissionPolicyBinding
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: name}, &b))
	b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn}
	require.NoError(t, admin.Update(ctx, &b))
	time.Sleep(1100 * time.Millisecond)
	require.ErrorIs(t, PolicyInForce(ctx, admin, name, time.Now(), 0), ErrNoAdmissionPolicy, "premise: a binding that warns is not in force")
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: name}, &b))
	b.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Deny}
	require.NoError(t, admin.Update(ctx, &b))
	assert.NoError(t, PolicyInForce(ctx, admin, name, time.Now(), 0), "in force now")
	assert.ErrorIs(t, PolicyInForce(ctx, admin, name, time.Now(), time.Second), ErrNoAdmissionPolicy,
		"switched to Deny just now: not in force since a second ago, whatever its creationTimestamp")
}

// TestPolicyShapeKustomized: config/admission as kustomize renders it
// (its YAML library folds the manifest's CEL scalars with other line
// breaks than this binary's) is the shipped shape (TestBinaryAsServiceAccount
// applies that rendering).
func TestPolicyShapeKustomized(t *testing.T) {
	out, err := exec.Command("kubectl", "kustomize", "config/admission").Output()
	if err != nil {
		t.Skipf("KUBECTL TEST SKIPPED: %v", err)
	}
	var p *admissionv1.ValidatingAdmissionPolicy
	var b *admissionv1.ValidatingAdmissionPolicyBinding
	for _, doc := range strings.Split(string(out), "\n---") {
		var meta metav1.TypeMeta
		require.NoError(t, yaml.Unmarshal([]byte(doc), &meta))
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			p = &admissionv1.ValidatingAdmissionPolicy{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), p))
		case "ValidatingAdmissionPolicyBinding":
			b = &admissionv1.ValidatingAdmissionPolicyBinding{}
			require.NoError(t, yaml.UnmarshalStrict([]byte(doc), b))
		}
	}
	require.NotNil(t, p)
	require.NotNil(t, b)
	assert.NoError(t, policyShapeErr(p, b, AdmissionPolicyName))
	p.Spec.Validations[1].Expression = strings.Replace(p.Spec.Validations[1].Expression, "'reboot.metal3.io/'", "''", 1)
	assert.Error(t, policyShapeErr(p, b, AdmissionPolicyName), "a changed expression is still told apart")
}
