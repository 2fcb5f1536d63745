package ipmi

import (
	"context"
	"fmt"
)

// Requests outside a session, in IPMI v1.5 framing (what ipmitool,
// FreeIPMI and OpenIPMI's ipmi_sim use for them), each on a socket of its
// own: a late answer to one can never be the first datagram after an Open
// Session Request. Nothing they answer is trusted with more than an error
// message: they are not authenticated.

// v15Call sends one IPMI request outside a session and returns the
// answer's completion code and data.
func v15Call(ctx context.Context, l *link, netFn, cmd, rqSeq uint8, data []byte) (uint8, []byte, error) {
	p := v15Sessionless(ipmiRequest(netFn, cmd, rqSeq, data))
	var code uint8
	var out []byte
	_, err := l.roundTrip(ctx, fmt.Sprintf("command %#02x/%#02x outside a session", netFn, cmd), func() ([]byte, error) { return p, nil },
		func(b []byte) (bool, error) {
			m, err := v15Message(b)
			if err == nil {
				code, out, err = parseResponse(m, netFn, cmd, rqSeq)
			}
			if err != nil {
				l.drop(err)
				return false, nil
			}
			out = append([]byte(nil), out...)
			return true, nil
		})
	return code, out, err
}

// probe sends Get Channel Authentication Capabilities (IPMI v2.0 section
// 22.13), as every console does before an RMCP+ session: some BMCs expect
// it. Any answer will do; none is an error (the BMC is unreachable).
func probe(ctx context.Context, l *link, priv uint8) error {
	_, _, err := v15Call(ctx, l, netFnApp, cmdAuthCaps, 0, []byte{0x80 | channelSelf, priv})
	return err
}

// Bounds on what is asked and kept of Get Channel Cipher Suites, whose
// answers are not authenticated: a few requests (16 bytes of records
// each, about three suites), a few distinct suite IDs.
const (
	maxSuiteRequests = 8
	maxOffered       = 16
)

// listSuites asks the BMC for the cipher suites it offers for IPMI
// payloads (Get Channel Cipher Suites, section 22.15), and returns their
// IDs, or nil if it does not answer: at most maxSuiteRequests requests
// and maxOffered distinct IDs.
func listSuites(ctx context.Context, l *link) []int {
	var records []byte
	for index := uint8(0); index < maxSuiteRequests; index++ {
		code, data, err := v15Call(ctx, l, netFnApp, cmdCipherList, index+1, []byte{channelSelf, 0x00, 0x80 | index})
		if err != nil || code != 0 || len(data) < 1 {
			break
		}
		records = append(records, data[1:]...)
		if len(data)-1 < 16 {
			break
		}
	}
	return parseSuiteRecords(records)
}

// parseSuiteRecords returns the distinct cipher suite IDs (at most
// maxOffered, in the order listed) of Get Channel Cipher Suites record
// data (table 22-18): C0h and the ID for a standard suite, C1h, the ID
// and a 3-byte IANA number for an OEM one, each followed by its algorithm
// bytes.
func parseSuiteRecords(b []byte) []int {
	var ids []int
	seen := map[int]bool{}
	add := func(id int) {
		if !seen[id] && len(ids) < maxOffered {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for i := 0; i < len(b); {
		switch {
		case b[i] == 0xc0 && i+1 < len(b):
			add(int(b[i+1]))
			i += 2
		case b[i] == 0xc1 && i+1 < len(b):
			add(int(b[i+1]))
			i += 5
		default:
			i++
		}
	}
	return ids
}

// completionNames names the completion codes (IPMI v2.0 table 5-2).
var completionNames = map[uint8]string{
	0xc0: "node busy", 0xc1: "invalid command", 0xc2: "command invalid for the LUN",
	0xc3: "timeout while processing the command", 0xc4: "out of space",
	0xc5: "reservation canceled or invalid", 0xc6: "request data truncated",
	0xc7: "request data length invalid", 0xc8: "request data field length limit exceeded",
	0xc9: "parameter out of range", 0xca: "cannot return the number of requested data bytes",
	0xcb: "requested sensor, data or record not present", 0xcc: "invalid data field in request",
	0xcd: "command illegal for the sensor or record type", 0xce: "command response could not be provided",
	0xcf: "cannot execute a duplicated request", 0xd0: "SDR repository in update mode",
	0xd1: "device in firmware update mode", 0xd2: "BMC initialization in progress",
	0xd3: "destination unavailable", 0xd4: "insufficient privilege level",
	0xd5: "not supported in the present state", 0xd6: "sub-function disabled or unavailable",
	0xff: "unspecified error",
}

func completionName(c uint8) string {
	if n, ok := completionNames[c]; ok {
		return n
	}
	return "command-specific or OEM code"
}
