package etcd

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

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

// Store is a plan.ViewStore on etcd. Under its prefix a plan is a header
// key (the plan without its reboots, its index, the number of reboots and
// the nonce of its pages) and pages of PageSize reboot records:
//
//	PREFIX headers/UUID
//	PREFIX pages/UUID/NONCE/00000000 ...
//
// The plan's Version is the header's ModRevision; every write is one
// transaction that compares it (compare-and-swap) and rewrites the header,
// so a page never changes without the header changing too. A pass writes
// the pages of the reboots it changed and the header, in one transaction.
// Pages are written before the header that names them, under a nonce, so
// that a crash in the middle of Create leaves nothing visible and two
// creators of one UUID cannot mix their pages.
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
	// txns and bytes count the write transactions committed and the
	// bytes of the values they put (Written).
	txns, bytes int64
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

type members struct {
	nonce string
	m     map[string]int
}

var _ plan.ViewStore = (*Store)(nil)

// NewStore returns the store under prefix (e.g. "/rebootkit/").
func NewStore(cli *clientv3.Client, prefix string) *Store {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &Store{cli: cli, prefix: prefix, cache: &memberCache{m: map[string]members{}}}
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
}

func (s *Store) headerKey(uuid string) string { return s.prefix + "headers/" + uuid }
func (s *Store) pagesPrefix(uuid, nonce string) string {
	return s.prefix + "pages/" + uuid + "/" + nonce + "/"
}
func (s *Store) pageKey(uuid, nonce string, n int) string {
	return fmt.Sprintf("%s%08d", s.pagesPrefix(uuid, nonce), n)
}

// readHeader returns the header and its ModRevision.
func (s *Store) readHeader(ctx context.Context, uuid string) (header, int64, error) {
	var h header
	if err := plan.ValidUUID(uuid); err != nil {
		return h, 0, err
	}
	resp, err := s.cli.Get(ctx, s.headerKey(uuid))
	if err != nil {
		return h, 0, fmt.Errorf("etcd: get %s: %w", uuid, err)
	}
	if len(resp.Kvs) == 0 {
		return h, 0, fmt.Errorf("%w: %s", plan.ErrNotFound, uuid)
	}
	kv := resp.Kvs[0]
	if err := json.Unmarshal(kv.Value, &h); err != nil {
		return h, 0, fmt.Errorf("%w: plan %s header: %v", plan.ErrCorrupt, uuid, err)
	}
	if h.Plan.UUID != uuid {
		return h, 0, fmt.Errorf("%w: the header under %s names plan %q", plan.ErrCorrupt, uuid, h.Plan.UUID)
	}
	if h.Count < 0 || h.Count > plan.MaxServers || h.Index.Total != h.Count || h.Nonce == "" {
		return h, 0, fmt.Errorf("%w: plan %s: header of %d reboots, index of %d", plan.ErrCorrupt, uuid, h.Count, h.Index.Total)
	}
	if err := h.Plan.Validate(); err != nil {
		return h, 0, fmt.Errorf("%w: plan %s header: %v", plan.ErrCorrupt, uuid, err)
	}
	return h, kv.ModRevision, nil
}

// readPages reads the given pages of a plan at revision rev (0: now).
func (s *Store) readPages(ctx context.Context, uuid string, h header, pages []int, rev int64) (map[int][]plan.Reboot, error) {
	out := make(map[int][]plan.Reboot, len(pages))
	opts := []clientv3.OpOption{}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	for start := 0; start < len(pages); start += maxTxnOps {
		batch := pages[start:min(start+maxTxnOps, len(pages))]
		ops := make([]clientv3.Op, len(batch))
		for i, n := range batch {
			ops[i] = clientv3.OpGet(s.pageKey(uuid, h.Nonce, n), opts...)
		}
		resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("etcd: read pages of %s: %w", uuid, err)
		}
		for i, r := range resp.Responses {
			n := batch[i]
			kvs := r.GetResponseRange().Kvs
			if len(kvs) == 0 {
				return nil, fmt.Errorf("%w: plan %s: page %d missing", plan.ErrCorrupt, uuid, n)
			}
			var rs []plan.Reboot
			if err := json.Unmarshal(kvs[0].Value, &rs); err != nil {
				return nil, fmt.Errorf("%w: plan %s: page %d: %v", plan.ErrCorrupt, uuid, n, err)
			}
			if want := min(PageSize, h.Count-n*PageSize); len(rs) != want {
				return nil, fmt.Errorf("%w: plan %s: page %d holds %d reboots, want %d", plan.ErrCorrupt, uuid, n, len(rs), want)
			}
			out[n] = rs
		}
	}
	return out, nil
}

func pageCount(count int) int { return (count + PageSize - 1) / PageSize }

// Get implements plan.Store: the whole plan, read at one revision.
func (s *Store) Get(ctx context.Context, uuid string) (plan.Plan, error) {
	p, _, err := s.load(ctx, uuid)
	return p, err
}

// load reads the whole plan and its header at one revision.
func (s *Store) load(ctx context.Context, uuid string) (plan.Plan, header, error) {
	h, rev, err := s.readHeader(ctx, uuid)
	if err != nil {
		return plan.Plan{}, h, err
	}
	all := make([]int, pageCount(h.Count))
	for i := range all {
		all[i] = i
	}
	pages, err := s.readPages(ctx, uuid, h, all, rev)
	if err != nil {
		return plan.Plan{}, h, err
	}
	p := h.Plan
	p.Reboots = make([]plan.Reboot, 0, h.Count)
	for n := range all {
		p.Reboots = append(p.Reboots, pages[n]...)
	}
	if err := p.Validate(); err != nil {
		return plan.Plan{}, h, fmt.Errorf("%w: plan %s: %v", plan.ErrCorrupt, uuid, err)
	}
	p.Version = strconv.FormatInt(rev, 10)
	return p, h, nil
}

// encodePages returns the JSON of every page of p.
func encodePages(p plan.Plan) ([][]byte, error) {
	out := make([][]byte, pageCount(len(p.Reboots)))
	for n := range out {
		raw, err := json.Marshal(p.Reboots[n*PageSize : min((n+1)*PageSize, len(p.Reboots))])
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

// Create implements plan.Store: pages first (in as many transactions as
// the limits need, each refused if the plan exists), then the header, in
// a transaction that is refused if the plan exists.
func (s *Store) Create(ctx context.Context, p plan.Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	hk := s.headerKey(p.UUID)
	others, lerr := s.List(ctx)
	if lerr != nil && !errors.Is(lerr, plan.ErrCorrupt) {
		return lerr
	}
	if err := plan.CheckOthers(p, others); err != nil {
		return err
	}
	pages, err := encodePages(p)
	if err != nil {
		return err
	}
	h := header{Plan: p, Count: len(p.Reboots), Nonce: newNonce(), Index: plan.IndexOf(p)}
	h.Plan.Reboots, h.Plan.Version = nil, ""
	raw, err := json.Marshal(h)
	if err != nil {
		return err
	}
	absent := append([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(hk), "=", 0)}, s.guard...)
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
			return s.refused(ctx, p.UUID, "", fmt.Errorf("%w: %s", plan.ErrExists, p.UUID))
		}
		s.count(written)
		return nil
	}
	cleanup := func() {
		_, _ = s.cli.Delete(context.WithoutCancel(ctx), s.pagesPrefix(p.UUID, h.Nonce), clientv3.WithPrefix())
	}
	for n, pg := range pages {
		if len(ops) >= maxTxnOps || size+len(pg) > maxTxnBytes {
			if err := flush(); err != nil {
				cleanup()
				return err
			}
		}
		ops = append(ops, clientv3.OpPut(s.pageKey(p.UUID, h.Nonce, n), string(pg)))
		size += len(pg)
	}
	if err := flush(); err != nil {
		cleanup()
		return err
	}
	resp, err := s.cli.Txn(ctx).If(absent...).Then(clientv3.OpPut(hk, string(raw))).Commit()
	if err != nil {
		cleanup()
		return fmt.Errorf("etcd: create %s: %w", p.UUID, err)
	}
	if !resp.Succeeded {
		cleanup()
		return s.refused(ctx, p.UUID, "", fmt.Errorf("%w: %s", plan.ErrExists, p.UUID))
	}
	return nil
}

// refused explains a failed transaction: the guard (leadership) failed,
// or else the given error (a conflict, the plan exists).
func (s *Store) refused(ctx context.Context, uuid, version string, other error) error {
	if len(s.guard) > 0 {
		resp, err := s.cli.Txn(ctx).If(s.guard...).Commit()
		if err == nil && !resp.Succeeded {
			return fmt.Errorf("plan %s: %w", uuid, ErrNotLeader)
		}
	}
	return other
}

// write writes the header and the changed pages if the header is still at
// version (and the guard holds).
func (s *Store) write(ctx context.Context, uuid, version string, h header, pages map[int][]byte) error {
	rev, err := strconv.ParseInt(version, 10, 64)
	if err != nil {
		return fmt.Errorf("plan %s: version %q: %w", uuid, version, plan.ErrConflict)
	}
	h.Plan.Reboots, h.Plan.Version = nil, ""
	raw, err := json.Marshal(h)
	if err != nil {
		return err
	}
	ops := []clientv3.Op{clientv3.OpPut(s.headerKey(uuid), string(raw))}
	size := len(raw)
	keys := make([]int, 0, len(pages))
	for n := range pages {
		keys = append(keys, n)
	}
	sort.Ints(keys)
	for _, n := range keys {
		ops = append(ops, clientv3.OpPut(s.pageKey(uuid, h.Nonce, n), string(pages[n])))
		size += len(pages[n])
	}
	if len(ops) > maxTxnOps || size > maxTxnBytes {
		return fmt.Errorf("%w: plan %s: one write of %d pages (%d bytes) is over etcd's transaction limits", plan.ErrTooLarge, uuid, len(pages), size)
	}
	cmps := append([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(s.headerKey(uuid)), "=", rev)}, s.guard...)
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("etcd: write %s: %w", uuid, err)
	}
	if !resp.Succeeded {
		return s.refused(ctx, uuid, version, fmt.Errorf("plan %s: %w", uuid, plan.ErrConflict))
	}
	s.count(size)
	return nil
}

// Put implements plan.Store: compare-and-swap on the header's revision,
// writing the header and the pages whose content changed.
func (s *Store) Put(ctx context.Context, p plan.Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	cur, h, err := s.load(ctx, p.UUID)
	if err != nil {
		return fmt.Errorf("plan: refusing to overwrite: %w", err)
	}
	if cur.Version != p.Version {
		return fmt.Errorf("plan %s: %w", p.UUID, plan.ErrConflict)
	}
	if len(cur.Reboots) != len(p.Reboots) {
		return fmt.Errorf("plan %s: %d reboots, stored %d: the servers of a plan do not change", p.UUID, len(p.Reboots), len(cur.Reboots))
	}
	nowPages, err := encodePages(p)
	if err != nil {
		return err
	}
	oldPages, err := encodePages(cur)
	if err != nil {
		return err
	}
	changed := map[int][]byte{}
	for n := range nowPages {
		for i := n * PageSize; i < min((n+1)*PageSize, len(p.Reboots)); i++ {
			if p.Reboots[i].ServerUUID != cur.Reboots[i].ServerUUID {
				return fmt.Errorf("plan %s: reboot %d is server %s, stored %s: the servers of a plan do not change", p.UUID, i, p.Reboots[i].ServerUUID, cur.Reboots[i].ServerUUID)
			}
		}
		if !bytes.Equal(nowPages[n], oldPages[n]) {
			changed[n] = nowPages[n]
		}
	}
	h.Plan, h.Index = p, plan.IndexOf(p)
	return s.write(ctx, p.UUID, p.Version, h, changed)
}

// List implements plan.Store.
func (s *Store) List(ctx context.Context) ([]plan.Plan, error) {
	resp, err := s.cli.Get(ctx, s.prefix+"headers/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("etcd: list: %w", err)
	}
	var out []plan.Plan
	var bad []string
	for _, kv := range resp.Kvs {
		uuid := strings.TrimPrefix(string(kv.Key), s.prefix+"headers/")
		p, err := s.Get(ctx, uuid)
		if errors.Is(err, plan.ErrNotFound) {
			continue
		}
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UUID < out[j].UUID })
	if len(bad) > 0 {
		return out, fmt.Errorf("%w: %v", plan.ErrCorrupt, bad)
	}
	return out, nil
}

// Unfinished returns the UUIDs of the plans that may still reboot servers,
// reading headers only.
func (s *Store) Unfinished(ctx context.Context) ([]string, error) {
	resp, err := s.cli.Get(ctx, s.prefix+"headers/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcd: list: %w", err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		var h header
		if json.Unmarshal(kv.Value, &h) != nil {
			continue
		}
		if !h.Plan.State.Finished() || len(h.Index.InFlight) > 0 {
			out = append(out, h.Plan.UUID)
		}
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
	all := make([]int, pageCount(h.Count))
	for i := range all {
		all[i] = i
	}
	pages, err := s.readPages(ctx, uuid, h, all, rev)
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

// GetView implements plan.ViewStore: the header and the pages holding the
// reboots in flight and the next pending ones, at one revision.
func (s *Store) GetView(ctx context.Context, uuid string) (plan.View, error) {
	h, rev, err := s.readHeader(ctx, uuid)
	if err != nil {
		return plan.View{}, err
	}
	m, err := s.membersOf(ctx, uuid, h, rev)
	if err != nil {
		return plan.View{}, err
	}
	pos := plan.ViewPositions(h.Index, plan.PendingWindow(h.Plan))
	var need []int
	for _, i := range pos {
		if n := i / PageSize; len(need) == 0 || need[len(need)-1] != n {
			need = append(need, n)
		}
	}
	pages, err := s.readPages(ctx, uuid, h, need, rev)
	if err != nil {
		return plan.View{}, err
	}
	v := plan.View{Plan: h.Plan, Pos: pos, Index: h.Index, Members: m}
	v.Reboots = make([]plan.Reboot, len(pos))
	for k, i := range pos {
		v.Reboots[k] = pages[i/PageSize][i%PageSize]
	}
	v.Version = strconv.FormatInt(rev, 10)
	if err := v.Check(); err != nil {
		return plan.View{}, fmt.Errorf("%w: %v", plan.ErrCorrupt, err)
	}
	return v, nil
}

// PutView implements plan.ViewStore: the pages of the loaded reboots are
// read, patched and written with the header in one transaction that
// compares the header's revision (nothing changed since the view was read:
// every write rewrites the header) and the guard.
func (s *Store) PutView(ctx context.Context, v plan.View) error {
	if err := v.Check(); err != nil {
		return err
	}
	h, rev, err := s.readHeader(ctx, v.UUID)
	if err != nil {
		return fmt.Errorf("plan: refusing to overwrite: %w", err)
	}
	if strconv.FormatInt(rev, 10) != v.Version {
		return s.refused(ctx, v.UUID, v.Version, fmt.Errorf("plan %s: %w", v.UUID, plan.ErrConflict))
	}
	if v.Index.Total != h.Count {
		return fmt.Errorf("plan %s: view of %d reboots, stored %d", v.UUID, v.Index.Total, h.Count)
	}
	pos := v.Pos
	if pos == nil {
		pos = make([]int, len(v.Reboots))
		for i := range pos {
			pos[i] = i
		}
	}
	var need []int
	for _, i := range pos {
		if n := i / PageSize; len(need) == 0 || need[len(need)-1] != n {
			need = append(need, n)
		}
	}
	pages, err := s.readPages(ctx, v.UUID, h, need, rev)
	if err != nil {
		return fmt.Errorf("plan: refusing to overwrite: %w", err)
	}
	changed := map[int][]byte{}
	for k, i := range pos {
		pg := pages[i/PageSize]
		if pg[i%PageSize].ServerUUID != v.Reboots[k].ServerUUID {
			return fmt.Errorf("%w: plan %s: reboot %d is server %s, the view says %s", plan.ErrCorrupt, v.UUID, i, pg[i%PageSize].ServerUUID, v.Reboots[k].ServerUUID)
		}
		old, _ := json.Marshal(pg[i%PageSize])
		now, err := json.Marshal(v.Reboots[k])
		if err != nil {
			return err
		}
		if !bytes.Equal(old, now) {
			pg[i%PageSize] = v.Reboots[k]
			changed[i/PageSize] = nil
		}
	}
	for n := range changed {
		raw, err := json.Marshal(pages[n])
		if err != nil {
			return err
		}
		changed[n] = raw
	}
	h.Plan, h.Index = v.Plan, v.Index
	return s.write(ctx, v.UUID, v.Version, h, changed)
}
