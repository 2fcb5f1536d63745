package reboot

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rebootkit/rebootkit/power"
)

// FuzzQuickValue checks that the allocation-free fast path never disagrees
// with encoding/json: whatever it accepts is a JSON object whose mode it
// reads the same way.
func FuzzQuickValue(f *testing.F) {
	for _, v := range []string{"", `{"mode":"hard"}`, `{"mode":"soft"}`, `{"mode":"hard","requestedAt":"2026-01-01T00:00:00.5Z"}`,
		RequestValue(power.ModeSoft, time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))), `{"mode":"hard"`, `{"mode":"hard","requestedAt":""}`} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		m, ok := quickValue(v)
		if !ok || v == "" {
			return
		}
		var body struct {
			Mode *string `json:"mode"`
		}
		if err := json.Unmarshal([]byte(v), &body); err != nil {
			t.Fatalf("fast path accepted %q, which is not JSON: %v", v, err)
		}
		if body.Mode == nil || *body.Mode != m.String() {
			t.Fatalf("fast path read mode %v from %q, encoding/json %v", m, v, body.Mode)
		}
	})
}
