package power

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
)

// credKeySecret keys CredentialsKey: random per process, so that a key
// seen in a log or a heap dump tells nothing about the credentials (no
// dictionary can be run against it elsewhere).
var credKeySecret = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic("power: no randomness for CredentialsKey: " + err.Error())
	}
	return k
}()

// CredentialsKey returns an identity of a login's settings (for example
// the endpoint, the username, the password and the TLS settings), for
// Target.Login and Target.Config: equal for equal parts, in order, and
// different (but for a negligible chance) otherwise. It is an HMAC-SHA256
// of the parts, each length-prefixed, under a key drawn at random once per
// process: it never holds nor reveals the secret, and is meaningful only
// within the process that made it (never store it). Hosts with the same
// credentials thus share their login and session whatever Secret or file
// the credentials came from, and a real change of the credentials is a
// new login.
func CredentialsKey(parts ...string) string {
	m := hmac.New(sha256.New, credKeySecret)
	var n [binary.MaxVarintLen64]byte
	for _, p := range parts {
		m.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		m.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}
