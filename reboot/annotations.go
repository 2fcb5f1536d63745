package reboot

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rebootkit/rebootkit/power"
)

// Annotation keys of the reboot API.
const (
	// Annotation is the bare, set-and-forget request: the controller powers
	// the host off and back on, then removes the annotation.
	Annotation = "reboot.metal3.io"
	// AnnotationPrefix starts a keyed (phased) request,
	// reboot.metal3.io/{key}: the host is held off until the client that owns
	// {key} removes its annotation.
	AnnotationPrefix = Annotation + "/"
)

// Errors reported for annotations. Each comes wrapped in an *AnnotationError
// that names the annotation key.
var (
	// ErrInvalidKey: the suffix of reboot.metal3.io/{key} is not a valid
	// Kubernetes annotation name segment (empty included). The annotation
	// is ignored: it neither reboots nor holds the host, because no client
	// key can be told from it and no Policy can judge it. Its writer must
	// remove it and use a valid key.
	ErrInvalidKey = errors.New("invalid reboot annotation key")
	// ErrInvalidValue: the value is neither empty nor a JSON object. The
	// request counts as a soft reboot.
	ErrInvalidValue = errors.New("invalid reboot annotation value")
	// ErrUnknownMode: the value's "mode" is neither "soft" nor "hard". The
	// request counts as a soft reboot.
	ErrUnknownMode = errors.New("unknown reboot mode")
	// ErrNotAllowed: the Policy refuses this key; the request is ignored.
	ErrNotAllowed = errors.New("reboot request not allowed for this key")
	// ErrHardNotAllowed: the Policy refuses a hard reboot for this key; the
	// request counts as a soft reboot.
	ErrHardNotAllowed = errors.New("hard reboot not allowed for this key")
)

// AnnotationError is a problem with one reboot annotation.
type AnnotationError struct {
	// Key is the full annotation key, e.g. "reboot.metal3.io/fencing".
	Key string
	// Err is one of the sentinel errors of this package, possibly wrapping
	// the parser's error.
	Err error
}

// Error names the key and the problem.
func (e *AnnotationError) Error() string { return "annotation " + e.Key + ": " + e.Err.Error() }

// Unwrap returns the underlying error.
func (e *AnnotationError) Unwrap() error { return e.Err }

// Request is one reboot request read from an annotation.
type Request struct {
	// Name is the full annotation key, e.g. "reboot.metal3.io/fencing".
	Name string
	// Key is the client's key: the part after "reboot.metal3.io/", "" for
	// the bare annotation.
	Key string
	// Value is the annotation's value exactly as found; it is never
	// rewritten.
	Value string
	// Mode is the mode the request counts as after parsing and policy.
	Mode power.Mode
}

// Keyed reports whether r is a phased request that holds the host off:
// any reboot annotation but the bare one.
func (r Request) Keyed() bool { return r.Name != Annotation }

// IsRebootAnnotation reports whether key is the bare reboot annotation or
// starts with reboot.metal3.io/.
func IsRebootAnnotation(key string) bool {
	return key == Annotation || strings.HasPrefix(key, AnnotationPrefix)
}

// Policy says which clients may ask for reboots. The zero Policy allows
// every key and every mode. It answers the seed's drawback that RBAC cannot
// tell a reboot annotation from any other.
type Policy struct {
	// Allowed reports whether the client with this key ("" for the bare
	// annotation) may request reboots at all. nil allows every key.
	Allowed func(key string) bool
	// HardAllowed reports whether it may request hard reboots. nil allows
	// every allowed key.
	HardAllowed func(key string) bool
}

// Keys returns a function for Policy fields that allows exactly the given
// keys ("" is the bare annotation).
func Keys(keys ...string) func(string) bool {
	set := make(map[string]bool, len(keys))
	for _, k := range keys {
		set[k] = true
	}
	return func(k string) bool { return set[k] }
}

// Validate checks one annotation for an admission webhook that wants to
// reject bad requests up front. key must be a reboot annotation key; value
// must be empty or a JSON object whose optional "mode" is "soft" or "hard".
// The error is an *AnnotationError wrapping ErrInvalidKey, ErrInvalidValue
// or ErrUnknownMode. Decide accepts what Validate rejects (as a soft reboot,
// with a warning), so a webhook is optional.
func Validate(key, value string) error {
	if !IsRebootAnnotation(key) {
		return &AnnotationError{Key: key, Err: fmt.Errorf("%w: not a %s annotation", ErrInvalidKey, Annotation)}
	}
	if key != Annotation {
		if err := validSegment(strings.TrimPrefix(key, AnnotationPrefix)); err != nil {
			return &AnnotationError{Key: key, Err: err}
		}
	}
	if _, err := parseValue(value); err != nil {
		return &AnnotationError{Key: key, Err: err}
	}
	return nil
}

// ParseAnnotations reads every reboot request from a host's annotations,
// sorted by annotation name (the bare annotation first), and the problems
// found. Bad values count as soft requests; keys the policy refuses and
// invalid keys (reboot.metal3.io/ with an empty or malformed key) are left
// out with a warning that says why: they never reboot nor hold the host.
// The map is not modified.
func ParseAnnotations(annotations map[string]string, p Policy) ([]Request, []error) {
	return parseInto(nil, nil, annotations, p)
}

// parseInto is ParseAnnotations appending to reqs[:0] and warns[:0], so
// that a caller that keeps its buffers allocates nothing for valid input.
func parseInto(reqs []Request, warns []error, annotations map[string]string, p Policy) ([]Request, []error) {
	reqs, warns = reqs[:0], warns[:0]
	for k, v := range annotations {
		if !IsRebootAnnotation(k) {
			continue
		}
		key := ""
		if k != Annotation {
			key = k[len(AnnotationPrefix):]
			if err := validSegment(key); err != nil {
				warns = append(warns, &AnnotationError{Key: k, Err: fmt.Errorf("%w; ignored: it does not reboot or hold the host", err)})
				continue
			}
		}
		if p.Allowed != nil && !p.Allowed(key) {
			warns = append(warns, &AnnotationError{Key: k, Err: ErrNotAllowed})
			continue
		}
		mode, err := parseValue(v)
		if err != nil {
			warns = append(warns, &AnnotationError{Key: k, Err: err})
		}
		if mode == power.ModeHard && p.HardAllowed != nil && !p.HardAllowed(key) {
			warns = append(warns, &AnnotationError{Key: k, Err: ErrHardNotAllowed})
			mode = power.ModeSoft
		}
		reqs = append(reqs, Request{Name: k, Key: key, Value: v, Mode: mode})
	}
	slices.SortFunc(reqs, func(a, b Request) int { return strings.Compare(a.Name, b.Name) })
	if len(warns) > 1 {
		slices.SortStableFunc(warns, func(a, b error) int {
			return strings.Compare(a.(*AnnotationError).Key, b.(*AnnotationError).Key)
		})
	}
	if len(reqs) == 0 {
		reqs = nil
	}
	if len(warns) == 0 {
		warns = nil
	}
	return reqs, warns
}

// parseValue returns the mode of an annotation value; on error the mode is
// soft.
func parseValue(v string) (power.Mode, error) {
	if m, ok := quickValue(v); ok {
		return m, nil
	}
	s := strings.TrimSpace(v)
	if s == "" {
		return power.ModeSoft, nil
	}
	if s[0] != '{' {
		return power.ModeSoft, fmt.Errorf("%w: want empty or a JSON object like {\"mode\":\"hard\"}", ErrInvalidValue)
	}
	var body struct {
		Mode *string `json:"mode"`
	}
	if err := json.Unmarshal([]byte(s), &body); err != nil {
		return power.ModeSoft, fmt.Errorf("%w: %v", ErrInvalidValue, err)
	}
	if body.Mode == nil {
		return power.ModeSoft, nil
	}
	m, err := power.ParseMode(*body.Mode)
	if err != nil {
		return power.ModeSoft, fmt.Errorf("%w %q: want \"soft\" or \"hard\"", ErrUnknownMode, *body.Mode)
	}
	return m, nil
}

// quickValue recognises, without allocating, the values written most
// often: empty, {"mode":"hard"}, {"mode":"soft"}, and what Client writes,
// {"mode":"...","requestedAt":"<RFC 3339 time>"}. Anything else goes
// through encoding/json.
func quickValue(v string) (power.Mode, bool) {
	if v == "" {
		return power.ModeSoft, true
	}
	const head = `{"mode":"`
	if !strings.HasPrefix(v, head) {
		return 0, false
	}
	rest := v[len(head):]
	var m power.Mode
	switch {
	case strings.HasPrefix(rest, `hard"`):
		m = power.ModeHard
	case strings.HasPrefix(rest, `soft"`):
		m = power.ModeSoft
	default:
		return 0, false
	}
	rest = rest[len(`hard"`):]
	if rest == "}" {
		return m, true
	}
	const stamp = `,"requestedAt":"`
	if len(rest) < len(stamp)+len(`"}`) || !strings.HasPrefix(rest, stamp) || !strings.HasSuffix(rest, `"}`) {
		return 0, false
	}
	ts := rest[len(stamp) : len(rest)-2]
	if len(ts) == 0 {
		return 0, false
	}
	for i := 0; i < len(ts); i++ {
		c := ts[i]
		if !(c >= '0' && c <= '9' || c == 'T' || c == 'Z' || c == ':' || c == '.' || c == '-' || c == '+') {
			return 0, false
		}
	}
	return m, true
}

// validSegment checks a Kubernetes qualified-name segment: 1 to 63
// characters, alphanumeric at both ends, '-', '_' and '.' inside.
func validSegment(s string) error {
	if s == "" {
		return fmt.Errorf("%w: empty key after %q", ErrInvalidKey, AnnotationPrefix)
	}
	if len(s) > 63 {
		return fmt.Errorf("%w: key longer than 63 characters", ErrInvalidKey)
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for i := 0; i < len(s); i++ {
		c := s[i]
		if alnum(c) {
			continue
		}
		if (c == '-' || c == '_' || c == '.') && i > 0 && i < len(s)-1 {
			continue
		}
		return fmt.Errorf("%w: %q must be alphanumeric at both ends with only '-', '_' or '.' inside", ErrInvalidKey, s)
	}
	return nil
}
