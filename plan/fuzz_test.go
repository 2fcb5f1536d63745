package plan_test

import (
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/plan"
)

// FuzzDecode: the plan decoder never panics, and whatever it accepts
// encodes and decodes back to the same plan, byte for byte.
func FuzzDecode(f *testing.F) {
	p, _, _ := plan.Create(servers(2, 3), opts())
	seed, _ := plan.Encode(p)
	f.Add(seed)
	f.Add([]byte(`{"uuid":"x","state":"running","concurrency":1,"reboots":[{"server_uuid":"a","started_at":"2026-01-01T00:00:00.5+02:00","step":"job"}]}`))
	f.Add([]byte(`{"uuid":"x","state":"complete","concurrency":3,"failure_budget":1,"reboots":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := plan.Decode(data)
		if err != nil {
			return
		}
		enc, err := plan.Encode(p)
		if err != nil {
			t.Fatalf("accepted plan does not encode: %v", err)
		}
		q, err := plan.Decode(enc)
		if err != nil {
			t.Fatalf("re-decode: %v\n%s", err, enc)
		}
		enc2, _ := plan.Encode(q)
		if string(enc) != string(enc2) {
			t.Fatalf("not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzPolicyParsers: the parsers of operators' window, ramp and domain
// limit flags never panic; what ParseWeekly accepts prints back to itself
// (String), and an accepted ramp or limit holds only valid values.
func FuzzPolicyParsers(f *testing.F) {
	for _, s := range []string{"Mon-Fri 22:00-06:00", "daily 00:00-24:00", "fri-mon 9:30-12:00", "1,5,20%", "rack=1", "zone=10%", "Sun,Sat 23:59-00:00", "x=", "1,,%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if w, err := plan.ParseWeekly(s); err == nil {
			again, err := plan.ParseWeekly(w.String())
			if err != nil || again != w {
				t.Fatalf("%q parses to %q, which parses to %+v (%v)", s, w.String(), again, err)
			}
			// Its periods in a zone with DST are well ordered.
			ws := &plan.Windows{TimeZone: "America/New_York", Weekly: []string{s}}
			from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
			ps, err := ws.Periods(from, from.Add(40*24*time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range ps {
				if !p.Start.Before(p.End) || i > 0 && !ps[i-1].End.Before(p.Start) {
					t.Fatalf("%q: periods out of order: %v", s, ps)
				}
			}
		}
		if r, err := plan.ParseRamp(s); err == nil {
			for _, l := range r {
				if l.N < 1 || l.Percent && l.N > 100 {
					t.Fatalf("%q: stage %+v", s, l)
				}
			}
		}
		if d, err := plan.ParseDomainLimit(s); err == nil {
			if d.Label == "" || d.Max < 1 || d.Of(1) < 1 {
				t.Fatalf("%q: limit %+v", s, d)
			}
		}
	})
}
