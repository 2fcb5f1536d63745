package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"github.com/rebootkit/rebootkit/remediation"
)

// memAdmissions is an in-memory AdmissionStore with a linearisable
// compare-and-swap (as the API server's resourceVersion precondition).
type memAdmissions struct {
	machines []string
	requests map[string]remediation.Request
	version  int
}

func (m *memAdmissions) GetAdmissions(context.Context) (remediation.Admissions, error) {
	return remediation.Admissions{Machines: slices.Clone(m.machines), Requests: maps.Clone(m.requests), Version: strconv.Itoa(m.version)}, nil
}

func (m *memAdmissions) PutAdmissions(_ context.Context, a remediation.Admissions) error {
	if a.Version != strconv.Itoa(m.version) {
		return remediation.ErrConflict
	}
	m.machines, m.requests, m.version = slices.Clone(a.Machines), maps.Clone(a.Requests), m.version+1
	return nil
}

// TestHostAdmissionsRapid: remediations of a few hosts read the admission
// record, then (interleaved with the others' writes) admit themselves with
// a compare-and-swap, or release; remediations vanish (their object
// deleted: no host). The stored record never names two remediations of
// one host, and a remediation whose host is free and whose read is fresh
// is admitted.
func TestHostAdmissionsRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		hostOf := map[string]string{}
		var names []string
		for i := range rapid.IntRange(2, 6).Draw(t, "remediations") {
			n := fmt.Sprintf("r%d", i)
			names = append(names, n)
			hostOf[n] = fmt.Sprintf("h%d", rapid.IntRange(0, 2).Draw(t, "host of "+n))
		}
		mem := &memAdmissions{}
		store := &hostAdmissions{AdmissionStore: mem, hostOf: func(_ context.Context, n string) (string, error) {
			h, ok := hostOf[n]
			if !ok {
				return "", remediation.ErrNotFound
			}
			return h, nil
		}}
		read := map[string]remediation.Admissions{}
		pick := func(t *rapid.T) string { return rapid.SampledFrom(names).Draw(t, "r") }
		t.Repeat(map[string]func(*rapid.T){
			"read": func(t *rapid.T) {
				n := pick(t)
				read[n], _ = store.GetAdmissions(ctx)
			},
			"admit": func(t *rapid.T) {
				n := pick(t)
				a, ok := read[n]
				if !ok || a.Has(n) {
					t.Skip("no read, or already admitted")
				}
				free := true
				for _, m := range mem.machines {
					if h, ok := hostOf[m]; ok && h == hostOf[n] {
						free = false
					}
				}
				fresh := a.Version == strconv.Itoa(mem.version)
				a.Machines = append(slices.Clone(a.Machines), n)
				err := store.PutAdmissions(ctx, a)
				if fresh && free && hostOf[n] != "" && err != nil {
					if _, gone := hostOf[n]; gone {
						t.Fatalf("a fresh admission of %s on a free host refused: %v", n, err)
					}
				}
				delete(read, n)
			},
			"release": func(t *rapid.T) {
				n := pick(t)
				a, _ := store.GetAdmissions(ctx)
				a.Machines = slices.DeleteFunc(a.Machines, func(m string) bool { return m == n })
				_ = store.PutAdmissions(ctx, a)
			},
			"vanish": func(t *rapid.T) {
				delete(hostOf, pick(t))
			},
			"": func(t *rapid.T) {
				seen := map[string]string{}
				for _, m := range mem.machines {
					h, ok := hostOf[m]
					if !ok {
						continue
					}
					if o, dup := seen[h]; dup {
						t.Fatalf("host %s admitted for %s and %s", h, o, m)
					}
					seen[h] = m
				}
			},
		})
	})
}
