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

// sharedMem is an in-memory record of two sections (as Admissions over
// one ConfigMap) with a linearisable compare-and-swap over both.
type sharedMem struct {
	machines [2][]string
	requests [2]map[string]remediation.Request
	version  int
}

// sectionView is one controller's store over sharedMem.
type sectionView struct {
	m   *sharedMem
	sec int
}

func (v sectionView) GetAdmissions(context.Context) (remediation.Admissions, error) {
	o := 1 - v.sec
	a := remediation.Admissions{Machines: slices.Clone(v.m.machines[v.sec]), Requests: maps.Clone(v.m.requests[v.sec]), Version: strconv.Itoa(v.m.version)}
	for _, n := range v.m.machines[o] {
		if a.Others == nil {
			a.Others = map[string]string{}
		}
		a.Others[n] = v.m.requests[o][n].Host
	}
	return a, nil
}

func (v sectionView) PutAdmissions(_ context.Context, a remediation.Admissions) error {
	if a.Version != strconv.Itoa(v.m.version) {
		return remediation.ErrConflict
	}
	v.m.machines[v.sec], v.m.requests[v.sec], v.m.version = slices.Clone(a.Machines), maps.Clone(a.Requests), v.m.version+1
	return nil
}

// TestSharedHostLockRapid: remediations of the Machine remediation and of
// the external remediation, over a few hosts (names that may be equal
// across the two), read the one record, then (interleaved with the
// others' writes, of either controller) admit themselves with their
// request recorded, as the Reconciler does, or release. The stored record
// never names two remediations of one host across both sections, a write
// never changes the other section, and a fresh admission on a free host
// is accepted.
func TestSharedHostLockRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		mem := &sharedMem{}
		type rem struct {
			sec  int
			name string
		}
		var rems []rem
		hostOf := map[rem]string{}
		for i := range rapid.IntRange(2, 6).Draw(t, "remediations") {
			r := rem{sec: rapid.IntRange(0, 1).Draw(t, "section"), name: fmt.Sprintf("r%d", rapid.IntRange(0, i).Draw(t, "name"))}
			if _, dup := hostOf[r]; dup {
				continue
			}
			rems = append(rems, r)
			hostOf[r] = fmt.Sprintf("h%d", rapid.IntRange(0, 2).Draw(t, "host"))
		}
		stores := [2]*hostAdmissions{}
		for sec := range stores {
			stores[sec] = &hostAdmissions{AdmissionStore: sectionView{m: mem, sec: sec}, hostOf: func(_ context.Context, n string) (string, error) {
				if h, ok := hostOf[rem{sec, n}]; ok {
					return h, nil
				}
				return "", remediation.ErrNotFound
			}}
		}
		read := map[rem]remediation.Admissions{}
		pick := func(t *rapid.T) rem { return rapid.SampledFrom(rems).Draw(t, "remediation") }
		t.Repeat(map[string]func(*rapid.T){
			"read": func(t *rapid.T) {
				r := pick(t)
				read[r], _ = stores[r.sec].GetAdmissions(ctx)
			},
			"admit": func(t *rapid.T) {
				r := pick(t)
				a, ok := read[r]
				if !ok || a.Has(r.name) {
					t.Skip("no read, or already admitted")
				}
				delete(read, r)
				free := true
				for sec := range 2 {
					for _, n := range mem.machines[sec] {
						free = free && mem.requests[sec][n].Host != hostOf[r]
					}
				}
				fresh := a.Version == strconv.Itoa(mem.version)
				other := slices.Clone(mem.machines[1-r.sec])
				a.Machines = append(slices.Clone(a.Machines), r.name)
				a.Requests = maps.Clone(a.Requests)
				if a.Requests == nil {
					a.Requests = map[string]remediation.Request{}
				}
				a.Requests[r.name] = remediation.Request{Value: "v", Host: hostOf[r]}
				err := stores[r.sec].PutAdmissions(ctx, a)
				if fresh && free && err != nil {
					t.Fatalf("a fresh admission of %v on the free host %s refused: %v", r, hostOf[r], err)
				}
				if !slices.Equal(other, mem.machines[1-r.sec]) {
					t.Fatalf("a write of section %d changed the other: %v -> %v", r.sec, other, mem.machines[1-r.sec])
				}
			},
			"release": func(t *rapid.T) {
				r := pick(t)
				a, _ := stores[r.sec].GetAdmissions(ctx)
				a.Machines = slices.DeleteFunc(a.Machines, func(m string) bool { return m == r.name })
				a.Requests = maps.Clone(a.Requests)
				delete(a.Requests, r.name)
				_ = stores[r.sec].PutAdmissions(ctx, a)
			},
			"": func(t *rapid.T) {
				seen := map[string]string{}
				for sec := range 2 {
					for _, n := range mem.machines[sec] {
						h := mem.requests[sec][n].Host
						if o, dup := seen[h]; dup {
							t.Fatalf("host %s admitted for %s and %d/%s", h, o, sec, n)
						}
						seen[h] = fmt.Sprintf("%d/%s", sec, n)
					}
				}
			},
		})
	})
}
