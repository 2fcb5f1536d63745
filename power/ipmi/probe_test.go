package ipmi

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestSuiteRecordsBounded: the suite IDs of Get Channel Cipher Suites (an
// unauthenticated answer) are kept once each, at most maxOffered.
func TestSuiteRecordsBounded(t *testing.T) {
	var b []byte
	for i := 0; i < 200; i++ {
		b = append(b, 0xc0, 3, 0x01, 0x41, 0x81)
	}
	assert.Equal(t, []int{3}, parseSuiteRecords(b))
	b = nil
	for i := 0; i < 200; i++ {
		b = append(b, 0xc0, uint8(i))
	}
	ids := parseSuiteRecords(b)
	assert.Len(t, ids, maxOffered)
	assert.Equal(t, 0, ids[0])
}

// FuzzSuiteRecords: any record data gives at most maxOffered distinct IDs.
func FuzzSuiteRecords(f *testing.F) {
	f.Add([]byte{0xc0, 3, 0x01, 0x41, 0x81, 0xc1, 17, 0x57, 0x01, 0x00, 0x03})
	f.Add([]byte{0xc0})
	f.Fuzz(func(t *testing.T, b []byte) {
		ids := parseSuiteRecords(b)
		if len(ids) > maxOffered {
			t.Fatalf("%d IDs", len(ids))
		}
		seen := map[int]bool{}
		for _, id := range ids {
			if seen[id] || id < 0 || id > 255 {
				t.Fatalf("ID %d repeated or out of range", id)
			}
			seen[id] = true
		}
	})
}
