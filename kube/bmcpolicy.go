package kube

import (
	"context"
	"fmt"
	"time"
)

// DefaultPolicyRecheck is how long Powers keeps what it found of the
// reboot-client admission policy before it reads it again
// (Powers.PolicyRecheck).
const DefaultPolicyRecheck = 30 * time.Second

// policyGate returns nil if Powers may act on host name as far as the
// admission policy goes: WithoutAdmissionPolicy is set, or the policy
// PolicyName and its denying binding are in force (PolicyInForce, read
// directly, at most PolicyRecheck ago). Otherwise an error wrapping
// ErrNoAdmissionPolicy that names the fix: nothing is sent to the host's
// BMC.
func (p *Powers) policyGate(ctx context.Context, name string) error {
	if p.WithoutAdmissionPolicy {
		return nil
	}
	p.mu.Lock()
	perr, at := p.policyErr, p.policyAt
	p.mu.Unlock()
	recheck := p.PolicyRecheck
	if recheck <= 0 {
		recheck = DefaultPolicyRecheck
	}
	now := time.Now()
	if at.IsZero() || now.Sub(at) >= recheck || now.Before(at) {
		perr = PolicyInForce(ctx, p.Secrets, p.PolicyName, now, 0)
		p.mu.Lock()
		p.policyErr, p.policyAt = perr, now
		p.mu.Unlock()
	}
	if perr == nil {
		return nil
	}
	return fmt.Errorf("host %s: rebootkit sends no credentials to its BMC and makes no power call: %w; without it any reboot "+
		"client can redirect the host's BMC and fake a fence. Fix: kubectl apply -k config/admission (the policy and its binding "+
		"%s); or run rebootkit-controller with --without-admission-policy, knowing what is weaker then (kube package doc)",
		name, perr, policyName(p.PolicyName))
}

// policyName is name, or AdmissionPolicyName if it is empty.
func policyName(name string) string {
	if name == "" {
		return AdmissionPolicyName
	}
	return name
}
