package nodereuse_test

import (
	"context"
	"fmt"
	"github.com/rebootkit/rebootkit/internal/rapidcheck"
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rebootkit/rebootkit/fake"
	"github.com/rebootkit/rebootkit/nodereuse"
	"pgregory.net/rapid"
)

var pools = []nodereuse.Pool{nodereuse.MachineDeployment("a"), nodereuse.MachineDeployment("b"), nodereuse.ControlPlane("a")}

func genHosts(t *rapid.T) []nodereuse.Host {
	n := rapid.IntRange(0, 30).Draw(t, "hosts")
	hosts := make([]nodereuse.Host, n)
	for i := range hosts {
		h := nodereuse.Host{Name: fmt.Sprintf("h%02d", i), Labels: map[string]string{}}
		if p := rapid.IntRange(-1, len(pools)-1).Draw(t, "pool"); p >= 0 {
			h.Labels[nodereuse.Label], _ = pools[p].LabelValue()
		}
		if rapid.Bool().Draw(t, "rackA") {
			h.Labels["rack"] = "a"
		}
		h.State = rapid.SampledFrom([]nodereuse.ProvisioningState{nodereuse.StateAvailable, nodereuse.StateAvailable,
			nodereuse.StateDeprovisioning, nodereuse.StateProvisioned, nodereuse.StateInspecting}).Draw(t, "state")
		if rapid.IntRange(0, 4).Draw(t, "claimed") == 0 {
			h.ConsumerRef = "someone"
		}
		h.Deleting = rapid.IntRange(0, 9).Draw(t, "deleting") == 0
		h.Error = rapid.IntRange(0, 9).Draw(t, "error") == 0
		h.Paused = rapid.IntRange(0, 9).Draw(t, "paused") == 0
		h.Unhealthy = rapid.IntRange(0, 9).Draw(t, "unhealthy") == 0
		h.FailureDomain = rapid.SampledFrom([]string{"", "fd1", "fd2"}).Draw(t, "fd")
		hosts[i] = h
	}
	return hosts
}

func genRequest(t *rapid.T, hosts []nodereuse.Host) nodereuse.Request {
	req := nodereuse.Request{
		Pool:          rapid.SampledFrom(pools).Draw(t, "reqPool"),
		FailureDomain: rapid.SampledFrom([]string{"", "fd1", "fd2"}).Draw(t, "reqFD"),
		Seed:          rapid.Uint64().Draw(t, "seed"),
		Claimed:       map[string]bool{},
	}
	if rapid.Bool().Draw(t, "selector") {
		req.Selector.MatchLabels = map[string]string{"rack": "a"}
	}
	for _, h := range hosts {
		if rapid.IntRange(0, 9).Draw(t, "claimedInPass") == 0 {
			req.Claimed[h.Name] = true
		}
	}
	return req
}

// category is the dumb reference: which class a host falls in for req.
func category(h nodereuse.Host, req nodereuse.Request) string {
	want, _ := req.Pool.LabelValue()
	label, labelled := h.Labels[nodereuse.Label]
	switch {
	case h.Deleting, req.Claimed[h.Name], labelled && label != want, !req.Selector.Matches(h.Labels):
		return "never"
	}
	usable := h.State == nodereuse.StateAvailable && h.ConsumerRef == "" && !h.Error && !h.Paused && !h.Unhealthy
	fd := req.FailureDomain != "" && h.FailureDomain == req.FailureDomain
	switch {
	case labelled && usable && fd:
		return "reserved-fd"
	case labelled && usable:
		return "reserved"
	case labelled && (h.ConsumerRef == "" || h.State == nodereuse.StateDeprovisioning):
		return "waiting"
	case labelled:
		return "never"
	case usable && fd:
		return "free-fd"
	case usable:
		return "free"
	}
	return "never"
}

// TestSelectProperties checks Select against the dumb reference on random
// fleets: never another pool's host; a reserved usable host always wins;
// requeue exactly when reserved hosts exist but none is usable; the same
// input gives the same answer; the input is not modified; SelectN never
// hands out a host twice and starts with what Select picks.
func TestSelectProperties(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		hosts := genHosts(t)
		req := genRequest(t, hosts)
		orig := make([]nodereuse.Host, len(hosts))
		for i, h := range hosts {
			orig[i] = h
			orig[i].Labels = maps.Clone(h.Labels)
		}
		origClaimed := maps.Clone(req.Claimed)

		s, err := nodereuse.Select(hosts, req)
		if err != nil {
			t.Fatal(err)
		}
		cats := map[string][]string{}
		catOf := map[string]string{}
		for _, h := range hosts {
			c := category(h, req)
			cats[c] = append(cats[c], h.Name)
			catOf[h.Name] = c
		}
		var want string
		for _, c := range []string{"reserved-fd", "reserved", "waiting", "free-fd", "free"} {
			if len(cats[c]) > 0 {
				want = c
				break
			}
		}
		switch want {
		case "":
			if s.Outcome != nodereuse.OutcomeNoHost {
				t.Fatalf("no candidate, got %+v", s)
			}
		case "waiting":
			if s.Outcome != nodereuse.OutcomeRequeue {
				t.Fatalf("reserved hosts %v not available: want requeue, got %+v", cats["waiting"], s)
			}
		default:
			if s.Outcome != nodereuse.OutcomePick || catOf[s.Host] != want {
				t.Fatalf("want a %s host %v, got %+v (%s)", want, cats[want], s, catOf[s.Host])
			}
			if s.RemoveLabel != (want == "reserved" || want == "reserved-fd") {
				t.Fatalf("RemoveLabel %v for a %s host", s.RemoveLabel, want)
			}
		}
		again, _ := nodereuse.Select(hosts, req)
		if d := cmp.Diff(s, again); d != "" {
			t.Fatalf("same input, different answer: %s", d)
		}
		if d := cmp.Diff(orig, hosts); d != "" || !maps.Equal(origClaimed, req.Claimed) {
			t.Fatalf("input modified: %s", d)
		}

		n := rapid.IntRange(1, 10).Draw(t, "n")
		many, err := nodereuse.SelectN(hosts, req, n)
		if err != nil || len(many) != n {
			t.Fatalf("SelectN: %v, %d answers", err, len(many))
		}
		if d := cmp.Diff(s, many[0]); d != "" {
			t.Fatalf("SelectN's first answer differs from Select: %s", d)
		}
		picked := map[string]bool{}
		for _, m := range many {
			if m.Outcome != nodereuse.OutcomePick {
				continue
			}
			if picked[m.Host] {
				t.Fatalf("host %s handed out twice", m.Host)
			}
			picked[m.Host] = true
			if c := catOf[m.Host]; c == "never" || c == "waiting" {
				t.Fatalf("SelectN picked a %s host %s", c, m.Host)
			}
		}
	})
}

// TestConcurrentClaims: several controllers list the hosts (each keeps its
// possibly stale snapshot), then select and claim in random interleavings.
// No host is ever claimed by two machines, no machine gets two hosts, and
// no machine takes another pool's host.
func TestConcurrentClaims(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		hosts := genHosts(t)
		store := fake.NewReuseHosts(hosts...)
		type machine struct {
			name     string
			req      nodereuse.Request
			snapshot []nodereuse.Host
			host     string
		}
		var ms []*machine
		for i := 0; i < rapid.IntRange(1, 8).Draw(t, "machines"); i++ {
			ms = append(ms, &machine{name: fmt.Sprintf("m%d", i), req: nodereuse.Request{
				Pool: rapid.SampledFrom(pools).Draw(t, "pool"), Seed: rapid.Uint64().Draw(t, "seed")}})
		}
		poolOf := map[string]string{}
		for _, h := range hosts {
			poolOf[h.Name] = h.Labels[nodereuse.Label]
		}
		for step := 0; step < 40; step++ {
			m := ms[rapid.IntRange(0, len(ms)-1).Draw(t, "who")]
			if m.host != "" {
				continue
			}
			if m.snapshot == nil || rapid.Bool().Draw(t, "relist") {
				m.snapshot, _ = store.List(ctx)
				continue
			}
			s, err := nodereuse.Select(m.snapshot, m.req)
			if err != nil {
				t.Fatal(err)
			}
			if s.Outcome != nodereuse.OutcomePick {
				continue
			}
			var version string
			for _, h := range m.snapshot {
				if h.Name == s.Host {
					version = h.Version
				}
			}
			if err := store.Claim(ctx, s.Host, version, m.name, s.RemoveLabel); err == nil {
				m.host = s.Host
				want, _ := m.req.Pool.LabelValue()
				if p := poolOf[s.Host]; p != "" && p != want {
					t.Fatalf("%s (%s) claimed %s reserved for %s", m.name, want, s.Host, p)
				}
			}
			m.snapshot = nil
		}
		for h, consumers := range store.Claims() {
			if len(consumers) > 1 {
				t.Fatalf("host %s claimed by %v", h, consumers)
			}
		}
		var got []string
		for _, m := range ms {
			if m.host != "" {
				got = append(got, m.host)
			}
		}
		slices.Sort(got)
		if len(slices.Compact(got)) != len(got) {
			t.Fatalf("a host went to two machines: %v", got)
		}
	})
}

// TestClaimsWithOperator: as TestConcurrentClaims, with a second writer
// (fake.ReuseHosts.SetInterloper) that changes the host between a
// controller's select and its claim: relabels it for another pool, marks it
// being deleted, or gives it to someone else. Checked against the store:
// a claim never succeeds on a host changed since it was listed, so no
// machine takes another pool's host, a deleting host, or a host already
// given away.
func TestClaimsWithOperator(t *testing.T) {
	rapidcheck.Check(t, func(t *rapid.T) {
		ctx := context.Background()
		hosts := genHosts(t)
		store := fake.NewReuseHosts(hosts...)
		poolOf := map[string]string{}
		for _, h := range hosts {
			poolOf[h.Name] = h.Labels[nodereuse.Label]
		}
		taken := map[string]bool{}
		op := -1
		store.SetInterloper(func(name string) {
			kind := op
			op = -1
			switch kind {
			case 0:
				other := "md-other"
				_ = store.Update(name, func(h *nodereuse.Host) {
					h.Labels = map[string]string{nodereuse.Label: other}
				})
				poolOf[name] = other
			case 1:
				_ = store.Update(name, func(h *nodereuse.Host) { h.Deleting = true })
				taken[name] = true
			case 2:
				_ = store.Update(name, func(h *nodereuse.Host) { h.ConsumerRef = "operator" })
				taken[name] = true
			}
		})
		var claimed []string
		for i := 0; i < rapid.IntRange(1, 30).Draw(t, "attempts"); i++ {
			req := nodereuse.Request{Pool: rapid.SampledFrom(pools).Draw(t, "pool"), Seed: rapid.Uint64().Draw(t, "seed")}
			snap, _ := store.List(ctx)
			s, err := nodereuse.Select(snap, req)
			if err != nil {
				t.Fatal(err)
			}
			if s.Outcome != nodereuse.OutcomePick {
				continue
			}
			op = rapid.IntRange(-1, 2).Draw(t, "operator")
			var version string
			for _, h := range snap {
				if h.Name == s.Host {
					version = h.Version
				}
			}
			if err := store.Claim(ctx, s.Host, version, fmt.Sprintf("m%d", i), s.RemoveLabel); err != nil {
				continue
			}
			want, _ := req.Pool.LabelValue()
			if p := poolOf[s.Host]; p != "" && p != want {
				t.Fatalf("claimed %s reserved for %s by a %s machine", s.Host, p, want)
			}
			if taken[s.Host] {
				t.Fatalf("claimed %s after the operator took it", s.Host)
			}
			claimed = append(claimed, s.Host)
		}
		slices.Sort(claimed)
		if len(slices.Compact(claimed)) != len(claimed) {
			t.Fatalf("a host went to two machines: %v", claimed)
		}
	})
}
