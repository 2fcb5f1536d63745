package etcd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/plan"
)

// Every write of a plan's header (Create, a pass's write, an operator's
// command, Prune recording the end) puts, in the same transaction, a new
// random token (16 bytes from crypto/rand, hex) under PREFIX writes/UUID.
// A header's ModRevision alone does not tell two writes apart when etcd
// was restored from a copy of its data directory (revisions go back and
// are given again): the token does. The known-header cache (knownHead),
// the pages of the last view and of the last whole read are trusted only
// while the header's ModRevision AND the token are the ones read, and a
// plan's version (plan.Plan.Version) is "REVISION.TOKEN": a write compares
// both, so that it never lands on a header it did not read. A header
// written by a version without tokens leaves the token of the write
// before, or none: its ModRevision differs, or no token matches, and the
// header is read again.

func (s *Store) tokenPrefix() string         { return s.prefix + "writes/" }
func (s *Store) tokenKey(uuid string) string { return s.tokenPrefix() + uuid }

// newToken returns a token no other write has.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// A token as this package holds it (header.tok, the TOKEN of a version)
// is "" when the token key does not exist, and "." followed by the key's
// value when it does: whether the key exists is kept apart from its value,
// so that a key whose value is "" (or holds "."), left by another tool or
// by hand, is compared as it is and never wedges a plan's writes.

// heldToken is the token of a token key that exists with value v.
func heldToken(v string) string { return "." + v }

// putToken is the operation a header write adds: a new token, which it
// returns (as held).
func (s *Store) putToken(uuid string) (clientv3.Op, string) {
	tok := newToken()
	return clientv3.OpPut(s.tokenKey(uuid), tok), heldToken(tok)
}

// sameToken compares the plan's token with tok ("": the plan has none).
func (s *Store) sameToken(uuid, tok string) clientv3.Cmp {
	if tok == "" {
		return clientv3.Compare(clientv3.CreateRevision(s.tokenKey(uuid)), "=", 0)
	}
	return clientv3.Compare(clientv3.Value(s.tokenKey(uuid)), "=", tok[1:])
}

// sameHeader compares the header's ModRevision with rev and its token
// with tok: the header is the one written with that token.
func (s *Store) sameHeader(uuid string, rev int64, tok string) []clientv3.Cmp {
	return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.headerKey(uuid)), "=", rev), s.sameToken(uuid, tok)}
}

// tokenOf is the token in a read of the token key ("" if none).
func tokenOf(r *clientv3.GetResponse) string {
	if r == nil || len(r.Kvs) == 0 {
		return ""
	}
	return heldToken(string(r.Kvs[0].Value))
}

// listHeaders reads every header and every token at one revision: the
// headers' keys and values, the tokens by UUID, and the revision.
func (s *Store) listHeaders(ctx context.Context) ([]*mvccpb.KeyValue, map[string]string, int64, error) {
	resp, err := s.cli.Txn(ctx).Then(clientv3.OpGet(s.headersPrefix(), clientv3.WithPrefix()), clientv3.OpGet(s.tokenPrefix(), clientv3.WithPrefix())).Commit()
	if err != nil {
		return nil, nil, 0, fmt.Errorf("etcd: list: %w", err)
	}
	toks := resp.Responses[1].GetResponseRange().Kvs
	tok := make(map[string]string, len(toks))
	for _, kv := range toks {
		tok[strings.TrimPrefix(string(kv.Key), s.tokenPrefix())] = heldToken(string(kv.Value))
	}
	return resp.Responses[0].GetResponseRange().Kvs, tok, resp.Header.Revision, nil
}

// formatVersion is a plan's version: its header's ModRevision and token
// (as held: "." and the token key's value, or nothing when there is no
// token key).
func formatVersion(rev int64, tok string) string {
	return strconv.FormatInt(rev, 10) + tok
}

// parseVersion parses a version formatVersion made: the revision up to
// the first ".", the token (as held) from there on, whatever it holds.
func parseVersion(uuid, v string) (int64, string, error) {
	r, tok := v, ""
	if i := strings.IndexByte(v, '.'); i >= 0 {
		r, tok = v[:i], v[i:]
	}
	rev, err := strconv.ParseInt(r, 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("plan %s: version %q: %w", uuid, v, plan.ErrConflict)
	}
	return rev, tok, nil
}
