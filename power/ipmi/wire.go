package ipmi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
)

// The wire format of IPMI v2.0 (RMCP+, section 13) that this package
// speaks: an RMCP header, then an IPMI v1.5 session header (outside a
// session only, for Get Channel Authentication Capabilities and Get
// Channel Cipher Suites) or an RMCP+ session header, a payload, and for
// an authenticated packet the session trailer.

// rmcpHeader: RMCP version 1.0 (06h), reserved, sequence FFh (no RMCP
// acknowledge), class IPMI (07h).
var rmcpHeader = []byte{0x06, 0x00, 0xff, 0x07}

// Session header fields and payload types (IPMI v2.0 table 13-16).
const (
	authTypeNone      = 0x00 // IPMI v1.5 framing, no authentication
	authTypeRMCPPlus  = 0x06 // RMCP+ framing
	ptIPMI            = 0x00
	ptOpenRequest     = 0x10
	ptOpenResponse    = 0x11
	ptRAKP1           = 0x12
	ptRAKP2           = 0x13
	ptRAKP3           = 0x14
	ptRAKP4           = 0x15
	flagEncrypted     = 0x80
	flagAuthenticated = 0x40
	nextHeaderIPMI    = 0x07
	// rmcpPlusHeaderLen: RMCP (4), authentication type, payload type,
	// session ID (4), session sequence number (4), payload length (2).
	rmcpPlusHeaderLen = 16
	// v15HeaderLen: RMCP (4), authentication type, session sequence
	// number (4), session ID (4), message length (1).
	v15HeaderLen = 14
	// seqWindow: how far ahead of the last accepted one a BMC's session
	// sequence number may be (answers to retransmits, lost datagrams).
	seqWindow = 32
)

// IPMI addresses and network functions (IPMI v2.0 sections 5 and 13.8).
const (
	addrBMC       = 0x20 // responder: the BMC
	addrConsole   = 0x81 // requester: a remote console software ID
	netFnChassis  = 0x00
	netFnApp      = 0x06
	cmdChassisSts = 0x01
	cmdChassisCtl = 0x02
	cmdAuthCaps   = 0x38
	cmdSetPriv    = 0x3b
	cmdCloseSess  = 0x3c
	cmdCipherList = 0x54
	channelSelf   = 0x0e
)

// sessionless returns an RMCP+ packet outside a session: session ID and
// sequence number 0, neither authenticated nor encrypted.
func sessionless(pt uint8, payload []byte) []byte {
	p := append([]byte(nil), rmcpHeader...)
	p = append(p, authTypeRMCPPlus, pt, 0, 0, 0, 0, 0, 0, 0, 0)
	p = binary.LittleEndian.AppendUint16(p, uint16(len(payload)))
	return append(p, payload...)
}

// v15Sessionless returns an IPMI v1.5 packet outside a session carrying
// IPMI message msg.
func v15Sessionless(msg []byte) []byte {
	p := append([]byte(nil), rmcpHeader...)
	p = append(p, authTypeNone, 0, 0, 0, 0, 0, 0, 0, 0, uint8(len(msg)))
	return append(p, msg...)
}

// v15Message returns the IPMI message of an IPMI v1.5 packet outside a
// session, or an error.
func v15Message(p []byte) ([]byte, error) {
	if len(p) < v15HeaderLen || !isRMCP(p) {
		return nil, errors.New("not an RMCP datagram")
	}
	if p[4] != authTypeNone || binary.LittleEndian.Uint32(p[9:13]) != 0 {
		return nil, errors.New("not an IPMI v1.5 message outside a session")
	}
	n := int(p[13])
	if len(p) < v15HeaderLen+n {
		return nil, errors.New("truncated")
	}
	return p[v15HeaderLen : v15HeaderLen+n], nil
}

func isRMCP(p []byte) bool {
	return len(p) >= 4 && p[0] == rmcpHeader[0] && p[2] == rmcpHeader[2] && p[3] == rmcpHeader[3]
}

// sessionlessPayload returns the payload of an RMCP+ packet outside a
// session of payload type pt (flags clear, session ID and sequence 0).
func sessionlessPayload(p []byte, pt uint8) ([]byte, error) {
	if len(p) < rmcpPlusHeaderLen || !isRMCP(p) || p[4] != authTypeRMCPPlus {
		return nil, errors.New("not an RMCP+ datagram")
	}
	if p[5] != pt {
		return nil, fmt.Errorf("payload type %#02x, not %#02x", p[5], pt)
	}
	if binary.LittleEndian.Uint64(p[6:14]) != 0 {
		return nil, errors.New("a session ID or sequence number outside a session")
	}
	n := int(binary.LittleEndian.Uint16(p[14:16]))
	if len(p) < rmcpPlusHeaderLen+n {
		return nil, errors.New("truncated")
	}
	return p[rmcpPlusHeaderLen : rmcpPlusHeaderLen+n], nil
}

// checksum is the IPMI two's complement checksum of b.
func checksum(b []byte) uint8 {
	var s uint8
	for _, c := range b {
		s += c
	}
	return -s
}

// ipmiRequest returns an IPMI LAN request message (IPMI v2.0 section
// 13.8): BMC, network function, checksum, console, sequence, command,
// data, checksum.
func ipmiRequest(netFn, cmd, rqSeq uint8, data []byte) []byte {
	m := []byte{addrBMC, netFn << 2, 0, addrConsole, rqSeq << 2, cmd}
	m[2] = checksum(m[:2])
	m = append(m, data...)
	return append(m, checksum(m[3:]))
}

// parseResponse checks that m is the answer to request (netFn, cmd,
// rqSeq) and returns its completion code and data.
func parseResponse(m []byte, netFn, cmd, rqSeq uint8) (uint8, []byte, error) {
	if len(m) < 8 {
		return 0, nil, errors.New("IPMI message too short")
	}
	if checksum(m[:3]) != 0 || checksum(m[3:]) != 0 {
		return 0, nil, errors.New("IPMI message checksum")
	}
	// The addresses are not checked: some BMCs (go-ipmi's server) answer
	// from and to 20h.
	if m[1]>>2 != netFn|1 || m[4]>>2 != rqSeq&0x3f || m[5] != cmd {
		return 0, nil, errors.New("an answer to another request")
	}
	return m[6], m[7 : len(m)-1], nil
}

// Reasons an inbound datagram of a session is dropped.
var (
	errNotSession      = errors.New("not an RMCP+ IPMI message of a session")
	errUnauthenticated = errors.New("not authenticated")
	errNotEncrypted    = errors.New("not encrypted although the cipher suite encrypts")
	errOtherSession    = errors.New("another session ID")
	errBadAuthCode     = errors.New("AuthCode does not verify with this session's integrity key")
	errSequence        = errors.New("session sequence number repeated or outside the window (replay)")
	errMalformed       = errors.New("malformed session packet")
)

// keys are one session's: who it is and what it signs with.
type keys struct {
	st               suite
	consoleID, bmcID uint32
	k1               []byte // integrity key
	aesKey           []byte // the first 16 bytes of K2
	random           func([]byte) error
	outSeq, inSeq    uint32 // last sent, last accepted
	acceptedAny      bool
}

// seal returns an encrypted, authenticated RMCP+ packet carrying IPMI
// message msg, with the next outbound sequence number.
func (k *keys) seal(msg []byte) ([]byte, error) {
	k.outSeq++
	if k.outSeq == 0 {
		k.outSeq = 1
	}
	// Confidentiality (IPMI v2.0 section 13.29): a random IV, then the
	// message, pad bytes 1, 2, 3..., and the pad length, AES-CBC-128.
	padN := (aes.BlockSize - (len(msg)+1)%aes.BlockSize) % aes.BlockSize
	plain := append([]byte(nil), msg...)
	for i := 1; i <= padN; i++ {
		plain = append(plain, uint8(i))
	}
	plain = append(plain, uint8(padN))
	payload := make([]byte, aes.BlockSize+len(plain))
	if err := k.random(payload[:aes.BlockSize]); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k.aesKey)
	if err != nil {
		return nil, err
	}
	cipher.NewCBCEncrypter(block, payload[:aes.BlockSize]).CryptBlocks(payload[aes.BlockSize:], plain)

	p := append([]byte(nil), rmcpHeader...)
	p = append(p, authTypeRMCPPlus, ptIPMI|flagEncrypted|flagAuthenticated)
	p = binary.LittleEndian.AppendUint32(p, k.bmcID)
	p = binary.LittleEndian.AppendUint32(p, k.outSeq)
	p = binary.LittleEndian.AppendUint16(p, uint16(len(payload)))
	p = append(p, payload...)
	// Integrity (section 13.28.4): pad with FFh so that the bytes from
	// the authentication type to the next header are a multiple of 4,
	// the pad length, the next header, then the AuthCode over them.
	pad := (4 - (len(p)-4+2)%4) % 4
	for range pad {
		p = append(p, 0xff)
	}
	p = append(p, uint8(pad), nextHeaderIPMI)
	return append(p, k.mac(p[4:])...), nil
}

// mac is the AuthCode of b: HMAC-SHA1-96 or HMAC-SHA256-128 with K1.
func (k *keys) mac(b []byte) []byte {
	h := hmac.New(k.st.hash, k.k1)
	h.Write(b)
	return h.Sum(nil)[:k.st.icvLen]
}

// open verifies datagram p as a packet of this session and returns the
// IPMI message it carries. Anything that is not an IPMI payload
// authenticated with K1 and encrypted with K2, for this session's ID,
// with a sequence number past the last accepted one (and at most
// seqWindow past it), is an error, and nothing of it is used: the
// structure is checked, then the AuthCode over the whole packet, then the
// sequence number, and only then is the payload decrypted.
func (k *keys) open(p []byte) ([]byte, error) {
	if len(p) < rmcpPlusHeaderLen || !isRMCP(p) || p[4] != authTypeRMCPPlus || p[5]&0x3f != ptIPMI {
		return nil, errNotSession
	}
	if p[5]&flagAuthenticated == 0 {
		return nil, errUnauthenticated
	}
	if p[5]&flagEncrypted == 0 {
		return nil, errNotEncrypted
	}
	if binary.LittleEndian.Uint32(p[6:10]) != k.consoleID {
		return nil, errOtherSession
	}
	n := int(binary.LittleEndian.Uint16(p[14:16]))
	// The trailer: integrity pad, pad length, next header, AuthCode.
	end := len(p) - k.st.icvLen
	if end < rmcpPlusHeaderLen+n+2 {
		return nil, errMalformed
	}
	padN := int(p[end-2])
	if rmcpPlusHeaderLen+n+padN+2 != end || p[end-1] != nextHeaderIPMI {
		return nil, errMalformed
	}
	if !hmac.Equal(k.mac(p[4:end]), p[end:]) {
		return nil, errBadAuthCode
	}
	seq := binary.LittleEndian.Uint32(p[10:14])
	if seq == 0 || (k.acceptedAny && (seq-k.inSeq == 0 || seq-k.inSeq > seqWindow)) {
		return nil, errSequence
	}
	payload := p[rmcpPlusHeaderLen : rmcpPlusHeaderLen+n]
	if len(payload) < 2*aes.BlockSize || len(payload)%aes.BlockSize != 0 {
		return nil, errMalformed
	}
	block, err := aes.NewCipher(k.aesKey)
	if err != nil {
		return nil, err
	}
	plain := make([]byte, len(payload)-aes.BlockSize)
	cipher.NewCBCDecrypter(block, payload[:aes.BlockSize]).CryptBlocks(plain, payload[aes.BlockSize:])
	cpad := int(plain[len(plain)-1])
	if cpad >= aes.BlockSize || cpad+1 > len(plain) {
		return nil, errMalformed
	}
	for i := 0; i < cpad; i++ {
		if plain[len(plain)-1-cpad+i] != uint8(i+1) {
			return nil, errMalformed
		}
	}
	k.inSeq, k.acceptedAny = seq, true
	return plain[:len(plain)-1-cpad], nil
}
