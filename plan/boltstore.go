package plan

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
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
}

var _ Store = (*BoltStore)(nil)

var (
	bucketPlans = []byte("plans")
	keyHeader   = []byte("header")
)

// OpenBolt opens (or creates) the plan database at path. It waits at most
// a second for another process's lock, then returns ErrLocked.
func OpenBolt(path string) (*BoltStore, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s", ErrLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("plan: open %s: %w", path, err)
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

// header is a plan's header record.
type header struct {
	Plan
	Count   int    `json:"count"`
	Version uint64 `json:"version"`
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

// load reads a plan's bucket, checking every record's identity.
func load(b *bolt.Bucket, uuid string) (Plan, header, []record, error) {
	var h header
	raw := b.Get(keyHeader)
	if raw == nil {
		return Plan{}, h, nil, fmt.Errorf("%w: plan %s has no header record", ErrCorrupt, uuid)
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return Plan{}, h, nil, fmt.Errorf("%w: plan %s header: %v", ErrCorrupt, uuid, err)
	}
	if h.UUID != uuid {
		return Plan{}, h, nil, fmt.Errorf("%w: the header under %s names plan %q", ErrCorrupt, uuid, h.UUID)
	}
	if h.Count < 0 || h.Count > MaxServers {
		return Plan{}, h, nil, fmt.Errorf("%w: plan %s: %d reboots", ErrCorrupt, uuid, h.Count)
	}
	recs := make([]record, h.Count)
	p := h.Plan
	p.Reboots = make([]Reboot, h.Count)
	for i := 0; i < h.Count; i++ {
		raw := b.Get(rebootKey(i))
		if raw == nil {
			return Plan{}, h, nil, fmt.Errorf("%w: plan %s: reboot record %d missing", ErrCorrupt, uuid, i)
		}
		if err := json.Unmarshal(raw, &recs[i]); err != nil {
			return Plan{}, h, nil, fmt.Errorf("%w: plan %s: reboot record %d: %v", ErrCorrupt, uuid, i, err)
		}
		if recs[i].Index != i {
			return Plan{}, h, nil, fmt.Errorf("%w: plan %s: record %d holds index %d", ErrCorrupt, uuid, i, recs[i].Index)
		}
		p.Reboots[i] = recs[i].Reboot
	}
	if err := p.validate(); err != nil {
		return Plan{}, h, nil, fmt.Errorf("%w: plan %s: %v", ErrCorrupt, uuid, err)
	}
	p.Version = strconv.FormatUint(h.Version, 10)
	return p, h, recs, nil
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
	h := header{Plan: p, Count: len(p.Reboots), Version: version}
	h.Reboots = nil
	raw, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("plan: encode %s: %w", p.UUID, err)
	}
	if err := b.Put(keyHeader, raw); err != nil {
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
		for i, r := range p.Reboots {
			old, _ := json.Marshal(recs[i].Reboot)
			now, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if bytes.Equal(old, now) {
				continue
			}
			raw, err := json.Marshal(record{Index: i, Version: recs[i].Version + 1, Reboot: r})
			if err != nil {
				return err
			}
			if err := b.Put(rebootKey(i), raw); err != nil {
				return err
			}
		}
		nh := header{Plan: p, Count: h.Count, Version: h.Version + 1}
		nh.Reboots = nil
		raw, err := json.Marshal(nh)
		if err != nil {
			return err
		}
		return b.Put(keyHeader, raw)
	})
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
