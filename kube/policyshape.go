package kube

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// shippedPolicyYAML is config/admission's manifest, the one source of the
// policy and binding PolicyInForce requires (kubectl apply -k
// config/admission installs the same file).
//
//go:embed config/admission/reboot_client_policy.yaml
var shippedPolicyYAML string

// shippedPolicy is the policy and binding of shippedPolicyYAML, parsed
// once.
var shippedPolicy = sync.OnceValues(func() (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	var pol *admissionv1.ValidatingAdmissionPolicy
	var b *admissionv1.ValidatingAdmissionPolicyBinding
	for _, doc := range strings.Split(shippedPolicyYAML, "\n---") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			panic(fmt.Sprintf("kube: config/admission does not parse: %v", err))
		}
		var err error
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			pol = &admissionv1.ValidatingAdmissionPolicy{}
			err = yaml.UnmarshalStrict([]byte(doc), pol)
		case "ValidatingAdmissionPolicyBinding":
			b = &admissionv1.ValidatingAdmissionPolicyBinding{}
			err = yaml.UnmarshalStrict([]byte(doc), b)
		}
		if err != nil {
			panic(fmt.Sprintf("kube: config/admission does not parse: %v", err))
		}
	}
	if pol == nil || b == nil {
		panic("kube: config/admission lacks its policy or binding")
	}
	return pol, b
})

// policyShapeErr returns nil if pol and b (the policy and binding named
// name, as the API server returns them, defaults filled in) protect hosts
// as the shipped ones do, else why not: the policy has failurePolicy
// Fail, no paramKind, the shipped variables, validations and
// matchConditions, and matchConstraints with the shipped resource rules
// and nothing narrowing them (no selector, no exclusion, matchPolicy
// Equivalent); the binding names the policy, has no paramRef and no
// matchResources narrowing it (it covers every namespace), and its
// validationActions are exactly Deny.
func policyShapeErr(pol *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding, name string) error {
	want, wantB := shippedPolicy()
	ps, ws := &pol.Spec, &want.Spec
	switch {
	case ps.FailurePolicy == nil || *ps.FailurePolicy != admissionv1.Fail:
		return fmt.Errorf("policy %s: failurePolicy is not Fail", name)
	case ps.ParamKind != nil:
		return fmt.Errorf("policy %s has a paramKind", name)
	case !apiequality.Semantic.DeepEqual(squeezeValidations(ps.Validations), squeezeValidations(ws.Validations)):
		return fmt.Errorf("policy %s: its validations are not config/admission's", name)
	case !apiequality.Semantic.DeepEqual(squeezeVariables(ps.Variables), squeezeVariables(ws.Variables)):
		return fmt.Errorf("policy %s: its variables are not config/admission's", name)
	case !apiequality.Semantic.DeepEqual(squeezeConditions(ps.MatchConditions), squeezeConditions(ws.MatchConditions)):
		return fmt.Errorf("policy %s: its matchConditions are not config/admission's", name)
	case !sameConstraints(ps.MatchConstraints, ws.MatchConstraints):
		return fmt.Errorf("policy %s: its matchConstraints are not config/admission's", name)
	case b.Spec.PolicyName != name:
		return fmt.Errorf("binding %s does not bind policy %s", name, name)
	case b.Spec.ParamRef != nil:
		return fmt.Errorf("binding %s has a paramRef", name)
	case !unnarrowed(b.Spec.MatchResources):
		return fmt.Errorf("binding %s has matchResources that narrow it (config/admission's covers every namespace)", name)
	case !slices.Equal(b.Spec.ValidationActions, wantB.Spec.ValidationActions):
		return fmt.Errorf("binding %s: its validationActions are %v, not %v", name, b.Spec.ValidationActions, wantB.Spec.ValidationActions)
	}
	return nil
}

// sameConstraints reports whether got has want's resource rules (a rule's
// scope, which the API server defaults to "*", compared so) and nothing
// that narrows them.
func sameConstraints(got, want *admissionv1.MatchResources) bool {
	if got == nil || want == nil || !unnarrowed(&admissionv1.MatchResources{NamespaceSelector: got.NamespaceSelector,
		ObjectSelector: got.ObjectSelector, ExcludeResourceRules: got.ExcludeResourceRules, MatchPolicy: got.MatchPolicy}) {
		return false
	}
	norm := func(rs []admissionv1.NamedRuleWithOperations) []admissionv1.NamedRuleWithOperations {
		out := make([]admissionv1.NamedRuleWithOperations, len(rs))
		for i, r := range rs {
			out[i] = *r.DeepCopy()
			if out[i].Scope == nil {
				all := admissionv1.AllScopes
				out[i].Scope = &all
			}
		}
		return out
	}
	return apiequality.Semantic.DeepEqual(norm(got.ResourceRules), norm(want.ResourceRules))
}

// unnarrowed reports whether m selects everything: nil, or no resource
// rule, exclusion or selector requirement, and matchPolicy Equivalent
// (the API server's default) or unset.
func unnarrowed(m *admissionv1.MatchResources) bool {
	if m == nil {
		return true
	}
	empty := func(s *metav1.LabelSelector) bool {
		return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
	}
	return len(m.ResourceRules) == 0 && len(m.ExcludeResourceRules) == 0 && empty(m.NamespaceSelector) && empty(m.ObjectSelector) &&
		(m.MatchPolicy == nil || *m.MatchPolicy == admissionv1.Equivalent)
}

// squeeze is s with each run of white space made one space, trimmed: the
// manifest's CEL expressions are folded YAML scalars, which YAML
// libraries (kustomize's, kubectl's, this binary's) fold with different
// line breaks; CEL ignores white space between tokens, and the shipped
// string literals hold no run of it.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

// squeezeValidations is vs with their expressions and messages squeezed.
func squeezeValidations(vs []admissionv1.Validation) []admissionv1.Validation {
	out := make([]admissionv1.Validation, len(vs))
	for i, v := range vs {
		out[i] = *v.DeepCopy()
		out[i].Expression, out[i].Message, out[i].MessageExpression = squeeze(v.Expression), squeeze(v.Message), squeeze(v.MessageExpression)
	}
	return out
}

// squeezeVariables is vs with their expressions squeezed.
func squeezeVariables(vs []admissionv1.Variable) []admissionv1.Variable {
	out := make([]admissionv1.Variable, len(vs))
	for i, v := range vs {
		out[i] = admissionv1.Variable{Name: v.Name, Expression: squeeze(v.Expression)}
	}
	return out
}

// squeezeConditions is cs with their expressions squeezed.
func squeezeConditions(cs []admissionv1.MatchCondition) []admissionv1.MatchCondition {
	out := make([]admissionv1.MatchCondition, len(cs))
	for i, c := range cs {
		out[i] = admissionv1.MatchCondition{Name: c.Name, Expression: squeeze(c.Expression)}
	}
	return out
}
