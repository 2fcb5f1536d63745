package redfish

import (
	"fmt"
	"testing"
	"time"
)

// TestReview35af_FullRegistryDropsStaleRecordWithShortFloor (windows.go
// makeRoom; doc: a record is kept "with the longest settings any
// Controller of the process has used", and once full "the record whose
// windows end first is dropped and the registry's floor takes it"): a
// full registry whose records were filed before span grew (a Controller
// with longer LostLanding + SoftTimeout + StaleReads connected). makeRoom
// re-files at most expireBatch (256) of them, then drops the heap's top
// as it is: a record still filed under the old span, whose floor ends at
// its old exp, not span after its window began. A Controller with the
// longer settings (the one that widened the span) then sees the system's
// lost reset as over minutes early.
func TestReview35af_FullRegistryDropsStaleRecordWithShortFloor(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &windowRegistry{max: 300}
	o := resetOutcome{began: now, returned: now, stale: 30 * time.Second, lostSpan: 60 * time.Second, lost: true}
	for i := range 300 {
		r.noteReset(windowKey(fmt.Sprintf("https://10.0.%d.%d", i>>8, i&255), "/redfish/v1/Systems/1"), o)
	}
	long := 20 * time.Minute
	r.widen(long) // a Controller with longer settings connected
	o2 := o
	o2.began, o2.returned = now.Add(time.Second), now.Add(time.Second)
	r.noteReset(windowKey("https://10.9.9.9", "/redfish/v1/Systems/1"), o2) // full: one record goes to the floor
	if want := now.Add(long); r.floor.until.Before(want) {
		t.Fatalf("floor of the dropped record ends %v after its lost reset, want at least %v (the longest settings of the process)", r.floor.until.Sub(now), long)
	}
}
