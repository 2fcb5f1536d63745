package plan

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/rebootkit/rebootkit/internal/ownfile"
)

// ErrLocked: the bbolt file is open in another process (bbolt's file lock).
var ErrLocked = errors.New("plan: the plan database is open in another process")

// BoltStore keeps every plan in one bbolt file: per plan a bucket holding a
// header record (the plan without its reboots) and one record per reboot,
// each with its own version. Put is one transaction that checks the plan's
// version (compare-and-swap) and writes only the header and the reboot
// records whose content changed, so a pass that advances three reboots
// writes three records, not the whole plan. A record that does not decode,
// or whose identity does not match its key, is reported with ErrCorrupt and
// never overwritten.
//
// One process at a time may open the file (bbolt's lock): a second one
// gets ErrLocked. Within the process, BoltStore is safe for concurrent use.
type BoltStore struct {
	db *bolt.DB

	mu      sync.Mutex
	members map[string]memberCache // per plan UUID
	// decoded keeps, per plan, the records of the last view decoded, by
	// position: a record whose bytes did not change is not decoded again.
	decoded map[string]map[int]decodedRecord
}

type decodedRecord struct {
	raw []byte
	rec record
}

// memberCache is a plan's member map; a plan's servers never change.
type memberCache struct {
	created string
	m       map[string]int
}

var _ ViewStore = (*BoltStore)(nil)

var (
	bucketPlans = []byte("plans")
	keyHeader   = []byte("header")
	keyServers  = []byte("servers")
)

// OpenBolt opens (or creates) the plan database at path. It waits at most
// a second for another process's lock, then returns ErrLocked. It never
// opens path through a symbolic link, and refuses a path that is not a
// regular file with one link (ErrNotStoreFile).
func OpenBolt(path string) (*BoltStore, error) {
	return OpenBoltWith(path, BoltOptions{})
}

// BoltOptions are OpenBoltWith's options.
type BoltOptions struct {
	// Check, when set, judges the file opened (its descriptor, so that a
	// name swapped after a check of the path is judged too: its owner,
	// say) before a byte of it is read; its error is OpenBoltWith's.
	Check func(*os.File) error
}

// OpenBoltWith is OpenBolt with options.
func OpenBoltWith(path string, o BoltOptions) (*BoltStore, error) {
	open := openStoreFile
	if o.Check != nil {
		open = ownfile.CheckedOpener(ErrNotStoreFile, "the store", o.Check)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, OpenFile: open})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("plan: open %s: %w", path, err)
	}
	// The plans bucket is made once: an open of a store that has it writes
	// nothing (no transaction to sync), so that a process that opens the
	// file for each read (rebootctl's executor) holds its lock briefly.
	has := false
	if err := db.View(func(tx *bolt.Tx) error { has = tx.Bucket(bucketPlans) != nil; return nil }); err != nil {
		db.Close()
		return nil, fmt.Errorf("plan: %s: %w", path, err)
	}
	if has {
		return &BoltStore{db: db}, nil
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketPlans)
		return err
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("plan: %s: %w", path, err)
	}
	return &BoltStore{db: db}, nil
}

// Close closes the file.
func (s *BoltStore) Close() error { return s.db.Close() }

// PagesWritten returns how many pages the store has written so far (times
// the page size: bytes written), for benchmarks.
func (s *BoltStore) PagesWritten() (pages int64, pageSize int) {
	st := s.db.Stats()
	return st.TxStats.GetWrite(), s.db.Info().PageSize
}

// header is a plan's header record: the plan without its reboots, the
// index that summarizes them, and the plan's version.
type header struct {
	Plan
	Count   int    `json:"count"`
	Version uint64 `json:"version"`
	Index   *Index `json:"index,omitempty"`
}

// record is one reboot's record.
type record struct {
	Index   int    `json:"index"`
	Version uint64 `json:"version"`
	Reboot  Reboot `json:"reboot"`
}

func rebootKey(i int) []byte {
	k := make([]byte, 2+8)
	copy(k, "r/")
	binary.BigEndian.PutUint64(k[2:], uint64(i))
	return k
}

// readHeader reads and checks a plan's header record.
// readIndexedHeader reads plan uuid's header with its Index; a plan
// written before the index existed is read whole once to compute it.
func readIndexedHeader(b *bolt.Bucket, uuid string) (header, error) {
	h, err := readHeader(b, uuid)
	if err != nil || h.Index != nil {
		return h, err
	}
	p, _, _, err := load(b, uuid)
	if err != nil {
		return header{}, err
	}
	ix := IndexOf(p)
	h.Index = &ix
	return h, nil
}

func readHeader(b *bolt.Bucket, uuid string) (header, error) {
	var h header
	raw := b.Get(keyHeader)
	if raw == nil {
		return h, fmt.Errorf("%w: plan %s has no header record", ErrCorrupt, uuid)
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, fmt.Errorf("%w: plan %s header: %v", ErrCorrupt, uuid, err)
	}
	if h.UUID != uuid {
		return h, fmt.Errorf("%w: the header under %s names plan %q", ErrCorrupt, uuid, h.UUID)
	}
	if h.Count < 0 || h.Count > MaxServers {
		return h, fmt.Errorf("%w: plan %s: %d reboots", ErrCorrupt, uuid, h.Count)
	}
	if h.Index != nil && h.Index.Total != h.Count {
		return h, fmt.Errorf("%w: plan %s: index of %d reboots, header says %d", ErrCorrupt, uuid, h.Index.Total, h.Count)
	}
	if err := h.Plan.validate(); err != nil {
		return h, fmt.Errorf("%w: plan %s header: %v", ErrCorrupt, uuid, err)
	}
	return h, nil
}

// readRecord reads reboot record i, checking its identity.
func readRecord(b *bolt.Bucket, uuid string, i int) (record, error) {
	var rec record
	raw := b.Get(rebootKey(i))
	if raw == nil {
		return rec, fmt.Errorf("%w: plan %s: reboot record %d missing", ErrCorrupt, uuid, i)
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		return rec, fmt.Errorf("%w: plan %s: reboot record %d: %v", ErrCorrupt, uuid, i, err)
	}
	if rec.Index != i {
		return rec, fmt.Errorf("%w: plan %s: record %d holds index %d", ErrCorrupt, uuid, i, rec.Index)
	}
	return rec, nil
}

// load reads a whole plan, checking every record's identity and the
// index against the records.
func load(b *bolt.Bucket, uuid string) (Plan, header, []record, error) {
	h, err := readHeader(b, uuid)
	if err != nil {
		return Plan{}, h, nil, err
	}
	recs := make([]record, h.Count)
	p := h.Plan
	p.Reboots = make([]Reboot, h.Count)
	for i := 0; i < h.Count; i++ {
		if recs[i], err = readRecord(b, uuid, i); err != nil {
			return Plan{}, h, nil, err
		}
		p.Reboots[i] = recs[i].Reboot
	}
	if err := p.validate(); err != nil {
		return Plan{}, h, nil, fmt.Errorf("%w: plan %s: %v", ErrCorrupt, uuid, err)
	}
	if h.Index != nil && !equalIndex(*h.Index, IndexOf(p)) {
		return Plan{}, h, nil, fmt.Errorf("%w: plan %s: the index does not match the reboot records", ErrCorrupt, uuid)
	}
	p.Version = strconv.FormatUint(h.Version, 10)
	return p, h, recs, nil
}

func equalIndex(a, b Index) bool {
	return a.Total == b.Total && a.Core == b.Core && a.Started == b.Started && a.Done == b.Done && a.Failed == b.Failed &&
		a.Failures == b.Failures && a.DoneTime == b.DoneTime && a.DoneTimed == b.DoneTimed && slices.Equal(a.InFlight, b.InFlight) &&
		(a.DoneMax == b.DoneMax || a.DoneMax == 0) // 0: written before DoneMax existed
}

// Get implements Store.
func (s *BoltStore) Get(_ context.Context, uuid string) (Plan, error) {
	if err := ValidUUID(uuid); err != nil {
		return Plan{}, err
	}
	var p Plan
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPlans).Bucket([]byte(uuid))
		if b == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, uuid)
		}
		var err error
		p, _, _, err = load(b, uuid)
		return err
	})
	return p, err
}

// Create implements Store.
func (s *BoltStore) Create(_ context.Context, p Plan) error {
	if err := p.validate(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		plans := tx.Bucket(bucketPlans)
		if plans.Bucket([]byte(p.UUID)) != nil {
			return fmt.Errorf("%w: %s", ErrExists, p.UUID)
		}
		others, _ := listTx(plans)
		if err := CheckOthers(p, others); err != nil {
			return err
		}
		b, err := plans.CreateBucket([]byte(p.UUID))
		if err != nil {
			return fmt.Errorf("plan: create %s: %w", p.UUID, err)
		}
		return writeAll(b, p, 1)
	})
}

func writeAll(b *bolt.Bucket, p Plan, version uint64) error {
	if err := putHeader(b, p, IndexOf(p), version); err != nil {
		return err
	}
	servers := make([]string, len(p.Reboots))
	for i, r := range p.Reboots {
		servers[i] = r.ServerUUID
	}
	raw, err := json.Marshal(servers)
	if err != nil {
		return err
	}
	if err := b.Put(keyServers, raw); err != nil {
		return err
	}
	for i, r := range p.Reboots {
		raw, err := json.Marshal(record{Index: i, Version: 1, Reboot: r})
		if err != nil {
			return fmt.Errorf("plan: encode %s reboot %d: %w", p.UUID, i, err)
		}
		if err := b.Put(rebootKey(i), raw); err != nil {
			return err
		}
	}
	return nil
}

// Put implements Store: one transaction, compare-and-swap on the plan's
// version, writing only the records that changed.
func (s *BoltStore) Put(_ context.Context, p Plan) error {
	if err := p.validate(); err != nil {
		return err
	}
	if _, err := Encode(p); err != nil {
		return fmt.Errorf("plan: encode %s: %w", p.UUID, err)
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPlans).Bucket([]byte(p.UUID))
		if b == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, p.UUID)
		}
		cur, h, recs, err := load(b, p.UUID)
		if err != nil {
			return fmt.Errorf("plan: refusing to overwrite: %w", err)
		}
		if cur.Version != p.Version {
			return fmt.Errorf("plan %s: %w", p.UUID, ErrConflict)
		}
		if len(p.Reboots) != h.Count {
			return fmt.Errorf("plan %s: %d reboots, stored %d: the servers of a plan do not change", p.UUID, len(p.Reboots), h.Count)
		}
		err = CheckPut(cur, p, func() ([]Plan, error) {
			others, _ := listTx(tx.Bucket(bucketPlans))
			return others, nil
		})
		if err != nil {
			return err
		}
		for i, r := range p.Reboots {
			if recs[i].Reboot.ServerUUID != r.ServerUUID {
				return fmt.Errorf("plan %s: reboot %d is server %s, stored %s: the servers of a plan do not change", p.UUID, i, r.ServerUUID, recs[i].Reboot.ServerUUID)
			}
			if err := putRecord(b, i, recs[i], r); err != nil {
				return err
			}
		}
		return putHeader(b, p, IndexOf(p), h.Version+1)
	})
}

func putHeader(b *bolt.Bucket, p Plan, ix Index, version uint64) error {
	h := header{Plan: p, Count: ix.Total, Version: version, Index: &ix}
	h.Reboots, h.Plan.Version = nil, ""
	raw, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("plan: encode %s: %w", p.UUID, err)
	}
	return b.Put(keyHeader, raw)
}

// createdKey is what tells a plan from another plan of its UUID.
func createdKey(h header) string {
	if h.CreatedAt == nil {
		return ""
	}
	return h.CreatedAt.UTC().Format(time.RFC3339Nano)
}

// cachedMembers returns the plan's member map if it is cached (a plan's
// servers never change, so the map is read once: ReadView reads the
// servers record, or for a plan written before that record existed its
// reboot records, only when it is not).
func (s *BoltStore) cachedMembers(h header) (map[string]int, bool) {
	s.mu.Lock()
	c, ok := s.members[h.UUID]
	s.mu.Unlock()
	if ok && c.created == createdKey(h) && len(c.m) == h.Count {
		return c.m, true
	}
	return nil, false
}

// serversOf returns (a copy of) the plan's servers record, or, for a plan
// written before that record existed, its servers read from its reboot
// records.
func serversOf(b *bolt.Bucket, h header) ([]byte, []string, error) {
	if raw := b.Get(keyServers); raw != nil {
		return bytes.Clone(raw), nil, nil
	}
	servers := make([]string, 0, h.Count)
	for i := 0; i < h.Count; i++ {
		rec, err := readRecord(b, h.UUID, i)
		if err != nil {
			return nil, nil, err
		}
		servers = append(servers, rec.Reboot.ServerUUID)
	}
	return nil, servers, nil
}

// membersFrom makes (and caches) the plan's member map from its servers
// record raw (when not nil) or its servers.
func (s *BoltStore) membersFrom(h header, raw []byte, servers []string) (map[string]int, error) {
	if raw != nil {
		if err := json.Unmarshal(raw, &servers); err != nil {
			return nil, fmt.Errorf("%w: plan %s: servers record: %v", ErrCorrupt, h.UUID, err)
		}
	}
	if len(servers) != h.Count {
		return nil, fmt.Errorf("%w: plan %s: %d servers listed, %d reboots", ErrCorrupt, h.UUID, len(servers), h.Count)
	}
	m := make(map[string]int, len(servers))
	for i, id := range servers {
		m[id] = i
	}
	if len(m) != len(servers) {
		return nil, fmt.Errorf("%w: plan %s: a server is listed twice", ErrCorrupt, h.UUID)
	}
	s.mu.Lock()
	if s.members == nil {
		s.members = map[string]memberCache{}
	}
	s.members[h.UUID] = memberCache{created: createdKey(h), m: m}
	s.mu.Unlock()
	return m, nil
}

// PutView implements ViewStore: one transaction, compare-and-swap on the
// plan's version, writing the header and the loaded reboot records that
// changed. A view that does not load every reboot the stored plan has in
// flight, its first pending one and every reboot the view starts is
// refused (ErrViewIncomplete); one that moves a reboot in a way no pass
// does (CheckStepForward: a started one back to pending, an ended one,
// one whose job was seen to released) is refused (ErrStepBack). A loaded reboot is skipped unchanged
// only when the view was read from this plan's header at this version;
// otherwise it is compared with (and its server checked against) the
// stored record.
func (s *BoltStore) PutView(_ context.Context, v View) error {
	if err := v.check(); err != nil {
		return err
	}
	if err := v.Plan.validate(); err != nil {
		return err
	}
	defer s.forgetEnded(v)
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketPlans).Bucket([]byte(v.UUID))
		if b == nil {
			return fmt.Errorf("%w: %s", ErrNotFound, v.UUID)
		}
		// The index of a plan written before it existed is computed: the
		// view is checked against it (and the write stores v's).
		h, err := readIndexedHeader(b, v.UUID)
		if err != nil {
			return fmt.Errorf("plan: refusing to overwrite: %w", err)
		}
		if strconv.FormatUint(h.Version, 10) != v.Version {
			return fmt.Errorf("plan %s: %w", v.UUID, ErrConflict)
		}
		// The header is the one the view was read from (it was checked
		// then), or else checked now against the records it names.
		if v.base == nil || !bytes.Equal(v.base.header, b.Get(keyHeader)) {
			if err := checkStoredIndex(b, h); err != nil {
				return fmt.Errorf("plan: refusing to overwrite: %w", err)
			}
		}
		if v.Index.Total != h.Count {
			return fmt.Errorf("plan %s: view of %d reboots, stored %d: the servers of a plan do not change", v.UUID, v.Index.Total, h.Count)
		}
		// The view's index replaces the stored one: it must have loaded
		// every reboot the stored index has in flight and its first
		// pending one (a hand-built view could drop a running reboot).
		if err := v.CheckLoads(*h.Index); err != nil {
			return err
		}
		if err := checkResumedTx(tx, b, h, v.Unfinished(), v.DryRun); err != nil {
			return err
		}
		// The view's base is this plan's stored header (its UUID and
		// version) only when the view was read from this plan at this
		// version; otherwise its reboots are compared with the records.
		fromHere := v.base != nil && len(v.base.orig) == len(v.Reboots) && bytes.Equal(v.base.header, b.Get(keyHeader))
		// A record whose bytes are the ones the view was decoded from
		// need not be decoded again under the file's lock.
		known := fromHere && len(v.base.vers) == len(v.Reboots) && len(v.base.raws) == len(v.Reboots)
		for k, r := range v.Reboots {
			if fromHere && sameReboot(v.base.orig[k], r) {
				continue // unchanged since read from this header
			}
			i := v.pos(k)
			var rec record
			var ahead []byte // encoded ahead (EncodeView) from this very record
			if known && bytes.Equal(b.Get(rebootKey(i)), v.base.raws[k]) {
				rec = record{Index: i, Version: v.base.vers[k], Reboot: v.base.orig[k]}
				if len(v.base.enc) == len(v.Reboots) && v.base.enc[k] != nil && sameReboot(v.base.encFrom[k], r) {
					ahead = v.base.enc[k]
				}
			} else if rec, err = s.cachedRecord(b, v.UUID, i); err != nil {
				return fmt.Errorf("plan: refusing to overwrite: %w", err)
			}
			if rec.Reboot.ServerUUID != r.ServerUUID {
				return fmt.Errorf("%w: plan %s: record %d is server %s, the view says %s", ErrCorrupt, v.UUID, i, rec.Reboot.ServerUUID, r.ServerUUID)
			}
			if err := CheckStepForward(v.UUID, i, rec.Reboot, r); err != nil {
				return err
			}
			if ahead != nil {
				err = b.Put(rebootKey(i), ahead)
			} else {
				err = putRecord(b, i, rec, r)
			}
			if err != nil {
				return err
			}
		}
		return putHeader(b, v.Plan, v.Index, h.Version+1)
	})
}

// checkStoredIndex checks a stored index against the records it names, in
// O(in flight): counts that add up, the reboots it says are in flight in
// flight, the first one it says is pending pending.
func checkStoredIndex(b *bolt.Bucket, h header) error {
	if h.Index == nil {
		return nil // written before the index existed: Put rewrites it
	}
	ix := *h.Index
	if ix.Started < 0 || ix.Started > ix.Total || ix.Done+ix.Failed+ix.Released+len(ix.InFlight) != ix.Started || !slices.IsSorted(ix.InFlight) {
		return fmt.Errorf("%w: plan %s: inconsistent index (%s)", ErrCorrupt, h.UUID, summaryOf(ix))
	}
	check := append([]int(nil), ix.InFlight...)
	if ix.Started < ix.Total {
		check = append(check, ix.Started)
	}
	for _, i := range check {
		if i < 0 || i >= ix.Total {
			return fmt.Errorf("%w: plan %s: index names reboot %d of %d", ErrCorrupt, h.UUID, i, ix.Total)
		}
		rec, err := readRecord(b, h.UUID, i)
		if err != nil {
			return err
		}
		if ok := i < ix.Started && rec.Reboot.Step.InFlight() || i == ix.Started && rec.Reboot.Step == StepPending; !ok {
			return fmt.Errorf("%w: plan %s: reboot %d is %q, the index disagrees", ErrCorrupt, h.UUID, i, rec.Reboot.Step)
		}
	}
	return nil
}

// cachedRecord reads record i of plan uuid, decoding it only if its bytes
// differ from the ones last decoded for a view.
func (s *BoltStore) cachedRecord(b *bolt.Bucket, uuid string, i int) (record, error) {
	raw := b.Get(rebootKey(i))
	s.mu.Lock()
	d, ok := s.decoded[uuid][i]
	s.mu.Unlock()
	if ok && raw != nil && bytes.Equal(d.raw, raw) {
		return d.rec, nil
	}
	return readRecord(b, uuid, i)
}

// putRecord writes reboot r at i if it differs from the stored rec.
func putRecord(b *bolt.Bucket, i int, rec record, r Reboot) error {
	if sameReboot(rec.Reboot, r) {
		return nil
	}
	raw, err := json.Marshal(record{Index: i, Version: rec.Version + 1, Reboot: r})
	if err != nil {
		return err
	}
	return b.Put(rebootKey(i), raw)
}

func listTx(plans *bolt.Bucket) ([]Plan, []string) {
	var out []Plan
	var bad []string
	_ = plans.ForEachBucket(func(k []byte) error {
		p, _, _, err := load(plans.Bucket(k), string(k))
		if err != nil {
			bad = append(bad, err.Error())
			return nil
		}
		out = append(out, p)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].UUID < out[j].UUID })
	return out, bad
}

// List implements Store.
func (s *BoltStore) List(_ context.Context) ([]Plan, error) {
	var out []Plan
	var bad []string
	err := s.db.View(func(tx *bolt.Tx) error {
		out, bad = listTx(tx.Bucket(bucketPlans))
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("%w: %v", ErrCorrupt, bad)
	}
	return out, nil
}

// Import copies every readable plan of a FileStore directory (today's JSON
// files) into s. Plans already in s are left alone and named in the error
// (ErrExists); unreadable files are reported (ErrCorrupt) and skipped;
// nothing else is lost. It returns the UUIDs imported.
func (s *BoltStore) Import(ctx context.Context, dir string) ([]string, error) {
	plans, lerr := FileStore{Dir: dir}.List(ctx)
	var done []string
	errs := []error{lerr}
	for _, p := range plans {
		p.Version = ""
		if err := s.Create(ctx, p); err != nil {
			errs = append(errs, fmt.Errorf("import %s: %w", p.UUID, err))
			continue
		}
		done = append(done, p.UUID)
	}
	return done, errors.Join(errs...)
}

// checkResumedTx refuses a write that sets the plan in b, whose stored
// header is h, unfinished (unfinished) and a dry run (dryRun), when
// NewlyHolds says it must be checked (the plan ended, or was a dry run
// and no longer is) and a server of it is in another unfinished plan
// (CheckResumed, DryRunClearRefused): the check Create makes, in the
// write's transaction. It also refuses a write setting DryRun on a plan
// stored unfinished and not a dry run (DryRunSetRefused).
func checkResumedTx(tx *bolt.Tx, b *bolt.Bucket, h header, unfinished, dryRun bool) error {
	if dryRun && !h.DryRun {
		wasUnfinished := true
		if h.Index != nil {
			wasUnfinished = (View{Plan: h.Plan, Index: *h.Index}).Unfinished()
		} else {
			stored, _, _, err := load(b, h.UUID)
			if err != nil {
				return fmt.Errorf("plan: refusing to overwrite: %w", err)
			}
			wasUnfinished = stored.Unfinished()
		}
		if SetsDryRun(wasUnfinished, h.DryRun, dryRun) {
			return DryRunSetRefused(h.UUID)
		}
	}
	if !unfinished {
		return nil
	}
	if h.Index != nil && !NewlyHolds((View{Plan: h.Plan, Index: *h.Index}).Unfinished(), h.DryRun, unfinished, dryRun) {
		return nil
	}
	stored, _, _, err := load(b, h.UUID)
	if err != nil {
		return fmt.Errorf("plan: refusing to overwrite: %w", err)
	}
	if !NewlyHolds(stored.Unfinished(), stored.DryRun, unfinished, dryRun) {
		return nil
	}
	others, _ := listTx(tx.Bucket(bucketPlans))
	return checkHolds(stored, !stored.Unfinished(), others)
}
