package plan_test

import (
	"testing"

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
