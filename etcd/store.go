package etcd

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/rebootkit/rebootkit/plan"
)

// ErrNotLeader: a write was refused because the leadership it was fenced
// with (Store.Guarded) is gone: the lease expired, the executor was
// deposed. The executor must stop acting and campaign again.
var ErrNotLeader = errors.New("etcd: not the leader any more")

// PageSize is how many reboot records one etcd key holds.
const PageSize = 32

// Limits of one transaction, under etcd's defaults (128 operations, 1.5
// MiB per request).
const (
	maxTxnOps   = 100
	maxTxnBytes = 1 << 20
)

// MaxStartsPerPass is how many pending reboots a view loads at most
// (GetView), so how many reboots one pass starts at most: the pages they
// fill fit one transaction with the header. A plan whose concurrency is
// higher starts the rest in the next passes.
const MaxStartsPerPass = 48 * PageSize

// MaxInFlight is how many reboots of one plan may be in flight at once,
// whatever the concurrency: the header lists their positions, and must
// fit one etcd request. A view says so (plan.View.MaxInFlight): a pass
// starts no reboot while that many are in flight, and its reboots in
// flight go on (they end, unfreeze, are cancelled) so the plan moves;
// PutView refuses a view over it.
const MaxInFlight = 100_000

// readRetries bounds how often a read starts again because the revision
// it read at was compacted under it, and how often Create lists again
// because another plan was created meanwhile.
const readRetries = 8

// Store is a plan.ViewStore on etcd. Under its prefix a plan is a header
// key (the plan without its reboots, its index, the number of reboots and
// the nonce of its pages) and pages of PageSize reboot records:
//
//	PREFIX headers/UUID
//	PREFIX pages/UUID/NONCE/00000000 ...
//	PREFIX writes/UUID       (the token of the header's last write)
//	PREFIX unfinished/UUID   (while the plan may still reboot servers)
//	PREFIX summaries/UUID    (once Prune removed it)
//	PREFIX created           (rewritten by every write making a plan unfinished)
//	PREFIX swept             (rewritten by every SweepOrphans)
//
// Every read of a plan reads its header and then its pages at the
// revision the header was read at (one snapshot, retried from the start
// if etcd compacted that revision meanwhile), so a plan stays readable
// whatever etcd's compaction retention; a header the store knows at its
// current version is not fetched again, its revision and token are
// compared (knownHead). The plan's Version is the header's ModRevision and
// the random token its write put under PREFIX writes/UUID (token.go), used
// only as the compare-and-swap version: every write is one transaction
// that compares both and rewrites the header and the token, so a page
// never changes without the header changing too, and a write never lands
// on a header it did not read, even after etcd was restored from a copy
// of its data directory and gives revisions again. A write that fits
// one transaction (etcd's limits: 128 operations, 1.5 MiB) writes the
// changed pages and the header together; a larger one first writes the
// changed pages under new keys (PREFIX pages/UUID/NONCE/00000000/WRITE),
// each of those transactions compare-and-swap on the header too, and then
// the header that names them: readers never see half of it. Keys no header
// names any more (pages a later write replaced, the pages of a large write
// that lost its compare-and-swap) are deleted after the write; a writer
// that dies in between leaves them behind, never read. Pages of a
// new plan are written before the header that names them, under a nonce,
// so that a crash in the middle of Create leaves nothing visible and two
// creators of one UUID cannot mix their pages.
//
// Create checks the other unfinished plans (ErrServerInPlan) on a list
// read at one revision, and writes the header in a transaction that also
// compares that no plan was created or set unfinished again since (no
// header created since that revision, and the random value under PREFIX
// created, which every such write rewrites, as read with the list): two
// overlapping plans created at the same moment cannot both succeed, even
// after etcd was restored from a backup. A write that sets a plan that
// ended unfinished again, or clears DryRun on an unfinished plan, makes
// the same check (resumeCheck).
//
// Guarded returns a Store whose every write also compares what it is given
// (the election key an executor holds): once that leadership is gone, its
// writes fail with ErrNotLeader, whether it knows yet or not.
type Store struct {
	cli    *clientv3.Client
	prefix string
	guard  []clientv3.Cmp
	cache  *memberCache
}

type memberCache struct {
	mu sync.Mutex
	m  map[string]members // by UUID
	// loaded is, by UUID, what the last whole read of a plan saw, so that
	// a Put of that version compares with it instead of reading every page
	// again.
	loaded map[string]loadedPlan
	// viewed is, by UUID, the pages the last GetView read, so that a
	// PutView of that version patches them instead of reading them again.
	viewed map[string]viewedPages
	// known is, by UUID, the header this store last read, or its pass
	// wrote (knownHead).
	known map[string]knownHead
	// state is, by UUID, the header the plan's state was last read from
	// (GetState), for CommandPending.
	state map[string]stateRead
	// txns and bytes count the write transactions committed and the
	// bytes of the values they put (Written).
	txns, bytes int64
}

type members struct {
	nonce string
	m     map[string]int
}

// loadedPlan is a whole plan as read at version rev: its header and the
// SHA-256 of each page's stored value.
type loadedPlan struct {
	rev    int64
	h      header
	hashes [][sha256.Size]byte
}

// viewedPages are the pages of the plan's last view, decoded and as
// stored (never modified), as they are at version rev: read by GetView at
// that version, or written by PutView, whose write made rev. hraw is the
// header's stored value at rev. While the header is still at rev with
// that value, nothing of the plan changed (every write rewrites the
// header), so GetView reads none of these pages again.
type viewedPages struct {
	rev   int64
	h     header
	hraw  []byte
	pages map[int][]plan.Reboot
	raw   map[int][]byte
}

// current reports whether the pages of vp are the plan's pages at version
// rev, whose header is h (written with token h.tok), stored as hraw.
func (vp viewedPages) current(rev int64, h header, hraw []byte) bool {
	return vp.rev == rev && vp.h.tok == h.tok && vp.h.Nonce == h.Nonce && vp.h.Count == h.Count && bytes.Equal(vp.hraw, hraw)
}

// Written returns how many write transactions this store (and the stores
// Guarded made from it) committed, and the bytes of the values they put.
func (s *Store) Written() (txns, bytes int64) {
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	return s.cache.txns, s.cache.bytes
}

func (s *Store) count(size int) {
	s.cache.mu.Lock()
	s.cache.txns++
	s.cache.bytes += int64(size)
	s.cache.mu.Unlock()
}

var _ plan.ViewStore = (*Store)(nil)

// NewStore returns the store under prefix (e.g. "/rebootkit/").
func NewStore(cli *clientv3.Client, prefix string) *Store {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &Store{cli: cli, prefix: prefix, cache: &memberCache{m: map[string]members{}, loaded: map[string]loadedPlan{}, viewed: map[string]viewedPages{}, known: map[string]knownHead{}, state: map[string]stateRead{}}}
}

// Guarded returns a Store that adds cmps to every write.
func (s *Store) Guarded(cmps ...clientv3.Cmp) *Store {
	g := *s
	g.guard = append(slices.Clone(s.guard), cmps...)
	return &g
}

// header is a plan's header record.
type header struct {
	Plan  plan.Plan  `json:"plan"`
	Count int        `json:"count"`
	Nonce string     `json:"nonce"`
	Index plan.Index `json:"index"`
	// Over names, for the pages last written by a write too large for one
	// transaction, the key suffix they were written under.
	Over map[int]string `json:"over,omitempty"`
	// Request is the SHA-256 (hex) of the plan as Create was given it: a
	// Create of the same plan again (after its answer was lost) succeeds.
	Request string `json:"request,omitempty"`
	// Ended is when Prune first saw the plan ended.
	Ended *time.Time `json:"ended,omitempty"`
	// tok is the token of the write that stored the header (PREFIX
	// writes/UUID, token.go), as read with it: not part of the value.
	tok string
}

func (s *Store) headersPrefix() string        { return s.prefix + "headers/" }
func (s *Store) headerKey(uuid string) string { return s.headersPrefix() + uuid }
func (s *Store) pagesPrefix(uuid, nonce string) string {
	return s.prefix + "pages/" + uuid + "/" + nonce + "/"
}
func (s *Store) pageKey(uuid, nonce string, n int) string {
	return fmt.Sprintf("%s%08d", s.pagesPrefix(uuid, nonce), n)
}

// pageKeyOf is where page n of the plan with header h is stored.
func (s *Store) pageKeyOf(uuid string, h header, n int) string {
	if id, ok := h.Over[n]; ok {
		return s.pageKey(uuid, h.Nonce, n) + "/" + id
	}
	return s.pageKey(uuid, h.Nonce, n)
}

// decodeHeader decodes and checks the header stored under uuid.
func decodeHeader(uuid string, value []byte) (header, error) {
	var h header
	if err := json.Unmarshal(value, &h); err != nil {
		return h, fmt.Errorf("%w: plan %s header: %v", plan.ErrCorrupt, uuid, err)
	}
	if h.Plan.UUID != uuid {
		return h, fmt.Errorf("%w: the header under %s names plan %q", plan.ErrCorrupt, uuid, h.Plan.UUID)
	}
	if h.Count < 0 || h.Count > plan.MaxServers || h.Index.Total != h.Count || h.Nonce == "" {
		return h, fmt.Errorf("%w: plan %s: header of %d reboots, index of %d", plan.ErrCorrupt, uuid, h.Count, h.Index.Total)
	}
	for n, id := range h.Over {
		if n < 0 || n >= pageCount(h.Count) || id == "" || strings.Contains(id, "/") {
			return h, fmt.Errorf("%w: plan %s: header names page %d under %q", plan.ErrCorrupt, uuid, n, id)
		}
	}
	if err := h.Plan.Validate(); err != nil {
		return h, fmt.Errorf("%w: plan %s header: %v", plan.ErrCorrupt, uuid, err)
	}
	return h, nil
}

// readHeader returns the header, its ModRevision (the plan's version) and
// the revision it was read at (read its pages at that one).
func (s *Store) readHeader(ctx context.Context, uuid string) (h header, version, at int64, err error) {
	h, _, version, at, err = s.readHeaderValue(ctx, uuid)
	return h, version, at, err
}

// readHeaderValue is readHeader that also returns the header's stored
// value.
func (s *Store) readHeaderValue(ctx context.Context, uuid string) (h header, value []byte, version, at int64, err error) {
	k, at, _, _, err := s.headerAt(ctx, uuid)
	if err != nil {
		return h, nil, 0, 0, err
	}
	return k.h.clone(), k.raw, k.rev, at, nil
}

// compacted reports whether err says the revision read at was compacted:
// the read starts again at a current revision.
func compacted(err error) bool { return errors.Is(err, rpctypes.ErrCompacted) }

// retryCompacted runs read again while it fails because etcd compacted the
// revision it read at (at most readRetries times).
func retryCompacted(read func() error) error {
	for try := 0; ; try++ {
		err := read()
		if err == nil || !compacted(err) || try >= readRetries {
			return err
		}
	}
}

// readPages reads the given pages of a plan at revision rev, and returns
// them and the stored values.
func (s *Store) readPages(ctx context.Context, uuid string, h header, pages []int, rev int64) (map[int][]plan.Reboot, map[int][]byte, error) {
	return s.readPagesReusing(ctx, uuid, h, pages, rev, viewedPages{})
}

// readPagesReusing is readPages, reusing the decoded pages of prev whose
// stored value did not change (the pages of the plan's last view: most
// pages of a pass are as the last pass left them).
func (s *Store) readPagesReusing(ctx context.Context, uuid string, h header, pages []int, rev int64, prev viewedPages) (map[int][]plan.Reboot, map[int][]byte, error) {
	out := make(map[int][]plan.Reboot, len(pages))
	raw := make(map[int][]byte, len(pages))
	for start := 0; start < len(pages); start += maxTxnOps {
		batch := pages[start:min(start+maxTxnOps, len(pages))]
		ops := make([]clientv3.Op, len(batch))
		for i, n := range batch {
			ops[i] = clientv3.OpGet(s.pageKeyOf(uuid, h, n), clientv3.WithRev(rev))
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, nil, fmt.Errorf("etcd: read pages of %s: %w", uuid, err)
		}
		for i, r := range resp.Responses {
			n := batch[i]
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				return nil, nil, fmt.Errorf("%w: plan %s: page %d missing", plan.ErrCorrupt, uuid, n)
			}
			if was, ok := prev.raw[n]; ok && prev.h.Count == h.Count && bytes.Equal(was, kvs[0].Value) {
				out[n], raw[n] = prev.pages[n], kvs[0].Value
				continue
			}
			rs, err := decodePage(uuid, h, n, kvs[0].Value)
			if err != nil {
				return nil, nil, err
			}
			out[n] = rs
			raw[n] = kvs[0].Value
		}
	}
	return out, raw, nil
}

// decodePage decodes and checks page n of the plan with header h, stored
// as value.
func decodePage(uuid string, h header, n int, value []byte) ([]plan.Reboot, error) {
	var rs []plan.Reboot
	if err := json.Unmarshal(value, &rs); err != nil {
		return nil, fmt.Errorf("%w: plan %s: page %d: %v", plan.ErrCorrupt, uuid, n, err)
	}
	if want := min(PageSize, h.Count-n*PageSize); len(rs) != want {
		return nil, fmt.Errorf("%w: plan %s: page %d holds %d reboots, want %d", plan.ErrCorrupt, uuid, n, len(rs), want)
	}
	return rs, nil
}

func pageCount(count int) int { return (count + PageSize - 1) / PageSize }

func allPages(count int) []int {
	all := make([]int, pageCount(count))
	for i := range all {
		all[i] = i
	}
	return all
}

// Get implements plan.Store: the whole plan, read at one revision.
func (s *Store) Get(ctx context.Context, uuid string) (plan.Plan, error) {
	p, _, err := s.load(ctx, uuid)
	return p, err
}

// load is Get, that also returns what Put compares with (the header and
// the hashes of the pages read), whether the plan ended or not.
func (s *Store) load(ctx context.Context, uuid string) (plan.Plan, loadedPlan, error) {
	var (
		p  plan.Plan
		lp loadedPlan
	)
	err := retryCompacted(func() error {
		h, version, at, err := s.readHeader(ctx, uuid)
		if err != nil {
			return err
		}
		// Only the plans that may act again are cached: an ended one is
		// forgotten (it may have ended elsewhere).
		p, lp, err = s.assemble(ctx, uuid, h, version, at, !ended(h))
		if ended(h) {
			s.forget(uuid)
		}
		return err
	})
	return p, lp, err
}

// assemble reads every page of the plan with header h at revision at, and
// returns the plan and what it read (for Put); if keep, the store
// remembers that too (for Put and GetView).
func (s *Store) assemble(ctx context.Context, uuid string, h header, version, at int64, keep bool) (plan.Plan, loadedPlan, error) {
	all := allPages(h.Count)
	pages, raw, err := s.readPages(ctx, uuid, h, all, at)
	if err != nil {
		return plan.Plan{}, loadedPlan{}, err
	}
	// h may be a header this store keeps: the plan gets its own copy.
	p := ownPlan(h.Plan)
	p.Reboots = make([]plan.Reboot, 0, h.Count)
	hashes := make([][sha256.Size]byte, len(all))
	for n := range all {
		p.Reboots = append(p.Reboots, pages[n]...)
		hashes[n] = sha256.Sum256(raw[n])
	}
	if err := p.Validate(); err != nil {
		return plan.Plan{}, loadedPlan{}, fmt.Errorf("%w: plan %s: %v", plan.ErrCorrupt, uuid, err)
	}
	p.Version = formatVersion(version, h.tok)
	lp := loadedPlan{rev: version, h: h, hashes: hashes}
	if !keep {
		return p, lp, nil
	}
	s.cache.mu.Lock()
	s.cache.loaded[uuid] = lp
	if c, ok := s.cache.m[uuid]; !ok || c.nonce != h.Nonce {
		s.cache.m[uuid] = members{nonce: h.Nonce, m: plan.MembersOf(p)}
	}
	s.cache.mu.Unlock()
	return p, lp, nil
}

// encodePages returns the JSON of every page of p.
func encodePages(p plan.Plan) ([][]byte, error) {
	out := make([][]byte, pageCount(len(p.Reboots)))
	for n := range out {
		raw, err := encodePage(p.Reboots[n*PageSize : min((n+1)*PageSize, len(p.Reboots))])
		if err != nil {
			return nil, fmt.Errorf("etcd: encode %s: %w", p.UUID, err)
		}
		out[n] = raw
	}
	return out, nil
}

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// cleanupTimeout bounds the deletions a failed or finished write does
// after the fact (of keys no header names).
const cleanupTimeout = 10 * time.Second

// deleteKeys deletes keys no header names, in transactions that compare
// cmps (the header as the caller last read or wrote it, so that a key a
// write named again meanwhile is never deleted) and the guard (a deposed
// leader deletes nothing). It returns how many keys it deleted and
// whether every compare held. Callers after a write use it as best
// effort: a key left behind is never read, and Sweep deletes it later.
func (s *Store) deleteKeys(ctx context.Context, cmps []clientv3.Cmp, keys []string) (int, bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	cmps = append(slices.Clip(cmps), s.guard...)
	deleted := 0
	for start := 0; start < len(keys); start += maxTxnOps {
		var ops []clientv3.Op
		for _, k := range keys[start:min(start+maxTxnOps, len(keys))] {
			ops = append(ops, clientv3.OpDelete(k))
		}
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return deleted, false, err
		}
		if !resp.Succeeded {
			return deleted, false, nil
		}
		for _, r := range resp.Responses {
			deleted += int(r.GetResponseDeleteRange().Deleted)
		}
	}
	return deleted, true, nil
}

// Create implements plan.Store: pages first (in as many transactions as
// the limits need, each refused if the plan exists), then the header, in
// a transaction that is refused if the plan exists or if any plan was
// created since the other plans were checked (then they are listed and
// checked again). Create is idempotent for the same request: when the
// plan exists and its header records the same request (the SHA-256 of the
// plan as given), it succeeds, so that a caller whose Create was applied
// but whose answer was lost may try again; another plan of that UUID is
// refused (plan.ErrExists).
func (s *Store) Create(ctx context.Context, p plan.Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	hk := s.headerKey(p.UUID)
	// Fail early, before writing pages, if another plan holds a server.
	checked, err := s.checkOthers(ctx, p)
	if err != nil {
		return err
	}
	pages, err := encodePages(p)
	if err != nil {
		return err
	}
	request, err := requestHash(p)
	if err != nil {
		return err
	}
	h := header{Plan: p, Count: len(p.Reboots), Nonce: newNonce(), Index: plan.IndexOf(p), Request: request}
	h.Plan.Reboots, h.Plan.Version = nil, ""
	raw, err := json.Marshal(h)
	if err != nil {
		return err
	}
	// Neither the plan nor its summary (it was created, ended and pruned).
	absent := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(hk), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.summaryKey(p.UUID)), "=", 0)}, s.guard...)
	var ops []clientv3.Op
	size := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		resp, err := s.cli.Txn(ctx).If(absent...).Then(ops...).Commit()
		written := size
		ops, size = nil, 0
		if err != nil {
			return fmt.Errorf("etcd: create %s: %w", p.UUID, err)
		}
		if !resp.Succeeded {
			if err := s.refused(ctx, p.UUID, s.exists(ctx, p.UUID, request)); err != nil {
				return err
			}
			return errCreated
		}
		s.count(written)
		return nil
	}
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_, _ = s.cli.Delete(ctx, s.pagesPrefix(p.UUID, h.Nonce), clientv3.WithPrefix())
	}
	for n, pg := range pages {
		if len(ops) >= maxTxnOps || size+len(pg) > maxTxnBytes {
			if err := flush(); err != nil {
				cleanup()
				if errors.Is(err, errCreated) {
					return nil
				}
				return err
			}
		}
		ops = append(ops, clientv3.OpPut(s.pageKey(p.UUID, h.Nonce, n), string(pg)))
		size += len(pg)
	}
	if err := flush(); err != nil {
		cleanup()
		if errors.Is(err, errCreated) {
			return nil
		}
		return err
	}
	for try := 0; ; try++ {
		// No plan made unfinished since the list the check read (no
		// header created since its revision, the created key as it read
		// it): the check still holds when the header is written.
		cmps := append(slices.Clone(absent), s.unchanged(checked)...)
		if len(pages) > 0 {
			// Its pages are still there (SweepOrphans deletes the pages of a
			// Create that took too long).
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.pageKey(p.UUID, h.Nonce, 0)), ">", 0))
		}
		putTok, _ := s.putToken(p.UUID)
		then := []clientv3.Op{clientv3.OpPut(hk, string(raw)), putTok, s.putCreated()}
		if !ended(h) {
			then = append(then, clientv3.OpPut(s.indexKey(p.UUID), ""))
		}
		resp, err := s.cli.Txn(ctx).If(cmps...).Then(then...).
			Else(clientv3.OpGet(hk, clientv3.WithKeysOnly()), clientv3.OpGet(s.summaryKey(p.UUID), clientv3.WithKeysOnly())).Commit()
		if err != nil {
			// It may have been written: its pages stay.
			return fmt.Errorf("etcd: create %s: %w", p.UUID, err)
		}
		if resp.Succeeded {
			s.count(len(raw))
			return nil
		}
		if len(resp.Responses) > 1 && (len(resp.Responses[0].GetResponseRange().Kvs) > 0 || len(resp.Responses[1].GetResponseRange().Kvs) > 0) {
			cleanup()
			return s.refused(ctx, p.UUID, s.exists(ctx, p.UUID, request))
		}
		if err := s.refused(ctx, p.UUID, nil); err != nil || try >= readRetries {
			cleanup()
			if err == nil {
				err = fmt.Errorf("etcd: create %s: other plans were created all the while: %w", p.UUID, plan.ErrConflict)
			}
			return err
		}
		// Another plan was created meanwhile: check again.
		if checked, err = s.checkOthers(ctx, p); err != nil {
			cleanup()
			return err
		}
	}
}

// checkOthers lists the unfinished plans at one revision and checks that
// none holds a server of p; it returns the revision listed at and the
// created key read at it. Only a record that really is corrupt is passed
// over: any other error (etcd unreachable, a timeout) fails the check.
func (s *Store) checkOthers(ctx context.Context, p plan.Plan) (othersChecked, error) {
	// A corrupt record cannot be read: there is nothing to check it against.
	var others []plan.Plan
	var c othersChecked
	err := retryCompacted(func() error {
		heads, rev, _, err := s.unfinishedHeads(ctx)
		if err != nil {
			return err
		}
		others, c = nil, othersChecked{at: rev}
		resp, err := s.cli.Get(ctx, s.createdKey(), clientv3.WithRev(rev))
		if err != nil {
			return fmt.Errorf("etcd: list: %w", err)
		}
		c.created = tokenOf(resp)
		for _, ih := range heads {
			if ih.uuid == p.UUID {
				continue
			}
			o, _, err := s.assemble(ctx, ih.uuid, ih.h, ih.rev, rev, true)
			if errors.Is(err, plan.ErrCorrupt) {
				continue
			}
			if err != nil {
				return err
			}
			others = append(others, o)
		}
		return nil
	})
	if err != nil {
		return othersChecked{}, err
	}
	if err := plan.CheckOthers(p, others); err != nil {
		return othersChecked{}, err
	}
	return c, nil
}

// refused explains a failed transaction: the guard (leadership) failed,
// or else the given error (a conflict, the plan exists).
func (s *Store) refused(ctx context.Context, uuid string, other error) error {
	if err := s.notLeader(ctx); err != nil {
		return fmt.Errorf("plan %s: %w", uuid, err)
	}
	return other
}

// notLeader returns ErrNotLeader if the guard fails (read now), else nil.
func (s *Store) notLeader(ctx context.Context) error {
	if len(s.guard) > 0 {
		resp, err := s.cli.Txn(ctx).If(s.guard...).Commit()
		if err == nil && !resp.Succeeded {
			return ErrNotLeader
		}
	}
	return nil
}

// write writes header h (its plan and index) and the changed pages if the
// header is still at version rev (and the guard holds): in one
// transaction if they fit, else the pages first under new keys, in as many
// transactions as they need, then the header that names them. old is the
// header as read (where its pages are).
func (s *Store) write(ctx context.Context, uuid string, rev int64, old, h header, pages map[int][]byte) error {
	_, err := s.writeRev(ctx, uuid, rev, old, h, pages)
	return err
}

// wrote is what a write stored: the header h, its value raw, at the
// version rev (the header's new ModRevision); a knownHead.
type wrote struct {
	rev int64
	h   header
	raw []byte
}

// writeRev is write, returning what it stored.
func (s *Store) writeRev(ctx context.Context, uuid string, rev int64, old, h header, pages map[int][]byte) (wrote, error) {
	h.Plan.Reboots, h.Plan.Version = nil, ""
	h.Nonce, h.Count, h.Request, h.Ended = old.Nonce, old.Count, old.Request, old.Ended
	if !ended(h) {
		// Unfinished (again): its end is when Prune sees it end next.
		h.Ended = nil
	}
	keys := slices.Sorted(maps.Keys(pages))
	// A plan that ended and is set unfinished again, or whose DryRun is
	// cleared, is checked against the other unfinished plans, as Create
	// checks a new one.
	resume, resumeOps, err := s.resumeCheck(ctx, uuid, old, h)
	if err != nil {
		return wrote{}, err
	}
	// The header is the one read: its revision and its write's token.
	cas := append(append(s.sameHeader(uuid, rev, old.tok), s.guard...), resume...)
	putTok, tok := s.putToken(uuid)
	h.tok = tok
	headerOps := func(raw []byte) []clientv3.Op {
		return append(append([]clientv3.Op{clientv3.OpPut(s.headerKey(uuid), string(raw)), putTok}, s.indexOps(uuid, old, h)...), resumeOps...)
	}
	// The overlay keys of the pages rewritten are not named any more.
	var stale []string
	h.Over = maps.Clone(old.Over)
	for _, n := range keys {
		if _, ok := old.Over[n]; ok {
			stale = append(stale, s.pageKeyOf(uuid, old, n))
			delete(h.Over, n)
		}
	}
	if len(h.Over) == 0 {
		h.Over = nil
	}
	raw, err := json.Marshal(h)
	if err != nil {
		return wrote{}, err
	}
	size := len(raw)
	for _, n := range keys {
		size += len(pages[n])
	}
	if len(raw) > maxTxnBytes {
		return wrote{}, fmt.Errorf("%w: plan %s: a header of %d bytes is over etcd's request limit", plan.ErrTooLarge, uuid, len(raw))
	}
	if 3+len(resumeOps)+len(keys) <= maxTxnOps && size <= maxTxnBytes {
		ops := headerOps(raw)
		for _, n := range keys {
			ops = append(ops, clientv3.OpPut(s.pageKey(uuid, h.Nonce, n), string(pages[n])))
		}
		for len(stale) > 0 && len(ops) < maxTxnOps {
			ops = append(ops, clientv3.OpDelete(stale[0]))
			stale = stale[1:]
		}
		resp, err := s.cli.Txn(ctx).If(cas...).Then(ops...).Commit()
		if err != nil {
			return wrote{}, fmt.Errorf("etcd: write %s: %w", uuid, err)
		}
		if !resp.Succeeded {
			return wrote{}, s.refused(ctx, uuid, fmt.Errorf("plan %s: %w", uuid, plan.ErrConflict))
		}
		s.count(size)
		_, _, _ = s.deleteKeys(ctx, s.sameHeader(uuid, resp.Header.Revision, h.tok), stale)
		s.written(uuid, h)
		return wrote{rev: resp.Header.Revision, h: h, raw: raw}, nil
	}
	// Too large for one transaction: the pages under keys of their own,
	// then the header naming them.
	id := newNonce()
	h.Over = maps.Clone(old.Over)
	if h.Over == nil {
		h.Over = map[int]string{}
	}
	for _, n := range keys {
		h.Over[n] = id
		if _, ok := old.Over[n]; !ok {
			// The page's key of the plan's own nonce is not named any more.
			stale = append(stale, s.pageKeyOf(uuid, old, n))
		}
	}
	if raw, err = json.Marshal(h); err != nil {
		return wrote{}, err
	}
	if len(raw) > maxTxnBytes {
		return wrote{}, fmt.Errorf("%w: plan %s: a header of %d bytes is over etcd's request limit", plan.ErrTooLarge, uuid, len(raw))
	}
	var staged []string
	var ops []clientv3.Op
	batch := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		resp, err := s.cli.Txn(ctx).If(cas...).Then(ops...).Commit()
		written := batch
		ops, batch = nil, 0
		if err != nil {
			return fmt.Errorf("etcd: write %s: %w", uuid, err)
		}
		if !resp.Succeeded {
			return s.refused(ctx, uuid, fmt.Errorf("plan %s: %w", uuid, plan.ErrConflict))
		}
		s.count(written)
		return nil
	}
	for _, n := range keys {
		if len(ops) >= maxTxnOps || batch+len(pages[n]) > maxTxnBytes {
			if err := flush(); err != nil {
				_, _, _ = s.deleteKeys(ctx, nil, staged)
				return wrote{}, err
			}
		}
		k := s.pageKeyOf(uuid, h, n)
		staged = append(staged, k)
		ops = append(ops, clientv3.OpPut(k, string(pages[n])))
		batch += len(pages[n])
	}
	if err := flush(); err != nil {
		_, _, _ = s.deleteKeys(ctx, nil, staged)
		return wrote{}, err
	}
	resp, err := s.cli.Txn(ctx).If(cas...).Then(headerOps(raw)...).Commit()
	if err != nil {
		// It may have been written: the staged pages stay.
		return wrote{}, fmt.Errorf("etcd: write %s: %w", uuid, err)
	}
	if !resp.Succeeded {
		_, _, _ = s.deleteKeys(ctx, nil, staged)
		return wrote{}, s.refused(ctx, uuid, fmt.Errorf("plan %s: %w", uuid, plan.ErrConflict))
	}
	s.count(len(raw))
	_, _, _ = s.deleteKeys(ctx, s.sameHeader(uuid, resp.Header.Revision, h.tok), stale)
	s.written(uuid, h)
	return wrote{rev: resp.Header.Revision, h: h, raw: raw}, nil
}

// written is called after a write of header h: a plan that ended is
// forgotten by the caches.
func (s *Store) written(uuid string, h header) {
	if ended(h) {
		s.forget(uuid)
	}
}

// Put implements plan.Store: compare-and-swap on the header's revision,
// writing the header and the pages whose content changed. After a Get of
// the same version (an executor's pass, plan.Command), it compares with
// what that Get read instead of reading every page again; else (an ended
// plan, which no read keeps) it reads the plan whole and compares with
// that read.
func (s *Store) Put(ctx context.Context, p plan.Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	rev, tok, err := parseVersion(p.UUID, p.Version)
	if err != nil {
		return err
	}
	s.cache.mu.Lock()
	lp, ok := s.cache.loaded[p.UUID]
	mem := s.cache.m[p.UUID]
	s.cache.mu.Unlock()
	if !ok || lp.rev != rev || lp.h.tok != tok || mem.nonce != lp.h.Nonce {
		// Read again, and compare with that read itself: the store keeps
		// nothing of a plan that ended (load forgets it), which may be
		// written all the same (a record of a finished plan corrected).
		cur, read, err := s.load(ctx, p.UUID)
		if err != nil {
			return fmt.Errorf("plan: refusing to overwrite: %w", err)
		}
		lp = read
		if lp.rev != rev || lp.h.tok != tok {
			return fmt.Errorf("plan %s: %w", p.UUID, plan.ErrConflict)
		}
		s.cache.mu.Lock()
		mem = s.cache.m[p.UUID]
		s.cache.mu.Unlock()
		if mem.nonce != lp.h.Nonce {
			mem = members{nonce: lp.h.Nonce, m: plan.MembersOf(cur)}
		}
	}
	if len(p.Reboots) != lp.h.Count {
		return fmt.Errorf("plan %s: %d reboots, stored %d: the servers of a plan do not change", p.UUID, len(p.Reboots), lp.h.Count)
	}
	for i, r := range p.Reboots {
		if at, ok := mem.m[r.ServerUUID]; !ok || at != i {
			return fmt.Errorf("plan %s: reboot %d is server %s, stored elsewhere or not at all: the servers of a plan do not change", p.UUID, i, r.ServerUUID)
		}
	}
	nowPages, err := encodePages(p)
	if err != nil {
		return err
	}
	changed := map[int][]byte{}
	for n, pg := range nowPages {
		if sha256.Sum256(pg) != lp.hashes[n] {
			changed[n] = pg
		}
	}
	h := lp.h
	h.Plan, h.Index = p, plan.IndexOf(p)
	return s.write(ctx, p.UUID, rev, lp.h, h, changed)
}

// List implements plan.Store: every plan, read at one revision. Records
// that are corrupt are reported in the error (wrapping plan.ErrCorrupt)
// after the readable plans; any other error (etcd unreachable, a timeout)
// fails List.
func (s *Store) List(ctx context.Context) ([]plan.Plan, error) {
	out, _, corrupt, err := s.listAt(ctx, func(header) bool { return true })
	if err != nil {
		return nil, err
	}
	if len(corrupt) > 0 {
		return out, fmt.Errorf("%w: %s", plan.ErrCorrupt, strings.Join(corrupt, "; "))
	}
	return out, nil
}

// listAt reads every header and, for those want says, the whole plan, all
// at one revision, which it returns. corrupt describes the records that
// cannot be read; err is any other failure.
func (s *Store) listAt(ctx context.Context, want func(header) bool) (out []plan.Plan, at int64, corrupt []string, err error) {
	err = retryCompacted(func() error {
		out, corrupt = nil, nil
		kvs, tok, rev, err := s.listHeaders(ctx)
		if err != nil {
			return err
		}
		at = rev
		for _, kv := range kvs {
			uuid := strings.TrimPrefix(string(kv.Key), s.headersPrefix())
			h, err := decodeHeader(uuid, kv.Value)
			if err != nil {
				corrupt = append(corrupt, err.Error())
				continue
			}
			h.tok = tok[uuid]
			if !want(h) {
				continue
			}
			// Only the plans that may act again are cached: an ended one
			// is forgotten (it may have ended elsewhere).
			p, _, err := s.assemble(ctx, uuid, h, kv.ModRevision, at, !ended(h))
			if ended(h) {
				s.forget(uuid)
			}
			if errors.Is(err, plan.ErrCorrupt) {
				corrupt = append(corrupt, err.Error())
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, 0, nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UUID < out[j].UUID })
	return out, at, corrupt, nil
}

// Unfinished returns the UUIDs of the plans that may still reboot servers,
// at one revision, reading the index of unfinished plans and their headers
// only (never a retained ended plan). A header that cannot be read is
// reported in the error (wrapping plan.ErrCorrupt), after the UUIDs of the
// readable ones: its reboots in flight are nobody's until a person looks.
func (s *Store) Unfinished(ctx context.Context) ([]string, error) {
	heads, _, bad, err := s.unfinishedHeads(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(heads))
	for _, ih := range heads {
		out = append(out, ih.uuid)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%w: %s", plan.ErrCorrupt, strings.Join(bad, "; "))
	}
	return out, nil
}

// turns is Unfinished with, for each plan, whether its pass can act
// (plan.View.Acts, from its header): what Leadership.Pass shares its time
// among.
func (s *Store) turns(ctx context.Context) ([]plan.Turn, error) {
	heads, _, bad, err := s.unfinishedHeads(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]plan.Turn, 0, len(heads))
	for _, ih := range heads {
		out = append(out, plan.Turn{UUID: ih.uuid, Acts: plan.View{Plan: ih.h.Plan, Index: ih.h.Index}.Acts()})
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%w: %s", plan.ErrCorrupt, strings.Join(bad, "; "))
	}
	return out, nil
}

// membersOf returns the plan's member map (read once per plan).
func (s *Store) membersOf(ctx context.Context, uuid string, h header, rev int64) (map[string]int, error) {
	s.cache.mu.Lock()
	c, ok := s.cache.m[uuid]
	s.cache.mu.Unlock()
	if ok && c.nonce == h.Nonce {
		return c.m, nil
	}
	all := allPages(h.Count)
	pages, _, err := s.readPages(ctx, uuid, h, all, rev)
	if err != nil {
		return nil, err
	}
	m := make(map[string]int, h.Count)
	for n := range all {
		for k, r := range pages[n] {
			m[r.ServerUUID] = n*PageSize + k
		}
	}
	if len(m) != h.Count {
		return nil, fmt.Errorf("%w: plan %s: a server is listed twice", plan.ErrCorrupt, uuid)
	}
	s.cache.mu.Lock()
	s.cache.m[uuid] = members{nonce: h.Nonce, m: m}
	s.cache.mu.Unlock()
	return m, nil
}

// pagesOf are the pages holding positions pos (ascending).
func pagesOf(pos []int) []int {
	var need []int
	for _, i := range pos {
		if n := i / PageSize; len(need) == 0 || need[len(need)-1] != n {
			need = append(need, n)
		}
	}
	return need
}

// GetView implements plan.ViewStore: the header and the pages holding the
// reboots in flight and the next pending ones (at most MaxStartsPerPass,
// and no more than MaxInFlight in flight with them, but the first pending
// one always), at one revision; the view's MaxInFlight is MaxInFlight, so
// that a pass starts nothing while that many are in flight.
// When the header is as this store last read or wrote it (its version),
// the pages of the last view are what is stored: one read-only
// transaction compares the header's revision and reads the pages the last
// view did not hold (knownHead). Else the header is read, then every page
// of the view (and those whose stored value did not change are not
// decoded again).
func (s *Store) GetView(ctx context.Context, uuid string) (plan.View, error) {
	var v plan.View
	err := retryCompacted(func() error {
		var err error
		v, err = s.getView(ctx, uuid)
		return err
	})
	if err != nil {
		return plan.View{}, err
	}
	if err := v.Check(); err != nil {
		return plan.View{}, fmt.Errorf("%w: %v", plan.ErrCorrupt, err)
	}
	v.MaxInFlight = MaxInFlight
	return v, nil
}

// viewPositions are the positions of the reboots a view of the plan with
// header h loads: the first pending one always (PutView refuses a view
// without it, plan.View.CheckLoads), even with MaxInFlight in flight (the
// view's MaxInFlight keeps the pass from starting it then).
func viewPositions(h header) []int {
	pending := max(min(plan.PendingInView(h.Plan), MaxStartsPerPass, MaxInFlight-len(h.Index.InFlight)), 1)
	return plan.ViewPositions(h.Index, pending)
}

// missingPages are the pages of need that vp does not hold.
func missingPages(need []int, vp viewedPages) []int {
	var missing []int
	for _, n := range need {
		if _, ok := vp.pages[n]; !ok {
			missing = append(missing, n)
		}
	}
	return missing
}

func (s *Store) getView(ctx context.Context, uuid string) (plan.View, error) {
	s.cache.mu.Lock()
	prev := s.cache.viewed[uuid]
	was, known := s.cache.known[uuid]
	s.cache.mu.Unlock()
	// With the header known and the last view's pages of it, the pages
	// this view needs and the last one did not hold are read with the
	// comparison of the header's revision (at most a transaction's worth;
	// the rest after).
	var (
		pos, missing []int
		ops          []clientv3.Op
	)
	prepared := known && prev.current(was.rev, was.h, was.raw)
	if prepared {
		pos = viewPositions(was.h)
		missing = missingPages(pagesOf(pos), prev)
		for _, n := range missing[:min(len(missing), maxTxnOps-1)] {
			ops = append(ops, clientv3.OpGet(s.pageKeyOf(uuid, was.h, n)))
		}
	}
	k, at, hit, answers, err := s.headerAt(ctx, uuid, ops...)
	if err != nil {
		return plan.View{}, err
	}
	hit = hit && prepared // the header is the known one, and ops were read with it
	h := k.h
	m, err := s.membersOf(ctx, uuid, h, at)
	if err != nil {
		return plan.View{}, err
	}
	if !hit {
		pos = viewPositions(h)
	}
	need := pagesOf(pos)
	var (
		pages map[int][]plan.Reboot
		raw   map[int][]byte
	)
	if prev.current(k.rev, h, k.raw) {
		if !hit {
			missing = missingPages(need, prev)
		}
		got := 0
		if hit {
			got = len(answers)
		}
		if pages, raw, err = s.readPages(ctx, uuid, h, missing[got:], at); err != nil {
			return plan.View{}, err
		}
		for i := 0; i < got; i++ {
			n := missing[i]
			kvs := answers[i].GetResponseRange().Kvs
			if len(kvs) == 0 {
				return plan.View{}, fmt.Errorf("%w: plan %s: page %d missing", plan.ErrCorrupt, uuid, n)
			}
			if pages[n], err = decodePage(uuid, h, n, kvs[0].Value); err != nil {
				return plan.View{}, err
			}
			raw[n] = kvs[0].Value
		}
		for _, n := range need {
			if _, ok := pages[n]; !ok {
				pages[n], raw[n] = prev.pages[n], prev.raw[n]
			}
		}
	} else {
		if prev.h.Nonce != h.Nonce {
			prev = viewedPages{}
		}
		if pages, raw, err = s.readPagesReusing(ctx, uuid, h, need, at, prev); err != nil {
			return plan.View{}, err
		}
	}
	if ended(h) {
		// Nothing of a plan that ended is kept (it may have ended
		// elsewhere): the member map read for this view included.
		s.forget(uuid)
	} else {
		s.cache.mu.Lock()
		s.cache.viewed[uuid] = viewedPages{rev: k.rev, h: h, hraw: k.raw, pages: pages, raw: raw}
		s.cache.mu.Unlock()
	}
	// The header is kept too: the caller gets its own copy.
	v := plan.View{Plan: ownPlan(h.Plan), Pos: pos, Index: h.Index, Members: m}
	v.Index.InFlight, v.Index.DoneHist = slices.Clone(h.Index.InFlight), maps.Clone(h.Index.DoneHist)
	v.Reboots = make([]plan.Reboot, len(pos))
	for j, i := range pos {
		v.Reboots[j] = pages[i/PageSize][i%PageSize]
	}
	// The pages are kept (and reused by the next view): the caller
	// gets its own copy of what the reboots point to.
	plan.OwnReboots(v.Reboots)
	v.Version = formatVersion(k.rev, h.tok)
	return v, nil
}

// PutView implements plan.ViewStore: the pages of the loaded reboots are
// patched and written with the header, compare-and-swap on the header's
// revision (nothing changed since the view was read: every write rewrites
// the header) and the guard. The pages are the ones this store's GetView
// of that version read, else they are read again. Only the pages holding
// a reboot that is not the same as the one read (plan.SameReboot) are
// encoded, and only those whose encoding differs from their stored value
// are written. After the write, the pages are remembered as the plan's at
// the version it made, so that the next GetView reads none of them. A view
// that does not load every reboot the stored plan has in flight, its
// first pending one and every reboot the view starts is refused
// (plan.ErrViewIncomplete); one that moves a reboot in a way no pass does
// (a started one back to pending, an ended one to another step, one whose
// job the fleet showed to released: plan.CheckStepForward) is refused
// (plan.ErrStepBack).
func (s *Store) PutView(ctx context.Context, v plan.View) error {
	if err := v.Check(); err != nil {
		return err
	}
	rev, tok, err := parseVersion(v.UUID, v.Version)
	if err != nil {
		return err
	}
	var (
		h     header
		pages map[int][]plan.Reboot
		raw   map[int][]byte
	)
	pos := v.Pos
	if pos == nil {
		pos = make([]int, len(v.Reboots))
		for i := range pos {
			pos[i] = i
		}
	}
	need := pagesOf(pos)
	// After a GetView of this version (an executor's pass), patch the pages
	// it read: they are what is stored at that version, and the write
	// compares the version.
	s.cache.mu.Lock()
	vp, ok := s.cache.viewed[v.UUID]
	s.cache.mu.Unlock()
	ok = ok && vp.rev == rev && vp.h.tok == tok
	if ok {
		for _, n := range need {
			if _, in := vp.pages[n]; !in {
				ok = false
				break
			}
		}
	}
	if ok {
		h, pages, raw = vp.h, vp.pages, vp.raw
		if v.Index.Total != h.Count {
			return fmt.Errorf("plan %s: view of %d reboots, stored %d", v.UUID, v.Index.Total, h.Count)
		}
	} else if err := retryCompacted(func() error {
		var version, at int64
		var err error
		h, version, at, err = s.readHeader(ctx, v.UUID)
		if err != nil {
			return fmt.Errorf("plan: refusing to overwrite: %w", err)
		}
		if version != rev || h.tok != tok {
			return s.refused(ctx, v.UUID, fmt.Errorf("plan %s: %w", v.UUID, plan.ErrConflict))
		}
		if v.Index.Total != h.Count {
			return fmt.Errorf("plan %s: view of %d reboots, stored %d", v.UUID, v.Index.Total, h.Count)
		}
		if pages, raw, err = s.readPages(ctx, v.UUID, h, need, at); err != nil {
			return fmt.Errorf("plan: refusing to overwrite: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}
	// The view's index replaces the stored one: it must have loaded every
	// reboot the stored index has in flight and its first pending one (a
	// hand-built view could drop a running reboot and end the plan).
	if err := v.CheckLoads(h.Index); err != nil {
		return err
	}
	if n := len(v.Index.InFlight); n > MaxInFlight && n > len(h.Index.InFlight) {
		return fmt.Errorf("%w: plan %s: the view has %d reboots in flight, at most %d (MaxInFlight)", plan.ErrTooLarge, v.UUID, n, MaxInFlight)
	}
	// pages and raw are as read (shared with the cache, never modified): a
	// page that changes is copied, patched and encoded.
	patched := make(map[int][]plan.Reboot)
	for k, i := range pos {
		n := i / PageSize
		was := pages[n][i%PageSize]
		if was.ServerUUID != v.Reboots[k].ServerUUID {
			return fmt.Errorf("%w: plan %s: reboot %d is server %s, the view says %s", plan.ErrCorrupt, v.UUID, i, was.ServerUUID, v.Reboots[k].ServerUUID)
		}
		if err := plan.CheckStepForward(v.UUID, i, was, v.Reboots[k]); err != nil {
			return err
		}
		if plan.SameReboot(was, v.Reboots[k]) {
			continue
		}
		pg, ok := patched[n]
		if !ok {
			pg = slices.Clone(pages[n])
			patched[n] = pg
		}
		pg[i%PageSize] = v.Reboots[k]
	}
	// A page changed if it encodes otherwise than it is stored.
	changed := map[int][]byte{}
	for n, pg := range patched {
		// A copy of what the reboots point to: the page is kept.
		pg = plan.Plan{Reboots: pg}.Clone().Reboots
		wallOnly(pg)
		patched[n] = pg
		now, err := encodePage(pg)
		if err != nil {
			return err
		}
		if !bytes.Equal(now, raw[n]) {
			changed[n] = now
		}
	}
	// The header written is kept (knownHead): a copy of the view's, its
	// times as a read of it would hold them.
	nh := h
	nh.Plan, nh.Index = v.Plan, v.Index
	nh.Plan.Reboots = nil
	nh = nh.clone()
	wallOnlyHeader(&nh)
	w, err := s.writeRev(ctx, v.UUID, rev, h, nh, changed)
	if err != nil {
		return err
	}
	if ended(w.h) {
		return nil // written forgot the plan: it acts no more
	}
	s.remember(v.UUID, knownHead(w))
	// The pages as stored now, at the version the write made.
	now := viewedPages{rev: w.rev, h: w.h, hraw: w.raw, pages: make(map[int][]plan.Reboot, len(need)), raw: make(map[int][]byte, len(need))}
	for _, n := range need {
		now.pages[n], now.raw[n] = pages[n], raw[n]
		if pg, ok := patched[n]; ok {
			now.pages[n] = pg
		}
		if b, ok := changed[n]; ok {
			now.raw[n] = b
		}
	}
	s.cache.mu.Lock()
	s.cache.viewed[v.UUID] = now
	s.cache.mu.Unlock()
	return nil
}
