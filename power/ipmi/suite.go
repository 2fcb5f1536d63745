package ipmi

import (
	"crypto/sha1" //nolint:gosec // HMAC-SHA1 is what cipher suite 3 is made of (IPMI v2.0 table 22-20)
	"crypto/sha256"
	"fmt"
	"hash"
)

// Algorithm numbers of IPMI v2.0 tables 13-17 (authentication), 13-18
// (integrity) and 13-19 (confidentiality).
const (
	authRAKPHMACSHA1   = 0x01
	authRAKPHMACSHA256 = 0x03
	integHMACSHA196    = 0x01
	integHMACSHA256128 = 0x04
	cryptAESCBC128     = 0x01
)

// standardSuites are the algorithms of the standard cipher suites 0 to 19
// (IPMI v2.0 table 22-20): authentication, integrity, confidentiality.
var standardSuites = [20][3]uint8{
	{0, 0, 0}, {1, 0, 0}, {1, 1, 0}, {1, 1, 1}, {1, 1, 2}, {1, 1, 3},
	{2, 0, 0}, {2, 2, 0}, {2, 2, 1}, {2, 2, 2}, {2, 2, 3},
	{2, 3, 0}, {2, 3, 1}, {2, 3, 2}, {2, 3, 3},
	{3, 0, 0}, {3, 4, 0}, {3, 4, 1}, {3, 4, 2}, {3, 4, 3},
}

// suiteOf returns the standard cipher suite with these algorithms, or -1.
func suiteOf(auth, integ, crypt uint8) int {
	for id, a := range standardSuites {
		if a == [3]uint8{auth, integ, crypt} {
			return id
		}
	}
	return -1
}

// suite is a cipher suite this package can run: one that authenticates
// every packet of the session and encrypts it (3 and 17).
type suite struct {
	id                 int
	auth, integ, crypt uint8
	// hash is the RAKP and integrity hash (SHA-1 or SHA-256).
	hash func() hash.Hash
	// icvLen is the length of the RAKP 4 integrity check value and of
	// every packet's AuthCode: 12 bytes (HMAC-SHA1-96) or 16
	// (HMAC-SHA256-128).
	icvLen int
}

// suites are the cipher suites Config.CipherSuite may pin.
var suites = map[int]suite{
	3:  {id: 3, auth: authRAKPHMACSHA1, integ: integHMACSHA196, crypt: cryptAESCBC128, hash: sha1.New, icvLen: 12},
	17: {id: 17, auth: authRAKPHMACSHA256, integ: integHMACSHA256128, crypt: cryptAESCBC128, hash: sha256.New, icvLen: 16},
}

// Algorithm names for messages.
func authName(a uint8) string {
	return algName(a, map[uint8]string{0: "none", 1: "RAKP-HMAC-SHA1", 2: "RAKP-HMAC-MD5", 3: "RAKP-HMAC-SHA256"})
}

func integName(a uint8) string {
	return algName(a, map[uint8]string{0: "none", 1: "HMAC-SHA1-96", 2: "HMAC-MD5-128", 3: "MD5-128", 4: "HMAC-SHA256-128"})
}

func cryptName(a uint8) string {
	return algName(a, map[uint8]string{0: "none", 1: "AES-CBC-128", 2: "xRC4-128", 3: "xRC4-40"})
}

func algName(a uint8, names map[uint8]string) string {
	if n, ok := names[a]; ok {
		return n
	}
	return fmt.Sprintf("%#02x", a)
}
