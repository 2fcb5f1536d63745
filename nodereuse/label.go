package nodereuse

import (
	"errors"
	"fmt"
	"strings"
)

// Label marks a deprovisioned host as reserved for the pool that released
// it. Its value names the pool: "kcp-<name>" for a KubeadmControlPlane,
// "md-<name>" for a MachineDeployment.
const Label = "infrastructure.cluster.x-k8s.io/node-reuse"

// ErrInvalidPool is returned (wrapped) for pool names or label values that
// break the Kubernetes label value rules or the "kcp-"/"md-" form.
var ErrInvalidPool = errors.New("nodereuse: invalid pool")

// Kind is the kind of owner a pool of machines has. The zero value is not a
// valid kind: a pool must say what owns it.
type Kind int

const (
	// KindUnknown is the zero value; no label can be built from it.
	KindUnknown Kind = iota
	// KindControlPlane is a KubeadmControlPlane ("kcp-").
	KindControlPlane
	// KindMachineDeployment is a MachineDeployment ("md-").
	KindMachineDeployment
)

// String returns "kcp", "md" or "unknown".
func (k Kind) String() string {
	switch k {
	case KindControlPlane:
		return "kcp"
	case KindMachineDeployment:
		return "md"
	}
	return "unknown"
}

// Pool is a KCP or MD whose machines may reuse hosts.
type Pool struct {
	Kind Kind
	Name string
}

// ControlPlane returns the pool of the KubeadmControlPlane name.
func ControlPlane(name string) Pool { return Pool{Kind: KindControlPlane, Name: name} }

// MachineDeployment returns the pool of the MachineDeployment name.
func MachineDeployment(name string) Pool { return Pool{Kind: KindMachineDeployment, Name: name} }

// String returns the label value, or a description if the pool is invalid.
func (p Pool) String() string {
	v, err := p.LabelValue()
	if err != nil {
		return fmt.Sprintf("invalid pool %s/%q", p.Kind, p.Name)
	}
	return v
}

// LabelValue returns the value of Label for this pool, or an error wrapping
// ErrInvalidPool if the kind is unknown or the value would not be a valid
// label value (at most 63 characters, alphanumeric at both ends, '-', '_',
// '.' inside).
func (p Pool) LabelValue() (string, error) {
	if p.Kind != KindControlPlane && p.Kind != KindMachineDeployment {
		return "", fmt.Errorf("%w: kind %s", ErrInvalidPool, p.Kind)
	}
	if p.Name == "" {
		return "", fmt.Errorf("%w: empty name", ErrInvalidPool)
	}
	v := p.Kind.String() + "-" + p.Name
	if err := validLabelValue(v); err != nil {
		return "", fmt.Errorf("%w: name %q: %v", ErrInvalidPool, p.Name, err)
	}
	return v, nil
}

// ParsePool parses a Label value.
func ParsePool(value string) (Pool, error) {
	if err := validLabelValue(value); err != nil {
		return Pool{}, fmt.Errorf("%w: label value %q: %v", ErrInvalidPool, value, err)
	}
	prefix, name, ok := strings.Cut(value, "-")
	if !ok || name == "" {
		return Pool{}, fmt.Errorf("%w: label value %q: want kcp-<name> or md-<name>", ErrInvalidPool, value)
	}
	switch prefix {
	case "kcp":
		return ControlPlane(name), nil
	case "md":
		return MachineDeployment(name), nil
	}
	return Pool{}, fmt.Errorf("%w: label value %q: want kcp-<name> or md-<name>", ErrInvalidPool, value)
}

func validLabelValue(v string) error {
	if v == "" {
		return errors.New("empty")
	}
	if len(v) > 63 {
		return errors.New("longer than 63 characters")
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if alnum || (c == '-' || c == '_' || c == '.') && i > 0 && i < len(v)-1 {
			continue
		}
		return fmt.Errorf("character %q at %d: must be alphanumeric at both ends with only '-', '_' or '.' inside", c, i)
	}
	return nil
}
