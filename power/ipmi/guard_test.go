package ipmi

import (
	"encoding/binary"
	"errors"
	"testing"
)

// openSessionResponse builds an RMCP+ Open Session Response for console
// session 0x01020304 (message tag 0) naming the given algorithms, with
// status code status.
func openSessionResponse(status, auth, integ, crypt uint8) []byte {
	body := make([]byte, 36)
	body[openRespStatus] = status
	binary.LittleEndian.PutUint32(body[openRespConsoleID:], 0x01020304)
	binary.LittleEndian.PutUint32(body[openRespBMCID:], 0x0a0b0c0d)
	body[12], body[15], body[openRespAuthAlg] = 0x00, 8, auth
	body[20], body[23], body[openRespIntegAlg] = 0x01, 8, integ
	body[28], body[31], body[openRespCryptAlg] = 0x02, 8, crypt
	return sessionless(ptOpenResponse, body)
}

func TestCheckOpenSession(t *testing.T) {
	s3, s17 := suites[3], suites[17]
	if id, err := checkOpenSession(openSessionResponse(0, 1, 1, 1), 0, 0x01020304, s3); err != nil || id != 0x0a0b0c0d {
		t.Fatalf("suite 3 answered for 3: %v", err)
	}
	var de *DowngradeError
	if _, err := checkOpenSession(openSessionResponse(0, 1, 0, 0), 0, 0x01020304, s3); !errors.As(err, &de) || de.Asked != 3 || de.Offered != 1 {
		t.Fatalf("suite 1 for 3: %v", err)
	}
	if _, err := checkOpenSession(openSessionResponse(0, 0x3f, 0x3f, 0x3f), 0, 0x01020304, s17); !errors.As(err, &de) || de.Offered != -1 {
		t.Fatalf("unknown algorithms: %v", err)
	}
	var re *RefusedError
	if _, err := checkOpenSession(openSessionResponse(0x11, 0, 0, 0), 0, 0x01020304, s3); !errors.As(err, &re) || re.Status != 0x11 {
		t.Fatalf("a refusal: %v", err)
	}
	if _, err := checkOpenSession(openSessionResponse(0, 1, 1, 1)[:30], 0, 0x01020304, s3); !errors.Is(err, ErrProtocol) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := checkOpenSession(openSessionResponse(0, 1, 1, 1), 0, 0x01020305, s3); !errors.Is(err, ErrProtocol) {
		t.Fatalf("another session's: %v", err)
	}
	if _, err := checkOpenSession(openSessionResponse(0, 1, 1, 1), 7, 0x01020304, s3); !errors.Is(err, ErrProtocol) {
		t.Fatalf("another request's tag: %v", err)
	}
	relabelled := openSessionResponse(0, 1, 0, 0)
	relabelled[5] = ptRAKP2
	if _, err := checkOpenSession(relabelled, 0, 0x01020304, s3); !errors.Is(err, ErrDowngrade) {
		t.Fatalf("payload type 13h: %v", err)
	}
	if _, err := checkOpenSession([]byte{0x06, 0, 0xff, 0x07, 0x00, 0x00}, 0, 0x01020304, s3); !errors.Is(err, ErrDowngrade) {
		t.Fatalf("an IPMI 1.5 packet: %v", err)
	}
}
