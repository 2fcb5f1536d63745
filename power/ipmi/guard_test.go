package ipmi

import (
	"encoding/binary"
	"errors"
	"testing"
)

// openSessionResponse builds an RMCP+ Open Session Response naming the
// given algorithms, with status code status.
func openSessionResponse(status, auth, integ, crypt uint8) []byte {
	p := []byte{0x06, 0x00, 0xff, 0x07, 0x06, payloadOpenResp, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	body := make([]byte, 36)
	body[openRespStatus] = status
	body[12], body[15], body[openRespAuthAlg] = 0x00, 8, auth
	body[20], body[23], body[openRespIntegAlg] = 0x01, 8, integ
	body[28], body[31], body[openRespCryptAlg] = 0x02, 8, crypt
	binary.LittleEndian.PutUint16(p[offPayloadLength:], uint16(len(body)))
	return append(p, body...)
}

func TestCheckOpenSession(t *testing.T) {
	a3, i3, c3, _ := suiteAlgorithms(3)
	a1, i1, c1, _ := suiteAlgorithms(1)
	if err := checkOpenSession(openSessionResponse(0, a3, i3, c3), 3); err != nil {
		t.Fatalf("suite 3 answered for 3: %v", err)
	}
	var de *DowngradeError
	if err := checkOpenSession(openSessionResponse(0, a1, i1, c1), 3); !errors.As(err, &de) || de.Asked != 3 || de.Offered != 1 {
		t.Fatalf("suite 1 for 3: %v", err)
	}
	if err := checkOpenSession(openSessionResponse(0, 0x3f, 0x3f, 0x3f), 17); !errors.As(err, &de) || de.Offered != -1 {
		t.Fatalf("unknown algorithms: %v", err)
	}
	if err := checkOpenSession(openSessionResponse(0x11, 0, 0, 0), 3); err != nil {
		t.Fatalf("a refusal names no algorithms: %v", err)
	}
	if err := checkOpenSession(openSessionResponse(0, a3, i3, c3)[:30], 3); !errors.Is(err, errMalformedOpenSession) {
		t.Fatalf("truncated: %v", err)
	}
	if err := checkOpenSession([]byte{0x06, 0, 0xff, 0x07, 0x00, 0x00}, 3); err != nil {
		t.Fatalf("an IPMI 1.5 packet: %v", err)
	}
}

// FuzzCheckOpenSession: any datagram is classified without panicking, and
// a refusal is a *DowngradeError naming the suite asked.
func FuzzCheckOpenSession(f *testing.F) {
	a3, i3, c3, _ := suiteAlgorithms(3)
	f.Add(openSessionResponse(0, a3, i3, c3), 3)
	f.Add(openSessionResponse(0, 1, 0, 0), 17)
	f.Add([]byte{0x06, 0, 0xff, 0x07, 0x06, 0x11, 0, 0}, 3)
	f.Fuzz(func(t *testing.T, p []byte, asked int) {
		err := checkOpenSession(p, asked)
		var de *DowngradeError
		if errors.As(err, &de) && (de.Asked != asked || !errors.Is(err, ErrDowngrade)) {
			t.Fatalf("%v", err)
		}
	})
}
