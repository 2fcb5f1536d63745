package ipmi

import (
	"crypto/hmac"
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

// testKeys returns the keys of a session of suite st with fixed keys.
func testKeys(st suite) *keys {
	k1, k2 := make([]byte, st.hash().Size()), make([]byte, 20)
	for i := range k1 {
		k1[i] = uint8(i)
	}
	for i := range k2 {
		k2[i] = uint8(100 + i)
	}
	return &keys{st: st, consoleID: 0x01020304, bmcID: 0x0a0b0c0d, k1: k1, aesKey: k2[:16],
		random: func(b []byte) error { copy(b, "sixteen byte iv."); return nil }}
}

// answer seals msg as the BMC would (the keys' roles swapped).
func answer(k *keys, seq uint32, msg []byte) []byte {
	b := *k
	b.bmcID, b.outSeq = k.consoleID, seq-1
	p, _ := b.seal(msg)
	return p
}

func TestOpenVerifiesEverything(t *testing.T) {
	for _, id := range []int{3, 17} {
		k := testKeys(suites[id])
		msg := []byte{0x81, 0x04, 0x7b, 0x20, 0x04, 0x01, 0x00, 0x01, 0x00, 0x00, 0xda}
		good := answer(k, 5, msg)
		got, err := k.open(good)
		if err != nil || string(got) != string(msg) {
			t.Fatalf("suite %d: an authentic answer: %v %x", id, err, got)
		}
		if _, err := k.open(good); !errors.Is(err, errSequence) {
			t.Fatalf("suite %d: a replay: %v", id, err)
		}
		if _, err := k.open(answer(k, 5+seqWindow+1, msg)); !errors.Is(err, errSequence) {
			t.Fatalf("suite %d: past the window: %v", id, err)
		}
		if _, err := k.open(answer(k, 4, msg)); !errors.Is(err, errSequence) {
			t.Fatalf("suite %d: an older one: %v", id, err)
		}
		for i := 4; i < len(good); i++ {
			bad := append([]byte(nil), good...)
			bad[i] ^= 0x01
			if _, err := k.open(bad); err == nil {
				t.Fatalf("suite %d: byte %d flipped and accepted", id, i)
			}
		}
		other := testKeys(suites[id])
		other.k1[0] ^= 1
		if _, err := k.open(answer(other, 6, msg)); !errors.Is(err, errBadAuthCode) {
			t.Fatalf("suite %d: another key: %v", id, err)
		}
		clear := append([]byte(nil), good...)
		clear[5] = 0x40
		if _, err := k.open(clear); !errors.Is(err, errNotEncrypted) {
			t.Fatalf("suite %d: clear text: %v", id, err)
		}
		if _, err := k.open(answer(k, 6, msg)); err != nil {
			t.Fatalf("suite %d: the next one: %v", id, err)
		}
	}
}

// FuzzOpen: the verifying parser of session datagrams never panics, and
// accepts nothing that was not sealed with the session's keys: a datagram
// it accepts is one the fuzzer could only have got from the seed corpus
// (sealed), so its AuthCode must verify and its sequence number advance.
func FuzzOpen(f *testing.F) {
	k := testKeys(suites[3])
	msg := []byte{0x81, 0x04, 0x7b, 0x20, 0x04, 0x01, 0x00, 0x01, 0x00, 0x00, 0xda}
	f.Add(answer(k, 1, msg))
	f.Add(answer(k, 40, msg))
	f.Add(openSessionResponse(0, 1, 1, 1))
	f.Add([]byte{0x06, 0, 0xff, 0x07, 0x06, 0xc0, 4, 3, 2, 1, 1, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, p []byte) {
		k := testKeys(suites[3])
		m, err := k.open(p)
		if err != nil {
			return
		}
		if !k.acceptedAny || k.inSeq == 0 || len(p) < rmcpPlusHeaderLen+k.st.icvLen {
			t.Fatalf("accepted without state: %x", p)
		}
		if !hmac.Equal(k.mac(p[4:len(p)-k.st.icvLen]), p[len(p)-k.st.icvLen:]) {
			t.Fatalf("accepted with a bad AuthCode: %x", p)
		}
		if _, err := k.open(p); err == nil {
			t.Fatalf("accepted twice: %x", p)
		}
		_ = m
	})
}

// FuzzCheckOpenSession: any datagram after an Open Session Request is
// classified without panicking; only an RMCP+ Open Session Response with
// the pinned algorithms gives a session ID.
func FuzzCheckOpenSession(f *testing.F) {
	f.Add(openSessionResponse(0, 1, 1, 1), 3)
	f.Add(openSessionResponse(0, 3, 4, 1), 17)
	f.Add(openSessionResponse(0, 1, 0, 0), 17)
	f.Add(openSessionResponse(0x11, 0, 0, 0), 3)
	f.Add([]byte{0x06, 0, 0xff, 0x07, 0x06, 0x11, 0, 0}, 3)
	f.Fuzz(func(t *testing.T, p []byte, pick int) {
		st := suites[3]
		if pick%2 != 0 {
			st = suites[17]
		}
		id, err := checkOpenSession(p, 0, 0x01020304, st)
		if err == nil {
			if id == 0 || p[5] != ptOpenResponse || p[4] != authTypeRMCPPlus || p[16+16]&0x3f != st.auth ||
				p[16+24]&0x3f != st.integ || p[16+32]&0x3f != st.crypt {
				t.Fatalf("accepted %x", p)
			}
			return
		}
		var de *DowngradeError
		if errors.As(err, &de) && (de.Asked != st.id || !errors.Is(err, ErrDowngrade)) {
			t.Fatalf("%v", err)
		}
	})
}
