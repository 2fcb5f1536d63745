package reboot

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// escapedMetal3 is what PrefixedHosts shows for a metal3 reboot annotation
// found in a store that uses another prefix: not a reboot annotation, so
// nothing acts on it, and written back unchanged.
const escapedMetal3 = "rebootkit.invalid/metal3."

// WithPrefix returns hosts as a HostStore whose records carry the reboot
// API under prefix instead of metal3's reboot.metal3.io (which stays the
// default): prefix is the bare request and prefix + "/{key}" the keyed
// ones, e.g. "reboot.example.com" and "reboot.example.com/fencing". Give
// the result to the Reconciler and to every Client: they see metal3's
// keys, the store holds yours (in the annotations and in Status.Seen's
// entries). A metal3 key found in the store (someone
// else's protocol) is hidden from them and written back as it was. The
// result is a HostWatcher when hosts is. The prefix must be a valid
// annotation name (a DNS subdomain, like reboot.metal3.io).
func WithPrefix(hosts HostStore, prefix string) (HostStore, error) {
	if prefix == Annotation || !validPrefix(prefix) {
		return nil, fmt.Errorf("reboot: annotation prefix %q: %w", prefix, ErrInvalidKey)
	}
	p := PrefixedHosts{Hosts: hosts, Prefix: prefix}
	if w, ok := hosts.(HostWatcher); ok {
		return prefixedWatcher{p, w}, nil
	}
	return p, nil
}

// validPrefix: a DNS subdomain of lower-case labels.
func validPrefix(p string) bool {
	if p == "" || len(p) > 253 {
		return false
	}
	for _, l := range strings.Split(p, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// PrefixedHosts is the HostStore WithPrefix returns (without Watch).
type PrefixedHosts struct {
	// Hosts is your store.
	Hosts HostStore
	// Prefix replaces Annotation ("reboot.metal3.io").
	Prefix string
}

type prefixedWatcher struct {
	PrefixedHosts
	w HostWatcher
}

func (p prefixedWatcher) Watch(ctx context.Context, name string) (<-chan struct{}, error) {
	return p.w.Watch(ctx, name)
}

// toInternal maps the store's key k to what the Reconciler sees.
func (p PrefixedHosts) toInternal(k string) string {
	switch {
	case k == p.Prefix:
		return Annotation
	case strings.HasPrefix(k, p.Prefix+"/"):
		return AnnotationPrefix + k[len(p.Prefix)+1:]
	case IsRebootAnnotation(k) || strings.HasPrefix(k, escapedMetal3):
		// Escaped, and an escape's look-alike escaped again, so that
		// toStore gives every key back as it was (one escape dropped).
		return escapedMetal3 + k
	}
	return k
}

// toStore maps a key the Reconciler wrote back to the store's.
func (p PrefixedHosts) toStore(k string) string {
	switch {
	case k == Annotation:
		return p.Prefix
	case strings.HasPrefix(k, AnnotationPrefix):
		return p.Prefix + "/" + k[len(AnnotationPrefix):]
	case strings.HasPrefix(k, escapedMetal3):
		return k[len(escapedMetal3):]
	}
	return k
}

// mapSeen maps the annotation names of Status.Seen's entries ("name#hash")
// by f, keeping the list sorted: the store holds its own names there too.
func mapSeen(in []string, f func(string) string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, id := range in {
		if j := strings.LastIndexByte(id, '#'); j >= 0 {
			id = f(id[:j]) + id[j:]
		}
		out[i] = id
	}
	slices.Sort(out)
	return out
}

func mapKeys(in map[string]string, f func(string) string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[f(k)] = v
	}
	return out
}

// Get implements HostStore.
func (p PrefixedHosts) Get(ctx context.Context, name string) (Host, error) {
	h, err := p.Hosts.Get(ctx, name)
	if err != nil {
		return h, err
	}
	h.Annotations = mapKeys(h.Annotations, p.toInternal)
	h.Status.Seen = mapSeen(h.Status.Seen, p.toInternal)
	return h, nil
}

// Update implements HostStore.
func (p PrefixedHosts) Update(ctx context.Context, h Host) (Host, error) {
	h.Annotations = mapKeys(h.Annotations, p.toStore)
	h.Status.Seen = mapSeen(h.Status.Seen, p.toStore)
	w, err := p.Hosts.Update(ctx, h)
	if err != nil {
		return w, err
	}
	w.Annotations = mapKeys(w.Annotations, p.toInternal)
	w.Status.Seen = mapSeen(w.Status.Seen, p.toInternal)
	return w, nil
}
