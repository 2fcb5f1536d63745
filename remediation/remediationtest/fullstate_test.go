package remediationtest

import (
	"reflect"
	"testing"
)

// TestFullStateEqualSeesEveryField: Contract compares the State a store
// gives back with State.Equal; a field Equal does not compare would pass
// a store that loses it, whatever fullState sets.
func TestFullStateEqualSeesEveryField(t *testing.T) {
	full := fullState(t)
	typ := reflect.TypeOf(full)
	for i := 0; i < typ.NumField(); i++ {
		lost := full
		reflect.ValueOf(&lost).Elem().Field(i).SetZero()
		if lost.Equal(full) || full.Equal(lost) {
			t.Errorf("State.Equal does not see State.%s: a store that loses it passes Contract", typ.Field(i).Name)
		}
	}
}
